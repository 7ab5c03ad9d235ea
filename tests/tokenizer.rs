//! The tokenizer built from GGUF metadata against reference token ids, and
//! round trips. The reference ids were produced by llama.cpp's tokenizer
//! (llama-cpp-python 0.3.36, `tokenize(text, add_bos=False, special=True)`) on
//! the same GGUF: an independent implementation of the same vocabulary.

/// (text, llama.cpp's ids) for a multilingual / code / emoji / special-token set.
const CASES: &[(&str, &[u32])] = &[
    ("Hello, world!", &[19556, 28, 905, 17]),
    (
        "Le café coûte 3,50 € à Paris — très cher.",
        &[
            7026, 37366, 857, 41307, 676, 216, 35, 28, 37, 32, 24927, 25782, 7042, 1841, 681, 42623, 10106, 30,
        ],
    ),
    (
        "Über größere Straßen fährt man schneller.",
        &[
            142, 246, 593, 1665, 7466, 34878, 518, 19144, 34878, 264, 275, 9023, 88, 9573, 555, 262, 831, 9803, 30,
        ],
    ),
    (
        "日本語のテキストも大丈夫ですか？",
        &[
            23274, 115, 40993, 179, 120, 248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226, 10391, 220, 41479,
            7906, 226, 18614, 121, 7365, 117, 39958, 7365, 229, 8083, 249,
        ],
    ),
    (
        "Привет, как дела?",
        &[
            155, 249, 46879, 16464, 32547, 28, 31338, 6511, 13760, 33427, 42292, 6511, 47,
        ],
    ),
    (
        "مرحبا بالعالم",
        &[21706, 20602, 44626, 31462, 10805, 45726, 22208, 34966, 22208, 21706],
    ),
    (
        "emoji: 🦀🚀 and 👩‍💻 plus flags 🇫🇷",
        &[
            391, 33777, 42, 15107, 116, 218, 10813, 244, 218, 284, 15107, 235, 119, 321, 231, 10813, 236, 136, 8055,
            13198, 15107, 225, 121, 10813, 225, 132,
        ],
    ),
    (
        "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
        &[
            7853, 1085, 1000, 1662, 472, 1303, 1792, 42, 717, 1159, 44, 101, 35, 34, 46, 446, 365, 32, 950, 33, 32,
            595, 5123, 24, 108, 89, 108, 2056, 1672, 216, 34, 595, 19190, 35040, 472, 1628, 34115, 17, 45257, 104, 42,
            47, 15201, 43, 198, 109, 198,
        ],
    ),
    (
        "def f(a, b):\n\treturn a ** 2 + b  # comment\n",
        &[
            1604, 275, 24, 81, 28, 278, 727, 198, 197, 5406, 253, 1903, 216, 34, 1232, 278, 216, 907, 5189, 198,
        ],
    ),
    (
        "numbers 1234567890 and 3.14159e-10 and 0xFF",
        &[
            28707, 216, 33, 34, 35, 36, 37, 38, 39, 40, 41, 32, 284, 216, 35, 30, 33, 36, 33, 37, 41, 85, 29, 33, 32,
            284, 216, 32, 104, 10209,
        ],
    ),
    ("   leading spaces and trailing   ", &[256, 2899, 5600, 284, 35079, 333]),
    (
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
        &[1, 9690, 198, 2683, 359, 5356, 30, 2, 198, 1, 4093, 198, 26843, 2, 198],
    ),
    (
        "{\"name\": \"file_read\", \"arguments\": {\"path\": \"src/main.rs\", \"offset\": 0}}",
        &[
            39428, 1245, 1799, 476, 2153, 79, 1040, 1002, 476, 24370, 1799, 9583, 1537, 1799, 476, 10920, 31, 6157, 30,
            2833, 1002, 476, 14042, 1799, 216, 32, 17859,
        ],
    ),
];

#[test]
fn ids_match_llama_cpp() {
    let tokenizer = &crate::common::model().tokenizer;
    for (text, want) in CASES {
        let got = tokenizer.encode(text).unwrap();
        assert_eq!(&got[..], *want, "token ids differ for {text:?}");
    }
}

#[test]
fn decode_round_trips() {
    let tokenizer = &crate::common::model().tokenizer;
    for (text, _) in CASES {
        let ids = tokenizer.encode(text).unwrap();
        assert_eq!(tokenizer.decode(&ids).unwrap(), *text, "round trip of {text:?}");
    }
}

#[test]
fn control_tokens_are_single_ids_and_stop_generation() {
    let tokenizer = &crate::common::model().tokenizer;
    assert_eq!(tokenizer.encode("<|im_start|>").unwrap(), [1]);
    assert_eq!(tokenizer.encode("<|im_end|>").unwrap(), [2]);
    assert!(tokenizer.is_stop(2), "<|im_end|> ends a chat turn");
    assert_eq!(tokenizer.vocab_size(), 49152);
}

#[test]
fn streaming_text_never_splits_a_character() {
    // Emoji and CJK span several byte-level tokens; the stream must hold them back until whole.
    let tokenizer = &crate::common::model().tokenizer;
    for (text, _) in CASES {
        let mut stream = tessera_model::TextStream::new();
        let mut out = String::new();
        for id in tokenizer.encode(text).unwrap() {
            if let Some(piece) = stream.push(tokenizer, id).unwrap() {
                assert!(!piece.contains('\u{FFFD}'), "partial character emitted for {text:?}");
                out.push_str(&piece);
            }
        }
        assert_eq!(out, *text);
    }
}

#[test]
fn token_bytes_spell_the_text_exactly() {
    let tokenizer = &crate::common::model().tokenizer;
    let bytes = tokenizer.token_bytes();
    assert_eq!(bytes.len(), tokenizer.vocab_size());
    for text in [
        "Hello, world! ✓ 東京 🚀 ünïcödé\n\tcode: fn main() { println!(\"{}\", 1 + 2); }",
        "  leading spaces, trailing tab\t",
        "{\"name\": \"browser_open\", \"arguments\": {\"url\": \"https://example.com/a?b=c\"}}",
    ] {
        let ids = tokenizer.encode(text).unwrap();
        let spelled: Vec<u8> = ids.iter().flat_map(|&id| bytes[id as usize].clone()).collect();
        assert_eq!(spelled, text.as_bytes(), "{text:?}");
    }
    let im_end = tokenizer.token_to_id("<|im_end|>").unwrap();
    assert_eq!(bytes[im_end as usize], b"\xFF<|im_end|>");
    assert!(bytes.iter().all(|b| !b.is_empty()), "every id has bytes");
    let text_tokens_with_marker = bytes
        .iter()
        .enumerate()
        .filter(|(id, b)| b.first() == Some(&0xFF) && !tokenizer.id_to_token(*id as u32).unwrap().starts_with('<'))
        .count();
    assert_eq!(text_tokens_with_marker, 0);
}
