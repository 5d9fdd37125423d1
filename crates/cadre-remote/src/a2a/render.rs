//! Building A2A JSON (the server side): tasks, messages, parts, status and artifact update
//! events, each in the shape of the requested [`Version`].

use super::parts::{AnswerForm, render_parts};
use super::{A2aState, Version};
use crate::time::rfc3339;
use cadre_types::{IncompleteReason, Usage};
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

/// One message of a task's history (or its status): text (or the parts its text spells), and
/// optionally a data part.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub text: String,
    /// How its text becomes parts (an agent's answer may spell A2A parts).
    pub form: AnswerForm,
    /// A data part after the text, when there is one.
    pub data: Option<Value>,
    /// Its id.
    pub message_id: String,
}

/// Everything needed to render one task.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// The task id.
    pub id: String,
    /// The conversation it belongs to.
    pub context_id: String,
    /// The agent that runs it.
    pub agent: String,
    /// Its state.
    pub state: A2aState,
    /// The messages exchanged, oldest first.
    pub history: Vec<Said>,
    /// The agent's message that goes with the state (the question of an input-required task).
    pub note: Option<Said>,
    /// The answer (or partial output) of the latest turn, once there is one.
    pub output: Option<String>,
    /// How the agent's answers become parts.
    pub form: AnswerForm,
    /// Why it failed.
    pub error: Option<String>,
    /// Tokens the agent used.
    pub usage: Usage,
    /// Whether the latest turn's answer is complete, once it has ended: `Ok(())`, or why not.
    pub completeness: Option<Result<(), IncompleteReason>>,
    /// Last change, Unix ms.
    pub updated_at: u64,
    /// Where its latest turn was resumed after its node was lost, if it was.
    pub resumed: Option<Resumption>,
}

/// A task turn continued on another node after the one running it was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumption {
    /// How many times it was resumed.
    pub times: u64,
    /// The node that runs it now (or ran it last).
    pub node: String,
}

