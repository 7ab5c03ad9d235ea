//! The caller's side: a cloneable handle that validates requests at the
//! boundary and talks to the step loop over channels, and the per-request
//! event stream. Works from async code (`.await`) and from plain threads
//! (`wait`, `blocking_next`); it must not block inside an async runtime.

use crate::active::Active;
use crate::engine::{Command, Engine};
use crate::escaped::Escaper;
use crate::replay::ReplayMemory;
use crate::request::{MAX_STOP_BYTES, MAX_STOP_STRINGS};
use crate::scheduler::Scheduler;
use crate::sessions::SessionPins;
use crate::{persist, Completion, Constraint, EngineConfig, EngineError, EngineMetrics, Event, Field, GenerateRequest};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tessera_constrain::{CallFormat, CallSyntax, Envelope, ToolCallMatcher, Vocabulary};
use tessera_kv::{BlockPool, SeqId};
use tessera_model::{ChatTemplate, LoadedModel, ModelConfig, Tokenizer};
use tessera_sample::Sampler;
use tokio::sync::{mpsc, oneshot};

/// State the handles share with the engine.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Requests submitted and not yet admitted (first admission only).
    pub queued: AtomicUsize,
    next_id: AtomicU64,
    max_waiting: usize,
    kv_tokens: usize,
    block_size: usize,
    model_config: ModelConfig,
    tokenizer: Arc<Tokenizer>,
    template: ChatTemplate,
    /// How this model writes tool calls (from its chat template).
    envelope: Envelope,
    /// The vocabulary trie constrained requests are masked with, built by the
    /// first one (~70 ms here), so engines that never constrain never pay for it.
    pub vocab: std::sync::OnceLock<Vocabulary>,
    /// Recent sequences' texts and tokens, so a prompt that replays one
    /// (a chat's next turn) runs the same tokens.
    pub replay: ReplayMemory,
    /// Whether drafts inside a call's strings search the escaped prompt
    /// (prompt lookup on), and the thread that makes it.
    escapes: bool,
    escaper: Escaper,
}

/// A cloneable handle to a running engine.
#[derive(Debug, Clone)]
pub struct EngineHandle {
    commands: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
}

impl EngineHandle {
    /// Start an engine thread that owns `loaded`'s model and a pool sized by
    /// `config`, restoring the persisted prefix cache when one is configured.
    pub fn start(loaded: LoadedModel, config: EngineConfig) -> Result<Self, EngineError> {
        config.validate()?;
        let LoadedModel {
            model,
            tokenizer,
            template,
        } = loaded;
        let mut kv = model
            .new_kv_cache(config.kv_blocks, config.block_size, config.kv_dtype)
            .map_err(|error| EngineError::Config(error.to_string()))?;
        let mut pool = BlockPool::new(config.kv_blocks, config.block_size);
        if config.kv_events.is_some() {
            // Subscribers hear a clear before the restored blocks are announced.
            pool.record_events();
        }
        if let (Some(dir), Some(fingerprint)) = (&config.kv_cache_dir, &config.model_fingerprint) {
            persist::restore(dir, fingerprint, &mut pool, &mut kv)?;
        }
        let tokenizer = Arc::new(tokenizer);
        let pool_blocks = config.kv_blocks;
        let envelope = Envelope::new(CallFormat::detect(template.source()));
        let envelope = envelope
            .clone()
            .with_special_opener(tokenizer.is_special_token(envelope.opener_text()));
        let shared = Arc::new(Shared {
            queued: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            max_waiting: config.max_waiting,
            kv_tokens: config.kv_tokens(),
            block_size: config.block_size,
            model_config: model.config().clone(),
            tokenizer: tokenizer.clone(),
            template,
            envelope,
            vocab: std::sync::OnceLock::new(),
            replay: ReplayMemory::default(),
            escapes: config.speculation.lookup && config.speculation.enabled(),
            escaper: Escaper::start(tokenizer.clone())
                .map_err(|error| EngineError::Config(format!("starting the escaping thread: {error}")))?,
        });
        let engine = Engine {
            model,
            tokenizer,
            pool,
            kv,
            scheduler: Scheduler::new(config.max_running, config.max_batch_tokens),
            config,
            metrics: EngineMetrics::default(),
            shared: shared.clone(),
            pins: SessionPins::new(pool_blocks),
        };
        let (commands, receiver) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("tessera-engine".into())
            .spawn(move || engine.run(receiver))
            .map_err(|error| EngineError::Config(format!("starting the engine thread: {error}")))?;
        Ok(Self { commands, shared })
    }

