//! Thousands of random requests through the engine on a tiny random model: random
//! prompts over a few shared prefixes, random lengths, random cancellations at
//! random points, half the requests in one of 5 sessions (their prefixes pinned),
//! a pool small enough to force evictions, unpinning and preemptions. Every
//! request that finishes must equal the single-sequence greedy run, and at the
//! end nothing may leak: no referenced block, every request accounted for.

use crate::common::tiny::{write_tiny_model, Family, VOCAB};
use std::time::{Duration, Instant};
use tessera_engine::{EngineConfig, EngineHandle, Event, EventStream, GenerateRequest};
use tessera_model::{LoadOptions, LoadedModel, ModelLocation};

const REQUESTS: usize = 3000;
const IN_FLIGHT: usize = 24;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

fn load_tiny() -> LoadedModel {
    let dir = std::env::temp_dir().join(format!("tessera-engine-stress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_tiny_model(&dir, Family::Llama);
    let loaded = LoadedModel::load(&ModelLocation::HfDir(dir.clone()), &LoadOptions::default()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    loaded
}

/// A prompt of 1..=120 tokens: one of four shared prefixes (cut anywhere), then random tokens.
fn random_prompt(rng: &mut Rng, prefixes: &[Vec<u32>]) -> Vec<u32> {
    let prefix = &prefixes[rng.below(prefixes.len())];
    let mut prompt = prefix[..rng.below(prefix.len() + 1)].to_vec();
    let extra = 1 + rng.below(40);
    prompt.extend((0..extra).map(|_| rng.below(VOCAB) as u32));
    prompt
}

struct InFlight {
    prompt: Vec<u32>,
    max_tokens: usize,
    stream: EventStream,
    /// Cancel (drop the stream) after this many events, if set.
    cancel_after: Option<usize>,
    received: Vec<u32>,
}

/// Read one event; returns true when the request is over (finished or cancelled).
fn pump(flight: &mut InFlight, reference: &LoadedModel, finished: &mut usize) -> bool {
    if flight.cancel_after == Some(flight.received.len()) {
        return true; // dropping the stream cancels it
    }
    match flight.stream.blocking_next() {
        Some(Event::Token { id, .. }) => {
            flight.received.push(id);
            false
        }
        Some(Event::Finished(completion)) => {
            assert_eq!(completion.usage.completion_tokens, flight.max_tokens);
            let expected = crate::common::greedy_ignoring_eos(reference, &flight.prompt, flight.max_tokens);
            assert_eq!(flight.received, expected, "prompt {:?}", flight.prompt);
            *finished += 1;
            true
        }
        Some(Event::Failed(error)) => panic!("request failed: {error}"),
        None => panic!("the stream ended without a last event"),
    }
}

#[test]
fn thousands_of_random_requests_leak_nothing() {
    let reference = load_tiny();
    let config = EngineConfig {
        kv_blocks: 24, // 384 token slots: requests evict each other's cache and get preempted
        max_batch_tokens: 64,
        max_running: 6,
        max_waiting: IN_FLIGHT,
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(load_tiny(), config).unwrap();
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let prefixes: Vec<Vec<u32>> = (0..4)
        .map(|_| (0..80).map(|_| rng.below(VOCAB) as u32).collect())
        .collect();
    let (mut submitted, mut finished) = (0, 0);
    let mut flights: Vec<InFlight> = Vec::new();
    while submitted < REQUESTS || !flights.is_empty() {
        while submitted < REQUESTS && flights.len() < IN_FLIGHT {
            let prompt = random_prompt(&mut rng, &prefixes);
            let max_tokens = 1 + rng.below(20);
            // Half the requests belong to one of 5 sessions, whose prefixes get pinned.
            let session = (rng.below(2) == 0).then(|| std::sync::Arc::from(format!("s{}", rng.below(5))));
            let request = GenerateRequest {
                stop_at_eos: false,
                session,
                ..GenerateRequest::greedy(prompt.clone(), max_tokens)
            };
            let cancel_after = (rng.below(3) == 0).then(|| rng.below(max_tokens));
            let stream = engine.submit(request).unwrap();
            flights.push(InFlight {
                prompt,
                max_tokens,
                stream,
                cancel_after,
                received: Vec::new(),
            });
            submitted += 1;
        }
        let pick = rng.below(flights.len());
        if pump(&mut flights[pick], &reference, &mut finished) {
            flights.swap_remove(pick);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let m = engine.metrics().wait().unwrap();
        if m.requests_running == 0 && m.requests_waiting == 0 {
            break m;
        }
        assert!(Instant::now() < deadline, "engine never went idle: {m:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(metrics.kv_blocks_used, 0, "{metrics:?}");
    assert_eq!(
        metrics.kv_blocks_free + metrics.kv_blocks_cached + metrics.kv_blocks_pinned,
        metrics.kv_blocks_total
    );
    assert!(metrics.kv_blocks_pinned <= metrics.kv_blocks_total / 4, "{metrics:?}");
    // Clearing the cache lets the pins go too: the pool is back to its baseline.
    engine.clear_prefix_cache().wait().unwrap();
    let cleared = engine.metrics().wait().unwrap();
    assert_eq!(cleared.kv_blocks_free, cleared.kv_blocks_total, "{cleared:?}");
    assert_eq!(metrics.requests_failed, 0);
    assert_eq!(
        (metrics.requests_finished + metrics.requests_cancelled) as usize,
        REQUESTS,
        "{metrics:?}"
    );
    assert!(finished > REQUESTS / 2, "only {finished} finished");
    assert!(
        metrics.requests_cancelled > 0 && metrics.preemptions > 0 && metrics.evicted_blocks > 0,
        "{metrics:?}"
    );
    assert!(metrics.prefix_hit_tokens > 0, "{metrics:?}");
    engine.shutdown().wait().unwrap();
}
