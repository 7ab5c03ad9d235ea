//! Prefix reuse on the real model: a prompt that starts from cached K/V (shared
//! full blocks plus a copy-on-write partial block) gives bit-identical logits and
//! the same greedy tokens as the same prompt computed cold — prefixes on and off
//! block boundaries, hits inside a block, and hits on a live sequence's blocks.

use tessera_kv::BlockPool;
use tessera_model::{KvCache, LoadedModel, LogitsFor, Runtime, Sequence};

/// Greedy tokens after `prompt`, starting from whatever `pool` has cached.
/// Returns (cached tokens reused, last-prompt logits, generated tokens).
fn run(
    loaded: &LoadedModel,
    pool: &mut BlockPool,
    kv: &mut KvCache,
    prompt: &[u32],
) -> (usize, Vec<f32>, Vec<u32>, Sequence) {
    let model = &loaded.model;
    let (mut seq, cached) = Sequence::start(Runtime { model, pool, kv }, prompt);
    let logits = seq
        .feed(Runtime { model, pool, kv }, &prompt[cached..], 64, LogitsFor::Last)
        .unwrap();
    let first_logits = logits.row(0).to_vec();
    let mut next = crate::common::argmax(&first_logits) as u32;
    let mut out = vec![next];
    for _ in 0..8 {
        let logits = seq
            .feed(Runtime { model, pool, kv }, &[next], 1, LogitsFor::Last)
            .unwrap();
        next = crate::common::argmax(logits.row(0)) as u32;
        out.push(next);
    }
    (cached, first_logits, out, seq)
}

fn fresh(loaded: &LoadedModel) -> (BlockPool, KvCache) {
    crate::common::cache_for(loaded, 1200)
}

#[test]
fn warm_prefix_gives_the_cold_answer_bit_for_bit() {
    let loaded = crate::common::model();
    let base = loaded.tokenizer.encode(&crate::common::long_prompt()).unwrap();
    let suffix = loaded
        .tokenizer
        .encode("<|im_end|>\n<|im_start|>user\nAnswer in one word.<|im_end|>\n<|im_start|>assistant\n")
        .unwrap();
    let (mut pool, mut kv) = fresh(loaded);
    // Cache the base conversation, then finish it: its blocks stay cached.
    let (_, _, _, mut first) = run(loaded, &mut pool, &mut kv, &base);
    first.release(&mut pool);
    // cut: block boundary (64), mid-block (37, 101), tiny (5), whole base (331)
    for cut in [64usize, 37, 101, 5, base.len()] {
        let mut prompt = base[..cut].to_vec();
        prompt.extend(&suffix);
        let (mut cold_pool, mut cold_kv) = fresh(loaded);
        let (cold_cached, cold_logits, cold_out, mut cold_seq) = run(loaded, &mut cold_pool, &mut cold_kv, &prompt);
        cold_seq.release(&mut cold_pool);
        assert_eq!(cold_cached, 0);
        let (cached, logits, out, mut seq) = run(loaded, &mut pool, &mut kv, &prompt);
        seq.release(&mut pool);
        assert!(
            cached >= cut.min(prompt.len() - 1),
            "cut {cut}: only {cached} tokens reused"
        );
        assert_eq!(
            logits, cold_logits,
            "cut {cut}: logits differ with a cache hit of {cached} tokens"
        );
        assert_eq!(out, cold_out, "cut {cut}: greedy tokens differ");
    }
    let stats = pool.stats();
    assert_eq!(stats.free + stats.cached, stats.total, "pool back to baseline");
    pool.check_invariants().unwrap();
    let counters = pool.counters();
    assert!(counters.hit_tokens > 0 && counters.hit_tokens < counters.queried_tokens);
}

#[test]
fn a_hit_on_a_live_sequence_blocks_matches_cold() {
    let loaded = crate::common::model();
    let base = loaded.tokenizer.encode(&crate::common::long_prompt()).unwrap();
    let (mut pool, mut kv) = fresh(loaded);
    let (_, _, _, mut live) = run(loaded, &mut pool, &mut kv, &base); // stays live
    let mut prompt = base[..150].to_vec(); // mid-block: 150 = 9 × 16 + 6
    prompt.extend(loaded.tokenizer.encode(" Summarize that.").unwrap());
    let (mut cold_pool, mut cold_kv) = fresh(loaded);
    let (_, cold_logits, cold_out, _) = run(loaded, &mut cold_pool, &mut cold_kv, &prompt);
    let (cached, logits, out, mut second) = run(loaded, &mut pool, &mut kv, &prompt);
    assert_eq!(cached, 150);
    assert_eq!(logits, cold_logits);
    assert_eq!(out, cold_out);
    second.release(&mut pool);
    live.release(&mut pool);
    assert_eq!(pool.stats().used, 0, "every block released");
    pool.check_invariants().unwrap();
}
