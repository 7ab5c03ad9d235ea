//! The typed core every protocol is a thin adapter onto: a protocol-neutral
//! [`ChatRequest`](request::ChatRequest), validated once into a [`Job`](job::Job)
//! (rendering, tokenizing, constraint building), answered as protocol-neutral
//! [`Step`](answer::Step)s that each protocol renders its own way.

pub mod answer;
pub mod context;
pub mod endpoint;
pub mod error;
pub mod job;
pub mod memory;
pub mod pipeline;
pub mod prompt;
pub mod request;
pub mod tools_section;
