//! The seam through which a definition's own MCP servers (`mcpServers`) reach its children,
//! keeping MCP out of the runtime: the MCP layer implements [`AgentServers`]; the runtime
//! asks it for a [`ServerLease`] before it builds a child of such a definition, gives the
//! lease's tools to that child only, and holds the lease as long as the child exists. When
//! the last lease on a server drops, the MCP layer stops the server.

use crate::definitions::definition::AgentMcpServer;
use async_trait::async_trait;
use cadre_sandbox::SandboxPolicy;
use cadre_tools::Tool;
use std::path::PathBuf;
use std::sync::Arc;

/// What a child of a definition with `mcpServers` asks for.
#[derive(Debug, Clone, Copy)]
pub struct ServerRequest<'a> {
    /// The definition's name.
    pub agent: &'a str,
    /// Where the definition comes from (its file), for messages.
    pub origin: &'a str,
    /// Its `mcpServers` (from a definition the runtime trusts: made in code, or a file the
    /// file tools cannot write).
    pub servers: &'a [AgentMcpServer],
    /// The sandbox the child runs in: a server the definition declares runs within it
    /// (in it, when the server asks for none).
    pub sandbox: &'a SandboxPolicy,
    /// What stays read-only for the child's processes (under its root and the main
    /// workspace, configured paths included): its servers keep it read-only too.
    pub protected: &'a [PathBuf],
}

/// The tools of a definition's servers for one child, holding those servers while it lives.
pub struct ServerLease {
    /// The tools (`mcp__<server>__<tool>`), before the definition's own narrowing.
    pub tools: Vec<Arc<dyn Tool>>,
    /// What could not be provided, naming the server (shown to the parent as notices).
    pub warnings: Vec<String>,
    /// Dropped with the lease: releases the servers.
    _hold: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for ServerLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerLease")
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

impl ServerLease {
    /// A lease on `tools`; `hold` is dropped (releasing what it holds) with the lease.
    pub fn new(
        tools: Vec<Arc<dyn Tool>>,
        warnings: Vec<String>,
        hold: impl Send + Sync + 'static,
    ) -> Self {
        Self {
            tools,
            warnings,
            _hold: Box::new(hold),
        }
    }
}

/// Starts the servers of definitions' `mcpServers` for their children (the MCP layer).
#[async_trait]
pub trait AgentServers: Send + Sync {
    /// The tools of `request.servers` for a child about to be built: servers already
    /// running (for the parent, or for another child) are shared; one whose tools are not
    /// known yet is started now, the others on their first call. Never fails: what cannot
    /// be provided is a warning in the lease.
    async fn acquire(&self, request: ServerRequest<'_>) -> ServerLease;
}
