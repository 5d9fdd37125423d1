//! The typed event stream every run produces; the CLI, the TUI, the server and tests consume it.

use crate::{ApprovalRequest, Usage};
use serde::{Deserialize, Serialize};

/// Which limit ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// The maximum number of model turns.
    MaxTurns,
    /// The wall-clock budget.
    WallClock,
    /// The token budget.
    Tokens,
    /// The budget in dollars.
    Cost,
    /// One model reply grew past its cap (`max_reply_bytes`, or the output tokens cadre
    /// counted past `max_output_tokens`); the stream was dropped.
    ReplyTooLong,
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitKind::MaxTurns => "max turns",
            LimitKind::WallClock => "time budget",
            LimitKind::Tokens => "token budget",
            LimitKind::Cost => "cost budget",
            LimitKind::ReplyTooLong => "reply too long",
        })
    }
}

/// Why a run's answer is not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IncompleteReason {
    /// The run used its last turn.
    MaxTurns,
    /// The token or dollar budget ran out.
    Budget,
    /// The wall-clock budget ran out.
    Time,
    /// One model reply was cut off at its size cap.
    ReplyTooLong,
    /// The run was cancelled.
    Cancelled,
    /// An error (of the provider, or internal) stopped the run.
    Error,
}

impl IncompleteReason {
    /// The wire name: `max_turns`, `budget`, `time`, `reply_too_long`, `cancelled`, `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            IncompleteReason::MaxTurns => "max_turns",
            IncompleteReason::Budget => "budget",
            IncompleteReason::Time => "time",
            IncompleteReason::ReplyTooLong => "reply_too_long",
            IncompleteReason::Cancelled => "cancelled",
            IncompleteReason::Error => "error",
        }
    }
}

impl std::fmt::Display for IncompleteReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended. Never "completed" unless the model really finished.
///
/// Serialized as `{"state": ..., "complete": bool, "reason"?: ...}` plus the variant's own
/// field (`error`, `limit`): whether the answer is complete is derived from the state, never
/// stored beside it, and every reader of the JSON sees it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EndState {
    /// The model answered without further tool calls.
    Completed,
    /// A provider or internal error stopped the run.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// The run was cancelled (Ctrl-C, a cancelled task, a cancelled parent).
    Cancelled,
    /// A limit was reached; the run's output is partial.
    LimitReached {
        /// Which limit.
        limit: LimitKind,
    },
}

impl EndState {
    /// Why the answer is not complete; `None` when the run completed.
    pub fn incomplete_reason(&self) -> Option<IncompleteReason> {
        match self {
            EndState::Completed => None,
            EndState::Failed { .. } => Some(IncompleteReason::Error),
            EndState::Cancelled => Some(IncompleteReason::Cancelled),
            EndState::LimitReached { limit } => Some(match limit {
                LimitKind::MaxTurns => IncompleteReason::MaxTurns,
                LimitKind::WallClock => IncompleteReason::Time,
                LimitKind::Tokens | LimitKind::Cost => IncompleteReason::Budget,
                LimitKind::ReplyTooLong => IncompleteReason::ReplyTooLong,
            }),
        }
    }

    /// Whether the run's answer is complete (the model finished).
    pub fn is_complete(&self) -> bool {
        self.incomplete_reason().is_none()
    }

    /// Short name: `completed`, `failed`, `cancelled`, `limit_reached`.
    pub fn name(&self) -> &'static str {
        match self {
            EndState::Completed => "completed",
            EndState::Failed { .. } => "failed",
            EndState::Cancelled => "cancelled",
            EndState::LimitReached { .. } => "limit_reached",
        }
    }
}

impl Serialize for EndState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let reason = self.incomplete_reason();
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("state", self.name())?;
        match self {
            EndState::Failed { error } => map.serialize_entry("error", error)?,
            EndState::LimitReached { limit } => map.serialize_entry("limit", limit)?,
            EndState::Completed | EndState::Cancelled => {}
        }
        map.serialize_entry("complete", &reason.is_none())?;
        if let Some(reason) = reason {
            map.serialize_entry("reason", &reason)?;
        }
        map.end()
    }
}