    /// A prompt's tokens: where it starts with the text of a sequence this
    /// engine ran (a chat's earlier turns and the reply to them), that
    /// sequence's own tokens, then the rest tokenized; else all tokenized.
    /// The prefix cache matches tokens, so a history sent back (arguments as
    /// generated included) is a hit up to its new messages.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, tessera_model::ModelError> {
        match self.shared.replay.tokens_for(&self.shared.tokenizer, text) {
            Some(tokens) => Ok(tokens),
            None => self.shared.tokenizer.encode(text),
        }
    }

    /// The tokenizer (to encode prompts and decode ids).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.shared.tokenizer
    }

    /// The chat template.
    pub fn template(&self) -> &ChatTemplate {
        &self.shared.template
    }

    /// How this model writes tool calls (its template's form, Hermes by default):
    /// describe tools to it with `tessera_api::tools_prompt(tools, format)` (the layer above).
    pub fn call_format(&self) -> CallFormat {
        self.shared.envelope.format()
    }

    /// Token slots per KV block.
    pub fn block_size(&self) -> usize {
        self.shared.block_size
    }

    /// The model's configuration (context length, vocabulary size, ...).
    pub fn model_config(&self) -> &ModelConfig {
        &self.shared.model_config
    }

    /// Validate `request` and queue it. Events stream back on the returned
    /// stream; dropping it cancels the request and frees its blocks.
    pub fn submit(&self, request: GenerateRequest) -> Result<EventStream, EngineError> {
        let (request, matcher, sampler) = self.prepare(request)?;
        let limit = self.shared.max_waiting;
        let queued = self.shared.queued.fetch_add(1, Ordering::AcqRel);
        if queued >= limit {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(EngineError::QueueFull { limit });
        }
        let id = SeqId(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let prefill = matcher.as_ref().map(|m| m.prefill().to_string()).unwrap_or_default();
        let call_syntax = matcher.as_ref().and_then(|m| m.call_syntax());
        let escapes = self.shared.escapes && request.speculate && matcher.as_ref().is_some_and(may_write_json);
        let (events, receiver) = mpsc::unbounded_channel();
        let mut active = Active::new(id, request, sampler, matcher, events);
        if escapes {
            active.escaping = Some(self.shared.escaper.escape(active.tokens.clone()));
        }
        if self.commands.send(Command::Submit(Box::new(active))).is_err() {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(EngineError::Stopped);
        }
        Ok(EventStream {
            id,
            events: receiver,
            prefill,
            call_syntax,
        })
    }

    /// The tokens [`submit`](Self::submit) would prefill for `request` (its
    /// prompt and the constraint's forced opening, such as `<tool_call>` and
    /// a family's shared name prefix), validated exactly as `submit`
    /// validates it, without queueing it.
    pub fn render(&self, request: GenerateRequest) -> Result<Vec<u32>, EngineError> {
        self.prepare(request).map(|(request, _, _)| request.prompt)
    }

    /// `request` validated, with its matcher (whose prefill is appended to
    /// the prompt) and its sampler.
    fn prepare(
        &self,
        mut request: GenerateRequest,
    ) -> Result<(GenerateRequest, Option<ToolCallMatcher>, Sampler), EngineError> {
        let mut matcher = self.constrain(&mut request)?;
        self.validate(&request)?;
        if let Some(matcher) = matcher.as_mut() {
            self.check_budget(matcher, &request)?;
        }
        let sampler = Sampler::new(request.sampling.clone())?;
        Ok((request, matcher, sampler))
    }

    /// The request's tool-call (or JSON-value) matcher, with its prefill (if any) appended to the prompt.
    fn constrain(&self, request: &mut GenerateRequest) -> Result<Option<ToolCallMatcher>, EngineError> {
        let matcher = match &request.constraint {
            None => return Ok(None),
            Some(Constraint::Json(schema)) => ToolCallMatcher::json_value(schema),
            Some(Constraint::Tools(constraint)) => {
                ToolCallMatcher::new(constraint.tools.clone(), &constraint.choice, &self.shared.envelope).map_err(
                    |error| EngineError::Invalid {
                        field: Field::ToolChoice,
                        message: error.to_string(),
                    },
                )?
            }
        };
        if !matcher.prefill().is_empty() {
            let prefill = self
                .shared
                .tokenizer
                .encode(matcher.prefill())
                .map_err(|error| EngineError::model("encoding the constraint's prefill", error))?;
            request.prompt.extend(prefill);
        }
        Ok(Some(matcher))
    }

    fn validate(&self, request: &GenerateRequest) -> Result<(), EngineError> {
        let context = self.shared.model_config.max_context;
        let vocab = self.shared.model_config.vocab_size;
        let prompt = request.prompt.len();
        if prompt == 0 {
            return Err(EngineError::Invalid {
                field: Field::Prompt,
                message: "must contain at least one token".into(),
            });
        }
        let over = |field, value, limit| Err(EngineError::OverLimit { field, value, limit });
        if prompt >= context {
            return over(Field::PromptTokens, prompt, context - 1);
        }
        if prompt >= self.shared.kv_tokens {
            return over(Field::PromptTokens, prompt, self.shared.kv_tokens - 1);
        }
        if let Some(&token) = request.prompt.iter().find(|&&t| t as usize >= vocab) {
            return over(Field::PromptTokenId, token as usize, vocab - 1);
        }
        if request.max_tokens == 0 {
            return Err(EngineError::Invalid {
                field: Field::MaxTokens,
                message: "must be at least 1".into(),
            });
        }
        Self::validate_stop_strings(&request.stop_strings)
    }

    /// The vocabulary constrained requests are masked with.
    pub(crate) fn vocab(&self) -> &Vocabulary {
        let tokenizer = &self.shared.tokenizer;
        self.shared
            .vocab
            .get_or_init(|| Vocabulary::new(&tokenizer.token_bytes(), tokenizer.stop_ids()))
    }

    /// A forced call (or JSON value) must fit the request's budget: below the
    /// fewest tokens that complete one, the request is refused here rather
    /// than cut into a call that cannot be complete.
    fn check_budget(&self, matcher: &mut ToolCallMatcher, request: &GenerateRequest) -> Result<(), EngineError> {
        let context_room = self
            .shared
            .model_config
            .max_context
            .saturating_sub(request.prompt.len());
        let budget = request.max_tokens.min(context_room);
        let Some(least) = matcher.tokens_to_complete(self.vocab()) else {
            return Ok(());
        };
        if least <= budget {
            return Ok(());
        }
        let what = if matcher.is_json_value() {
            "the shortest value of the response format"
        } else {
            "the shortest complete tool call"
        };
        let limit = if budget < request.max_tokens {
            format!("the {budget} tokens left in the context")
        } else {
            format!("max_tokens ({budget})")
        };
        Err(EngineError::Invalid {
            field: Field::MaxTokens,
            message: format!("{what} needs {least} tokens, more than {limit}"),
        })
    }

    fn validate_stop_strings(stops: &[String]) -> Result<(), EngineError> {
        if stops.len() > MAX_STOP_STRINGS {
            return Err(EngineError::OverLimit {
                field: Field::Stop,
                value: stops.len(),
                limit: MAX_STOP_STRINGS,
            });
        }
        for stop in stops {
            if stop.is_empty() {
                return Err(EngineError::Invalid {
                    field: Field::Stop,
                    message: "a stop string is empty".into(),
                });
            }
            if stop.len() > MAX_STOP_BYTES {
                return Err(EngineError::OverLimit {
                    field: Field::StopStringBytes,
                    value: stop.len(),
                    limit: MAX_STOP_BYTES,
                });
            }
        }
        Ok(())
    }

    fn ask<T>(&self, command: impl FnOnce(crate::engine::Reply<T>) -> Command) -> Pending<T> {
        let (reply, receiver) = oneshot::channel();
        // If the engine is gone, the dropped reply makes `wait` answer `Stopped`.
        let _ = self.commands.send(command(reply));
        Pending(receiver)
    }

    /// A snapshot of the engine's metrics.
    pub fn metrics(&self) -> Pending<EngineMetrics> {
        self.ask(Command::Metrics)
    }

    /// Every full block in the prefix index, parents first: the set KV events describe.
    pub fn index_blocks(&self) -> Pending<Vec<tessera_kv::FullBlock>> {
        self.ask(Command::IndexBlocks)
    }

    /// Drop every cached (unreferenced) block: the next request starts cold.
    /// Answers how many blocks were dropped.
    pub fn clear_prefix_cache(&self) -> Pending<usize> {
        self.ask(Command::ClearPrefixCache)
    }

    /// Write the prefix cache to the configured directory now (0 blocks when
    /// none is configured).
    pub fn save_prefix_cache(&self) -> Pending<usize> {
        self.ask(Command::SavePrefixCache)
    }

    /// Fail what is queued or running, save the prefix cache (when configured)
    /// and stop the engine thread.
    pub fn shutdown(&self) -> Pending<()> {
        self.ask(Command::Shutdown)
    }
}

