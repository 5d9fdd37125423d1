//! Approval requests waiting for the person, oldest first: the dialog shows the first; the
//! rest (escalated by background children, or asked in parallel) are counted in the status
//! bar. The answer goes back through the shell, which holds each request's reply channel.

use cadre_types::{ApprovalDecision, ApprovalRequest};
use std::collections::VecDeque;

/// Requests kept waiting at most; beyond this new ones are denied at once by the shell.
pub const MAX_PENDING: usize = 256;

/// The choices of the dialog, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Run this call.
    Once,
    /// Run it and allow the tool for the rest of the session.
    Session,
    /// Run it and write an allow rule to the project configuration.
    Always,
    /// Refuse.
    Deny,
    /// Refuse with a reason the model sees.
    DenyWithFeedback,
}

impl Choice {
    /// Every choice, in dialog order.
    pub const ALL: [Choice; 5] = [
        Choice::Once,
        Choice::Session,
        Choice::Always,
        Choice::Deny,
        Choice::DenyWithFeedback,
    ];

    /// The label, with its key in brackets.
    pub fn label(self) -> &'static str {
        match self {
            Choice::Once => "[y] once",
            Choice::Session => "[s] this session",
            Choice::Always => "[a] always",
            Choice::Deny => "[n] deny",
            Choice::DenyWithFeedback => "[f] deny with feedback",
        }
    }
}

/// One waiting request.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    /// The shell's handle for the reply.
    pub id: u64,
    /// The request.
    pub request: ApprovalRequest,
}

/// The queue and the dialog's state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Approvals {
    queue: VecDeque<PendingApproval>,
    /// The highlighted choice.
    pub choice: usize,
    /// The feedback being typed, after "deny with feedback".
    pub feedback: Option<String>,
}

/// The answer to one request, as the shell carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Which request.
    pub id: u64,
    /// The decision returned to the engine.
    pub decision: ApprovalDecision,
    /// An allow rule to write to the project configuration ("always").
    pub allow_rule: Option<String>,
}

impl Approvals {
    /// Queue a request.
    pub fn push(&mut self, p: PendingApproval) {
        self.queue.push_back(p);
    }

    /// The request the dialog shows.
    pub fn current(&self) -> Option<&PendingApproval> {
        self.queue.front()
    }

    /// How many wait (the shown one included).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when none waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Answer the shown request with `choice` (feedback for the last choice is collected
    /// first: this returns `None` and opens the feedback line).
    pub fn answer(&mut self, choice: Choice) -> Option<Answer> {
        if choice == Choice::DenyWithFeedback && self.feedback.is_none() {
            self.feedback = Some(String::new());
            return None;
        }
        let p = self.queue.pop_front()?;
        let feedback = self.feedback.take().filter(|f| !f.trim().is_empty());
        self.choice = 0;
        let (decision, allow_rule) = match choice {
            Choice::Once => (ApprovalDecision::AllowOnce, None),
            Choice::Session => (ApprovalDecision::AllowSession, None),
            Choice::Always => (ApprovalDecision::AllowSession, Some(allow_rule(&p.request))),
            Choice::Deny => (ApprovalDecision::Deny { feedback: None }, None),
            Choice::DenyWithFeedback => (ApprovalDecision::Deny { feedback }, None),
        };
        Some(Answer {
            id: p.id,
            decision,
            allow_rule,
        })
    }

    /// Drop a request that is no longer waited for (its run ended).
    pub fn remove(&mut self, id: u64) {
        self.queue.retain(|p| p.id != id);
    }
}

/// The permission rule that allows exactly this call again: `tool(subject)` with the
/// subject's glob characters escaped, or the bare tool when it has no subject.
pub fn allow_rule(req: &ApprovalRequest) -> String {
    match req.subject.as_deref() {
        Some(s) if !s.is_empty() => {
            let mut escaped = String::with_capacity(s.len());
            for c in s.chars() {
                if c == '\\' {
                    escaped.push_str("\\\\");
                } else if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') {
                    escaped.push('[');
                    escaped.push(c);
                    escaped.push(']');
                } else {
                    escaped.push(c);
                }
            }
            format!("{}({escaped})", req.tool)
        }
        _ => req.tool.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(subject: Option<&str>) -> ApprovalRequest {
        ApprovalRequest {
            call_id: "c1".into(),
            tool: "bash".into(),
            args: serde_json::json!({}),
            subject: subject.map(str::to_string),
            reason: "bash can change the workspace".into(),
            risk: cadre_types::RiskLevel::Medium,
            agent: "main".into(),
            task_id: None,
        }
    }

    #[test]
    fn always_writes_an_exact_rule_and_feedback_is_asked_first() {
        let mut a = Approvals::default();
        a.push(PendingApproval {
            id: 1,
            request: req(Some("rm *.tmp")),
        });
        a.push(PendingApproval {
            id: 2,
            request: req(None),
        });
        let first = a.answer(Choice::Always).unwrap();
        assert_eq!(first.allow_rule.as_deref(), Some("bash(rm [*].tmp)"));
        assert_eq!(first.decision, ApprovalDecision::AllowSession);
        assert!(a.answer(Choice::DenyWithFeedback).is_none());
        a.feedback = Some("use trash instead".into());
        let second = a.answer(Choice::DenyWithFeedback).unwrap();
        assert_eq!(
            second.decision,
            ApprovalDecision::Deny {
                feedback: Some("use trash instead".into())
            }
        );
        assert!(a.is_empty());
    }

    #[test]
    fn the_always_rule_matches_that_subject_only() {
        use cadre_engine::{ApprovalMode, PermissionPolicy, PermissionRules, PolicyDecision};
        let rule = allow_rule(&req(Some(r"cat src/*.py | wc -l [x] \n")));
        let policy = PermissionPolicy {
            mode: ApprovalMode::Ask,
            rules: PermissionRules::parse(&[rule], &[], &[]).unwrap(),
        };
        let decide = |s: &str| policy.decide("bash", Some(s), false, false);
        assert_eq!(
            decide(r"cat src/*.py | wc -l [x] \n"),
            PolicyDecision::Allow
        );
        assert!(matches!(
            decide("cat src/a.py | wc -l [x] \\n"),
            PolicyDecision::Ask(_)
        ));
        assert!(matches!(
            decide("cat src/*.py | wc -l x \\n"),
            PolicyDecision::Ask(_)
        ));
    }
}
