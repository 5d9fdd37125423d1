//! cadre's MCP layer (see `docs/mcp.md`).
//!
//! As a client: MCP servers configured in `.mcp.json` (Claude Code's format) or
//! `[mcp_servers.NAME]` (Codex's format) become [`McpServers`], whose tools are ordinary
//! [`cadre_tools::Tool`]s named `mcp__<server>__<tool>`, so approvals, permission rules and
//! narrowing treat them like any other tool. [`AgentServerPool`] starts the servers
//! sub-agents' definitions declare (`mcpServers`) for their children only.
//!
//! As a server (`cadre mcp serve`): [`McpSession`] offers the runtime's delegation tools to
//! an MCP client over stdio ([`serve_stdio`]) or streamable HTTP ([`http_router`]).

mod agent_servers;
mod cache;
mod config;
mod connection;
pub mod naming;
mod result;
mod serve;
mod server;
mod servers;
mod stdio;
mod tool;

pub use agent_servers::AgentServerPool;
pub use cache::CACHE_DIR;
pub use config::{
    ConfigError, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, ServerConfig, ServerEntry, Startup,
    Transport, load_mcp_json,
};
pub use result::{MAX_MEDIA_BYTES, MEDIA_DIR};
pub use serve::{McpSession, ServeContext, http_router, serve_stdio};
pub use server::{CallError, McpServer, Offer, Progress, ServerState, StartError};
pub use servers::{McpServers, StartFailure};
pub use stdio::MAX_LINE_BYTES;
pub use tool::{McpTool, tools_of};
