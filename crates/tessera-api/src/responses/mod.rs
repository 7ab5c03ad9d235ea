//! The OpenAI Responses API (`/v1/responses`): its wire types ([`wire`],
//! [`response`]), parsed into the core ([`convert`]) and rendered out of it
//! ([`render`]), with the bounded store behind `previous_response_id` ([`store`]).

pub mod convert;
pub mod render;
pub mod response;
pub mod store;
pub mod wire;

pub use convert::{responses_request, Continuation};
pub use render::{respond, ResponsesRender};
pub use response::{EventBody, ResponseObject, StreamEvent};
pub use store::ResponseStore;
pub use wire::ResponsesRequest;
