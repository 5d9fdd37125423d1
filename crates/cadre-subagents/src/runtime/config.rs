//! Settings of the sub-agent runtime.

use crate::definitions::definition::AgentDefinition;
use crate::runtime::remote::RemoteExecutor;
use cadre_engine::{ApprovalMode, CompactionPolicy, Limits, PermissionPolicy, ToolHook};
use cadre_sandbox::{Launcher, SandboxPolicy, SandboxSpec};
use cadre_tools::{AccessPolicy, ToolRegistry};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How background children's approval requests are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundApprovals {
    /// Denied with a reason the child sees (fail closed).
    #[default]
    Deny,
    /// Passed to the parent's approval channel (queued for the human).
    Escalate,
}

/// Which delegation tools the parent model sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSurface {
    /// Only `task`.
    Task,
    /// Only the lifecycle tools (`agent_spawn`, ...).
    Lifecycle,
    /// Both.
    #[default]
    Both,
}

/// The OS sandbox of the processes agents start.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// Applies the sandbox (shared by every agent).
    pub launcher: Arc<Launcher>,
    /// The main agent's sandbox (top-level children are narrowed to it).
    pub main: SandboxSpec,
    /// The sandbox of a child whose definition asks for none.
    pub subagents: SandboxSpec,
}

impl SandboxSettings {
    /// The defaults on `launcher`: the main agent unsandboxed, children `workspace-write`
    /// without network.
    pub fn new(launcher: Arc<Launcher>) -> Self {
        Self {
            launcher,
            main: SandboxSpec::mode(cadre_sandbox::SandboxMode::Off),
            subagents: SandboxSpec::mode(cadre_sandbox::SandboxMode::WorkspaceWrite),
        }
    }

    /// The main agent's policy in its workspace `root`.
    pub fn main_policy(&self, root: &Path) -> SandboxPolicy {
        SandboxPolicy::resolve(&self.main, root)
    }
}

/// Default nesting depth of delegation (`[subagents] max_depth`).
pub const DEFAULT_MAX_DEPTH: u32 = 3;
/// Default cap on children running at once (`[subagents] max_concurrent`).
pub const DEFAULT_MAX_CONCURRENT: usize = 16;
/// Default turn limit of a child whose definition sets none (`[subagents] max_turns`).
pub const DEFAULT_MAX_TURNS: u32 = 10;