/// Whether a request under `matcher` may write a call's (or a JSON value's)
/// strings, where drafts search the escaped prompt: every mode but `none`.
fn may_write_json(matcher: &ToolCallMatcher) -> bool {
    matcher.is_json_value() || matcher.call_syntax().is_some()
}

/// A reply the engine will send.
#[derive(Debug)]
pub struct Pending<T>(oneshot::Receiver<Result<T, EngineError>>);

impl<T> Pending<T> {
    /// Block this thread for the reply (not from inside an async runtime).
    pub fn wait(self) -> Result<T, EngineError> {
        self.0.blocking_recv().map_err(|_| EngineError::Stopped)?
    }

    /// Await the reply.
    pub async fn recv(self) -> Result<T, EngineError> {
        self.0.await.map_err(|_| EngineError::Stopped)?
    }
}

/// One request's events, ending with `Finished` or `Failed`. Dropping it cancels the request.
#[derive(Debug)]
pub struct EventStream {
    id: SeqId,
    events: mpsc::UnboundedReceiver<Event>,
    prefill: String,
    call_syntax: Option<CallSyntax>,
}

/// A finished request, collected.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Generated token ids (a final stop token excluded).
    pub tokens: Vec<u32>,
    /// Their text.
    pub text: String,
    /// How it ended.
    pub completion: Completion,
}

