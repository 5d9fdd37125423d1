//! The MCP servers a definition declares (`mcpServers`), for its children: asked of the MCP
//! layer through [`AgentServers`](crate::AgentServers) before a child is built, with the
//! trust rule: `mcpServers` widens a child beyond its parent's tools and may run a command
//! written in the file, so only files the file tools cannot write may use it, the rule
//! `.mcp.json` lives by.

use super::{Parent, SubagentRuntime};
use crate::definitions::definition::{AgentDefinition, DefinitionSource};
use crate::runtime::child_setup::plan_workspace;
use crate::{ServerLease, ServerRequest};
use cadre_sandbox::{SandboxMode, SandboxPolicy};
use cadre_types::{Event, EventEnvelope};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a child about to be built will work, for the sandbox of its declared servers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ChildRoot<'a> {
    /// Where its definition puts it (the workspace, or its `workspace.path`).
    Planned,
    /// In a git worktree not made yet.
    WorktreeToBe,
    /// Here (its worktree).
    At(&'a Path),
}

impl SubagentRuntime {
    /// The lease on `agent`'s own MCP servers for a child about to be built under `parent`
    /// (none when it declares none), for [`create_child_holding`](Self::create_child_holding).
    /// What cannot be provided is a notice of the parent's run.
    pub async fn own_servers(&self, agent: &str, parent: &Parent) -> Option<Arc<ServerLease>> {
        self.own_servers_at(agent, parent, ChildRoot::Planned).await
    }

    /// [`own_servers`](Self::own_servers) for a child that will work in `root`.
    pub(crate) async fn own_servers_at(
        &self,
        agent: &str,
        parent: &Parent,
        root: ChildRoot<'_>,
    ) -> Option<Arc<ServerLease>> {
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
        let (sandbox, at) = self.servers_bound(def, parent, root);
        let access = self.cfg.file_access(Some(def), &at);
        let protected = self.cfg.protected_for(&access, &at);
        let lease = servers
            .acquire(ServerRequest {
                agent: &def.name,
                origin: &origin,
                servers: &def.mcp_servers,
                sandbox: &sandbox,
                protected: &protected,
            })
            .await;
        for w in &lease.warnings {
            warn(w.clone());
        }
        Some(Arc::new(lease))
    }

    /// The sandbox a child of `def` under `parent` will run in, which its declared servers
    /// run within. Building the child computes it again (and withholds the servers' tools if
    /// they came out wider); here the child's root may not exist yet: a worktree to be made
    /// is inside the workspace, so nothing there is counted as writable, and a plan that
    /// fails (the child will not be built) allows nothing.
    fn servers_bound(
        &self,
        def: &AgentDefinition,
        parent: &Parent,
        root: ChildRoot<'_>,
    ) -> (SandboxPolicy, PathBuf) {
        let bound = &parent.inherited.sandbox;
        if let ChildRoot::At(root) = root {
            return (
                self.cfg.sandbox_policy(def, root, bound),
                root.to_path_buf(),
            );
        }
        let Ok(plan) = plan_workspace(def, &self.cfg.main_workspace) else {
            let nothing = SandboxPolicy {
                mode: SandboxMode::ReadOnly,
                network: false,
                writable: Vec::new(),
            };
            return (nothing, self.cfg.main_workspace.clone());
        };
        let mut policy = self.cfg.sandbox_policy(def, &plan.root, bound);
        if matches!(root, ChildRoot::WorktreeToBe) && !policy.is_off() {
            policy.writable.retain(|d| !d.starts_with(&plan.root));
        }
        (policy, plan.root)
    }

    /// Whether `def` may use `mcpServers`: a definition made in code, or a file the file
    /// tools cannot write, judged where it resolves to (links followed): outside the
    /// workspace, or on a protected path inside it (`.cadre/`, `.claude/`, ...,
    /// `protected_paths`), like `.mcp.json`. Never a file from `subagents/` or
    /// `.gemini/agents/`, which the model may have written (the loader drops their
    /// `mcpServers` already; this holds for a definition changed after loading).
    fn may_declare_servers(&self, def: &AgentDefinition) -> bool {
        if def.model_writable {
            return false;
        }
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