/// Settings of the runtime. [`RuntimeConfig::new`] owns the defaults; configuration only
/// overrides what it sets.
#[derive(Clone)]
pub struct RuntimeConfig {
    /// The main workspace (canonical).
    pub main_workspace: PathBuf,
    /// Project-memory files a child's prompt takes from its runtime root, in order of
    /// preference (default `AGENTS.md`, then `CLAUDE.md`).
    pub memory_files: Vec<String>,
    /// Where child transcripts go (`None`: in memory only).
    pub sessions_dir: Option<PathBuf>,
    /// The tools children narrow from (the parent's tools without delegation tools).
    pub base_tools: ToolRegistry,
    /// Hooks every child runs with (the parent's).
    pub hooks: Vec<Arc<dyn ToolHook>>,
    /// The configured Claude Code hooks, whose `SubagentStart` and `SubagentStop` fire
    /// around every child (their tool events run through `hooks`).
    pub claude_hooks: Option<Arc<crate::hooks::ClaudeHooks>>,
    /// The parent's approval mode and rules; children inherit them.
    pub permissions: PermissionPolicy,
    /// What file tools may do in a workspace (protected paths added by the configuration,
    /// hard-linked reads); [`file_access`](Self::file_access) adapts it to the mode.
    pub file_access: AccessPolicy,
    /// The parent's limits, mirrored by `general-purpose`.
    pub parent_limits: Limits,
    /// Per-tool timeout inside children.
    pub tool_timeout: Duration,
    /// Parallel tool calls inside a child.
    pub max_parallel_tools: usize,
    /// Offload threshold inside children.
    pub offload_threshold: usize,
    /// Spawn depth cap (default 3).
    pub max_depth: u32,
    /// Children running at once per parent session (default 16); more wait as `pending`.
    pub max_concurrent: usize,
    /// Max turns of declared sub-agents without their own (default 10).
    pub default_max_turns: u32,
    /// Background approvals policy.
    pub background_approvals: BackgroundApprovals,
    /// Delegation tools offered.
    pub surface: ToolSurface,
    /// The task store, the one owner of task state: every task and live child is written
    /// there and read from there ([`cadre_store::MemoryStore`] keeps them in this process).
    pub store: Arc<dyn cadre_store::TaskStore>,
    /// Output token cap per model call of every child (none: the provider's default).
    pub max_output_tokens: Option<u32>,
    /// Cap on one model reply of every child, in bytes (text, thinking, tool arguments).
    pub max_reply_bytes: usize,
    /// Runs agents whose definition has a `url` (none: such agents cannot be started).
    pub remote: Option<Arc<dyn RemoteExecutor>>,
    /// How long a foreground `task` call waits before its child is moved to the background
    /// (`None`: wait until it ends).
    pub task_timeout: Option<Duration>,
    /// The OS sandbox of agents' processes (none: no agent is sandboxed).
    pub sandbox: Option<SandboxSettings>,
    /// How children's conversations are compacted (the parent's policy; none: never).
    pub compaction: Option<CompactionPolicy>,
    /// Results above this many bytes reach the parent as a head and a file under
    /// `.cadre/results/` (default 32 KiB).
    pub max_result_bytes: usize,
    /// Starts the MCP servers definitions declare (`mcpServers`) for their children (none:
    /// such declarations are a warning and the children get none).
    pub agent_servers: Option<Arc<dyn crate::AgentServers>>,
    /// Keep each local child's conversation in the task store at every turn boundary (its
    /// checkpoint, what continuing it on another node needs; default off).
    pub checkpoints: bool,
    /// What happens to a local child's task when the node running it is lost
    /// (`[subagents] on_orphan`; a definition's `on_orphan:` wins). With `Resume` the task
    /// is checkpointed whatever [`checkpoints`](Self::checkpoints) says. Default `Fail`.
    pub on_orphan: cadre_store::OrphanPolicy,
    /// How long a task's write is retried over a failing store before its end is kept in
    /// the local spool (`[store] write_retry_secs`, default 120 s).
    pub store_write_retry: Duration,
    /// How long creating a task is retried over a failing store before its caller is told
    /// (default 10 s; `cadre serve` uses `[store] connect_timeout_secs`, so a submission to
    /// a node whose store is down is refused within it).
    pub store_create_retry: Duration,
    /// How long a task's owner may go without beating it before the task is taken as an
    /// orphan when a parent resumes its session (`[store] orphan_timeout_secs`, default
    /// 600 s; see [`SubagentRuntime::reattach`](crate::SubagentRuntime::reattach)).
    pub orphan_timeout: Duration,
    /// Members a team may have at once (`[subagents] max_team_size`, default 8).
    pub max_team_size: usize,
    /// Undelivered team messages a recipient may have before sends to it are refused
    /// (default 32).
    pub team_mailbox: usize,
    /// Offer the team tools to every agent that may delegate, as a team's lead
    /// (`[subagents] teams`, default off: agents that form no team keep their tool list).
    /// Members always get them.
    pub teams: bool,
}

impl RuntimeConfig {
    /// Defaults for a main workspace whose tasks live in `store`.
    pub fn new(main_workspace: PathBuf, store: Arc<dyn cadre_store::TaskStore>) -> Self {
        Self {
            main_workspace,
            memory_files: cadre_engine::prompt::DEFAULT_MEMORY_FILES
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            sessions_dir: None,
            base_tools: ToolRegistry::new(),
            hooks: Vec::new(),
            claude_hooks: None,
            permissions: PermissionPolicy::default(),
            file_access: AccessPolicy::default(),
            parent_limits: Limits::default(),
            tool_timeout: cadre_engine::DEFAULT_TOOL_TIMEOUT,
            max_parallel_tools: cadre_engine::DEFAULT_MAX_PARALLEL_TOOLS,
            offload_threshold: cadre_engine::DEFAULT_OFFLOAD_THRESHOLD,
            max_depth: DEFAULT_MAX_DEPTH,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            default_max_turns: DEFAULT_MAX_TURNS,
            background_approvals: BackgroundApprovals::Deny,
            surface: ToolSurface::Both,
            task_timeout: None,
            remote: None,
            max_output_tokens: None,
            max_reply_bytes: cadre_llm::DEFAULT_MAX_REPLY_BYTES,
            store,
            sandbox: None,
            compaction: None,
            max_result_bytes: crate::runtime::results::DEFAULT_MAX_RESULT_BYTES,
            agent_servers: None,
            checkpoints: false,
            on_orphan: cadre_store::OrphanPolicy::Fail,
            store_write_retry: cadre_store::RETRY_FOR,
            store_create_retry: cadre_store::CREATE_RETRY_FOR,
            orphan_timeout: Duration::from_secs(cadre_store::DEFAULT_ORPHAN_TIMEOUT_SECS),
            max_team_size: crate::runtime::teams::DEFAULT_MAX_TEAM_SIZE,
            team_mailbox: crate::runtime::teams::DEFAULT_TEAM_MAILBOX,
            teams: false,
        }
    }

