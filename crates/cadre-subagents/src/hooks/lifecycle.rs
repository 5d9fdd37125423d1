//! The hook events outside a tool call's before and after: `PermissionRequest` when an
//! approval is about to be asked, `Notification` when one waits, `PreCompact` before a
//! compaction, `SessionEnd` when a session's run, REPL or TUI ends, and a team board's
//! `TaskCreated` / `TaskCompleted` and `TeammateIdle`.

use super::claude::ClaudeHooks;
use super::event::HookEvent;
use super::matcher::tool_spellings;
use cadre_engine::ToolCallInfo;
use cadre_tools::RunContext;
use cadre_types::{ApprovalDecision, ApprovalRequest};
use serde_json::{Map, Value, json};

/// The policy named when a `PermissionRequest` hook refuses a call.
pub const PERMISSION_HOOK_POLICY: &str = "a PermissionRequest hook";

/// `PermissionRequest`: the hooks' `decision.behavior`, as an answer to `request` (a deny
/// from any handler wins); `None` when none gave one.
pub(super) async fn permission_request(
    h: &ClaudeHooks,
    request: &ApprovalRequest,
    run: &RunContext,
) -> Option<ApprovalDecision> {
    let call = ToolCallInfo {
        call_id: request.call_id.clone(),
        tool: request.tool.clone(),
        args: request.args.clone(),
    };
    let mut input = h.tool_input(HookEvent::PermissionRequest, &call, run);
    // cadre offers no "always allow" rules to pick from here.
    input.insert("permission_suggestions".into(), json!([]));
    let names = tool_spellings(&request.tool);
    let o = h
        .fire(HookEvent::PermissionRequest, &names, input, run)
        .await;
    match o.behavior? {
        (true, _) => Some(ApprovalDecision::AllowOnce),
        (false, message) => Some(ApprovalDecision::Refused {
            policy: PERMISSION_HOOK_POLICY.into(),
            feedback: Some(message).filter(|m| !m.trim().is_empty()),
        }),
    }
}

/// `Notification` of `kind` (its matcher) with `message`; it decides nothing.
pub(super) async fn notification(h: &ClaudeHooks, kind: &str, message: &str, run: &RunContext) {
    let mut input = h.base(HookEvent::Notification, run);
    input.insert("message".into(), json!(message));
    input.insert("notification_type".into(), json!(kind));
    let _ = h.fire(HookEvent::Notification, &[kind], input, run).await;
}

/// `PreCompact`: the reason a hook blocks this compaction, if one does.
pub(super) async fn pre_compact(
    h: &ClaudeHooks,
    manual: bool,
    instructions: Option<&str>,
    run: &RunContext,
) -> Option<String> {
    let trigger = if manual { "manual" } else { "auto" };
    let mut input = h.base(HookEvent::PreCompact, run);
    input.insert("trigger".into(), json!(trigger));
    input.insert(
        "custom_instructions".into(),
        json!(instructions.unwrap_or("")),
    );
    h.fire(HookEvent::PreCompact, &[trigger], input, run)
        .await
        .block
}

/// A board item as the `TaskCreated` / `TaskCompleted` hooks are told of it.
#[derive(Debug, Clone, Copy)]
pub struct BoardTask<'a> {
    /// The team's name.
    pub team: &'a str,
    /// Who adds or finishes it: a member's label, or `lead`.
    pub by: &'a str,
    /// Its number (none yet when it is being added).
    pub id: Option<u64>,
    /// Its title.
    pub title: &'a str,
    /// Its detail.
    pub detail: Option<&'a str>,
}

impl ClaudeHooks {
    /// `SessionEnd` of `session_id`, ended for `reason` (`clear`, `logout`,
    /// `prompt_input_exit`, `other`); it cannot stop anything. What went wrong with its
    /// handlers, for the caller to show.
    pub async fn session_end(&self, session_id: &str, reason: &str) -> Vec<String> {
        let mut input = self.session_base(HookEvent::SessionEnd, session_id);
        input.insert("reason".into(), json!(reason));
        self.fire_quietly(HookEvent::SessionEnd, &[reason], input)
            .await
            .warnings
    }

    /// `TaskCreated` before `task` joins the board: the reason a hook refuses it, if one
    /// does.
    pub async fn task_created(&self, task: BoardTask<'_>, run: &RunContext) -> Option<String> {
        let input = self.board_input(HookEvent::TaskCreated, task, run);
        self.fire(HookEvent::TaskCreated, &[], input, run)
            .await
            .block
    }

    /// `TaskCompleted` before `task` is marked done with `result`: the reason a hook
    /// refuses it, if one does.
    pub async fn task_completed(
        &self,
        task: BoardTask<'_>,
        result: &str,
        run: &RunContext,
    ) -> Option<String> {
        let mut input = self.board_input(HookEvent::TaskCompleted, task, run);
        input.insert("task_result".into(), json!(result));
        self.fire(HookEvent::TaskCompleted, &[], input, run)
            .await
            .block
    }

    /// `TeammateIdle`: member `label` of `team`, running as `run`, finished its task.
    pub async fn teammate_idle(&self, team: &str, label: &str, run: &RunContext) {
        let mut input = self.base(HookEvent::TeammateIdle, run);
        input.insert("teammate_name".into(), json!(label));
        input.insert("team_name".into(), json!(team));
        let _ = self.fire(HookEvent::TeammateIdle, &[], input, run).await;
    }

    fn board_input(
        &self,
        event: HookEvent,
        task: BoardTask<'_>,
        run: &RunContext,
    ) -> Map<String, Value> {
        let mut m = self.base(event, run);
        if let Some(id) = task.id {
            m.insert("task_id".into(), json!(id.to_string()));
        }
        m.insert("task_subject".into(), json!(task.title));
        if let Some(d) = task.detail {
            m.insert("task_description".into(), json!(d));
        }
        m.insert("teammate_name".into(), json!(task.by));
        m.insert("team_name".into(), json!(task.team));
        m
    }
}
