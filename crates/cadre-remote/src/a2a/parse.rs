//! Reading A2A JSON, in either version: the parameters of an incoming request (server side,
//! strictly: required fields, media types and ranges are checked) and the tasks, messages and
//! events a remote agent answers with (client side, leniently: unknown fields are ignored, as
//! the SDKs do). Field names are read in camelCase and, as the protobuf JSON mapping allows,
//! in snake_case.

use super::A2aState;
use base64::Engine as _;
use cadre_types::Usage;
use serde_json::Value;

/// The parts of an incoming message that cadre uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingMessage {
    /// The text of its parts (text parts verbatim, data parts as JSON, text files inlined),
    /// one per line.
    pub text: String,
    /// The text of its text parts alone, one per line.
    pub plain: String,
    /// The values of its data parts, in order.
    pub data: Vec<Value>,
    /// The caller's message id.
    pub message_id: String,
    /// The conversation to continue.
    pub context_id: Option<String>,
    /// The task it refers to.
    pub task_id: Option<String>,
    /// The agent asked for in metadata (`agent`, `skill` or `skillId`).
    pub agent: Option<String>,
}

/// Parameters of `SendMessage` / `message/send`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendParams {
    /// The message.
    pub message: IncomingMessage,
    /// Answer at once instead of waiting for the task to finish
    /// (`configuration.returnImmediately: true`, or v0.3's `blocking: false`).
    pub return_immediately: bool,
    /// `configuration.historyLength`.
    pub history_length: Option<usize>,
}

/// Why the parameters of a request were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadParams {
    /// A field is missing, of the wrong type or out of range.
    Invalid(String),
    /// A part has a media type the agents do not take.
    MediaType(String),
}

impl std::fmt::Display for BadParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadParams::Invalid(m) => f.write_str(m),
            BadParams::MediaType(m) => write!(
                f,
                "media type `{m}` is not supported: the agents take text (text/*) and JSON (application/json)"
            ),
        }
    }
}

fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A member of an object by its camelCase name, or by its snake_case name.
pub fn member<'a>(v: &'a Value, camel: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| {
        let snake = snake_case(camel);
        (snake != camel).then(|| v.get(&snake)).flatten()
    })
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    member(v, key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// An optional non-negative integer member (`historyLength`, ...); `Err` says what is wrong.
pub fn non_negative(v: &Value, camel: &str, path: &str) -> Result<Option<u64>, String> {
    match member(v, camel) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => match n.as_i64() {
            Some(i) if i >= 0 => Ok(Some(i as u64)),
            Some(i) => Err(format!("{path}.{camel} must not be negative (got {i})")),
            None => Err(format!("{path}.{camel} must be an integer")),
        },
    }
}

fn agent_in(meta: Option<&Value>) -> Option<String> {
    let meta = meta?;
    ["agent", "skill", "skillId", "skill_id"]
        .iter()
        .find_map(|k| str_field(meta, k))
}

/// The text of a list of parts: text parts verbatim, data parts as compact JSON; file parts
/// are named but not fetched.
pub fn parts_text(parts: &Value) -> String {
    let mut out: Vec<String> = Vec::new();
    for p in parts.as_array().into_iter().flatten() {
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            out.push(t.to_string());
        } else if let Some(d) = p.get("data") {
            out.push(d.to_string());
        } else if let Some(name) = p
            .get("filename")
            .or_else(|| p.get("file").and_then(|f| f.get("name")))
            .and_then(Value::as_str)
        {
            out.push(format!("[attached file: {name}]"));
        }
    }
    out.join("\n")
}

