//! Building A2A JSON (the server side): tasks, messages, parts, status and artifact update
//! events, each in the shape of the requested [`Version`].

use super::{A2aState, Version};
use crate::time::rfc3339;
use cadre_types::Usage;
use serde_json::{Map, Value, json};

/// The id of the one artifact a cadre task produces: its answer.
pub const ANSWER_ARTIFACT: &str = "answer";

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The caller.
    User,
    /// The agent.
    Agent,
}

impl Role {
    fn wire(self, version: Version) -> &'static str {
        match (self, version) {
            (Role::User, Version::V1) => "ROLE_USER",
            (Role::Agent, Version::V1) => "ROLE_AGENT",
            (Role::User, Version::V03) => "user",
            (Role::Agent, Version::V03) => "agent",
        }
    }
}

/// Everything needed to render one task.
#[derive(Debug, Clone)]
pub struct TaskView<'a> {
    /// The task id.
    pub id: &'a str,
    /// The conversation it belongs to.
    pub context_id: &'a str,
    /// The agent that runs it.
    pub agent: &'a str,
    /// Its state.
    pub state: A2aState,
    /// The caller's message text.
    pub input: &'a str,
    /// The caller's message id.
    pub input_message_id: &'a str,
    /// The answer (or partial output), once there is one.
    pub output: Option<&'a str>,
    /// Why it failed.
    pub error: Option<&'a str>,
    /// Tokens the agent used.
    pub usage: Usage,
    /// Last change, Unix ms.
    pub updated_at: u64,
}

/// Which optional parts of a task to include.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// At most this many history messages (`None`: all).
    pub history: Option<usize>,
    /// Include the artifacts.
    pub artifacts: bool,
}

impl Default for Detail {
    fn default() -> Self {
        Self {
            history: None,
            artifacts: true,
        }
    }
}

/// A text part.
pub fn text_part(text: &str, version: Version) -> Value {
    match version {
        Version::V1 => json!({"text": text}),
        Version::V03 => json!({"kind": "text", "text": text}),
    }
}

/// A one-part text message.
pub fn message(
    role: Role,
    text: &str,
    message_id: &str,
    task_id: Option<&str>,
    context_id: Option<&str>,
    version: Version,
) -> Value {
    let mut m = Map::new();
    if version == Version::V03 {
        m.insert("kind".into(), json!("message"));
    }
    m.insert("messageId".into(), json!(message_id));
    m.insert("role".into(), json!(role.wire(version)));
    m.insert("parts".into(), json!([text_part(text, version)]));
    if let Some(t) = task_id {
        m.insert("taskId".into(), json!(t));
    }
    if let Some(c) = context_id {
        m.insert("contextId".into(), json!(c));
    }
    Value::Object(m)
}

/// A task status, with an optional agent message.
pub fn status(state: A2aState, message: Option<Value>, at_ms: u64, version: Version) -> Value {
    let mut s = Map::new();
    s.insert("state".into(), json!(state.wire(version)));
    if let Some(m) = message {
        s.insert("message".into(), m);
    }
    s.insert("timestamp".into(), json!(rfc3339(at_ms)));
    Value::Object(s)
}

/// The status of a task view: failed tasks carry their error as an agent message.
pub fn view_status(view: &TaskView<'_>, version: Version) -> Value {
    let note = match view.state {
        A2aState::Failed | A2aState::Rejected => view.error,
        _ => None,
    };
    let message = note.map(|text| {
        message(
            Role::Agent,
            text,
            &format!("{}-status", view.id),
            Some(view.id),
            Some(view.context_id),
            version,
        )
    });
    status(view.state, message, view.updated_at, version)
}

/// An artifact holding one text part.
pub fn artifact(artifact_id: &str, text: &str, version: Version) -> Value {
    json!({
        "artifactId": artifact_id,
        "name": artifact_id,
        "parts": [text_part(text, version)],
    })
}

