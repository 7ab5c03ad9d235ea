//! The engine on the real model: concurrent sequences produce exactly what each
//! produces alone, cache hits (whole prompt, mid-block, a previous turn's
//! partial last block, on a live sequence's blocks) change nothing, preemption under block pressure changes nothing,
//! a dropped stream frees its blocks, bad requests get typed errors, and the
//! pool is back to baseline after every test.

use crate::common::{assert_baseline, chat_prompt, greedy, long_prompt, model};
use tessera_engine::{EngineConfig, EngineError, EngineHandle, Event, Field, FinishReason, GenerateRequest};
use tessera_model::{KvDtype, LoadOptions};
use tessera_sample::SamplingParams;

fn start(config: EngineConfig) -> EngineHandle {
    EngineHandle::start(crate::common::load(&LoadOptions::default()), config).expect("starting the engine")
}

fn encode(text: &str) -> Vec<u32> {
    model().tokenizer.encode(text).unwrap()
}

/// What the single-sequence path (no engine, no batching) generates, without the stop token.
fn alone(prompt: &[u32], max_tokens: usize) -> Vec<u32> {
    let mut out = greedy(model(), prompt, max_tokens);
    if out.last().is_some_and(|&t| model().tokenizer.is_stop(t)) {
        out.pop();
    }
    out
}

fn prompts() -> Vec<Vec<u32>> {
    vec![
        encode(&long_prompt()),
        encode(&chat_prompt("Name three primary colors.")),
        encode(&chat_prompt(
            "Name three primary colors and explain why they are primary.",
        )),
        encode(&chat_prompt("Write a haiku about the sea.")),
    ]
}

#[test]
fn concurrent_sequences_match_each_alone() {
    // A small step budget: the 300-token prompt prefills in chunks while the others decode.
    let engine = start(EngineConfig {
        max_batch_tokens: 48,
        ..EngineConfig::for_tokens(4096)
    });
    let prompts = prompts();
    let streams: Vec<_> = prompts
        .iter()
        .map(|p| engine.submit(GenerateRequest::greedy(p.clone(), 24)).unwrap())
        .collect();
    for (prompt, stream) in prompts.iter().zip(streams) {
        let output = stream.wait().unwrap();
        assert_eq!(output.tokens, alone(prompt, 24), "prompt of {} tokens", prompt.len());
        assert_eq!(output.completion.usage.prompt_tokens, prompt.len());
        assert_eq!(output.text, model().tokenizer.decode(&output.tokens).unwrap());
    }
    let metrics = assert_baseline(&engine);
    assert!(metrics.steps > 0 && metrics.generated_tokens > 0);
    assert_eq!(metrics.requests_finished, 4);
    assert_eq!(metrics.time_to_first_token.count, 4);
}

#[test]
fn cache_hits_change_nothing() {
    let engine = start(EngineConfig::for_tokens(4096));
    let base = encode(&long_prompt());
    let first = engine
        .submit(GenerateRequest::greedy(base.clone(), 16))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(first.completion.usage.cached_tokens, 0);
    // The same prompt: everything but the last token is reused (a mid-block copy included).
    let again = engine
        .submit(GenerateRequest::greedy(base.clone(), 16))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(again.completion.usage.cached_tokens, base.len() - 1);
    assert_eq!(again.tokens, first.tokens);
    // Cuts on and off block boundaries, then a different continuation.
    for cut in [32, 37, 100, 161] {
        let mut prompt = base[..cut].to_vec();
        prompt.extend(encode(&chat_prompt("And in Python?")));
        let output = engine
            .submit(GenerateRequest::greedy(prompt.clone(), 12))
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(output.completion.usage.cached_tokens, cut, "cut at {cut}");
        assert_eq!(output.tokens, alone(&prompt, 12), "cut at {cut}");
    }
    let metrics = assert_baseline(&engine);
    assert!(metrics.hit_rate() > 0.5, "{metrics:?}");
}

#[test]
fn a_continued_conversation_reuses_every_token_of_the_previous_turn() {
    let engine = start(EngineConfig::for_tokens(4096));
    let base = encode(&long_prompt());
    let first = engine
        .submit(GenerateRequest {
            stop_at_eos: false,
            ..GenerateRequest::greedy(base.clone(), 13)
        })
        .unwrap()
        .wait()
        .unwrap();
    // The next turn repeats the prompt and the reply: every token whose K/V was
    // computed (all but the last sampled one) is reused, the partial last block
    // of the first turn included, and the output equals a cold run's.
    let mut next = base.clone();
    next.extend(&first.tokens);
    next.extend(encode(&chat_prompt("And in Python?")));
    let reused = base.len() + first.tokens.len() - 1;
    assert_ne!(reused % 16, 0, "the first turn ends inside a block");
    let output = engine
        .submit(GenerateRequest::greedy(next.clone(), 12))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(output.completion.usage.cached_tokens, reused);
    assert_eq!(output.tokens, alone(&next, 12));
    assert_baseline(&engine);
}