impl std::fmt::Display for EndState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndState::Completed => f.write_str("completed"),
            EndState::Failed { error } => write!(f, "failed: {error}"),
            EndState::Cancelled => f.write_str("cancelled"),
            EndState::LimitReached { limit } => write!(f, "limit reached ({limit})"),
        }
    }
}

/// What kind of progress a sub-agent update reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateKind {
    /// The child started.
    Start,
    /// The child started again, from its checkpoint, on another node than the one that
    /// ran it until that node was lost (instead of `start`). The text says where:
    /// `resumed on node <this> after node <lost> was lost`.
    Resumed,
    /// A piece of the child's text.
    Delta,
    /// A piece of the child's thinking.
    Thinking,
    /// The child started a tool call.
    ToolStart,
    /// A tool call of the child finished.
    ToolResult,
    /// The child finished.
    Done,
    /// The child failed or hit a limit.
    Error,
    /// The child was cancelled.
    Cancelled,
    /// The child compacted its conversation.
    Compaction,
}

/// Progress of a sub-agent, as seen by its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentUpdate {
    /// The sub-agent's name.
    pub agent: String,
    /// The background task id, when the child runs as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The child's session id.
    pub session_id: String,
    /// What happened.
    pub kind: UpdateKind,
    /// Text of the update (a delta, a result preview, an error).
    #[serde(default)]
    pub text: String,
    /// The tool involved, for tool updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Tokens the child used, on `done`, `error` and `cancelled` updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// How the child ended, on `done`, `error` and `cancelled` updates. Flattened, so an
    /// end update carries `state`, `complete`, `reason` (and `error` or `limit`) beside
    /// `text`, exactly as a run's `done` event does: readers need not parse the text.
    #[serde(flatten, default)]
    pub end: Option<EndState>,
}

/// Where one item of an agent's plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One item of an agent's plan.
// Its JSON Schema, doc comments included, is what `todo_write` offers the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct TodoItem {
    /// What to do.
    #[schemars(length(min = 1, max = TodoItem::MAX_CONTENT_CHARS))]
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
}

impl TodoItem {
    /// Characters of one item's `content` at most.
    pub const MAX_CONTENT_CHARS: usize = 500;
}

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The run started.
    RunStarted {
        /// The model the run uses.
        model: String,
    },
    /// A model turn is about to be requested.
    TurnStarted {
        /// 1-based turn number within the run.
        turn: u32,
    },
    /// A piece of the assistant's text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of the assistant's thinking.
    ThinkingDelta {
        /// The text.
        text: String,
    },
    /// A tool call starts.
    ToolStart {
        /// The call id.
        call_id: String,
        /// The tool name.
        tool: String,
        /// The raw JSON arguments.
        args: String,
        /// For a call that writes a whole file over an existing one: the text it replaces,
        /// read before the call runs (none for a new, large, binary or hidden file).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaces: Option<String>,
    },
    /// A tool call finished.
    ToolResult {
        /// The call id.
        call_id: String,
        /// The tool name.
        tool: String,
        /// What the model sees.
        output: String,
        /// Whether the call failed.
        is_error: bool,
    },
    /// A tool call waits for a human decision.
    ApprovalRequired {
        /// The request.
        request: ApprovalRequest,
    },
    /// Progress of a sub-agent.
    SubagentUpdate {
        /// The update.
        update: SubagentUpdate,
    },
    /// Usage of one model call made by the run or by a sub-agent on its behalf, with the
    /// run's running total (which includes its sub-agents).
    Usage {
        /// This call.
        usage: Usage,
        /// The run so far, sub-agents included.
        total: Usage,
        /// The sub-agent that made the call; none for the run's own calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent: Option<String>,
    },
    /// Results of finished background tasks were handed to the agent (before this turn).
    ResultsDelivered {
        /// The tasks whose results were delivered.
        task_ids: Vec<String>,
    },
    /// Older turns were summarised to fit the context window.
    Compaction {
        /// Messages replaced by the summary.
        replaced_messages: usize,
        /// Estimated tokens of the request before.
        tokens_before: u64,
        /// Estimated tokens of the request after.
        tokens_after: u64,
        /// The model that wrote the summary.
        model: String,
    },
    /// The agent's plan: its whole list after a `todo_write` call, or restated when a run
    /// continues a reopened session. Each agent (and each sub-agent) has its own.
    Todo {
        /// The items in the agent's order.
        todos: Vec<TodoItem>,
    },
    /// A non-fatal problem worth showing (a retried provider error, an injected notice).
    Notice {
        /// The text.
        message: String,
    },
    /// The run ended.
    Done {
        /// How it ended.
        #[serde(flatten)]
        state: EndState,
        /// The final (or partial) output.
        output: String,
        /// Model turns used.
        turns: u32,
        /// Total usage of the run, sub-agents included.
        usage: Usage,
    },
    /// A fatal error (also followed by `Done` with state `failed`).
    Error {
        /// The message.
        message: String,
    },
}

