//! The delegation tools a parent model is offered, per the configured surface.

use crate::runtime::{Inherited, SubagentRuntime, ToolSurface};
use crate::tools::agents::{AgentCloseTool, AgentListTool, AgentSendTool, AgentSpawnTool};
use crate::tools::task::TaskTool;
use crate::tools::task_control::{TaskCancelTool, TaskListTool, TaskOutputTool};
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
    reg
}
