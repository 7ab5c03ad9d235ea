//! Greedy continuations of fixed ChatML prompts on the real model are stable
//! text; on the native Q4_1 weights with f32 K/V they equal llama.cpp's
//! (recorded with llama-cpp-python 0.3.36, temperature 0, on the same GGUF).
//! llama.cpp's own f16 K/V path rounds the queries and the attention weights
//! to f16 as well, so no f16 cache equals it bit for bit; f32 K/V is the
//! comparison that checks the model's arithmetic.

use tessera_model::{ChatRole, KvDtype, LoadOptions};

#[test]
fn capital_of_france_tokens_and_answer() {
    let loaded = crate::common::model();
    let ids = loaded
        .tokenizer
        .encode(&crate::common::chat_prompt("What is the capital of France?"))
        .unwrap();
    assert_eq!(
        ids,
        [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]
    );
    let out = crate::common::greedy(loaded, &ids, 20);
    // "The capital of France is Paris." then <|im_end|>
    assert_eq!(out, [504, 3575, 282, 4649, 314, 7042, 30, 2]);
}

#[test]
fn templated_chat_answer_is_stable() {
    let loaded = crate::common::model();
    let messages = [tessera_model::ChatMessage::new(
        ChatRole::User,
        "Explain in two sentences why the sky is blue.",
    )];
    let prompt = loaded.template.render(&messages, true).unwrap();
    assert!(
        prompt.starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"),
        "{prompt}"
    );
    let out = crate::common::greedy(loaded, &loaded.tokenizer.encode(&prompt).unwrap(), 80);
    let text = loaded.tokenizer.decode(&out).unwrap();
    assert!(
        text.starts_with("The sky is blue because of a process called Rayleigh scattering"),
        "{text}"
    );
}

#[test]
fn native_q4_1_greedy_text_equals_llama_cpp() {
    let native = crate::common::load(&LoadOptions {
        repack_q4_1: false,
        ..LoadOptions::default()
    });
    let prompt = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
                  <|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let out = crate::common::greedy_with(&native, &native.tokenizer.encode(prompt).unwrap(), 30, KvDtype::F32);
    let text = native.tokenizer.decode(&out).unwrap();
    assert_eq!(
        text,
        "L'Étoile, la Marseillaise, la femme, la femme au martyre, la femme au martyre,"
    );
}