impl Resumption {
    /// The status message of a resumed task that is working.
    pub fn note(&self) -> String {
        format!(
            "resumed on node {} after the node running it was lost",
            self.node
        )
    }
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

/// A data part.
pub fn data_part(data: &Value, version: Version) -> Value {
    match version {
        Version::V1 => json!({"data": data, "mediaType": "application/json"}),
        Version::V03 => json!({"kind": "data", "data": data}),
    }
}

/// A message of a task: its text (or parts), and its data part when it has one.
pub fn said(s: &Said, task_id: &str, context_id: &str, version: Version) -> Value {
    let mut parts = render_parts(&s.text, s.form, version);
    if let Some(d) = &s.data {
        parts.push(data_part(d, version));
    }
    message_of(
        s.role,
        parts,
        &s.message_id,
        Some(task_id),
        Some(context_id),
        version,
    )
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
    let parts = vec![text_part(text, version)];
    message_of(role, parts, message_id, task_id, context_id, version)
}

/// A message of the given parts.
pub fn message_of(
    role: Role,
    parts: Vec<Value>,
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
    m.insert("parts".into(), Value::Array(parts));
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

/// The status of a task view: failed tasks carry their error as an agent message, an
/// input-required task its question.
pub fn view_status(view: &TaskView, version: Version) -> Value {
    let message = match view.state {
        A2aState::Failed | A2aState::Rejected => view.error.as_deref().map(|text| {
            message(
                Role::Agent,
                text,
                &format!("{}-status", view.id),
                Some(&view.id),
                Some(&view.context_id),
                version,
            )
        }),
        A2aState::InputRequired | A2aState::AuthRequired => view
            .note
            .as_ref()
            .map(|n| said(n, &view.id, &view.context_id, version)),
        A2aState::Working => view.resumed.as_ref().map(|r| {
            message(
                Role::Agent,
                &r.note(),
                &format!("{}-resumed-{}", view.id, r.times),
                Some(&view.id),
                Some(&view.context_id),
                version,
            )
        }),
        _ => None,
    };
    status(view.state, message, view.updated_at, version)
}

/// An artifact of the given parts.
pub fn artifact(artifact_id: &str, parts: Vec<Value>) -> Value {
    json!({
        "artifactId": artifact_id,
        "name": artifact_id,
        "parts": parts,
    })
}

/// A whole task.
pub fn task(view: &TaskView, detail: Detail, version: Version) -> Value {
    let mut t = Map::new();
    if version == Version::V03 {
        t.insert("kind".into(), json!("task"));
    }
    t.insert("id".into(), json!(view.id));
    t.insert("contextId".into(), json!(view.context_id));
    t.insert("status".into(), view_status(view, version));
    if detail.artifacts
        && let Some(out) = view.output.as_deref().filter(|o| !o.is_empty())
    {
        t.insert(
            "artifacts".into(),
            json!([artifact(
                ANSWER_ARTIFACT,
                render_parts(out, view.form, version)
            )]),
        );
    }
    let all = view.history.len();
    let keep = detail.history.unwrap_or(all).min(all);
    if keep > 0 {
        let history: Vec<Value> = view.history[all - keep..]
            .iter()
            .map(|s| said(s, &view.id, &view.context_id, version))
            .collect();
        t.insert("history".into(), Value::Array(history));
    }
    t.insert("metadata".into(), view_metadata(view));
    Value::Object(t)
}

/// A task's metadata: its agent, its usage so far, and once it ended whether it is
/// complete (and why not), and its resumptions.
pub fn view_metadata(view: &TaskView) -> Value {
    let mut metadata = json!({"agent": view.agent, "usage": super::usage::usage_json(&view.usage)});
    if let (Some(done), Some(m)) = (view.completeness, metadata.as_object_mut()) {
        m.insert("complete".into(), json!(done.is_ok()));
        if let Err(reason) = done {
            m.insert("reason".into(), json!(reason.as_str()));
        }
    }
    if let (Some(r), Some(m)) = (&view.resumed, metadata.as_object_mut()) {
        m.insert("resumed".into(), json!({"times": r.times, "node": r.node}));
    }
    metadata
}

/// `event` (a status update of either version) carrying `metadata`, as A2A's
/// `TaskStatusUpdateEvent.metadata`: the final one carries the task's usage with its end, so
/// a client never reads an end without the tokens it cost.
pub fn with_metadata(mut event: Value, metadata: Value) -> Value {
    let inner = match event.get_mut("statusUpdate") {
        Some(inner) => inner,
        None => &mut event,
    };
    if let Some(o) = inner.as_object_mut() {
        o.insert("metadata".into(), metadata);
    }
    event
}

/// The result of `SendMessage` / the first event of a stream: a task, wrapped by kind in v1.0.
pub fn task_result(task: Value, version: Version) -> Value {
    match version {
        Version::V1 => json!({"task": task}),
        Version::V03 => task,
    }
}

/// The result of a `SendMessage` answered with a message instead of a task.
pub fn message_result(message: Value, version: Version) -> Value {
    match version {
        Version::V1 => json!({"message": message}),
        Version::V03 => message,
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

/// An artifact update event carrying parts of the answer (a piece of its text, or all of
/// its parts).
pub fn artifact_update(
    task_id: &str,
    context_id: &str,
    parts: Vec<Value>,
    append: bool,
    last_chunk: bool,
    version: Version,
) -> Value {
    let mut ev = json!({
        "taskId": task_id,
        "contextId": context_id,
        "artifact": artifact(ANSWER_ARTIFACT, parts),
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

    fn view(state: A2aState) -> TaskView {
        let said = |role, text: &str, id: &str| Said {
            role,
            text: text.into(),
            form: AnswerForm::Text,
            data: None,
            message_id: id.into(),
        };
        TaskView {
            id: "task_1".into(),
            context_id: "ctx".into(),
            agent: "echo".into(),
            state,
            history: vec![
                said(Role::User, "hi", "m1"),
                said(Role::Agent, "hello", "task_1-answer"),
            ],
            note: None,
            output: Some("hello".into()),
            form: AnswerForm::Text,
            error: Some("boom".into()),
            usage: Usage::default(),
            completeness: Some(Err(IncompleteReason::MaxTurns)),
            updated_at: 0,
            resumed: None,
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
        assert_eq!(t["metadata"]["complete"], false);
        assert_eq!(t["metadata"]["reason"], "max_turns");
        let u = status_update("t", "c", json!({}), true, Version::V03);
        assert_eq!(u["kind"], "status-update");
        assert_eq!(u["final"], true);
        let a = artifact_update(
            "t",
            "c",
            vec![text_part("x", Version::V1)],
            true,
            false,
            Version::V1,
        );
        assert_eq!(a["artifactUpdate"]["artifact"]["parts"][0]["text"], "x");
    }

    #[test]
    fn a_resumed_task_says_so_in_its_status_and_metadata() {
        let mut v = view(A2aState::Working);
        v.resumed = Some(Resumption {
            times: 1,
            node: "b".into(),
        });
        let t = task(&v, Detail::default(), Version::V1);
        assert_eq!(
            t["status"]["message"]["parts"][0]["text"],
            "resumed on node b after the node running it was lost"
        );
        assert_eq!(t["metadata"]["resumed"], json!({"times": 1, "node": "b"}));
        // Once it ended, the status is its own; the metadata still tells.
        v.state = A2aState::Completed;
        let t = task(&v, Detail::default(), Version::V1);
        assert!(t["status"].get("message").is_none());
        assert_eq!(t["metadata"]["resumed"]["times"], 1);
        // A task never resumed has neither.
        let t = task(&view(A2aState::Working), Detail::default(), Version::V1);
        assert!(t["status"].get("message").is_none() && t["metadata"].get("resumed").is_none());
    }

    #[test]
    fn an_input_required_status_carries_the_question_with_its_data() {
        let mut v = view(A2aState::InputRequired);
        v.note = Some(Said {
            role: Role::Agent,
            text: "May I?".into(),
            form: AnswerForm::Text,
            data: Some(json!({"approval": {"tool": "bash"}})),
            message_id: "q1".into(),
        });
        let t = task(&v, Detail::default(), Version::V1);
        let m = &t["status"]["message"];
        assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(m["parts"][0]["text"], "May I?");
        assert_eq!(m["parts"][1]["data"]["approval"]["tool"], "bash");
        assert_eq!(m["parts"][1]["mediaType"], "application/json");
        let t = task(&v, Detail::default(), Version::V03);
        assert_eq!(t["status"]["message"]["parts"][1]["kind"], "data");
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
