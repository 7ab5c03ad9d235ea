//! One sequence's run over the paged cache, for callers that drive a single
//! stream (the `generate` command, tests, benches): it grows its block table as
//! tokens arrive, feeds prompts in chunks, and returns its blocks on release.
//! The continuous-batching engine drives many of these through one
//! [`Model::forward`](crate::model::Model::forward) per step instead.

use crate::batch::{Logits, LogitsFor, SeqInput};
use crate::cache::KvCache;
use crate::error::{ModelError, Result};
use crate::model::Model;
use tessera_kv::{BlockPool, BlockTable};

/// A token stream whose K/V lives in the paged cache.
#[derive(Debug, Default)]
pub struct Sequence {
    table: BlockTable,
    /// Tokens whose K/V is in the table (computed or reused), in order.
    tokens: Vec<u32>,
}

impl Sequence {
    /// An empty sequence holding no blocks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Start a sequence for `prompt` from the longest prefix the pool has cached
    /// (shared full blocks plus a copy-on-write of a partial block, performed
    /// here on `runtime.kv`). Returns the sequence, holding the reused tokens, and
    /// how many there are; feed `prompt[cached..]` next.
    pub fn start(runtime: Runtime<'_>, prompt: &[u32]) -> (Self, usize) {
        let mut admission = runtime.pool.admit(prompt);
        if let Some(copy) = admission.copy {
            let copied = runtime.kv.copy_block_prefix(copy.src, copy.dst, copy.rows);
            if let Err(error) = runtime.pool.finish_copy(copy) {
                tracing::error!(%error, "releasing a copy-on-write source");
            }
            if let Err(error) = copied {
                // Nothing reads the half-copied block: return the admission's blocks
                // (shared ones stay indexed, the copy target goes back free) and let
                // the prompt be computed from scratch.
                tracing::error!(%error, "copy-on-write of a cached block failed; recomputing the prompt");
                if let Err(error) = admission.table.release(runtime.pool) {
                    tracing::error!(%error, "releasing a failed admission's blocks");
                }
                return (Self::new(), 0);
            }
        }
        let cached = admission.cached_tokens;
        let sequence = Self {
            table: admission.table,
            tokens: prompt[..cached].to_vec(),
        };
        (sequence, cached)
    }

    /// Tokens already processed.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no token has been processed.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The block table (for tests that inspect or perturb it).
    pub fn table(&self) -> &BlockTable {
        &self.table
    }

    /// Run `tokens` in chunks of at most `chunk` tokens; logits per `want` for the
    /// final chunk's rows (`All` returns every row of every chunk). Each chunk's
    /// completed blocks are indexed in the pool for later prefix hits.
    pub fn feed(&mut self, runtime: Runtime<'_>, tokens: &[u32], chunk: usize, want: LogitsFor) -> Result<Logits> {
        let chunk = chunk.max(1);
        let limit = runtime.model.config().max_context;
        if self.len() + tokens.len() > limit {
            return Err(ModelError::OverLimit {
                field: "context tokens",
                value: self.len() + tokens.len(),
                limit,
            });
        }
        let mut collected: Option<Logits> = None;
        let pieces: Vec<&[u32]> = tokens.chunks(chunk).collect();
        for (index, piece) in pieces.iter().enumerate() {
            let last = index + 1 == pieces.len();
            let logits_for = match want {
                LogitsFor::All => LogitsFor::All,
                other if last => other,
                _ => LogitsFor::None,
            };
            if !self.reserve(runtime.pool, piece.len()) {
                return Err(ModelError::OverLimit {
                    field: "KV cache tokens",
                    value: self.len() + piece.len(),
                    limit: self.len() + self.room(runtime.pool),
                });
            }
            let logits = runtime.model.forward(&[self.input(piece, logits_for)], runtime.kv)?;
            self.advance(runtime.pool, piece);
            collected = Some(match collected {
                Some(previous) => previous.concat(logits),
                None => logits,
            });
        }
        collected.ok_or_else(|| ModelError::InvalidBatch("no tokens to feed".into()))
    }

    /// Make room in the block table for `extra` more tokens. All-or-nothing:
    /// `false` (nothing allocated) when the pool has too few allocatable blocks.
    pub fn reserve(&mut self, pool: &mut BlockPool, extra: usize) -> bool {
        self.table.grow(pool, self.len() + extra)
    }

    /// How many more tokens [`reserve`](Self::reserve) can make room for now:
    /// the slack in the table's last block plus every allocatable block.
    pub fn room(&self, pool: &BlockPool) -> usize {
        let capacity = self.table.blocks().len() * pool.block_size();
        capacity.saturating_sub(self.len()) + pool.num_allocatable() * pool.block_size()
    }

    /// This sequence's forward input for `tokens`, which follow what is cached
    /// (call [`reserve`](Self::reserve) for them first).
    pub fn input<'a>(&'a self, tokens: &'a [u32], logits: LogitsFor) -> SeqInput<'a> {
        SeqInput {
            tokens,
            start_pos: self.len(),
            blocks: self.table.blocks(),
            logits,
        }
    }

    /// Record that `tokens` ran (their K/V rows are written) and index the
    /// blocks they completed, so later prompts can share them.
    pub fn advance(&mut self, pool: &mut BlockPool, tokens: &[u32]) {
        let full_before = self.tokens.len() / pool.block_size();
        self.tokens.extend_from_slice(tokens);
        if self.tokens.len() / pool.block_size() > full_before {
            // Only when a block completes: a commit walks the whole chain.
            pool.commit(&self.table, &self.tokens);
        }
    }

    /// Return every block to the pool, indexing the partial last block first so
    /// a prompt that continues this sequence reuses all of it.
    pub fn release(&mut self, pool: &mut BlockPool) {
        pool.commit_tail(&self.table, &self.tokens);
        // The table only holds blocks it took from this pool; an error here is a bug.
        if let Err(error) = self.table.release(pool) {
            tracing::error!(%error, "releasing a sequence's blocks");
        }
        self.tokens.clear();
    }
}

/// The shared state a sequence runs against.
#[derive(Debug)]
pub struct Runtime<'a> {
    /// The model.
    pub model: &'a Model,
    /// The block pool.
    pub pool: &'a mut BlockPool,
    /// The K/V storage matching the pool.
    pub kv: &'a mut KvCache,
}
