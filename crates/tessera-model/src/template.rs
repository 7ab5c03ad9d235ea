//! Chat templates: the model's own Jinja template (GGUF `tokenizer.chat_template`
//! or `tokenizer_config.json`) rendered with minijinja, with the Python-style
//! string methods HF templates use. Rendering is deterministic: no clock, no
//! randomness, so the same conversation always yields the same prompt text.

use crate::error::{ModelError, Result};
use minijinja::{context, Environment, Error as JinjaError, ErrorKind};
use serde::Serialize;

/// Who speaks in a message, as chat templates name the roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions (`system`).
    System,
    /// The user (`user`).
    User,
    /// The model (`assistant`).
    Assistant,
    /// A tool's result, for templates with a tool role (`tool`).
    Tool,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// Who speaks (the template reads it as `message['role']`).
    pub role: ChatRole,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    /// A message from `role` with `content`.
    pub fn new(role: ChatRole, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}

/// ChatML, used when a model ships no template of its own.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

impl ChatTemplate {
    /// Compile `source`; `bos`/`eos` fill the template's `bos_token`/`eos_token`.
    pub fn new(source: &str, bos: Option<&str>, eos: Option<&str>) -> Result<Self> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> std::result::Result<String, JinjaError> {
                Err(JinjaError::new(ErrorKind::InvalidOperation, message))
            },
        );
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| ModelError::Template(format!("compiling: {e}")))?;
        Ok(Self {
            env,
            source: source.to_string(),
            bos_token: bos.unwrap_or_default().to_string(),
            eos_token: eos.unwrap_or_default().to_string(),
        })
    }

    /// The template's Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Render `messages`; with `add_generation_prompt` the text ends where the assistant's reply begins.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| ModelError::Template(e.to_string()))?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| ModelError::Template(format!("rendering: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_renders_generation_prompt() {
        let template = ChatTemplate::new(CHATML_TEMPLATE, None, None).unwrap();
        let text = template
            .render(&[ChatMessage::new(ChatRole::User, "Hi")], true)
            .unwrap();
        assert_eq!(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn python_string_methods_and_raise_exception_work() {
        let source = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}{% endif %}{{ messages[0]['content'].strip() }}";
        let template = ChatTemplate::new(source, None, None).unwrap();
        assert_eq!(
            template
                .render(&[ChatMessage::new(ChatRole::User, "  x ")], false)
                .unwrap(),
            "x"
        );
        let err = template
            .render(&[ChatMessage::new(ChatRole::System, "x")], false)
            .unwrap_err();
        assert!(err.to_string().contains("first must be user"), "{err}");
    }
}
