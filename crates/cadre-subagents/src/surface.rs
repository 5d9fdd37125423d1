//! The delegation tools a parent model is offered, per the configured surface.

use crate::agent_tools::{AgentListTool, AgentSendTool, AgentSpawnTool};
use crate::runtime::{SubagentRuntime, ToolSurface};
use crate::task_tool::TaskTool;
use crate::task_tools::{TaskCancelTool, TaskListTool, TaskOutputTool};
use cadre_tools::ToolRegistry;
use std::sync::Arc;

/// The delegation tools over `runtime` for `surface`.
pub fn tools(runtime: &Arc<SubagentRuntime>, surface: ToolSurface) -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    if matches!(surface, ToolSurface::Task | ToolSurface::Both) {
        reg.register(Arc::new(TaskTool::new(runtime.clone())));
    }
    if matches!(surface, ToolSurface::Lifecycle | ToolSurface::Both) {
        reg.register(Arc::new(AgentSpawnTool::new(runtime.clone())));
        reg.register(Arc::new(AgentSendTool::new(runtime.clone())));
        reg.register(Arc::new(AgentListTool::new(runtime.clone())));
        reg.register(Arc::new(TaskOutputTool::new(runtime.clone())));
        reg.register(Arc::new(TaskCancelTool::new(runtime.clone())));
        reg.register(Arc::new(TaskListTool::new(runtime.clone())));
    }
    reg
}
