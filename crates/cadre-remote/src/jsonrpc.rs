//! JSON-RPC 2.0 envelopes: validating a request body and building result and error
//! responses. Every malformed input becomes an error object, never a panic or an HTTP 500.
//! The request id is kept as the caller wrote it (a 36-digit number comes back with all its
//! digits), and a request without an id is a notification, which is never answered.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// A request id exactly as the caller wrote it: a string or a number, or `null`.
#[derive(Debug, Clone)]
pub(crate) enum RpcId {
    /// `null`: the caller's, or the answer to a request whose id could not be read.
    Null,
    /// The JSON text of a string or a number, verbatim.
    Raw(Box<RawValue>),
}

impl RpcId {
    /// The id's JSON text.
    #[cfg(test)]
    pub(crate) fn as_json(&self) -> &str {
        match self {
            RpcId::Null => "null",
            RpcId::Raw(raw) => raw.get(),
        }
    }

    /// A valid id from its JSON text, or `None` (objects, arrays, booleans).
    fn from_raw(raw: &RawValue) -> Option<Self> {
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'"' | b'-' | b'0'..=b'9') => Some(RpcId::Raw(raw.to_owned())),
            _ if text == "null" => Some(RpcId::Null),
            _ => None,
        }
    }
}

impl Serialize for RpcId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RpcId::Null => s.serialize_unit(),
            RpcId::Raw(raw) => raw.serialize(s),
        }
    }
}

/// A validated request.
#[derive(Debug, Clone)]
pub(crate) struct RpcRequest {
    /// The id to answer with; `None` for a notification, which gets no answer.
    pub id: Option<RpcId>,
    pub method: String,
    /// The params (`{}` when absent).
    pub params: Value,
}

/// Why a request body was refused, and whom to tell.
#[derive(Debug, Clone)]
pub(crate) struct Rejected {
    /// The id to answer with; `None` when the request was a notification (no answer).
    pub id: Option<RpcId>,
    pub error: RpcError,
}

/// A member that is present, `null` included (absent members stay `None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The members of a request, undecoded.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default)]
    params: Option<Value>,
}

fn invalid(what: &str) -> RpcError {
    RpcError::new(INVALID_REQUEST, format!("Invalid request: {what}"))
}

/// Validate a request body.
pub(crate) fn parse_request(body: &[u8]) -> Result<RpcRequest, Rejected> {
    let answer_null = |error| Rejected {
        id: Some(RpcId::Null),
        error,
    };
    let raw: &RawValue = serde_json::from_slice(body)
        .map_err(|e| answer_null(RpcError::new(PARSE_ERROR, format!("Parse error: {e}"))))?;
    match raw.get().as_bytes().first() {
        Some(b'{') => {}
        Some(b'[') => return Err(answer_null(invalid("batch requests are not supported"))),
        _ => return Err(answer_null(invalid("the request must be a JSON object"))),
    }
    let env: Envelope =
        serde_json::from_str(raw.get()).map_err(|e| answer_null(invalid(&format!("{e}"))))?;
    // Answer with the caller's id when it is a valid one, else null; no id, no answer.
    let id = match env.id {
        None => None,
        Some(raw) => Some(
            RpcId::from_raw(raw)
                .ok_or_else(|| answer_null(invalid("id must be a string, a number or null")))?,
        ),
    };
    let reject = |error| Rejected {
        id: id.clone(),
        error,
    };
    if env.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(reject(invalid("\"jsonrpc\" must be exactly \"2.0\"")));
    }
    let Some(Value::String(method)) = env.method else {
        return Err(reject(invalid("\"method\" must be a string")));
    };
    let params = match env.params {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err(reject(RpcError::invalid_params(
                "Invalid params: \"params\" must be an object",
            )));
        }
    };
    Ok(RpcRequest { id, method, params })
}

/// A response: a result or an error, with the request's id.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RpcResponse {
    jsonrpc: &'static str,
    id: RpcId,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

/// A success response.
pub(crate) fn success(id: &RpcId, result: Value) -> RpcResponse {
    RpcResponse {
        jsonrpc: "2.0",
        id: id.clone(),
        result: Some(result),
        error: None,
    }
}

/// An error response.
pub(crate) fn failure(id: &RpcId, error: &RpcError) -> RpcResponse {
    RpcResponse {
        jsonrpc: "2.0",
        id: id.clone(),
        result: None,
        error: Some(error.clone()),
    }
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

    fn rejected(body: &str) -> Rejected {
        parse_request(body.as_bytes()).unwrap_err()
    }

    fn code(body: &str) -> i64 {
        rejected(body).error.code
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
            code(r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            INVALID_PARAMS
        );
        let r = rejected(r#"{"jsonrpc":"1.0","id":"a","method":"x"}"#);
        assert_eq!(
            r.id.unwrap().as_json(),
            r#""a""#,
            "the id is echoed when it is valid"
        );
        let r = rejected("{not json");
        assert_eq!(r.id.unwrap().as_json(), "null");
    }

    #[test]
    fn a_valid_request_parses() {
        let r = parse_request(br#"{"jsonrpc":"2.0","id":7,"method":"GetTask"}"#).unwrap();
        assert_eq!(r.method, "GetTask");
        assert_eq!(r.id.unwrap().as_json(), "7");
        assert_eq!(r.params, json!({}));
        let r = parse_request(b"\n  {\"jsonrpc\":\"2.0\",\"id\": 8 ,\"method\":\"GetTask\"}\n")
            .unwrap();
        assert_eq!(r.id.unwrap().as_json(), "8");
    }

    #[test]
    fn ids_keep_their_exact_text() {
        for id in [
            "123456789012345678901234567890123456",
            "-0.000000000000000000000000000000001",
            "1e400",
            r#""caf\u00e9 \"x\"""#,
            "null",
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetTask"}}"#);
            let r = parse_request(body.as_bytes()).unwrap();
            let got = r.id.unwrap();
            assert_eq!(got.as_json(), id);
            let out = serde_json::to_string(&success(&got, json!(1))).unwrap();
            assert_eq!(out, format!(r#"{{"jsonrpc":"2.0","id":{id},"result":1}}"#));
        }
    }

    #[test]
    fn a_request_without_an_id_is_a_notification() {
        let r = parse_request(br#"{"jsonrpc":"2.0","method":"GetTask"}"#).unwrap();
        assert!(r.id.is_none());
        // Not answered even when it is invalid.
        assert!(
            rejected(r#"{"jsonrpc":"1.0","method":"GetTask"}"#)
                .id
                .is_none()
        );
        assert!(
            rejected(r#"{"jsonrpc":"2.0","method":"x","params":1}"#)
                .id
                .is_none()
        );
        // `"id": null` is a request (answered with null), not a notification.
        let r = parse_request(br#"{"jsonrpc":"2.0","id":null,"method":"GetTask"}"#).unwrap();
        assert_eq!(r.id.unwrap().as_json(), "null");
    }
}
