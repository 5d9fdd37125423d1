//! The cap on one model reply: its bytes (text, thinking, tool-call arguments) and the
//! output tokens cadre counts itself, so that a model stuck in a loop, or a provider that
//! ignores `max_tokens`, cannot grow a reply without bound.

use crate::compaction::estimate_tokens;
use cadre_llm::StreamEvent;

/// What one reply may hold, and how much it holds so far.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplyCap {
    max_bytes: usize,
    /// The output tokens past which the reply is dropped: `max_output_tokens` plus a
    /// quarter, the margin of the four-bytes-a-token estimate (the provider, which was
    /// sent `max_output_tokens`, normally ends the reply first).
    max_tokens: Option<u64>,
    bytes: usize,
}

impl ReplyCap {
    /// A cap of `max_bytes`, and of `max_output_tokens` when set.
    pub(crate) fn new(max_bytes: usize, max_output_tokens: Option<u32>) -> Self {
        Self {
            max_bytes,
            max_tokens: max_output_tokens.map(|n| u64::from(n) + u64::from(n) / 4),
            bytes: 0,
        }
    }

    /// Count `event`; true when the reply is now past the cap.
    pub(crate) fn exceeded_by(&mut self, event: &StreamEvent) -> bool {
        let n = match event {
            StreamEvent::TextDelta(t) | StreamEvent::ThinkingDelta(t) => t.len(),
            StreamEvent::ToolCall(c) => c.id.len() + c.name.len() + c.arguments.len(),
            StreamEvent::ThinkingSignature(_)
            | StreamEvent::Usage(_)
            | StreamEvent::ResponseId(_)
            | StreamEvent::Restart
            | StreamEvent::Done { .. } => 0,
        };
        self.bytes = self.bytes.saturating_add(n);
        self.bytes > self.max_bytes
            || self
                .max_tokens
                .is_some_and(|max| estimate_tokens(self.bytes) > max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_counted_tokens_both_cap_a_reply() {
        let text = |n: usize| StreamEvent::TextDelta("x".repeat(n));
        let mut cap = ReplyCap::new(10, None);
        assert!(!cap.exceeded_by(&text(10)));
        assert!(cap.exceeded_by(&text(1)));

        // 100 tokens allowed, counted at four bytes a token with a quarter of margin.
        let mut cap = ReplyCap::new(1 << 20, Some(100));
        assert!(!cap.exceeded_by(&text(500)));
        assert!(cap.exceeded_by(&text(4)));

        let mut cap = ReplyCap::new(8, None);
        let call = StreamEvent::ToolCall(cadre_types::ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: "{\"a\":1}".into(),
        });
        assert!(cap.exceeded_by(&call));
    }
}
