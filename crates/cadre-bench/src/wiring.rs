//! Wires the real thing for one scenario run: an OpenAI-compatible provider pointed at the
//! mock server, a `worker` sub-agent definition, the sub-agent runtime (max_concurrent = N unless capped)
//! and the parent agent with the delegation tools and the sub-agent turn extension.

use crate::responder::{CHILD_TOOL, WORKER};
use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use cadre_engine::{Agent, PermissionPolicy};
use cadre_llm::openai::OpenAiProvider;
use cadre_llm::{ProviderConfig, ProviderKind, ProviderRegistry, RetryPolicy};
use cadre_subagents::{
    AgentDefinition, AgentRegistry, RuntimeConfig, SkillSet, SubagentContext, SubagentRuntime,
    WorkspaceMode,
};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use cadre_types::ToolDefinition;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The model every agent of the scenario uses.
pub const MODEL_SPEC: &str = "mock:bench-model";

/// A trivial read-only tool: echoes its `text` argument.
pub struct Noop;

#[async_trait]
impl Tool for Noop {
    fn name(&self) -> &str {
        CHILD_TOOL
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: CHILD_TOOL.into(),
            description: "Does nothing and echoes its text argument.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "Echoed back."}},
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let text = args.get("text").and_then(|v| v.as_str()).unwrap_or("");
        Ok(ToolOutput::ok(format!("{CHILD_TOOL}:{text}")))
    }
}

/// Settings of one wiring.
#[derive(Clone)]
pub struct WireOptions {
    /// The providers (one HTTP client and its connection pool), see [`providers`].
    pub providers: Arc<ProviderRegistry>,
    /// Where JSONL sessions go (`None`: in memory).
    pub sessions_dir: Option<PathBuf>,
    /// Number of sub-agents (the parent's max_parallel_tools is set to it).
    pub n: usize,
    /// The runtime's max_concurrent.
    pub max_concurrent: usize,
    /// The task store every task is written through, if any.
    pub store: Option<Arc<dyn cadre_store::TaskStore>>,
    /// Checkpoint children's conversations in the store at every turn boundary.
    pub checkpoints: bool,
}

impl std::fmt::Debug for WireOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireOptions")
            .field("sessions_dir", &self.sessions_dir)
            .field("n", &self.n)
            .field("max_concurrent", &self.max_concurrent)
            .field("store", &self.store.is_some())
            .field("checkpoints", &self.checkpoints)
            .finish_non_exhaustive()
    }
}

/// The store of a scenario run: the runtime's handle, and the same store as a SQL store
/// for its counters.
pub struct OpenedStore {
    /// What the runtime writes through.
    pub store: Arc<dyn cadre_store::TaskStore>,
    /// The same store, for its write and read counters.
    pub sql: Arc<cadre_store::SqlStore>,
}

/// What a store did over part of a run, counted by the store itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Writes the writer ran (each write of a batch counts).
    pub writes: u64,
    /// Reads of a task by id asked for.
    pub task_reads: u64,
    /// Batches the writer committed (a batch of one write counts once).
    pub commits: u64,
}

impl OpenedStore {
    /// The counters so far.
    pub fn counts(&self) -> StoreCounts {
        let written = self.sql.write_stats();
        StoreCounts {
            writes: written.writes,
            task_reads: self.sql.read_stats().gets,
            commits: written.batches,
        }
    }
}

/// Open the store `kind` for a scenario run in `ws`.
pub async fn open_store(
    kind: crate::cli::StoreKind,
    ws: &std::path::Path,
) -> Result<Option<OpenedStore>> {
    use crate::cli::StoreKind;
    let node = cadre_store::NodeId::new("bench");
    let sql = match kind {
        StoreKind::None => return Ok(None),
        StoreKind::Sqlite => cadre_store::open_sqlite(&ws.join(".cadre").join("cadre.db"), node)
            .await
            .context("opening the SQLite store")?,
        StoreKind::Postgres => {
            let cluster = cadre_store::testing::shared_cluster().map_err(anyhow::Error::msg)?;
            let url = cluster
                .create_database()
                .await
                .map_err(anyhow::Error::msg)?;
            cadre_store::open(&url, node)
                .await
                .context("opening the PostgreSQL store")?
        }
    };
    let sql = Arc::new(sql);
    Ok(Some(OpenedStore {
        store: sql.clone(),
        sql,
    }))
}

