//! What a response may call: the mode (`none`, `auto`, `required`), the
//! allowed names or families, and whether calls may follow one another; parsed
//! where a request enters and read by the tool set and the automaton above.

/// Whether and how a response may call tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMode {
    /// Free text; a call can never be completed.
    None,
    /// Free text, or a call once the model writes the opener.
    Auto,
    /// The response is a call (its start is prefilled).
    Required,
}

/// One entry of an allowed-tools list, parsed once where it enters
/// (`browser_*` is a family, anything else a name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedTool {
    /// The tool of this name.
    Name(String),
    /// Every tool whose name starts with this prefix.
    Family(String),
}

impl AllowedTool {
    /// `prefix*` is a family, anything else a name.
    pub fn parse(text: &str) -> Self {
        match text.strip_suffix('*') {
            Some(prefix) => Self::Family(prefix.to_string()),
            None => Self::Name(text.to_string()),
        }
    }
}

impl std::fmt::Display for AllowedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Family(prefix) => write!(f, "{prefix}*"),
        }
    }
}

/// A resolved tool choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolChoice {
    /// None, auto or required.
    pub mode: CallMode,
    /// Names or families a call may use; `None` = every tool.
    pub allowed: Option<Vec<AllowedTool>>,
    /// Whether another call may follow a call.
    pub parallel: bool,
}
