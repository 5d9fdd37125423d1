//! JSON-RPC 2.0 envelopes: validating a request body and building result and error
//! responses. Every malformed input becomes an error object, never a panic or an HTTP 500.

use serde_json::{Value, json};

/// Invalid JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// Not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// Unknown method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// A failure inside the server.
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// The server is at its task limit or shutting down (implementation-defined range).
pub(crate) const SERVER_BUSY: i64 = -32000;
/// A2A: no such task.
pub(crate) const TASK_NOT_FOUND: i64 = -32001;
/// A2A: the task is already in a terminal state.
pub(crate) const TASK_NOT_CANCELABLE: i64 = -32002;

/// An error object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    pub(crate) fn task_not_found(id: &str) -> Self {
        Self::new(TASK_NOT_FOUND, format!("Task not found: {id}"))
    }
}

/// A validated request.
#[derive(Debug, Clone)]
pub(crate) struct RpcRequest {
    /// The id to answer with (`null` for notifications).
    pub id: Value,
    pub method: String,
    /// The params (`{}` when absent).
    pub params: Value,
}

/// Validate a request body. On failure, returns the id to answer with and the error.
pub(crate) fn parse_request(body: &[u8]) -> Result<RpcRequest, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
        )
    })?;
    let Value::Object(obj) = value else {
        let what = if value.is_array() {
            "batch requests are not supported"
        } else {
            "the request must be a JSON object"
        };
        return Err((
            Value::Null,
            RpcError::new(INVALID_REQUEST, format!("Invalid request: {what}")),
        ));
    };
    // Answer with the caller's id when it is a valid one, else null.
    let id = match obj.get("id") {
        None | Some(Value::Null) => Value::Null,
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::new(
                    INVALID_REQUEST,
                    "Invalid request: id must be a string, a number or null",
                ),
            ));
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            id,
            RpcError::new(
                INVALID_REQUEST,
                "Invalid request: \"jsonrpc\" must be exactly \"2.0\"",
            ),
        ));
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        return Err((
            id,
            RpcError::new(
                INVALID_REQUEST,
                "Invalid request: \"method\" must be a string",
            ),
        ));
    };
    let params = match obj.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return Err((
                id,
                RpcError::invalid_params("Invalid params: \"params\" must be an object"),
            ));
        }
    };
    Ok(RpcRequest {
        id,
        method: method.to_string(),
        params,
    })
}

/// A success response.
pub(crate) fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub(crate) fn failure(id: &Value, error: &RpcError) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": error.code, "message": error.message},
    })
}

/// A request body (the client side).
pub(crate) fn request(method: &str, params: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": uuid::Uuid::new_v4().to_string(),
        "method": method,
        "params": params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> i64 {
        parse_request(body.as_bytes()).unwrap_err().1.code
    }

    #[test]
    fn malformed_requests_get_the_right_codes() {
        assert_eq!(code("{not json"), PARSE_ERROR);
        assert_eq!(code("[]"), INVALID_REQUEST);
        assert_eq!(code("42"), INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#),
            INVALID_REQUEST
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            INVALID_PARAMS
        );
        let (id, _) = parse_request(br#"{"jsonrpc":"1.0","id":"a","method":"x"}"#).unwrap_err();
        assert_eq!(id, json!("a"), "the id is echoed when it is valid");
    }

    #[test]
    fn a_valid_request_parses() {
        let r = parse_request(br#"{"jsonrpc":"2.0","id":7,"method":"GetTask"}"#).unwrap();
        assert_eq!(r.method, "GetTask");
        assert_eq!(r.id, json!(7));
        assert_eq!(r.params, json!({}));
    }
}