impl EventStream {
    /// The request's id.
    pub fn id(&self) -> SeqId {
        self.id
    }

    /// Text the engine appended to the prompt to start a constrained response
    /// (a required call's opener and name prefix); the streamed text follows it.
    pub fn prefill(&self) -> &str {
        &self.prefill
    }

    /// How the response's text holds tool calls (`None` when it cannot hold
    /// any): stream it through `call_syntax.stream_parser(prefill)`.
    pub fn call_syntax(&self) -> Option<&CallSyntax> {
        self.call_syntax.as_ref()
    }

    /// The next event; `None` after the last one.
    pub async fn next(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The next event, blocking this thread (not from inside an async runtime).
    pub fn blocking_next(&mut self) -> Option<Event> {
        self.events.blocking_recv()
    }

    /// Block until the request ends and collect it.
    pub fn wait(mut self) -> Result<Output, EngineError> {
        let mut output = (Vec::new(), String::new());
        while let Some(event) = self.blocking_next() {
            match event {
                Event::Token { id, text, .. } => {
                    output.0.push(id);
                    output.1.push_str(&text);
                }
                Event::Finished(completion) => {
                    return Ok(Output {
                        tokens: output.0,
                        text: output.1,
                        completion,
                    })
                }
                Event::Failed(error) => return Err(error),
            }
        }
        Err(EngineError::Stopped)
    }
}
