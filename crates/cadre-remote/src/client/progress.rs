//! What a remote A2A agent has reported during one run — task and conversation ids, state,
//! status text, artifacts, the approval it asks for — and how that becomes the run's outcome.
//! Streamed text and status messages are passed on as events while they arrive.

use super::call::Call;
use crate::a2a::parse::{Item, RemoteQuestion};
use crate::a2a::{A2aState, Version};
use cadre_subagents::RemoteOutcome;
use cadre_types::{EndState, Usage};

/// What the remote reported so far.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub(crate) task_id: Option<String>,
    pub(crate) context_id: Option<String>,
    pub(crate) state: Option<A2aState>,
    pub(crate) status_text: Option<String>,
    pub(crate) artifacts: Vec<(String, String)>,
    pub(crate) direct_answer: Option<String>,
    /// As the remote reported it; a remote that reports none has an unknown cost.
    pub(crate) usage: Option<Usage>,
    /// Whether `usage` came with the task's end (a task or event in a terminal state): only
    /// then is it the task's whole usage, not what it had spent when last reported.
    pub(crate) usage_final: bool,
    /// Whether any answer text was passed on as a delta yet.
    pub(crate) streamed: bool,
    /// An approval the remote asks for that has not been answered yet.
    pub(crate) question: Option<RemoteQuestion>,
    /// The remote call ids whose approval was answered (a late copy is not asked again).
    pub(crate) answered: Vec<String>,
    /// The call id of the question the remote showed last, if its last state asked one.
    pub(crate) last_asked: Option<String>,
}

impl Progress {
    /// Take in one item; true when the run is over.
    pub(crate) fn apply(&mut self, it: Item, call: &Call<'_>) -> bool {
        match it {
            Item::Task(t) => {
                self.task_id = Some(t.id.clone());
                if t.context_id.is_some() {
                    self.context_id = t.context_id.clone();
                }
                if let Some(u) = t.usage {
                    self.usage = Some(u);
                    self.usage_final = t.state.is_terminal();
                }
                self.state = Some(t.state);
                self.consider(t.state, t.question.clone());
                if t.status_text.is_some() && t.question.is_none() {
                    self.status_text = t.status_text.clone();
                }
                if !t.artifacts.is_empty() {
                    self.artifacts = t.artifacts;
                } else if t.state == A2aState::Completed && self.artifacts.is_empty() {
                    self.direct_answer = t.last_agent_text;
                }
                // A task that finished before its stream could show progress (a fast remote,
                // or a blocking reply) still shows its answer as progress, once.
                if t.state.is_terminal() && !self.streamed {
                    let answer = self.answer();
                    if !answer.is_empty() {
                        call.delta(&answer);
                        self.streamed = true;
                    }
                }
            }
            Item::Message { text, context_id } => {
                if context_id.is_some() {
                    self.context_id = context_id;
                }
                call.delta(&text);
                self.streamed = true;
                self.direct_answer = Some(text);
                self.state = Some(A2aState::Completed);
                return true;
            }
            Item::Status {
                task_id,
                context_id,
                state,
                text,
                question,
                usage,
            } => {
                if let Some(u) = usage {
                    self.usage = Some(u);
                    self.usage_final = state.is_terminal();
                }
                let asks = question.is_some();
                self.consider(state, question);
                if self.task_id.is_none() {
                    self.task_id = task_id;
                }
                if context_id.is_some() {
                    self.context_id = context_id;
                }
                self.state = Some(state);
                // A question is asked through the approval channel, not shown as a notice.
                if let Some(t) = text.filter(|_| !asks) {
                    if !state.is_terminal() {
                        call.notice(&t);
                    }
                    self.status_text = Some(t);
                }
            }
            Item::Artifact {
                task_id,
                artifact_id,
                text,
                append,
            } => {
                if self.task_id.is_none() {
                    self.task_id = task_id;
                }
                call.delta(&text);
                self.streamed |= !text.is_empty();
                match self.artifacts.iter_mut().find(|(id, _)| *id == artifact_id) {
                    Some((_, t)) if append => t.push_str(&text),
                    Some((_, t)) => *t = text,
                    None => self.artifacts.push((artifact_id, text)),
                }
            }
        }
        if let Some(id) = &self.task_id {
            call.report_remote_id(id);
        }
        // Waiting for an approval is not the end: the run answers it and goes on.
        self.state.is_some_and(|s| {
            s.is_terminal()
                || (s.is_interrupted() && self.question.is_none() && !self.waits_on_answered())
        })
    }

    /// Note the approval the remote asks for, unless it was answered already.
    fn consider(&mut self, state: A2aState, question: Option<RemoteQuestion>) {
        self.last_asked = None;
        if state != A2aState::InputRequired {
            return;
        }
        if let Some(q) = question {
            self.last_asked = Some(q.call_id.clone());
            if !self.answered.contains(&q.call_id) {
                self.question = Some(q);
            }
        }
    }

    /// Whether the remote still shows a question this run has answered (a stale copy).
    fn waits_on_answered(&self) -> bool {
        self.last_asked
            .as_ref()
            .is_some_and(|id| self.answered.contains(id))
    }

    /// The approval to ask for now, marked as answered.
    pub(crate) fn take_question(&mut self) -> Option<RemoteQuestion> {
        let q = self.question.take()?;
        self.answered.push(q.call_id.clone());
        Some(q)
    }

    fn answer(&self) -> String {
        let arts: Vec<&str> = self
            .artifacts
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| !t.is_empty())
            .collect();
        if !arts.is_empty() {
            return arts.join("\n");
        }
        self.direct_answer
            .clone()
            .or_else(|| self.status_text.clone())
            .unwrap_or_default()
    }

    /// Whether the run ended on a task whose end came without its usage (a stream's final
    /// event that carries none, or a remote whose usage lands after its state): the task
    /// should be read once more for it.
    pub(crate) fn usage_unsettled(&self) -> bool {
        self.task_id.is_some() && self.state.is_some_and(A2aState::is_terminal) && !self.usage_final
    }

    pub(crate) fn outcome(self, call: &Call<'_>) -> RemoteOutcome {
        let state = self.state.unwrap_or(A2aState::Unknown);
        let reason = self
            .status_text
            .clone()
            .unwrap_or_else(|| "no reason given".into());
        let (end, output) = match state {
            A2aState::Completed => (EndState::Completed, self.answer()),
            // The remote asks a question: it is the answer; a follow-up continues the context.
            A2aState::InputRequired => (
                EndState::Completed,
                self.status_text.clone().unwrap_or_else(|| self.answer()),
            ),
            A2aState::Canceled => (EndState::Cancelled, self.answer()),
            A2aState::Failed => (
                EndState::Failed {
                    error: format!("remote agent at {} failed: {reason}", call.base),
                },
                self.answer(),
            ),
            A2aState::Rejected => (
                EndState::Failed {
                    error: format!("remote agent at {} rejected the task: {reason}", call.base),
                },
                String::new(),
            ),
            A2aState::AuthRequired => (
                EndState::Failed {
                    error: format!(
                        "remote agent at {} requires authentication: {reason}",
                        call.base
                    ),
                },
                String::new(),
            ),
            other => (
                EndState::Failed {
                    error: format!(
                        "remote agent at {} stopped answering while its task was {}",
                        call.base,
                        other.wire(Version::V03)
                    ),
                },
                self.answer(),
            ),
        };
        RemoteOutcome {
            state: end,
            output,
            usage: self.usage.unwrap_or_else(|| Usage::default().priced(None)),
            remote_task_id: self.task_id,
            context_id: self.context_id,
        }
    }
}