#[test]
fn a_hit_on_a_live_sequences_blocks_matches() {
    let engine = start(EngineConfig::for_tokens(4096));
    let base = encode(&long_prompt());
    let mut live = engine
        .submit(GenerateRequest {
            stop_at_eos: false,
            ..GenerateRequest::greedy(base.clone(), 40)
        })
        .unwrap();
    // Once it streams, its prompt blocks are indexed and still referenced by it.
    assert!(matches!(live.blocking_next(), Some(Event::Token { .. })));
    let mut prompt = base[..200].to_vec();
    prompt.extend(encode(&chat_prompt("Summarize the question.")));
    let output = engine
        .submit(GenerateRequest::greedy(prompt.clone(), 12))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(output.completion.usage.cached_tokens, 200);
    assert_eq!(output.tokens, alone(&prompt, 12));
    let live = live.wait().unwrap();
    assert_eq!(live.completion.reason, FinishReason::Length);
    assert_baseline(&engine);
}

#[test]
fn preemption_under_block_pressure_changes_nothing() {
    // 12 blocks = 192 tokens: each request fits alone, four together do not.
    let engine = start(EngineConfig {
        kv_blocks: 12,
        max_batch_tokens: 64,
        max_running: 4,
        ..EngineConfig::default()
    });
    let prompts: Vec<Vec<u32>> = prompts()
        .into_iter()
        .skip(1)
        .chain([encode(&chat_prompt("Count to ten."))])
        .collect();
    let request = |p: &Vec<u32>| GenerateRequest {
        stop_at_eos: false,
        ..GenerateRequest::greedy(p.clone(), 60)
    };
    let streams: Vec<_> = prompts.iter().map(|p| engine.submit(request(p)).unwrap()).collect();
    for (prompt, stream) in prompts.iter().zip(streams) {
        let output = stream.wait().unwrap();
        let reference = crate::common::greedy_ignoring_eos(model(), prompt, 60);
        assert_eq!(output.tokens, reference, "prompt of {} tokens", prompt.len());
    }
    let metrics = assert_baseline(&engine);
    assert!(metrics.preemptions > 0, "the pool was never short: {metrics:?}");
}

#[test]
fn requests_sharing_a_new_prefix_compute_it_once() {
    // Six sessions open at once with the same new ~300-token context: the first
    // computes it; the others wait for it and reuse it, instead of all computing it.
    let engine = start(EngineConfig {
        max_batch_tokens: 64,
        ..EngineConfig::for_tokens(8192)
    });
    let shared = encode(&long_prompt());
    let prompts: Vec<Vec<u32>> = (0..6)
        .map(|i| [shared.clone(), encode(&chat_prompt(&format!("Question {i}: why?")))].concat())
        .collect();
    let streams: Vec<_> = prompts
        .iter()
        .map(|p| engine.submit(GenerateRequest::greedy(p.clone(), 4)).unwrap())
        .collect();
    for (i, (prompt, stream)) in prompts.iter().zip(streams).enumerate() {
        let output = stream.wait().unwrap();
        if i == 0 || i == prompts.len() - 1 {
            assert_eq!(output.tokens, alone(prompt, 4), "session {i}");
        }
    }
    let metrics = assert_baseline(&engine);
    let total: usize = prompts.iter().map(Vec::len).sum();
    assert!(metrics.deferrals > 0, "{metrics:?}");
    assert!(
        (metrics.prefill_tokens as usize) < shared.len() + total / 4,
        "the shared context was recomputed: {} of {total} prompt tokens computed",
        metrics.prefill_tokens
    );
}