/// Whether the agents take a part of this media type: `text/*` and JSON.
pub fn accepts_media(media_type: &str) -> bool {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The text and data of an incoming message's parts, checked: every part has content, and
/// a declared media type the agents take. A text file sent inline (`raw`, v0.3 `bytes`) is
/// decoded into the text; a file by URL is named, not fetched.
fn read_parts(parts: &[Value]) -> Result<(String, String, Vec<Value>), BadParams> {
    let mut text: Vec<String> = Vec::new();
    let mut plain: Vec<&str> = Vec::new();
    let mut data = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let at = || format!("params.message.parts[{i}]");
        if !p.is_object() {
            return Err(BadParams::Invalid(format!("{} must be an object", at())));
        }
        let file = p.get("file").filter(|f| f.is_object());
        let media = member(p, "mediaType")
            .or_else(|| file.and_then(|f| member(f, "mimeType")))
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty());
        if let Some(m) = media
            && !accepts_media(m)
        {
            return Err(BadParams::MediaType(m.to_string()));
        }
        let name = p
            .get("filename")
            .or_else(|| file.and_then(|f| f.get("name")))
            .and_then(Value::as_str)
            .unwrap_or("file");
        if let Some(t) = p.get("text") {
            let t = t
                .as_str()
                .ok_or_else(|| BadParams::Invalid(format!("{}.text must be a string", at())))?;
            text.push(t.to_string());
            plain.push(t);
        } else if let Some(d) = p.get("data") {
            text.push(d.to_string());
            data.push(d.clone());
        } else if let Some(raw) = p.get("raw").or_else(|| file.and_then(|f| f.get("bytes"))) {
            let bytes = raw
                .as_str()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .ok_or_else(|| {
                    BadParams::Invalid(format!("{}: the file content must be base64", at()))
                })?;
            let content = String::from_utf8(bytes).map_err(|_| {
                BadParams::Invalid(format!(
                    "{}: the file {name} is not UTF-8 text, and the agents take text only",
                    at()
                ))
            })?;
            text.push(format!("[attached file: {name}]\n{content}"));
        } else if let Some(url) = p
            .get("url")
            .or_else(|| file.and_then(|f| f.get("uri")))
            .and_then(Value::as_str)
        {
            text.push(format!("[attached file: {name} at {url}, not fetched]"));
        } else {
            return Err(BadParams::Invalid(format!(
                "{} has no content (text, data, raw or url)",
                at()
            )));
        }
    }
    Ok((text.join("\n"), plain.join("\n"), data))
}

/// Read the parameters of a send.
pub fn send_params(params: &Value) -> Result<SendParams, BadParams> {
    let invalid = |m: &str| BadParams::Invalid(m.to_string());
    let msg = params
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| invalid("params.message must be an object"))?;
    let message_id = str_field(msg, "messageId")
        .ok_or_else(|| invalid("params.message.messageId must be a non-empty string"))?;
    let parts = msg
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("params.message.parts must be an array"))?;
    let (text, plain, data) = read_parts(parts)?;
    if text.trim().is_empty() {
        return Err(invalid("the message has no text or data part"));
    }
    let cfg = params.get("configuration").filter(|c| c.is_object());
    let flag = |k: &str| cfg.and_then(|c| member(c, k)).and_then(Value::as_bool);
    let return_immediately =
        flag("returnImmediately") == Some(true) || flag("blocking") == Some(false);
    let history_length = match cfg {
        Some(c) => non_negative(c, "historyLength", "params.configuration")
            .map_err(BadParams::Invalid)?
            .map(|n| n as usize),
        None => None,
    };
    Ok(SendParams {
        message: IncomingMessage {
            text,
            plain,
            data,
            message_id,
            context_id: str_field(msg, "contextId"),
            task_id: str_field(msg, "taskId"),
            agent: agent_in(msg.get("metadata")).or_else(|| agent_in(params.get("metadata"))),
        },
        return_immediately,
        history_length,
    })
}

/// An approval a remote cadre agent asks its caller for: the `approval` data part of an
/// input-required status message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteQuestion {
    /// The asking agent, on the remote.
    pub agent: String,
    /// The tool it wants to run.
    pub tool: String,
    /// The tool's arguments.
    pub args: Value,
    /// What the call acts on (a command, a path), when the remote says.
    pub subject: Option<String>,
    /// Why it needs approval.
    pub reason: String,
    /// `low`, `medium` or `high`.
    pub risk: String,
    /// The remote's id of the call: the question's identity.
    pub call_id: String,
}

