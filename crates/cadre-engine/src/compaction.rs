//! Context compaction: when a conversation nears its model's context window, the older
//! turns are replaced by a summary the model writes, so the session goes on instead of
//! dying at the limit.
//!
//! What stays verbatim: the system prompt and the tool list (they are not messages, so the
//! head of the cached prefix survives), the latest `keep_recent_turns` turns, and every
//! tool call with its result (the cut is never between them). Live state that extensions
//! append (a background-task status) is appended again by them when the summarised part
//! held the last copy, because they read the history to decide what the model still needs.
//! The summary request carries no tools and only the summarisation prompt; it is a model
//! call of the run like any other: not sent once the run is stopped, its budget exhausted or
//! its observer refuses, not retried either then, and charged to the run's budget.

use crate::observer::TurnObserver;
use crate::run_loop::Emitter;
use crate::run_state::Stop;
use crate::session::{CompactionRecord, Session, SessionError};
use crate::stream::{Gate, call_unshown};
use cadre_llm::{ContextWindows, ModelRequest, ProviderError, RequestMetadata, ResolvedModel};
use cadre_tools::RunContext;
use cadre_types::{Event, LimitKind, Message, ToolDefinition};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Default share of the window at which a conversation is compacted.
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.8;
/// Default number of latest turns kept verbatim.
pub const DEFAULT_KEEP_RECENT_TURNS: usize = 4;
/// How much of one message the summariser sees; the rest is elided with a note (a huge
/// tool output must not make the summary request itself too long).
const MAX_RENDERED_MESSAGE: usize = 8_000;

/// The instructions of the summary request.
const SUMMARY_PROMPT: &str = "You compress the earlier part of a conversation between a user \
and an AI agent, so that the agent can continue the work from your summary alone. Write a \
concise summary in Markdown with these sections:\n\
- Goal: what the user asked for, and constraints they set.\n\
- Decisions: what was decided and why.\n\
- Facts: what was learned (file paths, names, commands, values, errors), exactly as written.\n\
- Sub-agent tasks: every task id with its agent, whether it finished, and its result or the \
gist of it (keep figures, paths and conclusions).\n\
- Open questions and next steps.\n\
Leave out pleasantries and anything superseded. Do not invent anything.";

/// The lead of the message that replaces the summarised turns.
const SUMMARY_LEAD: &str = "<conversation-summary>\nThe earlier part of this conversation was \
summarised to fit the context window:\n\n";

/// How and when an agent's conversation is compacted.
#[derive(Debug, Clone)]
pub struct CompactionPolicy {
    /// Compact on its own: before a request above the threshold, and once after the
    /// provider refused a request as too long. Off, only [`Agent::compact`]
    /// (`/compact`, `--compact-now`) compacts.
    ///
    /// [`Agent::compact`]: crate::Agent::compact
    pub automatic: bool,
    /// The context window of each model.
    pub windows: Arc<ContextWindows>,
    /// Compact before a request that would exceed this share of the window (0 < t ≤ 1).
    pub threshold: f64,
    /// The latest turns kept verbatim (at least 1).
    pub keep_recent_turns: usize,
    /// The model that writes summaries (none: the agent's own).
    pub model: Option<ResolvedModel>,
    /// The models whose unknown window was said already.
    pub unknown_windows: UnknownWindows,
}

/// The models a notice said have no known context window, shared by the clones of a
/// policy (a main agent and its children), so each model is named once. It holds one entry
/// per model used, which the configuration bounds.
#[derive(Debug, Clone, Default)]
pub struct UnknownWindows(Arc<Mutex<HashSet<String>>>);

impl UnknownWindows {
    /// True the first time it is asked about `spec`.
    pub fn first(&self, spec: &str) -> bool {
        self.0
            .lock()
            .map(|mut said| said.insert(spec.to_string()))
            .unwrap_or(false)
    }
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self {
            automatic: true,
            windows: Arc::new(ContextWindows::new()),
            threshold: DEFAULT_COMPACTION_THRESHOLD,
            keep_recent_turns: DEFAULT_KEEP_RECENT_TURNS,
            model: None,
            unknown_windows: UnknownWindows::default(),
        }
    }
}

