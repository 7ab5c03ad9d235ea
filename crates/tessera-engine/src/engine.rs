//! The step loop: the thread that owns the model, the pool, the K/V storage and
//! every sequence. It drains commands, sweeps cancelled requests, admits, plans,
//! runs one forward, samples, streams and finishes — then goes again, blocking
//! on the command channel only when there is nothing to run.

use crate::active::Active;
use crate::emit::{emit_next, propose_draft, verify, StepContext};
use crate::handle::Shared;
use crate::scheduler::{Chunk, Resources, Scheduler};
use crate::sessions::SessionPins;
use crate::{
    persist, Completion, EngineConfig, EngineError, EngineMetrics, Event, FinishReason, Timings, ToolOutput, Usage,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tessera_constrain::CallSyntax;
use tessera_kv::BlockPool;
use tessera_model::{KvCache, Logits, LogitsFor, Model, Tokenizer};
use tokio::sync::{mpsc, oneshot};

/// A reply channel for a command.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

/// What a handle can ask the engine.
#[derive(Debug)]
pub(crate) enum Command {
    Submit(Box<Active>),
    Metrics(Reply<EngineMetrics>),
    IndexBlocks(Reply<Vec<tessera_kv::FullBlock>>),
    ClearPrefixCache(Reply<usize>),
    SavePrefixCache(Reply<usize>),
    Shutdown(Reply<()>),
}

/// The engine's owned state.
pub(crate) struct Engine {
    pub model: Model,
    pub tokenizer: Arc<Tokenizer>,
    pub pool: BlockPool,
    pub kv: KvCache,
    pub config: EngineConfig,
    pub scheduler: Scheduler,
    pub metrics: EngineMetrics,
    pub shared: Arc<Shared>,
    /// The last prefix of recently active sessions, kept referenced.
    pub pins: SessionPins,
}

/// Whether the loop goes on after a command.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

impl Engine {
    /// Run until shut down, or until every handle is gone and the work is done.
    pub fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            self.publish_index_events();
            if self.scheduler.is_idle() {
                let Some(command) = commands.blocking_recv() else {
                    break;
                };
                if self.handle(command) == Flow::Stop {
                    return;
                }
            }
            while let Ok(command) = commands.try_recv() {
                if self.handle(command) == Flow::Stop {
                    return;
                }
            }
            self.step();
        }
        self.publish_index_events();
        if let Err(error) = self.save_cache() {
            tracing::warn!(%error, "saving the prefix cache at exit");
        }
    }

    fn handle(&mut self, command: Command) -> Flow {
        match command {
            Command::Submit(seq) => self.scheduler.waiting.push_back(*seq),
            Command::Metrics(reply) => {
                let _ = reply.send(Ok(self.snapshot()));
            }
            Command::IndexBlocks(reply) => {
                // Announce first: a caller comparing events with the index sees both agree.
                self.publish_index_events();
                let _ = reply.send(Ok(self.pool.full_blocks()));
            }
            Command::ClearPrefixCache(reply) => {
                self.pins.clear(&mut self.pool);
                let cached = self.pool.num_cached();
                self.pool.clear_cache();
                let _ = reply.send(Ok(cached));
            }
            Command::SavePrefixCache(reply) => {
                let _ = reply.send(self.save_cache());
            }
            Command::Shutdown(reply) => {
                self.fail_everything(EngineError::Stopped);
                let _ = reply.send(self.save_cache().map(|_| ()));
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    /// Send the index's changes since the last call to the KV-event sink.
    fn publish_index_events(&mut self) {
        let Some(sink) = &self.config.kv_events else {
            return;
        };
        let events = self.pool.take_events();
        if !events.is_empty() && sink.send(events).is_err() {
            tracing::warn!("the KV-event publisher stopped; events are no longer sent");
            self.config.kv_events = None;
        }
    }

    /// Save when a directory is configured; `Ok(0)` when none is.
    fn save_cache(&self) -> Result<usize, EngineError> {
        match (&self.config.kv_cache_dir, &self.config.model_fingerprint) {
            (Some(dir), Some(fingerprint)) => persist::save(dir, fingerprint, &self.pool, &self.kv),
            _ => Ok(0),
        }
    }

    fn snapshot(&self) -> EngineMetrics {
        let stats = self.pool.stats();
        let pinned_only = self.pins.blocks_held_only_by_pins(&self.pool);
        EngineMetrics {
            kv_blocks_total: stats.total,
            kv_blocks_used: stats.used - pinned_only,
            kv_blocks_pinned: pinned_only,
            sessions_pinned: self.pins.sessions(),
            kv_blocks_cached: stats.cached,
            kv_blocks_free: stats.free,
            kv_bytes_per_block: self.kv.allocated_bytes() / stats.total.max(1),
            kv_block_tokens: self.config.block_size,
            max_running: self.config.max_running,
            evicted_blocks: self.pool.counters().evicted_blocks,
            requests_running: self.scheduler.running.len(),
            requests_waiting: self.scheduler.waiting.len(),
            ..self.metrics.clone()
        }
    }

    /// One scheduling round and at most one forward pass.
    fn step(&mut self) {
        let never_admitted = self.scheduler.sweep_cancelled(&mut self.pool, &mut self.metrics);
        self.dequeued(never_admitted);
        let mut resources = Resources {
            model: &self.model,
            pool: &mut self.pool,
            kv: &mut self.kv,
            metrics: &mut self.metrics,
        };
        let admitted = self.scheduler.admit(&mut resources);
        self.dequeued(admitted);
        let mut plan = self.scheduler.plan(&mut self.pool, &mut self.pins, &mut self.metrics);
        if self.config.speculation.enabled() {
            let rows = self.config.speculation.rows_for(plan.chunks.len());
            let context = self.model.config().max_context;
            self.scheduler.add_drafts(&mut plan, &mut self.pool, rows, context);
        }
        for seq in plan.exhausted {
            self.finish(seq, FinishReason::Length);
        }
        if plan.chunks.is_empty() {
            return;
        }
        match self.forward(&plan.chunks) {
            Ok(logits) => self.absorb(&plan.chunks, logits),
            Err(error) => {
                tracing::error!(%error, "forward pass failed");
                let failure = EngineError::model("in the forward pass", error);
                for chunk in &plan.chunks {
                    if let Some(seq) = self.take_running(chunk.seq) {
                        self.fail(seq, failure.clone());
                    }
                }
            }
        }
    }

    /// Requests leaving the waiting count a handle checks against `max_waiting`.
    fn dequeued(&self, count: usize) {
        if count > 0 {
            self.shared.queued.fetch_sub(count, Ordering::AcqRel);
        }
    }

    /// Run the planned chunks as one ragged batch (a chunk with a draft asks
    /// for logits at every row, to verify it).
    fn forward(&mut self, chunks: &[Chunk]) -> tessera_model::Result<Logits> {
        let running = &self.scheduler.running;
        let planned: Vec<(&Active, Vec<u32>, LogitsFor)> = chunks
            .iter()
            .filter_map(|chunk| running.iter().find(|seq| seq.id == chunk.seq).map(|seq| (seq, chunk)))
            .map(|(seq, chunk)| {
                let start = seq.kv.len();
                let mut tokens = seq.tokens[start..start + chunk.len].to_vec();
                tokens.extend_from_slice(&seq.draft.tokens[..chunk.draft]);
                let logits = if chunk.draft > 0 {
                    LogitsFor::All
                } else if start + chunk.len == seq.tokens.len() {
                    LogitsFor::Last
                } else {
                    LogitsFor::None
                };
                (seq, tokens, logits)
            })
            .collect();
        let inputs: Vec<_> = planned
            .iter()
            .map(|(seq, tokens, logits)| seq.kv.input(tokens, *logits))
            .collect();
        self.metrics.steps += 1;
        self.model.forward(&inputs, &mut self.kv)
    }

    /// Record what ran, sample where logits came back (verifying drafts),
    /// stream, draft the next step and finish.
    fn absorb(&mut self, chunks: &[Chunk], mut logits: Logits) {
        let mut done = Vec::new();
        let speculation = self.config.speculation;
        for (batch_index, chunk) in chunks.iter().enumerate() {
            let Some(seq) = self.scheduler.running.iter_mut().find(|seq| seq.id == chunk.seq) else {
                continue;
            };
            let start = seq.kv.len();
            let prompt_part = (start + chunk.len).min(seq.prompt_len).saturating_sub(start);
            self.metrics.prefill_tokens += prompt_part as u64;
            let step = self.metrics.steps;
            let mut context = StepContext {
                tokenizer: &self.tokenizer,
                vocab: &self.shared.vocab,
                metrics: &mut self.metrics,
                max_context: self.model.config().max_context,
                step,
            };
            let outcome = if chunk.draft > 0 {
                let rows: Vec<usize> = logits.rows_of_seq(batch_index).collect();
                verify(
                    seq,
                    &mut self.pool,
                    &rows,
                    &mut logits,
                    (chunk.draft, speculation.max_draft),
                    &mut context,
                )
            } else {
                seq.kv.advance(&mut self.pool, &seq.tokens[start..start + chunk.len]);
                if seq.pending() > 0 {
                    continue;
                }
                let Some(row) = logits.rows_of_seq(batch_index).next() else {
                    continue;
                };
                emit_next(seq, logits.row_mut(row), None, &mut context)
            };
            match outcome {
                Ok(Some(reason)) => done.push((seq.id, Ok(reason))),
                Ok(None) => {
                    if speculation.enabled() && seq.speculate {
                        propose_draft(seq, &speculation, &mut context);
                    }
                }
                Err(error) => done.push((seq.id, Err(error))),
            }
        }
        for (id, outcome) in done {
            if let Some(seq) = self.take_running(id) {
                match outcome {
                    Ok(reason) => self.finish(seq, reason),
                    Err(error) => self.fail(seq, error),
                }
            }
        }
    }

    fn take_running(&mut self, id: tessera_kv::SeqId) -> Option<Active> {
        let at = self.scheduler.running.iter().position(|seq| seq.id == id)?;
        Some(self.scheduler.running.remove(at))
    }

    /// End a request normally: free its blocks (full ones stay cached) and send the completion.
    fn finish(&mut self, mut seq: Active, mut reason: FinishReason) {
        if let Some(session) = seq.session.clone() {
            // Its full blocks are indexed; pinning them keeps the next turn's prefix warm.
            let full = seq.kv.len() / self.pool.block_size();
            let blocks = seq.kv.table().blocks()[..full].to_vec();
            self.pins.pin(session, &blocks, &mut self.pool);
        }
        seq.kv.release(&mut self.pool);
        self.shared.replay.remember(&self.tokenizer, &seq.tokens);
        let tool_output = self.tool_output(&seq);
        if reason == FinishReason::Stop && tool_output.as_ref().is_some_and(|o| !o.parsed.calls.is_empty()) {
            reason = FinishReason::ToolCalls;
        }
        self.metrics.requests_finished += 1;
        let now = Instant::now();
        let since = |at: Option<Instant>| at.map(|t| t - seq.times.submitted).unwrap_or_default();
        let completion = Completion {
            reason,
            usage: Usage {
                prompt_tokens: seq.prompt_len,
                completion_tokens: seq.generated(),
                cached_tokens: seq.cached_tokens.unwrap_or(0),
                speculation: seq.draft.counts,
            },
            timings: Timings {
                queued: since(seq.times.admitted),
                time_to_first_token: since(seq.times.first_token),
                total: now - seq.times.submitted,
            },
            tool_output,
        };
        let _ = seq.events.send(Event::Finished(completion));
    }

    /// A constrained response's prefill and its text parsed into free text and calls.
    fn tool_output(&self, seq: &Active) -> Option<ToolOutput> {
        let matcher = seq.matcher.as_ref().filter(|m| !m.is_json_value())?;
        let mut generated = &seq.tokens[seq.prompt_len..];
        if let Some((&last, rest)) = generated.split_last() {
            if seq.is_stop_token(last, &self.tokenizer) {
                generated = rest;
            }
        }
        let text = match self.tokenizer.decode(generated) {
            Ok(text) => format!("{}{text}", matcher.prefill()),
            Err(error) => {
                tracing::error!(%error, "decoding a constrained response");
                return None;
            }
        };
        // A response cut by max_tokens may end inside a call: parse what is complete.
        let syntax = matcher
            .call_syntax()
            .unwrap_or_else(|| CallSyntax::new(matcher.envelope().format()));
        let parsed = syntax.parse(&text).unwrap_or_else(|error| {
            tracing::debug!(%error, "an unfinished call is left as text");
            tessera_constrain::ParsedResponse {
                content: text.clone(),
                calls: Vec::new(),
            }
        });
        Some(ToolOutput {
            prefill: matcher.prefill().to_string(),
            parsed,
        })
    }

    /// End a request with an error, freeing its blocks.
    fn fail(&mut self, mut seq: Active, error: EngineError) {
        seq.kv.release(&mut self.pool);
        self.metrics.requests_failed += 1;
        let _ = seq.events.send(Event::Failed(error));
    }

    /// Fail every waiting and running request (shutdown).
    fn fail_everything(&mut self, error: EngineError) {
        let waiting: Vec<Active> = self.scheduler.waiting.drain(..).collect();
        let never_admitted = waiting.iter().filter(|seq| seq.times.admitted.is_none()).count();
        self.dequeued(never_admitted);
        let running: Vec<Active> = self.scheduler.running.drain(..).collect();
        for seq in waiting.into_iter().chain(running) {
            self.fail(seq, error.clone());
        }
    }
}
