mod common;

#[test]
fn capital_of_france() {
    let loaded = common::model();
    let ids = loaded.tokenizer.encode(&common::chat_prompt("What is the capital of France?")).unwrap();
    assert_eq!(ids, [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]);
    let out = common::greedy(loaded, &ids, 20);
    println!("{out:?} {:?}", loaded.tokenizer.decode(&out));
    assert_eq!(&out[..7], &[504, 3575, 282, 4649, 314, 7042, 30]);
}