impl CompactionPolicy {
    /// The token count above which a request of `model` is compacted first; `None` when
    /// its window is unknown or compaction is not automatic.
    pub fn limit_for(&self, model: &ResolvedModel) -> Option<u64> {
        if !self.automatic {
            return None;
        }
        let window = self.windows.window(&model.spec, &model.model)?;
        let share = self.threshold.clamp(0.05, 1.0);
        Some((window as f64 * share) as u64)
    }
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionReport {
    /// Messages replaced by the summary.
    pub replaced_messages: usize,
    /// Estimated tokens of the request before.
    pub tokens_before: u64,
    /// Estimated tokens of the request after.
    pub tokens_after: u64,
    /// The model that wrote the summary.
    pub model: String,
}

/// Why a compaction did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// Everything in the conversation is among the turns kept verbatim.
    #[error("nothing to compact: the conversation has no turns older than the latest {0}")]
    NothingToCompact(usize),
    /// The summary call failed.
    #[error("the summary call failed: {0}")]
    Provider(#[from] ProviderError),
    /// The model returned an empty summary.
    #[error("the model returned an empty summary")]
    EmptySummary,
    /// A hook refused this compaction.
    #[error("a PreCompact hook blocked it: {0}")]
    Blocked(String),
    /// The run was stopped before or during the summary call (cancelled, or its observer
    /// refused the model step).
    #[error("cancelled")]
    Cancelled,
    /// The budget was used up before or during the summary call.
    #[error("the {0} is used up")]
    LimitReached(LimitKind),
    /// The compacted session could not be saved.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Estimated tokens of `bytes` of text (about four bytes a token for English and code).
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// What an image counts for in the estimate: as many bytes as the most tokens providers
/// charge for one image (about 1 600 for Anthropic's largest unscaled size).
const IMAGE_BYTES: usize = 4 * 1600;

/// The bytes of a message that reach the model.
fn message_bytes(m: &Message) -> usize {
    match m {
        Message::Assistant {
            content,
            thinking,
            tool_calls,
            ..
        } => {
            content.len()
                + thinking.as_ref().map_or(0, String::len)
                + tool_calls
                    .iter()
                    .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                    .sum::<usize>()
        }
        Message::Tool {
            tool_call_id,
            name,
            content,
            images,
            ..
        } => tool_call_id.len() + name.len() + content.len() + images.len() * IMAGE_BYTES,
        other => other.text().len(),
    }
}

/// Estimated tokens of a request made of `fixed_bytes` (system prompt, tools) and
/// `messages`.
pub(crate) fn estimate_request(fixed_bytes: usize, messages: &[Message]) -> u64 {
    estimate_tokens(fixed_bytes + messages.iter().map(message_bytes).sum::<usize>())
}

/// The bytes of the system prompt and tool list.
pub(crate) fn fixed_bytes(system: &str, tools: &[ToolDefinition]) -> usize {
    system.len()
        + tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>()
}

/// The size of the conversation as the model counts it: the last call's reported usage,
/// plus an estimate of what was appended since.
#[derive(Debug, Default)]
pub(crate) struct ContextMeter {
    /// Tokens the provider reported for the conversation of the first `len` messages.
    reported: Option<(u64, usize)>,
}

impl ContextMeter {
    /// Remember the usage of a call whose reply made the conversation `len` messages long.
    pub(crate) fn record(&mut self, usage: &cadre_types::Usage, len: usize) {
        if usage.total() > 0 {
            self.reported = Some((usage.total(), len));
        }
    }

    /// Forget the reported size (the conversation was rewritten).
    pub(crate) fn reset(&mut self) {
        self.reported = None;
    }

    /// The estimated tokens of a request with `messages`.
    pub(crate) fn estimate(&self, fixed_bytes: usize, messages: &[Message]) -> u64 {
        match self.reported {
            Some((tokens, len)) if len <= messages.len() => {
                tokens + estimate_request(0, &messages[len..])
            }
            _ => estimate_request(fixed_bytes, messages),
        }
    }
}

/// Where the kept part of `messages` starts when the latest `keep` turns stay: at the
/// first message of the `keep`-th latest turn (a turn is the user or injected messages
/// before a reply, the reply, and the results of its tool calls). `None` when there is
/// nothing older to summarise.
pub(crate) fn split_point(messages: &[Message], keep: usize) -> Option<usize> {
    let replies: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::Assistant { .. }))
        .map(|(i, _)| i)
        .collect();
    let keep = keep.max(1);
    let mut cut = if replies.len() >= keep {
        replies[replies.len() - keep]
    } else {
        // Fewer replies than turns to keep: only what precedes the first reply could go,
        // and that is the turn's own input.
        return None;
    };
    // The turn's input (a prompt, injected messages) stays with its reply.
    while cut > 0 && matches!(messages[cut - 1], Message::User { .. }) {
        cut -= 1;
    }
    // A cut always lands after a complete turn: what precedes it ends with a reply or the
    // results of its calls, never inside a call/result pair.
    (cut > 0).then_some(cut)
}

