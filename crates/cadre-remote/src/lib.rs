//! cadre's remote layer: sub-agents that run on another node.
//!
//! - [`server`]: `cadre serve` — exposes a runtime's agents over A2A (v1.0 JSON-RPC binding,
//!   with the v0.3 method names too) and over the task protocol (`POST /tasks`, ...), with
//!   bearer-token auth, body and concurrency limits and graceful shutdown.
//! - [`client`]: [`RemoteClient`], the runtime's [`RemoteExecutor`](cadre_subagents::RemoteExecutor)
//!   for definitions with a `url`: it discovers the protocol from the agent card, streams
//!   progress back as ordinary events and propagates cancellation.
//! - [`a2a`]: the A2A wire shapes both sides share (states, tasks, messages, the agent card).

pub mod a2a;
pub mod client;
// Also built with the unit tests, so that `cargo clippy --all-targets` keeps it compiling.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod jsonrpc;
pub mod server;
mod time;

pub use client::{ClientSettings, RemoteClient, adopt_remote_tasks};
pub use server::{
    AnswerForm, AnswerStyle, ApprovalPolicy, RequestGuard, ServeError, ServeOptions, Server,
};
