//! Approval requests raised when a tool call needs a human decision, and the answers.

use serde::{Deserialize, Serialize};

/// How risky a tool call is judged to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// Reads only.
    Low,
    /// Changes the workspace.
    #[default]
    Medium,
    /// Could do damage outside the workspace or be hard to undo.
    High,
}

/// A question to the human (or the policy standing in for one): may this call run?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The tool call id.
    pub call_id: String,
    /// The tool name.
    pub tool: String,
    /// The arguments the tool would run with.
    pub args: serde_json::Value,
    /// What the call acts on (a command, a path), when the tool says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Why approval is needed.
    pub reason: String,
    /// How risky the call is.
    pub risk: RiskLevel,
    /// The agent asking: `main` or the sub-agent's name.
    pub agent: String,
    /// The background task the asking agent runs in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// For a call that writes a whole file over an existing one: the text it replaces, so
    /// the question can show the real change (none for a new, large, binary or hidden file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

/// The answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call only.
    AllowOnce,
    /// Run it, and allow this tool for the rest of the session without asking.
    AllowSession,
    /// A person refused; the optional feedback is shown to the model.
    Deny {
        /// Why, in the human's words, shown to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
    /// Refused by a policy standing in for a person: nobody was asked.
    Refused {
        /// Which policy, as the user would set it (`headless run without --approval auto`,
        /// `subagents.background_approvals = "deny"`).
        policy: String,
        /// What the model is told besides, e.g. to carry on without the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
}

impl ApprovalDecision {
    /// What the model sees for a refused call: who refused it and why; `None` when the
    /// decision lets the call run.
    pub fn refusal_text(&self) -> Option<String> {
        match self {
            ApprovalDecision::AllowOnce | ApprovalDecision::AllowSession => None,
            ApprovalDecision::Deny { feedback } => Some(match feedback {
                Some(f) if !f.is_empty() => format!("denied by the user: {f}"),
                _ => "denied by the user".to_string(),
            }),
            ApprovalDecision::Refused { policy, feedback } => Some(match feedback {
                Some(f) if !f.is_empty() => format!("refused by policy ({policy}): {f}"),
                _ => format!("refused by policy ({policy})"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_person_denies_as_the_user() {
        let person = ApprovalDecision::Deny {
            feedback: Some("not now".into()),
        };
        assert_eq!(
            person.refusal_text().as_deref(),
            Some("denied by the user: not now")
        );
        let policy = ApprovalDecision::Refused {
            policy: "serve.approvals = \"deny\"".into(),
            feedback: None,
        };
        let text = policy.refusal_text().unwrap_or_default();
        assert_eq!(text, "refused by policy (serve.approvals = \"deny\")");
        assert!(ApprovalDecision::AllowOnce.refusal_text().is_none());
        let json = serde_json::to_value(&policy).unwrap_or_default();
        assert_eq!(json["decision"], "refused");
    }
}