/// One message of the summarised part, as plain text for the summariser (no tool-call
/// pairing to respect, and no provider rules about roles).
fn render_message(m: &Message) -> String {
    let (head, body) = match m {
        Message::System { content } => ("[system]".to_string(), content.as_str()),
        Message::User { content } => ("[user]".to_string(), content.as_str()),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let mut head = "[assistant]".to_string();
            for c in tool_calls {
                head.push_str(&format!(
                    "\n[tool call {} {}({})]",
                    c.id, c.name, c.arguments
                ));
            }
            (head, content.as_str())
        }
        Message::Tool {
            tool_call_id,
            name,
            is_error,
            content,
            ..
        } => (
            format!(
                "[tool result {tool_call_id} {name}{}]",
                if *is_error { ", error" } else { "" }
            ),
            content.as_str(),
        ),
    };
    format!("{head}\n{}\n\n", elide(body, MAX_RENDERED_MESSAGE))
}

/// The summarised part for the summariser, at most `max_bytes` long when its window is
/// known: an earlier summary at the head is kept, then as many of the latest messages as
/// fit, with a note of how many earlier ones were left out.
fn render_transcript(messages: &[Message], max_bytes: Option<usize>) -> String {
    let rendered: Vec<String> = messages.iter().map(render_message).collect();
    let total: usize = rendered.iter().map(String::len).sum();
    let Some(max) = max_bytes.filter(|max| total > *max) else {
        return rendered.concat();
    };
    let head = usize::from(
        messages
            .first()
            .is_some_and(|m| m.text().starts_with(SUMMARY_LEAD)),
    );
    let mut used: usize = rendered[..head].iter().map(String::len).sum();
    let mut from = rendered.len();
    while from > head {
        let next = rendered[from - 1].len();
        if used + next > max {
            break;
        }
        used += next;
        from -= 1;
    }
    let mut out = rendered[..head].concat();
    out.push_str(&format!(
        "[{} earlier messages left out: the summariser's context window cannot hold them]\n\n",
        from - head
    ));
    out.push_str(&rendered[from..].concat());
    out
}

/// `text`, or its head with a note of how much was left out.
fn elide(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[… {} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
    .into()
}

/// What one compaction works with.
pub(crate) struct Compaction<'a> {
    /// The agent's model (the summariser when the policy names none).
    pub model: &'a ResolvedModel,
    pub policy: &'a CompactionPolicy,
    pub run: &'a Arc<RunContext>,
    /// The bytes of the system prompt and tools of the run's requests.
    pub fixed_bytes: usize,
    /// Extra instructions (`/compact keep the API decisions`).
    pub instructions: Option<&'a str>,
    /// Asked for by the user (`/compact`), not by a full context window.
    pub manual: bool,
    /// The run's hooks, asked before each compaction whether it may happen.
    pub hooks: &'a [Arc<dyn crate::ToolHook>],
}