#[test]
fn memory_per_cached_token_is_two_layers_heads_dims_element_bytes() {
    for (kv_dtype, bytes) in [(KvDtype::F16, 2), (KvDtype::F32, 4)] {
        // 1000 tokens round up to 63 blocks of 16.
        let engine = start(EngineConfig {
            kv_dtype,
            ..EngineConfig::for_tokens(1000)
        });
        let config = engine.model_config().clone();
        let per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * bytes;
        assert_eq!(
            per_token,
            2 * 30 * 3 * 64 * bytes,
            "SmolLM2-135M: 30 layers, 3 KV heads of 64"
        );
        let metrics = engine.metrics().wait().unwrap();
        assert_eq!(metrics.kv_blocks_total, 63);
        assert_eq!(metrics.kv_bytes_per_block, 16 * per_token, "{kv_dtype}");
    }
}

#[test]
fn a_dropped_stream_cancels_and_frees_its_blocks() {
    let engine = start(EngineConfig::for_tokens(4096));
    let mut stream = engine
        .submit(GenerateRequest {
            stop_at_eos: false,
            ..GenerateRequest::greedy(encode(&long_prompt()), 500)
        })
        .unwrap();
    assert!(matches!(stream.blocking_next(), Some(Event::Token { .. })));
    drop(stream);
    let metrics = assert_baseline(&engine);
    assert_eq!(metrics.requests_cancelled, 1);
    assert!(metrics.generated_tokens < 500);
}

#[test]
fn bad_requests_get_typed_errors() {
    let engine = start(EngineConfig {
        max_running: 1,
        max_waiting: 1,
        ..EngineConfig::for_tokens(2048)
    });
    let config = engine.model_config().clone();
    let submit = |prompt: Vec<u32>, max_tokens| engine.submit(GenerateRequest::greedy(prompt, max_tokens)).err();
    assert!(matches!(
        submit(vec![], 4),
        Some(EngineError::Invalid {
            field: Field::Prompt,
            ..
        })
    ));
    let bad_id = config.vocab_size as u32;
    assert_eq!(
        submit(vec![1, bad_id], 4),
        Some(EngineError::OverLimit {
            field: Field::PromptTokenId,
            value: bad_id as usize,
            limit: config.vocab_size - 1
        })
    );
    assert!(matches!(
        submit(vec![1; 2048], 4),
        Some(EngineError::OverLimit {
            field: Field::PromptTokens,
            ..
        })
    ));
    assert!(matches!(
        submit(vec![1, 2], 0),
        Some(EngineError::Invalid {
            field: Field::MaxTokens,
            ..
        })
    ));
    let hot = GenerateRequest {
        sampling: SamplingParams {
            temperature: -1.0,
            ..SamplingParams::default()
        },
        ..GenerateRequest::greedy(vec![1, 2], 4)
    };
    assert!(matches!(
        engine.submit(hot),
        Err(EngineError::Invalid {
            field: Field::Sampling("temperature"),
            ..
        })
    ));
    // One running (admitted once it streams), one waiting: the third is refused.
    let long = |n| GenerateRequest {
        stop_at_eos: false,
        ..GenerateRequest::greedy(encode(&chat_prompt("Tell me a story.")), n)
    };
    let mut running = engine.submit(long(200)).unwrap();
    assert!(matches!(running.blocking_next(), Some(Event::Token { .. })));
    let waiting = engine.submit(long(2)).unwrap();
    assert_eq!(engine.submit(long(2)).err(), Some(EngineError::QueueFull { limit: 1 }));
    drop(running);
    assert_eq!(waiting.wait().unwrap().tokens.len(), 2);
    assert_baseline(&engine);
}

