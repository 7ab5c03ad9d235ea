//! The Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`):
//! its wire types ([`wire`], [`response`]), parsed into the core
//! ([`convert`]) and rendered out of it ([`render`]).

pub mod convert;
pub mod render;
pub mod response;
pub mod wire;

pub use convert::messages_request;
pub use render::{message, MessagesRender};
pub use response::{MessageResponse, StopReason, StreamEvent, TokenCount, Usage};
pub use wire::MessagesRequest;