impl Compaction<'_> {
    /// Summarise the older turns of `session` and replace them with the summary (recorded
    /// in the transcript). Emits a `compaction` event and charges the summary call to
    /// `stop`'s budget. The summary call is gated like a turn's: `stop` and `observer`
    /// may refuse it or its retries.
    pub(crate) async fn run(
        &self,
        session: &mut Session,
        stop: &Stop,
        observer: &dyn TurnObserver,
    ) -> Result<CompactionReport, CompactionError> {
        let keep = self.policy.keep_recent_turns.max(1);
        let cut =
            split_point(session.messages(), keep).ok_or(CompactionError::NothingToCompact(keep))?;
        for hook in self.hooks {
            if let Some(reason) = hook
                .pre_compact(self.manual, self.instructions, self.run)
                .await
            {
                return Err(CompactionError::Blocked(reason));
            }
        }
        let tokens_before = estimate_request(self.fixed_bytes, session.messages());
        let summariser = self.policy.model.as_ref().unwrap_or(self.model);
        let request = self.request(summariser, &session.messages()[..cut]);
        let emitter = Emitter::new(Arc::clone(self.run));
        let gate = Gate {
            observer,
            run: self.run,
        };
        let Some(reply) = call_unshown(summariser, request, &emitter, stop, gate).await else {
            return Err(match stop.budget.exceeded() {
                Some(limit) => CompactionError::LimitReached(limit),
                None => CompactionError::Cancelled,
            });
        };
        let reply = reply?;
        let summary = reply.text.trim();
        if summary.is_empty() {
            return Err(CompactionError::EmptySummary);
        }
        let message = Message::user(format!("{SUMMARY_LEAD}{summary}\n</conversation-summary>"));
        let after: Vec<Message> = std::iter::once(message.clone())
            .chain(session.messages()[cut..].iter().cloned())
            .collect();
        let report = CompactionReport {
            replaced_messages: cut,
            tokens_before,
            tokens_after: estimate_request(self.fixed_bytes, &after),
            model: summariser.spec.clone(),
        };
        session.compact(CompactionRecord {
            replaced: cut,
            summary: message,
            tokens_before: report.tokens_before,
            tokens_after: report.tokens_after,
            model: report.model.clone(),
        })?;
        cadre_tools::otel::compaction_event(
            report.replaced_messages,
            report.tokens_before,
            report.tokens_after,
        );
        emitter.emit(Event::Compaction {
            replaced_messages: report.replaced_messages,
            tokens_before: report.tokens_before,
            tokens_after: report.tokens_after,
            model: report.model.clone(),
        });
        Ok(report)
    }

    /// The most bytes of transcript the summariser's window takes (when it is known): about
    /// half of it, leaving room for the instructions and the summary it writes.
    fn transcript_budget(&self, summariser: &ResolvedModel) -> Option<usize> {
        let window = self
            .policy
            .windows
            .window(&summariser.spec, &summariser.model)?;
        usize::try_from(window / 2)
            .ok()
            .map(|t| t.saturating_mul(4))
    }

    fn request(&self, summariser: &ResolvedModel, old: &[Message]) -> ModelRequest {
        let mut system = SUMMARY_PROMPT.to_string();
        if let Some(extra) = self.instructions.map(str::trim).filter(|s| !s.is_empty()) {
            system.push_str("\n\nThe user asks in particular: ");
            system.push_str(extra);
        }
        ModelRequest {
            model: summariser.model.clone(),
            system,
            messages: vec![Message::user(format!(
                "Summarise this conversation:\n\n{}",
                render_transcript(old, self.transcript_budget(summariser))
            ))],
            tools: Vec::new(),
            max_output_tokens: None,
            max_reply_bytes: None,
            temperature: None,
            metadata: RequestMetadata {
                agent: self.run.agent.clone(),
                session_id: self.run.session_id.clone(),
                // Not the conversation's cache: this prefix is never sent again.
                cache_key: String::new(),
            },
            // Set by the call (it answers the provider's questions between attempts).
            retry_gate: cadre_llm::RetryGate::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::ToolCall;

    fn call(id: &str) -> Message {
        Message::Assistant {
            content: String::new(),
            thinking: None,
            thinking_signature: None,
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "echo".into(),
                arguments: "{}".into(),
            }],
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "echo".into(),
            content: "out".into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    #[test]
    fn the_cut_keeps_the_latest_turns_with_their_inputs_and_never_splits_a_pair() {
        let m = vec![
            Message::user("go"),                // 0
            call("a"),                          // 1
            result("a"),                        // 2
            Message::user("<status>"),          // 3
            call("b"),                          // 4
            result("b"),                        // 5
            call("c"),                          // 6
            result("c"),                        // 7
            Message::user("<results>"),         // 8
            Message::assistant("final answer"), // 9
        ];
        // One turn kept: the final answer with the results injected before it.
        assert_eq!(split_point(&m, 1), Some(8));
        // Two: from the call at 6 (its predecessor is a result, a complete pair).
        assert_eq!(split_point(&m, 2), Some(6));
        // Three: the status injected before the call at 4 goes with it.
        assert_eq!(split_point(&m, 3), Some(3));
        // Four: the first turn with its prompt, that is everything: nothing to summarise.
        assert_eq!(split_point(&m, 4), None);
        assert_eq!(split_point(&m, 9), None);
        for keep in 1..4 {
            let cut = split_point(&m, keep).unwrap();
            assert!(!matches!(m[cut], Message::Tool { .. }), "keep {keep}");
        }
    }

    #[test]
    fn the_meter_adds_an_estimate_of_what_came_after_the_reported_usage() {
        let m = vec![
            Message::user("x".repeat(400)),
            Message::assistant("y".repeat(40)),
        ];
        let mut meter = ContextMeter::default();
        assert_eq!(meter.estimate(400, &m), 210);
        let usage = cadre_types::Usage {
            input_tokens: 150,
            output_tokens: 12,
            ..Default::default()
        };
        meter.record(&usage, 1);
        assert_eq!(meter.estimate(400, &m), 162 + 10);
        meter.reset();
        assert_eq!(meter.estimate(400, &m), 210);
    }

    #[test]
    fn a_transcript_longer_than_the_summarisers_window_keeps_the_earlier_summary_and_the_latest() {
        let mut messages = vec![Message::user(format!("{SUMMARY_LEAD}old facts"))];
        for i in 0..50 {
            messages.push(Message::user(format!("question {i} {}", "x".repeat(900))));
            messages.push(Message::assistant(format!("answer {i}")));
        }
        let whole = render_transcript(&messages, None);
        assert_eq!(render_transcript(&messages, Some(whole.len())), whole);
        let cut = render_transcript(&messages, Some(10_000));
        assert!(cut.len() <= 10_200, "{}", cut.len());
        assert!(cut.starts_with("[user]\n<conversation-summary>"), "{cut}");
        assert!(cut.contains("old facts"));
        assert!(cut.contains("earlier messages left out"), "{cut}");
        assert!(cut.ends_with("[assistant]\nanswer 49\n\n"), "{cut}");
        assert!(!cut.contains("question 0 "));
    }

    #[test]
    fn huge_messages_are_elided_for_the_summariser_on_a_char_boundary() {
        let text = "é".repeat(10_000);
        let shown = elide(&text, MAX_RENDERED_MESSAGE);
        assert!(shown.len() < MAX_RENDERED_MESSAGE + 100);
        assert!(
            shown.ends_with("more bytes not shown]"),
            "{}",
            &shown[shown.len() - 40..]
        );
    }
}