/// Everything a scenario run needs.
pub struct Wiring {
    /// The sub-agent runtime.
    pub runtime: Arc<SubagentRuntime>,
    /// The parent agent.
    pub parent: Agent,
}

/// The `worker` definition: a leaf in the main workspace with only the `noop` tool.
pub fn worker() -> AgentDefinition {
    let mut d = AgentDefinition::new(WORKER, "Does one small job with the noop tool and reports.");
    d.prompt = "You are a worker. Do the job you are given with your tools, then report the \
                outcome in one line."
        .into();
    d.workspace.mode = WorkspaceMode::Shared;
    d.tools = Some(vec![CHILD_TOOL.into()]);
    d
}

/// A provider registry with one OpenAI-compatible provider `mock` at `base_url` (the mock
/// server's `http://127.0.0.1:PORT/v1`): one HTTP client. One quick retry (1 ms) covers a
/// pooled connection that the mock server closed (the floor does the same); a retried
/// request that had reached the server would show in the request count check.
pub fn providers(base_url: &str, stream: bool) -> Result<Arc<ProviderRegistry>> {
    let cfg = ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(base_url.to_string()),
        stream: Some(stream),
        max_attempts: Some(2),
        ..ProviderConfig::default()
    };
    let policy = RetryPolicy::from_config(&cfg).with_base_delay(Duration::from_millis(1));
    let provider = OpenAiProvider::from_config("mock", &cfg)?.with_retry_policy(policy);
    let mut cfgs = HashMap::new();
    cfgs.insert("mock".to_string(), cfg);
    let registry = Arc::new(ProviderRegistry::new(cfgs, "mock"));
    registry.insert("mock", Arc::new(provider));
    Ok(registry)
}

/// Build providers, registry, runtime and parent for the workspace `ws` (canonical).
pub fn wire(ws: &Path, opts: &WireOptions) -> Result<Wiring> {
    let providers = opts.providers.clone();
    let registry = AgentRegistry::builder()
        .workspace(ws)
        .user_dir(None)
        .declare(worker())
        .load();
    if !registry.errors().is_empty() {
        bail!("agent registry errors: {:?}", registry.errors());
    }
    let policy = PermissionPolicy::default();
    let n = opts.n.max(1);
    let store = opts.store.clone().unwrap_or_else(|| {
        Arc::new(cadre_store::MemoryStore::new(cadre_store::NodeId::new(
            "bench",
        )))
    });
    let mut cfg = RuntimeConfig::new(ws.to_path_buf(), store);
    cfg.sessions_dir = opts.sessions_dir.clone();
    cfg.base_tools = ToolRegistry::new().with(Arc::new(Noop));
    cfg.permissions = policy.clone();
    cfg.max_concurrent = opts.max_concurrent.max(1);
    cfg.checkpoints = opts.checkpoints;
    let runtime = SubagentRuntime::new(cfg, registry, SkillSet::new(), providers.clone());
    let mut tools = ToolRegistry::new().with(Arc::new(Noop));
    for t in runtime.delegation_tools().iter() {
        tools.register(t.clone());
    }
    let model = providers
        .resolve(MODEL_SPEC)
        .context("resolving the mock model")?;
    let parent = Agent::builder("main", model)
        .system_prompt(cadre_engine::prompt::main_system_prompt(ws))
        .tools(tools)
        .permissions(policy)
        .max_parallel_tools(n)
        .extension(Arc::new(SubagentContext::new(runtime.clone())))
        .build();
    Ok(Wiring { runtime, parent })
}