fn question_of(message: Option<&Value>) -> Option<RemoteQuestion> {
    let a = message?
        .get("parts")?
        .as_array()?
        .iter()
        .find_map(|p| p.get("data")?.get("approval"))?;
    let s = |k: &str| a.get(k).and_then(Value::as_str).map(str::to_string);
    Some(RemoteQuestion {
        agent: s("agent").unwrap_or_default(),
        tool: s("tool")?,
        args: a.get("args").cloned().unwrap_or(Value::Null),
        subject: s("subject"),
        reason: s("reason").unwrap_or_default(),
        risk: s("risk").unwrap_or_default(),
        call_id: s("callId")?,
    })
}

/// A task as a remote agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTask {
    /// Task id.
    pub id: String,
    /// Conversation id.
    pub context_id: Option<String>,
    /// State.
    pub state: A2aState,
    /// Text of the status message, if any.
    pub status_text: Option<String>,
    /// Artifacts as (id, text), in order.
    pub artifacts: Vec<(String, String)>,
    /// Text of the last agent message in the history.
    pub last_agent_text: Option<String>,
    /// Usage reported in the metadata (cadre servers report it).
    pub usage: Option<Usage>,
    /// The approval the remote asks for, when it waits for one.
    pub question: Option<RemoteQuestion>,
}

impl RemoteTask {
    /// The answer: the artifacts' text, else the status message, else the last agent message.
    pub fn answer(&self) -> String {
        let arts: Vec<&str> = self
            .artifacts
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| !t.is_empty())
            .collect();
        if !arts.is_empty() {
            return arts.join("\n");
        }
        self.status_text
            .clone()
            .or_else(|| self.last_agent_text.clone())
            .unwrap_or_default()
    }
}

/// One thing a remote agent sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A task snapshot.
    Task(RemoteTask),
    /// A direct message (the whole answer, no task).
    Message {
        /// Its text.
        text: String,
        /// Conversation id.
        context_id: Option<String>,
    },
    /// A status change.
    Status {
        /// Task id.
        task_id: Option<String>,
        /// Conversation id.
        context_id: Option<String>,
        /// New state.
        state: A2aState,
        /// Text of the status message.
        text: Option<String>,
        /// The approval the remote asks for, when it waits for one.
        question: Option<RemoteQuestion>,
        /// The task's usage so far, when the event's metadata reports it (cadre servers
        /// report it with every state change, the end included).
        usage: Option<Usage>,
    },
    /// A piece of an artifact.
    Artifact {
        /// Task id.
        task_id: Option<String>,
        /// Artifact id.
        artifact_id: String,
        /// Its text.
        text: String,
        /// Append to the artifact (else replace it).
        append: bool,
    },
}

fn status_of(v: &Value) -> (A2aState, Option<String>, Option<RemoteQuestion>) {
    let status = v.get("status");
    let state = status
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .map_or(A2aState::Unknown, A2aState::parse);
    let text = status
        .and_then(|s| s.get("message"))
        .and_then(|m| m.get("parts"))
        .map(parts_text)
        .filter(|t| !t.is_empty());
    let question = question_of(status.and_then(|s| s.get("message")));
    (state, text, question)
}

fn task(v: &Value) -> Option<RemoteTask> {
    let id = str_field(v, "id")?;
    let (state, status_text, question) = status_of(v);
    let artifacts = v
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| {
            let id = str_field(a, "artifactId").unwrap_or_default();
            (id, a.get("parts").map(parts_text).unwrap_or_default())
        })
        .collect();
    let last_agent_text = v
        .get("history")
        .and_then(Value::as_array)
        .and_then(|h| {
            h.iter().rev().find(|m| {
                matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("ROLE_AGENT" | "agent")
                )
            })
        })
        .and_then(|m| m.get("parts"))
        .map(parts_text);
    let usage = usage_of(v);
    Some(RemoteTask {
        id,
        context_id: str_field(v, "contextId"),
        state,
        status_text,
        artifacts,
        last_agent_text,
        usage,
        question,
    })
}

/// `metadata.usage` of a task or an event.
fn usage_of(v: &Value) -> Option<Usage> {
    v.get("metadata")
        .and_then(|m| m.get("usage"))
        .and_then(super::usage::parse_usage)
}