/// A whole task.
pub fn task(view: &TaskView<'_>, detail: Detail, version: Version) -> Value {
    let mut t = Map::new();
    if version == Version::V03 {
        t.insert("kind".into(), json!("task"));
    }
    t.insert("id".into(), json!(view.id));
    t.insert("contextId".into(), json!(view.context_id));
    t.insert("status".into(), view_status(view, version));
    let output = view.output.filter(|o| !o.is_empty());
    if detail.artifacts
        && let Some(out) = output
    {
        t.insert(
            "artifacts".into(),
            json!([artifact(ANSWER_ARTIFACT, out, version)]),
        );
    }
    let mut history = vec![message(
        Role::User,
        view.input,
        view.input_message_id,
        Some(view.id),
        Some(view.context_id),
        version,
    )];
    if view.state == A2aState::Completed
        && let Some(out) = output
    {
        history.push(message(
            Role::Agent,
            out,
            &format!("{}-answer", view.id),
            Some(view.id),
            Some(view.context_id),
            version,
        ));
    }
    let keep = detail.history.unwrap_or(history.len()).min(history.len());
    if keep > 0 {
        let skip = history.len() - keep;
        t.insert(
            "history".into(),
            Value::Array(history.into_iter().skip(skip).collect()),
        );
    }
    t.insert(
        "metadata".into(),
        json!({"agent": view.agent, "usage": super::usage::usage_json(&view.usage)}),
    );
    Value::Object(t)
}

/// The result of `SendMessage` / the first event of a stream: a task, wrapped by kind in v1.0.
pub fn task_result(task: Value, version: Version) -> Value {
    match version {
        Version::V1 => json!({"task": task}),
        Version::V03 => task,
    }
}

/// A status update event. `last` marks the final event of a stream (v0.3's `final`).
pub fn status_update(
    task_id: &str,
    context_id: &str,
    status: Value,
    last: bool,
    version: Version,
) -> Value {
    match version {
        Version::V1 => json!({"statusUpdate": {
            "taskId": task_id,
            "contextId": context_id,
            "status": status,
        }}),
        Version::V03 => json!({
            "kind": "status-update",
            "taskId": task_id,
            "contextId": context_id,
            "status": status,
            "final": last,
        }),
    }
}

/// An artifact update event carrying a piece of text.
pub fn artifact_update(
    task_id: &str,
    context_id: &str,
    text: &str,
    append: bool,
    last_chunk: bool,
    version: Version,
) -> Value {
    let mut ev = json!({
        "taskId": task_id,
        "contextId": context_id,
        "artifact": artifact(ANSWER_ARTIFACT, text, version),
        "append": append,
        "lastChunk": last_chunk,
    });
    match version {
        Version::V1 => json!({"artifactUpdate": ev}),
        Version::V03 => {
            if let Some(o) = ev.as_object_mut() {
                o.insert("kind".into(), json!("artifact-update"));
            }
            ev
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(state: A2aState) -> TaskView<'static> {
        TaskView {
            id: "task_1",
            context_id: "ctx",
            agent: "echo",
            state,
            input: "hi",
            input_message_id: "m1",
            output: Some("hello"),
            error: Some("boom"),
            usage: Usage::default(),
            updated_at: 0,
        }
    }

    #[test]
    fn v1_tasks_use_protobuf_names() {
        let t = task(&view(A2aState::Completed), Detail::default(), Version::V1);
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(t["artifacts"][0]["parts"][0]["text"], "hello");
        assert_eq!(t["history"][0]["role"], "ROLE_USER");
        assert_eq!(t["history"][1]["role"], "ROLE_AGENT");
        assert!(t.get("kind").is_none());
        assert!(t["status"].get("message").is_none());
        assert_eq!(task_result(t, Version::V1)["task"]["id"], "task_1");
    }

    #[test]
    fn v03_tasks_carry_kinds() {
        let t = task(&view(A2aState::Failed), Detail::default(), Version::V03);
        assert_eq!(t["kind"], "task");
        assert_eq!(t["status"]["state"], "failed");
        assert_eq!(t["status"]["message"]["parts"][0]["kind"], "text");
        assert_eq!(t["status"]["message"]["parts"][0]["text"], "boom");
        assert_eq!(t["history"][0]["role"], "user");
        let u = status_update("t", "c", json!({}), true, Version::V03);
        assert_eq!(u["kind"], "status-update");
        assert_eq!(u["final"], true);
        let a = artifact_update("t", "c", "x", true, false, Version::V1);
        assert_eq!(a["artifactUpdate"]["artifact"]["parts"][0]["text"], "x");
    }

    #[test]
    fn history_length_keeps_the_newest() {
        let d = Detail {
            history: Some(1),
            artifacts: false,
        };
        let t = task(&view(A2aState::Completed), d, Version::V1);
        assert_eq!(t["history"].as_array().unwrap().len(), 1);
        assert_eq!(t["history"][0]["role"], "ROLE_AGENT");
        assert!(t.get("artifacts").is_none());
        let none = Detail {
            history: Some(0),
            artifacts: true,
        };
        assert!(
            task(&view(A2aState::Working), none, Version::V1)
                .get("history")
                .is_none()
        );
    }
}
