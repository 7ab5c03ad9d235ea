//! Errors with their HTTP status, shaped as the client's protocol shapes them:
//! OpenAI's `{"error": {"message", "type", "param", "code"}}`, or Anthropic's
//! `{"type": "error", "error": {"type", "message"}}` on its routes
//! ([`Dialect`]). Every error reaches the client through here, once;
//! internal errors are logged and answered without their details.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tessera_engine::EngineError;

/// Which protocol's error shape a route answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's (Chat Completions, Completions, Responses, everything else).
    OpenAi,
    /// Anthropic's (`/v1/messages…`).
    Anthropic,
}

impl Dialect {
    /// The dialect of the route at `path`.
    pub fn of_path(path: &str) -> Self {
        match path.starts_with("/v1/messages") {
            true => Self::Anthropic,
            false => Self::OpenAi,
        }
    }
}

/// An error answered to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// OpenAI's error type (`invalid_request_error`, ...).
    pub kind: &'static str,
    /// The request field at fault, if one is.
    pub param: Option<String>,
    /// A machine-readable code, if any.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// 400: the request is wrong in `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: Some(param.into()),
            code: None,
        }
    }

    /// 400: the body is not the JSON the endpoint takes.
    pub fn malformed(message: impl Into<String>, param: Option<String>) -> Self {
        Self {
            code: Some("invalid_json"),
            param,
            ..Self::invalid("", message)
        }
    }

    /// 413: the body is over the limit.
    pub fn too_large(limit: usize) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("the request body is over the limit of {limit} bytes"),
            kind: "invalid_request_error",
            param: None,
            code: Some("request_too_large"),
        }
    }

    /// 401: no or a wrong API key.
    pub fn unauthorized() -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            message: "invalid or missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`".into(),
            kind: "invalid_request_error",
            param: None,
            code: Some("invalid_api_key"),
        }
    }

    /// 404: no such route.
    pub fn not_found(path: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: format!("no route for {path}"),
            kind: "invalid_request_error",
            param: None,
            code: Some("not_found"),
        }
    }

    /// 405: the route exists, not with this method.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self {
            status: StatusCode::METHOD_NOT_ALLOWED,
            message: format!("{method} is not allowed on {path}"),
            kind: "invalid_request_error",
            param: None,
            code: Some("method_not_allowed"),
        }
    }

    /// 500: something failed inside; the details go to the log only.
    pub fn internal(context: &str, error: &dyn std::fmt::Display) -> Self {
        tracing::error!(%error, "{context}");
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "internal error; see the server log".into(),
            kind: "server_error",
            param: None,
            code: None,
        }
    }

    /// The engine's `error`; `param` is the request field it is about, as
    /// the API layer named it (statuses: 400, 429, 503, else 500).
    pub fn engine(error: &EngineError, param: Option<&str>) -> Self {
        match error {
            EngineError::OverLimit { .. } => Self::invalid(param.unwrap_or_default(), error.to_string()),
            EngineError::Invalid { message, .. } => Self::invalid(param.unwrap_or_default(), message.clone()),
            EngineError::QueueFull { .. } => Self {
                status: StatusCode::TOO_MANY_REQUESTS,
                message: error.to_string(),
                kind: "rate_limit_error",
                param: None,
                code: Some("queue_full"),
            },
            EngineError::Stopped => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: "the server is shutting down".into(),
                kind: "server_error",
                param: None,
                code: Some("unavailable"),
            },
            EngineError::Config(_)
            | EngineError::Model { .. }
            | EngineError::Sampling { .. }
            | EngineError::Persist { .. } => Self::internal("request failed in the engine", error),
        }
    }

    /// The error as OpenAI's JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }

    /// The error as Anthropic's JSON body: its type by status, the field at
    /// fault named in the message.
    pub fn anthropic_body(&self) -> serde_json::Value {
        let kind = match self.status.as_u16() {
            400 | 405 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 => "overloaded_error",
            _ => "api_error",
        };
        let message = match self.param.as_deref().filter(|p| !p.is_empty()) {
            Some(param) if !self.message.starts_with(param) => format!("{param}: {}", self.message),
            _ => self.message.clone(),
        };
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    /// The body in `dialect`'s shape.
    pub fn body_in(&self, dialect: Dialect) -> serde_json::Value {
        match dialect {
            Dialect::OpenAi => self.body(),
            Dialect::Anthropic => self.anthropic_body(),
        }
    }

    /// The response in `dialect`'s shape.
    pub fn response_in(self, dialect: Dialect) -> Response {
        (self.status, Json(self.body_in(dialect))).into_response()
    }
}

impl From<tessera_api::InvalidRequest> for ApiError {
    fn from(error: tessera_api::InvalidRequest) -> Self {
        Self::invalid(error.param, error.message)
    }
}

impl From<tessera_api::RequestError> for ApiError {
    fn from(error: tessera_api::RequestError) -> Self {
        match error {
            tessera_api::RequestError::Invalid(invalid) => invalid.into(),
            tessera_api::RequestError::Engine { source, param } => Self::engine(&source, param),
            internal @ tessera_api::RequestError::Internal { .. } => {
                Self::internal("a request failed inside the API layer", &internal)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}
