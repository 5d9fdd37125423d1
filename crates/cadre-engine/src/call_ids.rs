//! Tool-call ids made unique before a reply is recorded and sent back. Providers pair each
//! tool result with its call by id, but some servers number the calls of every reply from
//! zero (`call_0` each turn), repeat an id within one reply or send none; a repeated id
//! would pair results with the wrong call, or get the request refused. This is the one
//! place that fixes them, for every provider.

use cadre_types::{Message, ToolCall};
use std::collections::HashSet;

/// The base of the name given to a call that came without an id.
const UNNAMED: &str = "call";

/// Every tool-call id already in `history`.
fn used_ids(history: &[Message]) -> HashSet<&str> {
    let mut used = HashSet::new();
    for m in history {
        match m {
            Message::Assistant { tool_calls, .. } => {
                used.extend(tool_calls.iter().map(|c| c.id.as_str()));
            }
            Message::Tool { tool_call_id, .. } => {
                used.insert(tool_call_id.as_str());
            }
            _ => {}
        }
    }
    used
}

/// Rename each call whose id is empty or already used — earlier in `calls` or anywhere in
/// `history` — to `<id>_<n>`, with the smallest `n` from 2 that is free. Returns how many
/// were renamed.
pub(crate) fn make_unique(calls: &mut [ToolCall], history: &[Message]) -> usize {
    let used = used_ids(history);
    let mut taken: HashSet<String> = HashSet::new();
    let mut renamed = 0;
    for call in calls.iter_mut() {
        let clash = |id: &str| used.contains(id) || taken.contains(id);
        if call.id.is_empty() || clash(&call.id) {
            let base = if call.id.is_empty() {
                UNNAMED
            } else {
                call.id.as_str()
            };
            let fresh = (2u64..)
                .map(|n| format!("{base}_{n}"))
                .find(|id| !clash(id))
                .unwrap_or_default();
            tracing::debug!(from = %call.id, to = %fresh, "duplicate tool-call id renamed");
            call.id = fresh;
            renamed += 1;
        }
        taken.insert(call.id.clone());
    }
    renamed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "echo".into(),
            arguments: "{}".into(),
        }
    }

    fn ids(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn repeats_in_a_reply_and_in_the_history_are_renamed() {
        let history = vec![
            Message::user("go"),
            Message::Assistant {
                content: String::new(),
                thinking: None,
                thinking_signature: None,
                tool_calls: vec![call("call_0"), call("call_1")],
            },
            Message::Tool {
                tool_call_id: "call_0".into(),
                name: "echo".into(),
                content: "a".into(),
                is_error: false,
                images: Vec::new(),
            },
        ];
        let mut calls = vec![
            call("call_0"),
            call("call_0"),
            call("call_0_2"),
            call(""),
            call(""),
            call("fresh"),
        ];
        assert_eq!(make_unique(&mut calls, &history), 5);
        assert_eq!(
            ids(&calls),
            vec![
                "call_0_2",
                "call_0_3",
                "call_0_2_2",
                "call_2",
                "call_3",
                "fresh"
            ]
        );
        let mut unique = vec![call("a"), call("b")];
        assert_eq!(make_unique(&mut unique, &history), 0);
        assert_eq!(ids(&unique), vec!["a", "b"]);
    }
}
