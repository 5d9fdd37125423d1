//! The MCP servers a definition declares (`mcpServers`), for its children: asked of the MCP
//! layer through [`AgentServers`](crate::AgentServers) before a child is built, with the
//! trust rule: `mcpServers` widens a child beyond its parent's tools and may run a command
//! written in the file, so only files the file tools cannot write may use it, the rule
//! `.mcp.json` lives by.

use super::{Parent, SubagentRuntime};
use crate::definitions::definition::{AgentDefinition, DefinitionSource};
use crate::{ServerLease, ServerRequest};
use cadre_types::{Event, EventEnvelope};
use std::sync::Arc;

impl SubagentRuntime {
    /// The lease on `agent`'s own MCP servers for a child about to be built under `parent`
    /// (none when it declares none), for [`create_child_holding`](Self::create_child_holding).
    /// What cannot be provided is a notice of the parent's run.
    pub async fn own_servers(&self, agent: &str, parent: &Parent) -> Option<Arc<ServerLease>> {
        let def = self.registry.get(agent)?;
        if def.mcp_servers.is_empty() {
            return None;
        }
        let warn = |message: String| {
            parent.run.events.emit(EventEnvelope {
                session_id: parent.run.session_id.clone(),
                agent: parent.run.agent.clone(),
                task_id: parent.run.task_id.clone(),
                event: Event::Notice {
                    message: format!("warning: agent {}: {message}", def.name),
                },
            });
        };
        if def.remote.is_some() {
            warn("`mcpServers` ignored: a remote agent has the tools its server gives it".into());
            return None;
        }
        let Some(servers) = &self.cfg.agent_servers else {
            warn("`mcpServers` ignored: MCP servers are not available here".into());
            return None;
        };
        let origin = def.source.to_string();
        if !self.may_declare_servers(def) {
            warn(format!(
                "`mcpServers` ignored: file tools can write {origin}; MCP servers are taken only from agent files they cannot write (.cadre/agents/, .claude/agents/, the user's agent directory), as from .mcp.json"
            ));
            return None;
        }
        let lease = servers
            .acquire(ServerRequest {
                agent: &def.name,
                origin: &origin,
                servers: &def.mcp_servers,
            })
            .await;
        for w in &lease.warnings {
            warn(w.clone());
        }
        Some(Arc::new(lease))
    }

    /// Whether `def` may use `mcpServers`: a definition made in code, or a file the file
    /// tools cannot write, judged where it resolves to (links followed): outside the
    /// workspace, or on a protected path inside it (`.cadre/`, `.claude/`, ...,
    /// `protected_paths`), like `.mcp.json`. Not `subagents/` or `.gemini/agents/`, which
    /// the file tools can write.
    fn may_declare_servers(&self, def: &AgentDefinition) -> bool {
        let DefinitionSource::File(path) = &def.source else {
            return true;
        };
        let Ok(abs) = path.canonicalize() else {
            return false;
        };
        let main = &self.cfg.main_workspace;
        match abs.strip_prefix(main) {
            Ok(rel) => self.cfg.file_access.is_protected(&abs, rel),
            Err(_) => true,
        }
    }
}
