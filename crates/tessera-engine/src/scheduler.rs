//! The scheduler: who is admitted, who runs how many tokens this step, and who
//! is preempted when the pool runs out. Follows vLLM v1's policy: running
//! sequences first (decodes, then prefill chunks, oldest first) within a token
//! budget; admission in arrival order; on block exhaustion the newest running
//! sequence is preempted (its blocks released, its full blocks left cached) and
//! requeued at the front. Cost: O(running²) per step with running ≤ `max_running`.

use crate::active::Active;
use crate::sessions::SessionPins;
use crate::EngineMetrics;
use std::collections::VecDeque;
use std::time::Instant;
use tessera_kv::{BlockPool, SeqId};
use tessera_model::{KvCache, Model, Runtime, Sequence};

/// Waiting requests examined (and deferred) per step at most, bounding admission cost.
const MAX_DEFERRED_PER_STEP: usize = 64;

/// Tokens of one sequence to run in this step's forward: `len` of its own
/// pending tokens, then the first `draft` tokens of its draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub seq: SeqId,
    pub len: usize,
    pub draft: usize,
}

/// The engine's queues. `running` is in admission order, oldest first.
#[derive(Debug)]
pub(crate) struct Scheduler {
    pub waiting: VecDeque<Active>,
    pub running: Vec<Active>,
    pub max_running: usize,
    pub max_batch_tokens: usize,
}

/// What happened to one sequence while making room for it.
enum Room {
    Granted(usize),
    /// The sequence itself was preempted (it was the newest).
    PreemptedSelf,
    /// It cannot grow and nothing else holds blocks: it must end.
    Exhausted,
}

/// A step's plan: the chunks to run, and sequences that must end because the
/// pool cannot hold them even alone.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub chunks: Vec<Chunk>,
    pub exhausted: Vec<Active>,
}

impl Plan {
    /// Tokens planned so far.
    pub fn tokens(&self) -> usize {
        self.chunks.iter().map(|c| c.len + c.draft).sum()
    }
}

/// The shared state admission and preemption work on.
pub(crate) struct Resources<'a> {
    pub model: &'a Model,
    pub pool: &'a mut BlockPool,
    pub kv: &'a mut KvCache,
    pub metrics: &'a mut EngineMetrics,
}

impl Scheduler {
    pub fn new(max_running: usize, max_batch_tokens: usize) -> Self {
        Self {
            waiting: VecDeque::new(),
            running: Vec::new(),
            max_running,
            max_batch_tokens,
        }
    }

    /// Whether nothing is waiting or running.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Remove sequences whose receiver is gone, freeing their blocks. Returns
    /// how many of them had never been admitted (they still count as queued).
    pub fn sweep_cancelled(&mut self, pool: &mut BlockPool, metrics: &mut EngineMetrics) -> usize {
        let mut never_admitted = 0;
        let mut keep = |seq: &mut Active| {
            if !seq.is_cancelled() {
                return true;
            }
            seq.kv.release(pool);
            metrics.requests_cancelled += 1;
            if seq.times.admitted.is_none() {
                never_admitted += 1;
            }
            false
        };
        self.running.retain_mut(&mut keep);
        self.waiting.retain_mut(&mut keep);
        never_admitted
    }

    /// Admit waiting requests, oldest first, while a slot is free and the pool
    /// has room for their first chunk (always when nothing runs). A request
    /// whose prompt shares at least a block more than its cache hit with a
    /// running sequence's unfinished prefill waits for that prefill, then
    /// reuses it (SGLang's in-batch prefix sharing): N sessions that open with
    /// the same new system prompt compute it once. Returns how many were
    /// admitted for the first time.
    pub fn admit(&mut self, res: &mut Resources<'_>) -> usize {
        let mut first_time = 0;
        let mut deferred = Vec::new();
        while self.running.len() < self.max_running && deferred.len() < MAX_DEFERRED_PER_STEP {
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            let (kv, cached) = Sequence::start(
                Runtime {
                    model: res.model,
                    pool: res.pool,
                    kv: res.kv,
                },
                &seq.tokens,
            );
            seq.kv = kv;
            if self.leader_computing(&seq, cached, res.pool.block_size()) {
                seq.kv.release(res.pool);
                res.metrics.deferrals += 1;
                deferred.push(seq);
                continue;
            }
            let first_chunk = seq.pending().min(self.max_batch_tokens);
            if seq.kv.room(res.pool) < first_chunk && !self.running.is_empty() {
                seq.kv.release(res.pool);
                self.waiting.push_front(seq);
                break;
            }
            if seq.cached_tokens.is_none() {
                seq.cached_tokens = Some(cached);
                seq.times.admitted = Some(Instant::now());
                res.metrics.prefix_queried_tokens += seq.prompt_len as u64;
                res.metrics.prefix_hit_tokens += cached as u64;
                first_time += 1;
            }
            self.running.push(seq);
        }
        for seq in deferred.into_iter().rev() {
            self.waiting.push_front(seq);
        }
        first_time
    }

