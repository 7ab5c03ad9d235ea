//! The request every protocol is parsed into: messages, tools, a tool choice,
//! a JSON format, sampling and limits, with nothing of any one wire format
//! left in it. [`chat_job`](crate::chat_job) validates it into a job.
//!
//! Field names for errors come from the [`Endpoint`](crate::Endpoint) the
//! request came through, except where the wire's own path is only known to
//! the adapter (an earlier call's arguments): those carry it.

use serde_json::Value;
use tessera_constrain::{AllowedTool, CallMode, ToolChoice, ToolDef};

/// A conversation to answer, in protocol-neutral terms.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools the model may call (kept in the prompt whatever the choice).
    pub tools: Vec<ToolDef>,
    /// Which calls may or must be made; `None` is `auto` with tools.
    pub tool_choice: Option<Choice>,
    /// Whether more than one call may be made (default true).
    pub parallel_tool_calls: Option<bool>,
    /// The answer must be one JSON value of this schema.
    pub json_format: Option<Value>,
    /// How tokens are drawn.
    pub sampling: Sampling,
    /// Most tokens to generate (`None`: the server's default).
    pub max_tokens: Option<u64>,
    /// Strings that end free text.
    pub stop: Vec<String>,
    /// The client's session (its prefix is kept warm between turns).
    pub session: Option<String>,
    /// The model id to echo (`None`: the served name).
    pub model: Option<String>,
    /// Generate past end-of-turn tokens until `max_tokens` (benchmarks).
    pub ignore_eos: bool,
    /// A `max_tokens` over what is left of the context is cut to fit, and
    /// an answer that reaches the window ends with
    /// [`FinishReason::ContextWindow`](crate::FinishReason::ContextWindow)
    /// (Anthropic's semantics); otherwise it is a 400 (OpenAI's).
    pub fit_to_context: bool,
}

impl ChatRequest {
    /// A request for `messages` with every default: no tools, OpenAI's
    /// sampling defaults, the server's default length.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            tools: Vec::new(),
            tool_choice: None,
            parallel_tool_calls: None,
            json_format: None,
            sampling: Sampling::default(),
            max_tokens: None,
            stop: Vec::new(),
            session: None,
            model: None,
            ignore_eos: false,
            fit_to_context: false,
        }
    }

    /// With `tools` offered under `choice` (`None`: `auto`).
    pub fn with_tools(self, tools: Vec<ToolDef>, choice: Option<Choice>) -> Self {
        Self {
            tools,
            tool_choice: choice,
            ..self
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Instructions (system or developer).
    System(String),
    /// The user's words.
    User(String),
    /// The model's earlier turn: its text, then its calls.
    Assistant {
        /// Free text before the calls.
        text: String,
        /// The calls it made, in order.
        calls: Vec<PastCall>,
    },
    /// A tool's result.
    Tool {
        /// The result's text.
        text: String,
        /// The call it answers, when the wire names it.
        call_id: Option<String>,
        /// Where the call id sits in the request body (named in errors).
        field: String,
    },
}

impl Message {
    /// A tool's result that names no call.
    pub fn tool(text: impl Into<String>) -> Self {
        Self::Tool {
            text: text.into(),
            call_id: None,
            field: String::new(),
        }
    }
}

/// A call of an earlier assistant turn, sent back by the client.
#[derive(Debug, Clone, PartialEq)]
pub struct PastCall {
    /// Its id in the core's form (`call_…`), when the wire carries one.
    pub id: Option<String>,
    /// The tool called.
    pub name: String,
    /// Its arguments as the wire carries them.
    pub arguments: PastArguments,
    /// Where the arguments sit in the request body (named in errors).
    pub field: String,
}

/// An earlier call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum PastArguments {
    /// JSON text as a client sent it (Chat Completions, Responses).
    Text(String),
    /// A parsed object (Anthropic's `tool_use.input`).
    Object(Value),
    /// The text the model generated, kept by this server (a stored
    /// response): replayed verbatim.
    Generated(String),
}

/// A tool choice and the request field it came from (named in errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// Mode and allowed names or families (its `parallel` is set from
    /// [`ChatRequest::parallel_tool_calls`]).
    pub choice: ToolChoice,
    /// `tool_choice`, or the extension field that replaced it.
    pub field: &'static str,
}

impl Choice {
    /// `mode` over every tool.
    pub fn mode(mode: CallMode, field: &'static str) -> Self {
        Self::allowed(mode, None, field)
    }

    /// One tool (or a `prefix*` family) must be called.
    pub fn named(name: &str, field: &'static str) -> Self {
        Self::allowed(CallMode::Required, Some(vec![AllowedTool::parse(name)]), field)
    }

    /// `mode` over the tools `allowed` names (`None`: every tool).
    pub fn allowed(mode: CallMode, allowed: Option<Vec<AllowedTool>>, field: &'static str) -> Self {
        Self {
            choice: ToolChoice {
                mode,
                allowed,
                parallel: true,
            },
            field,
        }
    }
}

/// Sampling as requested; what is unsaid takes the protocol's defaults
/// (temperature 1, top_p 1, no top-k, a fresh seed).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sampling {
    /// Temperature (0 and anything under 1e-4: greedy).
    pub temperature: Option<f32>,
    /// Nucleus mass, (0, 1].
    pub top_p: Option<f32>,
    /// Keep the k most likely tokens (0: off).
    pub top_k: Option<usize>,
    /// Drop tokens less likely than min-p × the most likely.
    pub min_p: Option<f32>,
    /// Penalty for tokens already present (1: off).
    pub repetition_penalty: Option<f32>,
    /// Seed for sampling.
    pub seed: Option<u64>,
}

/// A raw prompt to continue: no template, no tools, and the caller's own
/// text, so control-token text in it is that control token.
#[derive(Debug, Clone, Default)]
pub struct RawRequest {
    /// The text to continue.
    pub prompt: String,
    /// How tokens are drawn.
    pub sampling: Sampling,
    /// Most tokens to generate (`None`: the server's default).
    pub max_tokens: Option<u64>,
    /// Strings that end the text.
    pub stop: Vec<String>,
    /// The client's session.
    pub session: Option<String>,
    /// The model id to echo.
    pub model: Option<String>,
    /// Generate past end-of-turn tokens until `max_tokens` (benchmarks).
    pub ignore_eos: bool,
}