    /// The policy for the file tools of an agent working in `root`: the configured one,
    /// plus the paths `def` protects; `bypass` mode protects nothing.
    pub fn file_access(&self, def: Option<&AgentDefinition>, root: &Path) -> AccessPolicy {
        let mut policy = self.file_access.clone();
        if let Some(def) = def {
            policy = policy.protect_paths(root, &def.protected_paths);
        }
        if self.permissions.mode == ApprovalMode::Bypass {
            policy = policy.unprotected();
        }
        policy
    }

    /// The sandbox of a child of `def` working in `root` under a parent whose processes run
    /// in `parent`: what the definition (or the default for sub-agents) asks for, narrowed
    /// to the parent's. Off when the runtime sandboxes nothing.
    pub fn sandbox_policy(
        &self,
        def: &AgentDefinition,
        root: &Path,
        parent: &SandboxPolicy,
    ) -> SandboxPolicy {
        let Some(settings) = &self.sandbox else {
            return SandboxPolicy::off();
        };
        let spec = def.sandbox.as_ref().unwrap_or(&settings.subagents);
        let mut policy = SandboxPolicy::resolve(spec, root);
        if def.model_writable {
            // A definition the model could have written never gets more than one that
            // says nothing (the loader drops such requests; this holds whatever it let by).
            policy = policy.within(&SandboxPolicy::resolve(&settings.subagents, root));
        }
        policy.within(parent)
    }

    /// The orphan policy of a new task of `def`'s child: `Resume` only for a local child
    /// without a worktree (a worktree stays on the disk of the node that made it; a remote
    /// task is its server's to keep), by the definition's `on_orphan:` or else the
    /// configured default.
    pub fn orphan_policy(
        &self,
        def: Option<&AgentDefinition>,
        resumable: bool,
    ) -> cadre_store::OrphanPolicy {
        use cadre_store::OrphanPolicy;
        let isolated = def.is_some_and(|d| d.isolation.is_some());
        if !resumable || isolated {
            return OrphanPolicy::Fail;
        }
        def.and_then(|d| d.on_orphan).unwrap_or(self.on_orphan)
    }

    /// What stays read-only for the processes of an agent working in `root` whose file
    /// tools follow `access`: what those tools may not write under its own root and under
    /// the main workspace. One list for its `bash` and for the MCP servers it starts.
    pub(crate) fn protected_for(&self, access: &AccessPolicy, root: &Path) -> Vec<PathBuf> {
        let mut protected = access.protected_roots(root);
        if root != self.main_workspace {
            protected.extend(access.protected_roots(&self.main_workspace));
        }
        protected
    }

    /// The sandbox object for `policy` of an agent working in `root` whose file tools
    /// follow `access` (none when it is off). What those file tools may not write stays
    /// read-only for its processes too, under its own root and under the main workspace:
    /// one list, [`AccessPolicy::protected_roots`], for both.
    pub fn sandbox_for(
        &self,
        policy: &SandboxPolicy,
        access: &AccessPolicy,
        root: &Path,
    ) -> Option<Arc<cadre_sandbox::Sandbox>> {
        let settings = self.sandbox.as_ref()?;
        let protected = self.protected_for(access, root);
        let mut owned = vec![root.join(".cadre")];
        if root != self.main_workspace {
            owned.push(self.main_workspace.join(".cadre"));
        }
        // cadre writes its own `.cadre/` (sessions, tool outputs) while a command runs, so
        // it is made rather than watched; the rest, when missing, is watched by `bash`.
        if !access.is_protecting() {
            owned.clear();
        }
        (!policy.is_off()).then(|| {
            Arc::new(
                cadre_sandbox::Sandbox::new(settings.launcher.clone(), policy.clone())
                    .protect(protected)
                    .own_protected(owned),
            )
        })
    }
}
