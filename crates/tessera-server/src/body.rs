//! Request bodies: read within the size limit and deserialized with the path
//! of the first bad field, so errors name it (`messages[2].content`).

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// The body as `T`, or the error a client should see.
pub fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<T, ApiError> {
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(ApiError::too_large(limit))
        }
        Err(rejection) => return Err(ApiError::malformed(rejection.body_text(), None)),
    };
    let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let syntax = matches!(
            inner.classify(),
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof
        );
        let param = (path != "." && !path.is_empty() && !syntax).then_some(path.clone());
        let message = match (&param, inner.classify()) {
            (_, serde_json::error::Category::Syntax | serde_json::error::Category::Eof) => {
                format!("the body is not valid JSON: {inner}")
            }
            (Some(path), _) => format!("{path}: {inner}"),
            (None, _) => format!("the body does not match the request shape: {inner}"),
        };
        ApiError::malformed(message, param)
    })?;
    // Whitespace may follow the value; anything else means the body is not one JSON value.
    deserializer
        .end()
        .map_err(|_| ApiError::malformed("the body has trailing characters after the JSON value", None))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_api::openai::ChatCompletionRequest as ChatRequest;

    fn error_of(json: &str) -> ApiError {
        parse::<ChatRequest>(Ok(Bytes::from(json.to_string())), 1000).unwrap_err()
    }

    #[test]
    fn errors_name_the_field() {
        let error = error_of(r#"{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}"#);
        assert_eq!(error.status, StatusCode::BAD_REQUEST);
        assert_eq!(error.param.as_deref(), Some("temperature"));
        let error = error_of(r#"{"messages": [{"role": 3}]}"#);
        assert_eq!(error.param.as_deref(), Some("messages[0].role"));
        let error = error_of(r#"{"messages": [}"#);
        assert!(error.message.contains("not valid JSON"), "{}", error.message);
        let error = error_of(r#"{"model": "x"}"#);
        assert!(error.message.contains("missing field `messages`"), "{}", error.message);
    }

    #[test]
    fn trailing_characters_after_the_value_are_refused() {
        let body = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
        let error = error_of(&format!("{body}xyz"));
        assert_eq!(error.status, StatusCode::BAD_REQUEST);
        assert_eq!(error.message, "the body has trailing characters after the JSON value");
        assert!(error_of(&format!("{body}{body}"))
            .message
            .contains("trailing characters"));
        let padded = format!(" {body} \n\t");
        assert!(
            parse::<ChatRequest>(Ok(Bytes::from(padded)), 1000).is_ok(),
            "whitespace is not trailing text"
        );
    }
}
