//! Approval requests waiting for the person, oldest first: the dialog shows the first; the
//! rest (escalated by background children, or asked in parallel) are counted in the status
//! bar. The answer goes back through the shell, which holds each request's reply channel.

use cadre_tools::CommandLine;
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
    /// The allow rules to write to the project configuration, for "always" (empty for a
    /// command no allow rule can cover); `None` for the other choices.
    pub allow_rules: Option<Vec<String>>,
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
        let (decision, allow_rules) = match choice {
            Choice::Once => (ApprovalDecision::AllowOnce, None),
            Choice::Session => (ApprovalDecision::AllowSession, None),
            Choice::Always => (
                ApprovalDecision::AllowSession,
                Some(allow_rules(&p.request)),
            ),
            Choice::Deny => (ApprovalDecision::Deny { feedback: None }, None),
            Choice::DenyWithFeedback => (ApprovalDecision::Deny { feedback }, None),
        };
        Some(Answer {
            id: p.id,
            decision,
            allow_rules,
        })
    }

    /// Drop a request that is no longer waited for (its run ended).
    pub fn remove(&mut self, id: u64) {
        self.queue.retain(|p| p.id != id);
    }
}

/// The permission rules that allow exactly this call again: `tool(subject)` with the
/// subject's glob characters escaped, or the bare tool when it has no subject. Allow rules
/// match a `bash` line command by command, so a line gets one rule per simple command, and
/// none when no allow rule can cover it (it writes a file, or takes values at run time).
pub fn allow_rules(req: &ApprovalRequest) -> Vec<String> {
    let subject = req.subject.as_deref().filter(|s| !s.is_empty());
    let Some(subject) = subject else {
        return vec![req.tool.clone()];
    };
    let subjects = if req.tool == "bash" {
        let mut texts = CommandLine::parse(subject)
            .allow_texts()
            .unwrap_or_default();
        texts.dedup();
        texts
    } else {
        vec![subject.to_string()]
    };
    subjects
        .iter()
        .map(|s| format!("{}({})", req.tool, escape_glob(s)))
        .collect()
}

/// `text` as a glob matching only itself.
fn escape_glob(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
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
    escaped
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
            replaces: None,
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
        assert_eq!(
            first.allow_rules,
            Some(vec!["bash(rm [*].tmp)".to_string()])
        );
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
    fn the_always_rules_match_that_command_only() {
        use cadre_engine::{ApprovalMode, PermissionPolicy, PermissionRules, PolicyDecision};
        use cadre_tools::PermissionSubject;
        let line = r"cat src/*.py | wc -l [x] \n";
        let rules = allow_rules(&req(Some(line)));
        assert_eq!(rules, [r"bash(cat src/[*].py)", r"bash(wc -l [[]x[]] n)"]);
        let policy = PermissionPolicy {
            mode: ApprovalMode::Ask,
            rules: PermissionRules::parse(&rules, &[], &[]).unwrap(),
        };
        let decide = |s: &str| policy.decide("bash", &PermissionSubject::command(s), false, false);
        assert_eq!(decide(line), PolicyDecision::Allow);
        assert_eq!(decide("cat src/*.py"), PolicyDecision::Allow);
        for other in [
            r"cat src/a.py | wc -l [x] \n",
            r"cat src/*.py | wc -l x \n",
            r"cat src/*.py; rm -rf src",
        ] {
            assert!(matches!(decide(other), PolicyDecision::Ask(_)), "{other}");
        }
        // A line that writes a file cannot be allowed by a rule: "always" writes none.
        assert!(allow_rules(&req(Some("echo x > out"))).is_empty());
        assert_eq!(allow_rules(&req(None)), ["bash"]);
    }
}
