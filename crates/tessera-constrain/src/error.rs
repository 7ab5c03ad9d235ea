//! Errors in tool definitions and tool choices. Each names what is wrong.

/// A tool set or tool choice that cannot be compiled.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ConstrainError {
    /// A tool has an empty name.
    #[error("tools[{index}].name is empty")]
    EmptyName {
        /// Position in the tool list.
        index: usize,
    },
    /// A tool name uses characters outside `[A-Za-z0-9_.-]` or is too long.
    #[error("tool name `{name}` is invalid: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Two tools share a name.
    #[error("tool name `{0}` is defined twice")]
    DuplicateName(String),
    /// `tool_choice` names a tool that is not defined.
    #[error("tool_choice names `{0}`, which is not among the tools")]
    UnknownTool(String),
    /// A `prefix*` family matches no tool.
    #[error("tool_choice family `{0}*` matches no tool")]
    EmptyFamily(String),
    /// A tool choice that needs tools, with none defined.
    #[error("tool_choice `{0}` needs at least one tool")]
    NoTools(String),
    /// A response format's schema cannot be used.
    #[error("invalid response schema at {path}: {message}")]
    InvalidResponseSchema {
        /// JSON pointer to the offending part.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A tool's parameter schema cannot be used.
    #[error("tool `{tool}`: invalid parameters schema at {path}: {message}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// JSON pointer to the offending part.
        path: String,
        /// What is wrong.
        message: String,
    },
}
