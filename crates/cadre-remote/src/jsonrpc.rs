//! JSON-RPC 2.0 envelopes: validating a request body and building result and error
//! responses, errors carrying A2A's `google.rpc.ErrorInfo`. Every malformed input becomes an error object, never a panic or an HTTP 500.
//! The request id is kept as the caller wrote it (a 36-digit number comes back with all its
//! digits), and a request without an id is a notification, which is never answered.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The errors a JSON-RPC answer can carry: the standard ones and A2A's (`-32001` to `-32099`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// Invalid JSON.
    Parse,
    /// Not a valid request object.
    InvalidRequest,
    /// Unknown method.
    MethodNotFound,
    /// Bad parameters.
    InvalidParams,
    /// A failure inside the server.
    Internal,
    /// The server is at its task limit or shutting down (implementation-defined range).
    ServerBusy,
    /// A2A: no such task.
    TaskNotFound,
    /// A2A: the task is already in a terminal state.
    TaskNotCancelable,
    /// A2A: push notifications are not offered.
    PushNotificationNotSupported,
    /// A2A: the operation does not apply (a message or a subscription to an ended task).
    UnsupportedOperation,
    /// A2A: a media type the agent does not take (or a body that is not JSON).
    ContentTypeNotSupported,
    /// A2A: there is no extended agent card.
    ExtendedCardNotConfigured,
    /// A2A: the requested protocol version is not served.
    VersionNotSupported,
}

/// The `domain` of the `google.rpc.ErrorInfo` of every error.
pub(crate) const ERROR_DOMAIN: &str = "a2a-protocol.org";
/// The `@type` of an ErrorInfo in ProtoJSON.
const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The code of a task the server does not know (the client checks for it).
pub(crate) const TASK_NOT_FOUND: i64 = -32001;

impl ErrorKind {
    /// The JSON-RPC error code.
    pub(crate) fn code(self) -> i64 {
        match self {
            ErrorKind::Parse => -32700,
            ErrorKind::InvalidRequest => -32600,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::Internal => -32603,
            ErrorKind::ServerBusy => -32000,
            ErrorKind::TaskNotFound => TASK_NOT_FOUND,
            ErrorKind::TaskNotCancelable => -32002,
            ErrorKind::PushNotificationNotSupported => -32003,
            ErrorKind::UnsupportedOperation => -32004,
            ErrorKind::ContentTypeNotSupported => -32005,
            ErrorKind::ExtendedCardNotConfigured => -32007,
            ErrorKind::VersionNotSupported => -32009,
        }
    }

    /// The ErrorInfo `reason` (the A2A error's name in UPPER_SNAKE_CASE, without `Error`).
    pub(crate) fn reason(self) -> &'static str {
        match self {
            ErrorKind::Parse => "JSON_PARSE",
            ErrorKind::InvalidRequest => "INVALID_REQUEST",
            ErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
            ErrorKind::InvalidParams => "INVALID_PARAMS",
            ErrorKind::Internal => "INTERNAL_ERROR",
            ErrorKind::ServerBusy => "SERVER_BUSY",
            ErrorKind::TaskNotFound => "TASK_NOT_FOUND",
            ErrorKind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            ErrorKind::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ErrorKind::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ErrorKind::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            ErrorKind::ExtendedCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ErrorKind::VersionNotSupported => "VERSION_NOT_SUPPORTED",
        }
    }
}

/// An error object. `data` is the ProtoJSON array A2A asks for: one `google.rpc.ErrorInfo`
/// with the kind's reason, the A2A domain and string metadata (camelCase keys).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Value,
    #[serde(skip)]
    pub kind: ErrorKind,
    /// A refusal to try again later, elsewhere: answered with this HTTP status (not 200)
    /// and `Retry-After: secs`, so a load balancer can send the request to another node.
    #[serde(skip)]
    pub refusal: Option<(u16, &'static str)>,
}

impl RpcError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            code: kind.code(),
            message: message.into(),
            data: json!([{
                "@type": ERROR_INFO_TYPE,
                "reason": kind.reason(),
                "domain": ERROR_DOMAIN,
                "metadata": {},
            }]),
            kind,
            refusal: None,
        }
    }

    /// Add `key: value` to the ErrorInfo's metadata.
    pub(crate) fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        if let Some(meta) = self.data[0]["metadata"].as_object_mut() {
            meta.insert(key.to_string(), Value::String(value.into()));
        }
        self
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidParams, message)
    }

    pub(crate) fn task_not_found(id: &str) -> Self {
        Self::new(ErrorKind::TaskNotFound, format!("Task not found: {id}")).with("taskId", id)
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
    #[cfg(any(test, feature = "fuzzing"))]
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
    RpcError::new(
        ErrorKind::InvalidRequest,
        format!("Invalid request: {what}"),
    )
}

/// Validate a request body.
pub(crate) fn parse_request(body: &[u8]) -> Result<RpcRequest, Rejected> {
    let answer_null = |error| Rejected {
        id: Some(RpcId::Null),
        error,
    };
    let raw: &RawValue = serde_json::from_slice(body)
        .map_err(|e| answer_null(RpcError::new(ErrorKind::Parse, format!("Parse error: {e}"))))?;
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

    fn code(body: &str) -> ErrorKind {
        rejected(body).error.kind
    }

    #[test]
    fn malformed_requests_get_the_right_codes() {
        assert_eq!(code("{not json"), ErrorKind::Parse);
        assert_eq!(code("[]"), ErrorKind::InvalidRequest);
        assert_eq!(code("42"), ErrorKind::InvalidRequest);
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1}"#),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            ErrorKind::InvalidParams
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
    fn errors_carry_error_info() {
        let e = RpcError::task_not_found("t1");
        let v = serde_json::to_value(failure(&RpcId::Null, &e)).unwrap();
        assert_eq!(v["error"]["code"], -32001);
        assert_eq!(
            v["error"]["data"],
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org",
                "metadata": {"taskId": "t1"}}])
        );
        assert!(v["error"].get("kind").is_none());
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