fn message(v: &Value) -> Item {
    Item::Message {
        text: v.get("parts").map(parts_text).unwrap_or_default(),
        context_id: str_field(v, "contextId"),
    }
}

fn status_event(v: &Value) -> Item {
    let (state, text, question) = status_of(v);
    Item::Status {
        usage: usage_of(v),
        question,
        task_id: str_field(v, "taskId"),
        context_id: str_field(v, "contextId"),
        state,
        text,
    }
}

fn artifact_event(v: &Value) -> Item {
    let art = v.get("artifact");
    Item::Artifact {
        task_id: str_field(v, "taskId"),
        artifact_id: art
            .and_then(|a| str_field(a, "artifactId"))
            .unwrap_or_default(),
        text: art
            .and_then(|a| a.get("parts"))
            .map(parts_text)
            .unwrap_or_default(),
        append: v.get("append").and_then(Value::as_bool).unwrap_or(false),
    }
}

/// Read a JSON-RPC `result` (or one stream event) of either version.
pub fn item(result: &Value) -> Option<Item> {
    match result.get("kind").and_then(Value::as_str) {
        Some("task") => return task(result).map(Item::Task),
        Some("message") => return Some(message(result)),
        Some("status-update") => return Some(status_event(result)),
        Some("artifact-update") => return Some(artifact_event(result)),
        _ => {}
    }
    if let Some(t) = result.get("task") {
        return task(t).map(Item::Task);
    }
    if let Some(m) = result.get("message").filter(|m| m.get("parts").is_some()) {
        return Some(message(m));
    }
    if let Some(s) = result.get("statusUpdate") {
        return Some(status_event(s));
    }
    if let Some(a) = result.get("artifactUpdate") {
        return Some(artifact_event(a));
    }
    if result.get("id").is_some() && result.get("status").is_some() {
        return task(result).map(Item::Task);
    }
    if result.get("parts").is_some() {
        return Some(message(result));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn send_params_of_both_versions() {
        let v1 = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}],
            "metadata": {"skill": "echo"}}, "configuration": {"returnImmediately": true}});
        let p = send_params(&v1).unwrap();
        assert_eq!(p.message.text, "hi");
        assert_eq!(p.message.agent.as_deref(), Some("echo"));
        assert!(p.return_immediately);
        let v03 = json!({"message": {"kind": "message", "messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "a"}, {"kind": "data", "data": {"x": 1}}],
            "contextId": "c"}, "configuration": {"blocking": false}, "metadata": {"agent": "b"}});
        let p = send_params(&v03).unwrap();
        assert_eq!(p.message.text, "a\n{\"x\":1}");
        assert_eq!(p.message.context_id.as_deref(), Some("c"));
        assert_eq!(p.message.agent.as_deref(), Some("b"));
        assert!(p.return_immediately);
        assert!(send_params(&json!({"message": {"messageId": "m", "parts": []}})).is_err());
        assert!(send_params(&json!({"message": "x"})).is_err());
        assert!(
            !send_params(&json!({"message": {"messageId": "m", "parts": [{"text": "x"}]}}))
                .unwrap()
                .return_immediately
        );
    }

    fn invalid(params: Value) -> String {
        match send_params(&params) {
            Err(BadParams::Invalid(m)) => m,
            other => panic!("{params}: {other:?}"),
        }
    }

    #[test]
    fn sends_are_checked() {
        assert!(invalid(json!({"message": {"parts": [{"text": "x"}]}})).contains("messageId"));
        assert!(
            invalid(json!({"message": {"messageId": "", "parts": [{"text": "x"}]}}))
                .contains("messageId")
        );
        assert!(
            invalid(
                json!({"message": {"messageId": "m", "parts": [{"text": "x"}]},
            "configuration": {"historyLength": -1}})
            )
            .contains("negative")
        );
        assert!(
            invalid(json!({"message": {"messageId": "m", "parts": [{"mediaType": "text/plain"}]}}))
                .contains("no content")
        );
        assert!(
            invalid(
                json!({"message": {"messageId": "m", "parts": [{"raw": "//8=",
            "filename": "x.bin", "mediaType": "text/plain"}]}})
            )
            .contains("not UTF-8")
        );
        let odd = json!({"message": {"messageId": "m", "parts": [{"raw": "dGNr",
            "mediaType": "application/x-unsupported-tck-type"}]}});
        assert_eq!(
            send_params(&odd),
            Err(BadParams::MediaType(
                "application/x-unsupported-tck-type".into()
            ))
        );
        let v03 = json!({"message": {"messageId": "m", "parts": [{"kind": "file",
            "file": {"name": "a.png", "mimeType": "image/png", "bytes": "AAAA"}}]}});
        assert!(matches!(send_params(&v03), Err(BadParams::MediaType(_))));
    }

    #[test]
    fn text_files_are_inlined_and_snake_case_is_read() {
        let p = send_params(&json!({"message": {"message_id": "m", "context_id": "c",
            "parts": [{"raw": "aGVsbG8=", "filename": "a.txt", "media_type": "text/plain"},
                      {"url": "https://x/y.md", "filename": "y.md"},
                      {"data": {"approve": true}}]},
            "configuration": {"history_length": 3, "return_immediately": true}}))
        .unwrap();
        assert_eq!(
            p.message.text,
            "[attached file: a.txt]\nhello\n[attached file: y.md at https://x/y.md, not fetched]\n{\"approve\":true}"
        );
        assert_eq!(p.message.data, vec![json!({"approve": true})]);
        assert_eq!(p.message.context_id.as_deref(), Some("c"));
        assert_eq!(p.history_length, Some(3));
        assert!(p.return_immediately);
    }

    #[test]
    fn an_approval_question_is_read_from_the_status_message() {
        let ev = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "q", "role": "ROLE_AGENT",
            "parts": [{"text": "Agent `w` asks to run `bash`"},
                      {"data": {"approval": {"agent": "w", "tool": "bash", "args": {"command": "ls"},
                       "subject": "ls", "reason": "bash runs commands", "risk": "medium",
                       "callId": "call_1"}}}]}}}});
        let Some(Item::Status {
            state, question, ..
        }) = item(&ev)
        else {
            panic!()
        };
        assert_eq!(state, A2aState::InputRequired);
        let q = question.unwrap();
        assert_eq!((q.agent.as_str(), q.tool.as_str()), ("w", "bash"));
        assert_eq!(q.args, json!({"command": "ls"}));
        assert_eq!(q.call_id, "call_1");
        // A question in words only is no approval question.
        let plain = json!({"kind": "status-update", "taskId": "t", "status": {"state": "input-required",
            "message": {"parts": [{"kind": "text", "text": "Which file?"}]}}});
        assert!(matches!(
            item(&plain),
            Some(Item::Status { question: None, .. })
        ));
    }

    #[test]
    fn results_of_both_versions() {
        let v1 = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "done"}]}]}});
        let Some(Item::Task(t)) = item(&v1) else {
            panic!()
        };
        assert_eq!(t.state, A2aState::Completed);
        assert_eq!(t.answer(), "done");
        let v03 = json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
            "status": {"state": "failed", "message": {"parts": [{"kind": "text", "text": "bad"}]}}});
        assert_eq!(
            item(&v03),
            Some(Item::Status {
                task_id: Some("t".into()),
                context_id: Some("c".into()),
                state: A2aState::Failed,
                text: Some("bad".into()),
                question: None,
                usage: None,
            })
        );
        let art = json!({"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a",
            "parts": [{"text": "x"}]}, "append": true}});
        assert!(matches!(
            item(&art),
            Some(Item::Artifact { append: true, .. })
        ));
        let bare = json!({"id": "t", "status": {"state": "working"}});
        assert!(matches!(item(&bare), Some(Item::Task(_))));
        let msg = json!({"message": {"messageId": "m", "parts": [{"text": "hey"}]}});
        assert!(matches!(item(&msg), Some(Item::Message { .. })));
        assert_eq!(item(&json!({"nothing": 1})), None);
    }
}