/// An event with the ids that say where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    /// The session the event belongs to.
    pub session_id: String,
    /// The agent: `main` or a sub-agent's name.
    pub agent: String,
    /// The background task, if the run is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The event itself.
    #[serde(flatten)]
    pub event: Event,
}

/// Where a run sends its events. Implementations must be cheap and must not block.
pub trait EventSink: Send + Sync {
    /// Deliver one event.
    fn emit(&self, event: EventEnvelope);
}

/// A sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: EventEnvelope) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_event_serialises_flat_with_state() {
        let env = EventEnvelope {
            session_id: "s-1".into(),
            agent: "main".into(),
            task_id: None,
            event: Event::Done {
                state: EndState::LimitReached {
                    limit: LimitKind::MaxTurns,
                },
                output: "partial".into(),
                turns: 3,
                usage: Usage::default(),
            },
        };
        let v: serde_json::Value = serde_json::to_value(&env).unwrap();
        assert_eq!(v["type"], "done");
        assert_eq!(v["state"], "limit_reached");
        assert_eq!(v["limit"], "max_turns");
        assert_eq!(v["agent"], "main");
        assert_eq!(v["complete"], false);
        assert_eq!(v["reason"], "max_turns");
        let back: EventEnvelope = serde_json::from_value(v).unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn end_states_say_whether_the_answer_is_complete_and_why_not() {
        let cases = [
            (EndState::Completed, None),
            (
                EndState::Failed { error: "x".into() },
                Some(IncompleteReason::Error),
            ),
            (EndState::Cancelled, Some(IncompleteReason::Cancelled)),
            (
                EndState::LimitReached {
                    limit: LimitKind::MaxTurns,
                },
                Some(IncompleteReason::MaxTurns),
            ),
            (
                EndState::LimitReached {
                    limit: LimitKind::WallClock,
                },
                Some(IncompleteReason::Time),
            ),
            (
                EndState::LimitReached {
                    limit: LimitKind::Tokens,
                },
                Some(IncompleteReason::Budget),
            ),
            (
                EndState::LimitReached {
                    limit: LimitKind::Cost,
                },
                Some(IncompleteReason::Budget),
            ),
        ];
        for (state, reason) in cases {
            assert_eq!(state.incomplete_reason(), reason, "{state}");
            let v = serde_json::to_value(&state).unwrap();
            assert_eq!(v["complete"], reason.is_none(), "{v}");
            assert_eq!(
                v.get("reason").and_then(|r| r.as_str()),
                reason.map(IncompleteReason::as_str),
                "{v}"
            );
            let back: EndState = serde_json::from_value(v).unwrap();
            assert_eq!(back, state);
        }
    }
}
