//! The approval policy of background children under `background_approvals = "deny"`: every
//! request is refused at once, as a policy answer, so no one is told a request waits.

use async_trait::async_trait;
use cadre_tools::ApprovalHandler;
use cadre_types::{ApprovalDecision, ApprovalRequest};

/// Denies every request of a background child (fail closed), with a reason it sees.
pub(crate) struct BackgroundDeny;

#[async_trait]
impl ApprovalHandler for BackgroundDeny {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        Self::refusal(&request)
    }

    fn policy_answer(&self, request: &ApprovalRequest) -> Option<ApprovalDecision> {
        Some(Self::refusal(request))
    }
}

impl BackgroundDeny {
    fn refusal(request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Refused {
            policy: "subagents.background_approvals = \"deny\"".into(),
            feedback: Some(format!(
                "{} needs approval, and background sub-agents cannot ask for it. Do without it and report what you could not do.",
                request.tool
            )),
        }
    }
}
