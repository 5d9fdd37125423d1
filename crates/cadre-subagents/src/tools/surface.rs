//! The delegation tools a parent model is offered, per the configured surface.

use crate::runtime::{Inherited, SubagentRuntime, ToolSurface};
use crate::tools::agents::{AgentCloseTool, AgentListTool, AgentSendTool, AgentSpawnTool};
use crate::tools::task::TaskTool;
use crate::tools::task_control::{TaskCancelTool, TaskListTool, TaskOutputTool};
use crate::tools::team::{
    BoardAddTool, BoardClaimTool, BoardDoneTool, BoardListTool, BoardReleaseTool, TeamHandle,
    TeamListTool, TeamSendTool,
};
use cadre_tools::{ToolInfo, ToolRegistry, TypedTool};
use std::sync::Arc;

/// What each delegation tool is, `task` first and then the lifecycle tools in the order
/// [`tools`] registers them. Every list of delegation tools (what a leaf child never
/// inherits, what the call-time guard refuses, the names definition files may use) is
/// derived from this; a test builds [`tools`] and fails when a tool it offers is missing.
pub const DELEGATION: [ToolInfo; 8] = [
    TaskTool::INFO,
    AgentSpawnTool::INFO,
    AgentSendTool::INFO,
    AgentListTool::INFO,
    AgentCloseTool::INFO,
    TaskOutputTool::INFO,
    TaskCancelTool::INFO,
    TaskListTool::INFO,
];

/// What each team tool is, in the order [`team_tools`] registers them. They are of the
/// delegation kind, so a member's own children never inherit them; they are given only to
/// a team's members (holding their seat) and, with `[subagents] teams` on, to every agent
/// that may delegate (a lead).
pub const TEAM: [ToolInfo; 7] = [
    TeamSendTool::INFO,
    BoardAddTool::INFO,
    BoardClaimTool::INFO,
    BoardDoneTool::INFO,
    BoardReleaseTool::INFO,
    BoardListTool::INFO,
    TeamListTool::INFO,
];

/// The team tools over `runtime` of the member holding `seat`, or of a lead (`None`).
pub fn team_tools(
    runtime: &Arc<SubagentRuntime>,
    seat: Option<Arc<crate::runtime::teams::TeamSeat>>,
) -> ToolRegistry {
    let h = TeamHandle::new(crate::runtime::RuntimeRef::new(runtime), seat);
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(TeamSendTool(h.clone())));
    reg.register(Arc::new(BoardAddTool(h.clone())));
    reg.register(Arc::new(BoardClaimTool(h.clone())));
    reg.register(Arc::new(BoardDoneTool(h.clone())));
    reg.register(Arc::new(BoardReleaseTool(h.clone())));
    reg.register(Arc::new(BoardListTool(h.clone())));
    reg.register(Arc::new(TeamListTool(h)));
    reg
}

/// The delegation tools over `runtime` for `surface`, for an agent that passes `inherited`
/// down to its children.
pub fn tools(
    runtime: &Arc<SubagentRuntime>,
    surface: ToolSurface,
    inherited: &Arc<Inherited>,
) -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    if matches!(surface, ToolSurface::Task | ToolSurface::Both) {
        reg.register(Arc::new(TaskTool::for_parent(runtime, inherited.clone())));
    }
    if matches!(surface, ToolSurface::Lifecycle | ToolSurface::Both) {
        reg.register(Arc::new(AgentSpawnTool::for_parent(
            runtime,
            inherited.clone(),
        )));
        reg.register(Arc::new(AgentSendTool::for_parent(
            runtime,
            inherited.clone(),
        )));
        reg.register(Arc::new(AgentListTool::new(runtime)));
        reg.register(Arc::new(AgentCloseTool::for_parent(
            runtime,
            inherited.clone(),
        )));
        reg.register(Arc::new(TaskOutputTool::new(runtime)));
        reg.register(Arc::new(TaskCancelTool::new(runtime)));
        reg.register(Arc::new(TaskListTool::new(runtime)));
    }
    if runtime.config().teams {
        for t in team_tools(runtime, None).iter() {
            reg.register(t.clone());
        }
    }
    reg
}