    /// Whether a running sequence is still prefilling tokens `seq` shares with
    /// it, at least a block beyond what `seq` found cached.
    fn leader_computing(&self, seq: &Active, cached: usize, block_size: usize) -> bool {
        self.running.iter().any(|leader| {
            let prompt = &leader.tokens[..leader.prompt_len];
            if leader.kv.len() >= prompt.len() {
                return false; // its prompt is done: what it shares is already indexed
            }
            let shared = prompt.iter().zip(&seq.tokens).take_while(|(a, b)| a == b).count();
            shared >= cached + block_size && leader.kv.len() < shared
        })
    }

    /// Plan this step: one token for each decoding sequence, then prefill chunks,
    /// within the token budget, reserving blocks and preempting as needed.
    pub fn plan(&mut self, pool: &mut BlockPool, pins: &mut SessionPins, metrics: &mut EngineMetrics) -> Plan {
        let mut plan = Plan::default();
        for decoding in [true, false] {
            let mut i = 0;
            while i < self.running.len() && plan.tokens() < self.max_batch_tokens {
                let seq = &self.running[i];
                if seq.is_decoding() != decoding || plan.chunks.iter().any(|c| c.seq == seq.id) {
                    i += 1;
                    continue;
                }
                let want = seq.pending().min(self.max_batch_tokens - plan.tokens());
                match self.make_room(i, want, (pool, &mut *pins), &mut plan, metrics) {
                    Room::Granted(len) => {
                        plan.chunks.push(Chunk {
                            seq: self.running[i].id,
                            len,
                            draft: 0,
                        });
                        i += 1;
                    }
                    Room::PreemptedSelf => {}
                    Room::Exhausted => plan.exhausted.push(self.running.remove(i)),
                }
            }
        }
        plan
    }

    /// Let decoding sequences verify their drafts in this step, within what the
    /// plan leaves of `step_rows` rows and of the token budget (shared evenly,
    /// oldest first), of the request's token limits (`max_context` included)
    /// and of the blocks free now: a draft never preempts, unpins or shortens
    /// anything.
    pub fn add_drafts(&mut self, plan: &mut Plan, pool: &mut BlockPool, step_rows: usize, max_context: usize) {
        let rows_left = step_rows.min(self.max_batch_tokens).saturating_sub(plan.tokens());
        let drafting: Vec<usize> = (0..plan.chunks.len())
            .filter(|&c| {
                let chunk = &plan.chunks[c];
                self.running
                    .iter()
                    .find(|seq| seq.id == chunk.seq)
                    .is_some_and(|seq| seq.is_decoding() && seq.pending() == 1 && !seq.draft.tokens.is_empty())
            })
            .collect();
        let mut rows_left = rows_left;
        for (n, &c) in drafting.iter().enumerate() {
            let share = rows_left.div_ceil(drafting.len() - n);
            let Some(seq) = self.running.iter_mut().find(|seq| seq.id == plan.chunks[c].seq) else {
                continue;
            };
            // Row i samples token i + 1 of this step: at most `left` tokens, and
            // positions stay below the model's context.
            let left = seq
                .stop
                .max_tokens
                .saturating_sub(seq.generated())
                .min(max_context.saturating_sub(seq.tokens.len()) + 1);
            let draft = seq.draft.tokens.len().min(share).min(left.saturating_sub(1));
            if draft > 0 && seq.kv.reserve(pool, 1 + draft) {
                plan.chunks[c].draft = draft;
                rows_left -= draft;
            }
        }
    }

    /// Reserve blocks for `want` more tokens of `running[i]`: a smaller chunk if
    /// that is all that fits, else unpin the least recently active session, else
    /// preempt the newest sequence, and retry.
    fn make_room(
        &mut self,
        i: usize,
        want: usize,
        (pool, pins): (&mut BlockPool, &mut SessionPins),
        plan: &mut Plan,
        metrics: &mut EngineMetrics,
    ) -> Room {
        loop {
            let seq = &mut self.running[i];
            if seq.kv.reserve(pool, want) {
                return Room::Granted(want);
            }
            let room = seq.kv.room(pool).min(want);
            if room > 0 && seq.kv.reserve(pool, room) {
                return Room::Granted(room);
            }
            if pins.unpin_oldest(pool) {
                continue;
            }
            let newest = self.running.len() - 1;
            if newest == 0 {
                return Room::Exhausted;
            }
            let victim = self.running.remove(newest);
            plan.chunks.retain(|c| c.seq != victim.id);
            self.preempt(victim, pool, metrics);
            if newest == i {
                return Room::PreemptedSelf;
            }
        }
    }

    /// Free a sequence's blocks and requeue it first in line; its full blocks
    /// stay indexed, so re-admission reuses most of its K/V.
    fn preempt(&mut self, mut seq: Active, pool: &mut BlockPool, metrics: &mut EngineMetrics) {
        tracing::debug!(seq = seq.id.0, tokens = seq.tokens.len(), "preempting for KV blocks");
        seq.kv.release(pool);
        seq.draft.clear();
        metrics.preemptions += 1;
        self.waiting.push_front(seq);
    }
}
