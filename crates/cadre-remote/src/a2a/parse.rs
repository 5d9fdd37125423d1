//! Reading A2A JSON leniently, in either version: the parameters of an incoming
//! `SendMessage` (server side) and the tasks, messages and events a remote agent answers
//! with (client side). Unknown fields are ignored, as the SDKs do.

use super::A2aState;
use cadre_types::Usage;
use serde_json::Value;

/// The parts of an incoming message that cadre uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingMessage {
    /// The text of its parts (text parts verbatim, data parts as JSON), one per line.
    pub text: String,
    /// The caller's message id (generated when absent).
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

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
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

/// Read the parameters of a send.
pub fn send_params(params: &Value) -> Result<SendParams, String> {
    let msg = params
        .get("message")
        .filter(|m| m.is_object())
        .ok_or("params.message must be an object")?;
    let parts = msg
        .get("parts")
        .filter(|p| p.is_array())
        .ok_or("params.message.parts must be an array")?;
    let text = parts_text(parts);
    if text.trim().is_empty() {
        return Err("the message has no text or data part".into());
    }
    let cfg = params.get("configuration");
    let flag = |k: &str| cfg.and_then(|c| c.get(k)).and_then(Value::as_bool);
    let return_immediately =
        flag("returnImmediately") == Some(true) || flag("blocking") == Some(false);
    let history_length = cfg
        .and_then(|c| c.get("historyLength"))
        .and_then(Value::as_u64)
        .map(|n| n as usize);
    Ok(SendParams {
        message: IncomingMessage {
            text,
            message_id: str_field(msg, "messageId")
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            context_id: str_field(msg, "contextId"),
            task_id: str_field(msg, "taskId"),
            agent: agent_in(msg.get("metadata")).or_else(|| agent_in(params.get("metadata"))),
        },
        return_immediately,
        history_length,
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

fn status_of(v: &Value) -> (A2aState, Option<String>) {
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
    (state, text)
}

fn task(v: &Value) -> Option<RemoteTask> {
    let id = str_field(v, "id")?;
    let (state, status_text) = status_of(v);
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
    let usage = v
        .get("metadata")
        .and_then(|m| m.get("usage"))
        .and_then(super::usage::parse_usage);
    Some(RemoteTask {
        id,
        context_id: str_field(v, "contextId"),
        state,
        status_text,
        artifacts,
        last_agent_text,
        usage,
    })
}

fn message(v: &Value) -> Item {
    Item::Message {
        text: v.get("parts").map(parts_text).unwrap_or_default(),
        context_id: str_field(v, "contextId"),
    }
}

fn status_event(v: &Value) -> Item {
    let (state, text) = status_of(v);
    Item::Status {
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
        assert!(send_params(&json!({"message": {"parts": []}})).is_err());
        assert!(send_params(&json!({"message": "x"})).is_err());
        assert!(
            !send_params(&json!({"message": {"parts": [{"text": "x"}]}}))
                .unwrap()
                .return_immediately
        );
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
                text: Some("bad".into())
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
