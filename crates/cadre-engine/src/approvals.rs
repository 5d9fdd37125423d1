//! Approval handlers for runs without a human at the keyboard.

use async_trait::async_trait;
use cadre_tools::ApprovalHandler;
use cadre_types::{ApprovalDecision, ApprovalRequest};

/// Approves every request (`--approval auto`).
#[derive(Debug, Default, Clone, Copy)]
pub struct AutoApprove;

#[async_trait]
impl ApprovalHandler for AutoApprove {
    async fn decide(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// Refuses every request in the name of a policy, with a fixed explanation the model sees.
#[derive(Debug, Clone)]
pub struct DenyAll {
    policy: String,
    feedback: String,
}

impl DenyAll {
    /// Refuse as `policy` (what the user would set to change it), telling the model `feedback`.
    pub fn new(policy: impl Into<String>, feedback: impl Into<String>) -> Self {
        Self {
            policy: policy.into(),
            feedback: feedback.into(),
        }
    }
}

#[async_trait]
impl ApprovalHandler for DenyAll {
    async fn decide(&self, _request: ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Refused {
            policy: self.policy.clone(),
            feedback: Some(self.feedback.clone()),
        }
    }
}

type Notice = Box<dyn Fn(&ApprovalRequest, bool) + Send + Sync>;

/// The handler of a headless run: answers every request the same way (`--approval
/// deny|auto`) and reports each one through a notice callback (the CLI prints a hint on stderr).
pub struct NonInteractiveApprovals {
    approve: bool,
    policy: String,
    notice: Option<Notice>,
}

impl std::fmt::Debug for NonInteractiveApprovals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NonInteractiveApprovals")
            .field("approve", &self.approve)
            .field("policy", &self.policy)
            .finish()
    }
}

impl NonInteractiveApprovals {
    /// Approve (`true`) or refuse (`false`) every request.
    pub fn new(approve: bool) -> Self {
        Self {
            approve,
            policy: "non-interactive run".into(),
            notice: None,
        }
    }

    /// Name the policy that refuses, as the user would change it (`headless run without
    /// --approval auto`); the model and the logs see it.
    pub fn policy(mut self, policy: impl Into<String>) -> Self {
        self.policy = policy.into();
        self
    }

    /// Call `f(request, approved)` for every request.
    pub fn with_notice(
        mut self,
        f: impl Fn(&ApprovalRequest, bool) + Send + Sync + 'static,
    ) -> Self {
        self.notice = Some(Box::new(f));
        self
    }
}

#[async_trait]
impl ApprovalHandler for NonInteractiveApprovals {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        if let Some(n) = &self.notice {
            n(&request, self.approve);
        }
        if self.approve {
            ApprovalDecision::AllowOnce
        } else {
            ApprovalDecision::Refused {
                policy: self.policy.clone(),
                feedback: Some(format!(
                    "{} needs approval and nobody can approve it in this non-interactive run; \
                     it was not run. Continue without it or explain what you would have done.",
                    request.tool
                )),
            }
        }
    }
}
