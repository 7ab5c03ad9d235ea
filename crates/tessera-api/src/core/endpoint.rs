//! Which protocol a request came through: it names the request fields the
//! core's errors are about, and the limits that differ between protocols.

use tessera_engine::Field;

/// The route a job came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions` (OpenAI Chat Completions).
    Chat,
    /// `/v1/completions` (a raw prompt).
    Completion,
    /// `/v1/messages` (Anthropic Messages).
    Messages,
    /// `/v1/responses` (OpenAI Responses).
    Responses,
    /// `tessera generate`: fields are its command-line flags.
    Cli,
}

impl Endpoint {
    /// The request field that holds what the engine calls `field`.
    pub fn param(self, field: Field) -> &'static str {
        match field {
            Field::Prompt | Field::PromptTokens | Field::PromptTokenId => self.prompt_field(),
            Field::MaxTokens => self.max_tokens_field(),
            Field::Stop | Field::StopStringBytes => self.stop_field(),
            Field::ToolChoice if self == Endpoint::Cli => "--tool-choice",
            Field::ToolChoice => "tool_choice",
            Field::Sampling(name) if self == Endpoint::Cli => cli_flag(name),
            Field::Sampling(name) => name,
        }
    }

    /// Where the conversation (or prompt) is.
    pub fn prompt_field(self) -> &'static str {
        match self {
            Endpoint::Chat | Endpoint::Messages => "messages",
            Endpoint::Completion => "prompt",
            Endpoint::Responses => "input",
            Endpoint::Cli => "--prompt",
        }
    }

    /// The length limit.
    pub fn max_tokens_field(self) -> &'static str {
        match self {
            Endpoint::Responses => "max_output_tokens",
            Endpoint::Cli => "--max-tokens",
            _ => "max_tokens",
        }
    }

    /// The stop strings.
    pub fn stop_field(self) -> &'static str {
        match self {
            Endpoint::Messages => "stop_sequences",
            Endpoint::Cli => "--stop",
            _ => "stop",
        }
    }

    /// Tool `index`'s parameter schema.
    pub fn tool_schema_field(self, index: usize) -> String {
        match self {
            Endpoint::Messages => format!("tools[{index}].input_schema"),
            Endpoint::Responses => format!("tools[{index}].parameters"),
            Endpoint::Cli => format!("--tools: tools[{index}].parameters"),
            Endpoint::Chat | Endpoint::Completion => format!("tools[{index}].function.parameters"),
        }
    }

    /// The JSON response format.
    pub fn json_format_field(self) -> &'static str {
        match self {
            Endpoint::Responses => "text.format",
            Endpoint::Messages => "output_config.format",
            Endpoint::Chat | Endpoint::Completion | Endpoint::Cli => "response_format",
        }
    }

    /// The JSON response format's schema.
    pub fn json_schema_field(self) -> &'static str {
        match self {
            Endpoint::Responses => "text.format.schema",
            Endpoint::Messages => "output_config.format.schema",
            Endpoint::Chat | Endpoint::Completion | Endpoint::Cli => "response_format.json_schema.schema",
        }
    }

    /// Whether its streams end with `data: [DONE]` (OpenAI's chat and
    /// completions) rather than after their last event.
    pub fn sends_done_marker(self) -> bool {
        matches!(self, Endpoint::Chat | Endpoint::Completion)
    }

    /// The highest temperature the protocol allows (Anthropic's scale ends at 1).
    pub fn max_temperature(self) -> f32 {
        match self {
            Endpoint::Messages => 1.0,
            _ => 2.0,
        }
    }
}

/// The `tessera generate` flag of a sampling parameter.
fn cli_flag(name: &'static str) -> &'static str {
    match name {
        "temperature" => "--temperature",
        "top_p" => "--top-p",
        "top_k" => "--top-k",
        "min_p" => "--min-p",
        "repetition_penalty" => "--repeat-penalty",
        "seed" => "--seed",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_named_as_each_protocol_names_them() {
        assert_eq!(Endpoint::Chat.param(Field::PromptTokens), "messages");
        assert_eq!(Endpoint::Completion.param(Field::PromptTokenId), "prompt");
        assert_eq!(Endpoint::Completion.param(Field::StopStringBytes), "stop");
        assert_eq!(Endpoint::Chat.param(Field::Sampling("top_p")), "top_p");
        assert_eq!(Endpoint::Messages.param(Field::Stop), "stop_sequences");
        assert_eq!(Endpoint::Responses.param(Field::MaxTokens), "max_output_tokens");
        assert_eq!(Endpoint::Responses.param(Field::Prompt), "input");
        assert_eq!(Endpoint::Messages.tool_schema_field(2), "tools[2].input_schema");
        assert_eq!(Endpoint::Cli.param(Field::Sampling("top_p")), "--top-p");
        assert_eq!(Endpoint::Cli.param(Field::MaxTokens), "--max-tokens");
    }
}