#[test]
fn the_prefix_cache_survives_a_restart() {
    let dir = std::env::temp_dir().join(format!("tessera-engine-persist-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fingerprint = tessera_model::model_fingerprint(&crate::common::model_path()).unwrap();
    let config = EngineConfig {
        kv_cache_dir: Some(dir.clone()),
        model_fingerprint: Some(fingerprint),
        ..EngineConfig::for_tokens(4096)
    };
    let prompt = encode(&long_prompt());
    let first = start(config.clone());
    let cold = first
        .submit(GenerateRequest::greedy(prompt.clone(), 8))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(cold.completion.usage.cached_tokens, 0);
    first.shutdown().wait().unwrap();

    let second = start(config.clone());
    let warm = second
        .submit(GenerateRequest::greedy(prompt.clone(), 8))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(warm.completion.usage.cached_tokens, prompt.len() - 1);
    assert_eq!(warm.tokens, cold.tokens);
    second.shutdown().wait().unwrap();

    // A corrupt file is ignored (with a warning): a cold start, same answer.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
    }
    let third = start(config);
    let after = third
        .submit(GenerateRequest::greedy(prompt, 8))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(after.completion.usage.cached_tokens, 0);
    assert_eq!(after.tokens, cold.tokens);
    third.shutdown().wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stop_string_ends_generation_where_it_appears() {
    let engine = start(EngineConfig::for_tokens(4096));
    let prompt = encode(&chat_prompt("Write a haiku about the sea."));
    let free = engine
        .submit(GenerateRequest::greedy(prompt.clone(), 24))
        .unwrap()
        .wait()
        .unwrap();
    // A stop string spanning the boundary between two generated tokens' text.
    let tokenizer = &model().tokenizer;
    let pieces: Vec<String> = free.tokens.iter().map(|&t| tokenizer.decode(&[t]).unwrap()).collect();
    let at = (4..pieces.len())
        .find(|&i| !pieces[i].trim().is_empty() && !pieces[i - 1].trim().is_empty())
        .unwrap();
    let stop = format!(
        "{}{}",
        pieces[at - 1].chars().last().unwrap(),
        pieces[at].chars().next().unwrap()
    );
    let first = free.text.find(&stop).unwrap();
    let stopped = engine
        .submit(GenerateRequest {
            stop_strings: vec![stop.clone(), "never appears here".into()],
            ..GenerateRequest::greedy(prompt, 24)
        })
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(stopped.completion.reason, FinishReason::Stop);
    assert!(stopped.text.contains(&stop), "{stop:?} in {:?}", stopped.text);
    assert!(free.text.starts_with(&stopped.text));
    // It stopped on the token that completed the string, not later.
    let before_last = tokenizer.decode(&stopped.tokens[..stopped.tokens.len() - 1]).unwrap();
    assert!(before_last.len() < first + stop.len(), "{before_last:?}");
    let err = engine
        .submit(GenerateRequest {
            stop_strings: vec![String::new()],
            ..GenerateRequest::greedy(vec![1], 1)
        })
        .err();
    assert!(
        matches!(err, Some(EngineError::Invalid { field: Field::Stop, .. })),
        "{err:?}"
    );
    assert_baseline(&engine);
}

/// A session's last prefix survives other traffic that would have evicted it,
/// and the pin gives way when a running sequence needs the blocks.
#[test]
fn a_sessions_prefix_stays_warm_under_pressure_and_yields_when_needed() {
    // 40 blocks of 16 tokens: one 300-token prompt plus generation is half the pool.
    let engine = start(EngineConfig::for_tokens(640));
    let mine = encode(&long_prompt());
    let session = |prompt: &Vec<u32>, session: Option<&str>| GenerateRequest {
        session: session.map(std::sync::Arc::from),
        ..GenerateRequest::greedy(prompt.clone(), 4)
    };
    let others: Vec<Vec<u32>> = (0..3)
        .map(|i| {
            encode(&format!(
                "Story {i}: {}",
                long_prompt().replace("Rust", &format!("Zig {i}"))
            ))
        })
        .collect();
    let run = |request| engine.submit(request).unwrap().wait().unwrap();
    // Without a session, three other prompts evict most of this one.
    run(session(&mine, None));
    for other in &others {
        run(session(other, None));
    }
    let cold = run(session(&mine, None)).completion.usage.cached_tokens;
    engine.clear_prefix_cache().wait().unwrap();
    // With a session, its prefix (up to a quarter of the pool) is pinned and stays.
    run(session(&mine, Some("agent-1")));
    let pinned = engine.metrics().wait().unwrap();
    assert_eq!(pinned.sessions_pinned, 1);
    assert_eq!(pinned.kv_blocks_pinned, 10, "a quarter of 40 blocks: {pinned:?}");
    for other in &others {
        run(session(other, None));
    }
    let warm = run(session(&mine, Some("agent-1"))).completion.usage.cached_tokens;
    assert!(
        warm >= 160 && warm > cold,
        "pinned {warm} vs unpinned {cold} cached tokens"
    );
    // A request needing the whole pool unpins the session instead of failing.
    // 568 tokens = 36 blocks: more than the 30 the pins leave.
    let huge = encode(&format!(
        "Essay: {} {}",
        long_prompt().replace("Rust", "Go"),
        long_prompt()
    ));
    let out = run(GenerateRequest {
        stop_at_eos: false,
        ..GenerateRequest::greedy(huge[..560].to_vec(), 8)
    });
    assert_eq!(out.tokens.len(), 8);
    let after = assert_baseline(&engine);
    assert_eq!(after.kv_blocks_pinned, 0, "{after:?}");
    assert_eq!(after.kv_blocks_free + after.kv_blocks_cached, after.kv_blocks_total);
}
