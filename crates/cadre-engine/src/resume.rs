//! Continuing a run from a copy of its conversation kept elsewhere (a checkpoint): what it
//! had spent is counted again, its completed turns count against its turn limit, and the
//! tool calls of its last reply that have no result are settled before the next model call.
//! A call that only reads, or whose tool is idempotent, runs again; any other may have acted
//! already, so the model is told its outcome is unknown rather than having it run twice.

use cadre_tools::ToolRegistry;
use cadre_types::{Message, ToolCall, Usage};
use std::collections::HashSet;

/// How a run takes up a conversation that an earlier run (of another process, say) left.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    /// What the earlier run had spent: charged to this run's budget before it starts, so
    /// its limits continue from the recorded totals.
    pub spent: Usage,
    /// Why the earlier run's calls in flight stopped, as the model reads it:
    /// `interrupted: outcome unknown (<why>)`.
    pub why: String,
}

/// The turns the conversation records: one per model reply.
pub(crate) fn completed_turns(history: &[Message]) -> u32 {
    let n = history
        .iter()
        .filter(|m| matches!(m, Message::Assistant { .. }))
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The text of the conversation's last message when it is a model reply that asked for
/// nothing: the run that wrote it had answered.
pub(crate) fn final_answer(history: &[Message]) -> Option<&str> {
    match history.last() {
        Some(Message::Assistant {
            content,
            tool_calls,
            ..
        }) if tool_calls.is_empty() => Some(content),
        _ => None,
    }
}

/// The calls of the last model reply that have no result after it, in call order.
pub(crate) fn unanswered(history: &[Message]) -> Vec<ToolCall> {
    let Some(last) = history
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &history[last] else {
        return Vec::new();
    };
    let answered: HashSet<&str> = history[last + 1..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    tool_calls
        .iter()
        .filter(|c| !answered.contains(c.id.as_str()))
        .cloned()
        .collect()
}

/// True when `call` may run again: its tool only reads or is idempotent. An unknown tool
/// "runs" again too: the dispatcher answers it with the same error it got the first time.
pub(crate) fn may_rerun(tools: &ToolRegistry, call: &ToolCall) -> bool {
    tools
        .get(&call.name)
        .is_none_or(|t| t.is_read_only() || t.is_idempotent())
}

/// The result the model gets for a call that may have acted before its run was lost.
pub(crate) fn interrupted(call: &ToolCall, why: &str) -> Message {
    Message::Tool {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        content: format!("interrupted: outcome unknown ({why})"),
        is_error: true,
        images: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "bash".into(),
            content: "ok".into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    fn reply(calls: Vec<ToolCall>) -> Message {
        Message::Assistant {
            content: String::new(),
            thinking: None,
            thinking_signature: None,
            tool_calls: calls,
        }
    }

    #[test]
    fn only_the_last_replys_calls_without_a_result_are_unanswered() {
        let mut h = vec![Message::user("go"), reply(vec![call("a")]), result("a")];
        assert!(unanswered(&h).is_empty());
        h.push(reply(vec![call("b"), call("c")]));
        let ids = |h: &[Message]| unanswered(h).into_iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(ids(&h), ["b", "c"]);
        h.push(result("c"));
        assert_eq!(ids(&h), ["b"]);
        assert_eq!(completed_turns(&h), 2);
        assert!(unanswered(&[Message::user("go")]).is_empty());
    }
}
