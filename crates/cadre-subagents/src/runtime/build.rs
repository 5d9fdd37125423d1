//! Building a child: definition to agent (workspace, prompt, tools narrowed from what its
//! parent may call, model, limits, what it inherits) or to a remote runner, with its fresh
//! session. A one-off child is first only *planned* (checked, given its session id and its
//! tool grant) and built when its task gets a slot.

use super::SubagentRuntime;
use super::{BuiltKey, Child, ChildPlan, ChildRunner, Decided, Inherited, Parent, SpawnError};
use crate::DELEGATION_TOOLS;
use crate::ServerLease;
use crate::definitions::definition::{AgentDefinition, DefinitionSource, FactoryInput};
use crate::runtime::agent_policy::child_policy;
use crate::runtime::child_setup::{SetupError, child_prompt_with, plan_workspace};
use crate::runtime::narrowing::{child_grant, narrow_names};
use crate::runtime::worktree::Worktree;
use crate::tools::guard::DelegationGuard;
use cadre_engine::{Agent, Limits, Offloader, PermissionPolicy, Session, SessionMeta};
use cadre_llm::ResolvedModel;
use cadre_sandbox::SandboxPolicy;
use cadre_tools::{RunContext, ToolGrant, ToolRegistry, Workspace};
use cadre_types::{new_sub_session_id, unix_millis};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl SubagentRuntime {
    /// Check the depth cap for a child of `parent`, and decide whether it may delegate and
    /// which tools it may call: a subset of what the parent may call, plus the tools of its
    /// definition's own MCP servers (`own`) that the definition's lists let through.
    fn decide(
        &self,
        def: &AgentDefinition,
        parent: &Parent,
        own: Option<&ServerLease>,
    ) -> Result<Decided, SpawnError> {
        let depth = parent.run.depth + 1;
        if depth > self.cfg.max_depth {
            return Err(SpawnError::DepthExceeded(self.cfg.max_depth));
        }
        if def.remote.is_some() {
            // A remote agent runs elsewhere, with the tools its server gives it.
            return Ok(Decided {
                may_delegate: false,
                grant: ToolGrant::only(Vec::<String>::new()),
                team: None,
            });
        }
        let may_delegate = def.can_delegate && depth < self.cfg.max_depth;
        let mut grant = child_grant(
            &parent.callable(),
            def.tools.as_deref(),
            &def.disallowed_tools,
            DELEGATION_TOOLS,
            may_delegate,
        );
        for t in own_tools(def, own) {
            if !grant.iter().any(|g| g == t.name()) {
                grant.push(t.name().to_string());
            }
        }
        Ok(Decided {
            may_delegate,
            grant: ToolGrant::only(grant),
            team: None,
        })
    }

    /// The child's own limits: `general-purpose` mirrors its parent's, a declared agent has
    /// its own (max turns defaulting to `default_max_turns`).
    fn limits_of(&self, def: &AgentDefinition, parent: &Parent) -> Limits {
        if def.source == DefinitionSource::Builtin {
            parent.inherited.limits
        } else {
            Limits {
                max_turns: def.max_turns.unwrap_or(self.cfg.default_max_turns),
                wall_clock: def.wall_clock_secs.map(Duration::from_secs),
                max_tokens: def.max_tokens,
                // Dollars are budgeted from the top: the parent's budget holds it down.
                max_cost_usd: None,
            }
        }
    }

    /// The approval policy a child of `def` runs under: its parent's, narrowed by the
    /// definition's own rules and approval mode (a child never gets a looser one than its
    /// parent).
    fn permissions_of(
        &self,
        def: &AgentDefinition,
        parent: &Parent,
    ) -> Result<PermissionPolicy, SpawnError> {
        child_policy(&parent.inherited.permissions, &def.permissions).map_err(|e| {
            SpawnError::Model {
                agent: def.name.clone(),
                message: format!("its permission rules: {e}"),
            }
        })
    }

    /// The child's tools: the parent's tools within the child's grant; its own delegation
    /// tools (which pass down what the child has) when it may delegate, else the delegation
    /// tools withheld with the reason a call to one is refused.
    fn tools_of(
        &self,
        def: &AgentDefinition,
        parent: &Parent,
        decided: &Decided,
        inherited: &Arc<Inherited>,
        own: Option<&ServerLease>,
    ) -> ToolRegistry {
        let grant = &decided.grant;
        let mut tools = parent
            .tools
            .filtered(|t| grant.allows(t.name()) && !crate::is_delegation(t));
        // The definition's own servers' tools replace inherited ones of the same name.
        for t in own_tools(def, own) {
            tools.register(t.clone());
        }
        if decided.may_delegate {
            for t in self.delegation_tools_for(inherited).iter() {
                if grant.allows(t.name()) {
                    tools.register(t.clone());
                }
            }
        } else {
            for name in DELEGATION_TOOLS {
                let reason = if def.can_delegate {
                    SpawnError::DepthExceeded(self.cfg.max_depth).to_string()
                } else {
                    format!(
                        "{name} is not available: {} is a leaf sub-agent and cannot delegate",
                        def.name
                    )
                };
                tools.withhold(*name, reason);
            }
        }
        // A member's team tools hold its seat; they are not its parent's to pass down.
        if let (Some(seat), Some(rt)) = (&decided.team, self.me.upgrade()) {
            for t in crate::tools::surface::team_tools(&rt, Some(seat.clone())).iter() {
                tools.register(t.clone());
            }
        }
        tools
    }

    /// The model a child of `def` talks to (its own, else its parent's), checked before its
    /// first request: a provider without its key fails the child, naming what to set.
    fn child_model(
        &self,
        def: &AgentDefinition,
        parent: &Parent,
    ) -> Result<ResolvedModel, SpawnError> {
        let spec = def
            .model
            .clone()
            .unwrap_or_else(|| parent.run.model.clone());
        let failed = |message: String| SpawnError::Model {
            agent: def.name.clone(),
            message,
        };
        self.providers
            .preflight(&spec)
            .map_err(|e| failed(e.to_string()))?;
        self.providers
            .resolve(&spec)
            .map_err(|e| failed(e.to_string()))
    }

    fn prepare(
        &self,
        def: &AgentDefinition,
        parent: &Parent,
        decided: &Decided,
        root: Option<&Path>,
        own: Option<&ServerLease>,
    ) -> Result<(Agent, PathBuf, SandboxPolicy), SpawnError> {
        let mut plan = plan_workspace(def, &self.cfg.main_workspace)?;
        if let Some(root) = root {
            plan.root = root.to_path_buf();
        }
        let sandbox = self
            .cfg
            .sandbox_policy(def, &plan.root, &parent.inherited.sandbox);
        let model = self.child_model(def, parent)?;
        let inherited = Arc::new(Inherited {
            hooks: parent.inherited.hooks.clone(),
            permissions: self.permissions_of(def, parent)?,
            limits: self.limits_of(def, parent),
            sandbox: sandbox.clone(),
        });
        let mut tools = self.tools_of(def, parent, decided, &inherited, own);
        let named_network = named_network_tools(def, &tools);
        if sandbox.denies_network() {
            tools.withhold_network_except(sandbox.mode.as_str(), &named_network);
        }
        // A definition's MCP server runs in its child's sandbox; a grandchild (or a child
        // that took the server's tools from its parent) narrower than that may not use it.
        tools.withhold_wider_processes(&sandbox);
        let (skills_section, _missing) = self.skills.preload(&def.skills);
        let prompt = child_prompt_with(
            def,
            &plan,
            !decided.may_delegate,
            &skills_section,
            &self.cfg.memory_files,
        );
        if let Some(factory) = &def.factory {
            let input = FactoryInput {
                model,
                tools,
                workspace: plan.root.clone(),
                system_prompt: prompt,
            };
            let agent = factory(&input).map_err(|source| SpawnError::Factory {
                agent: def.name.clone(),
                source,
            })?;
            return Ok((agent, plan.root, sandbox));
        }
        let mut b = Agent::builder(def.name.clone(), model)
            .system_prompt(prompt)
            .tools(tools)
            .network_tools(named_network)
            .limits(inherited.limits)
            .tool_timeout(self.cfg.tool_timeout)
            .max_parallel_tools(self.cfg.max_parallel_tools)
            .max_reply_bytes(self.cfg.max_reply_bytes)
            .permissions(inherited.permissions.clone())
            .offloader(Offloader::new(&plan.root, self.cfg.offload_threshold));
        for h in super::child_hooks::engine_hooks(&self.cfg, def, &inherited.hooks) {
            b = b.hook(h);
        }
        if let Some(n) = self.cfg.max_output_tokens {
            b = b.max_output_tokens(n);
        }
        if let Some(policy) = &self.cfg.compaction {
            b = b.compaction(policy.clone());
        }
        if let Some(seat) = &decided.team {
            b = b.extension(Arc::new(crate::runtime::teams::TeamInbox::new(
                self.store().clone(),
                seat.clone(),
            )));
        }
        b = b.hook(Arc::new(DelegationGuard::new(
            decided.may_delegate,
            self.cfg.max_depth,
        )));
        Ok((b.build(), plan.root, sandbox))
    }

    /// The agent and workspace of a local child of `def` under `parent`. Everything in them
    /// follows from the definition, the depth, the model, the parent's tools within the
    /// child's grant and what the parent passes down, so children for which all of these
    /// are the same share one built agent; factory-made and delegating agents are built every
    /// time. A cached isolated workspace that was deleted meanwhile is set up again.
    fn local_agent(
        &self,
        def: &AgentDefinition,
        parent: &Parent,
        decided: &Decided,
        root: Option<&Path>,
        own: Option<&ServerLease>,
    ) -> Result<(Agent, Arc<Workspace>), SpawnError> {
        // A delegating agent holds the delegation tools, which hold the runtime: caching it
        // here would make a cycle that keeps the runtime alive after its owner drops it. A
        // child in its own worktree has a root nobody else has. One with servers of its own
        // has tools made for it, and so has a team member (its seat).
        let cacheable = def.factory.is_none()
            && !decided.may_delegate
            && root.is_none()
            && own.is_none()
            && decided.team.is_none();
        let key = cacheable.then(|| BuiltKey {
            agent: def.name.clone(),
            parent_depth: parent.run.depth,
            model: def
                .model
                .clone()
                .unwrap_or_else(|| parent.run.model.clone()),
            // The very tool objects the child would get (kept alive by the cached agent,
            // so an address is never reused while its entry exists).
            tools: parent
                .tools
                .iter()
                .filter(|t| decided.grant.allows(t.name()))
                .map(|t| (t.name().to_string(), Arc::as_ptr(t) as *const () as usize))
                .collect(),
            inherited: Arc::as_ptr(&parent.inherited) as usize,
        });
        if let Some(key) = &key
            && let Some((agent, ws, _)) = self.built_agents().get(key)
            && ws.root().is_dir()
        {
            return Ok((agent.clone(), ws.clone()));
        }
        let (built, root, sandbox) = self.prepare(def, parent, decided, root, own)?;
        let access = self.cfg.file_access(Some(def), &root);
        let os_sandbox = self.cfg.sandbox_for(&sandbox, &access, &root);
        let workspace = Arc::new(
            Workspace::new(&root)
                .map_err(|e| {
                    SpawnError::Setup(SetupError::Io {
                        agent: def.name.clone(),
                        path: root.clone(),
                        source: e,
                    })
                })?
                .with_policy(access)
                .with_sandbox(os_sandbox),
        );
        if let Some(key) = key {
            // The entry pins what its key's `inherited` address points to.
            self.built_agents().insert(
                key,
                (built.clone(), workspace.clone(), parent.inherited.clone()),
            );
        }
        Ok((built, workspace))
    }

    /// The delegation tools of an agent that passes `inherited` down, per the configured
    /// surface.
    pub(crate) fn delegation_tools_for(&self, inherited: &Arc<Inherited>) -> ToolRegistry {
        match self.me.upgrade() {
            Some(rt) => crate::tools::surface::tools(&rt, self.cfg.surface, inherited),
            None => ToolRegistry::new(),
        }
    }

    /// The tools of a top-level agent over this runtime: the configured base tools and the
    /// delegation tools, or, with `max_depth = 0`, the delegation tools withheld with the
    /// depth refusal (nothing to offer, a clear answer to a call anyway).
    pub fn top_level_tools(&self) -> ToolRegistry {
        let mut tools = self.cfg.base_tools.clone();
        if self.cfg.max_depth == 0 {
            for name in DELEGATION_TOOLS {
                tools.withhold(
                    *name,
                    SpawnError::DepthExceeded(self.cfg.max_depth).to_string(),
                );
            }
        } else {
            for t in self.delegation_tools().iter() {
                tools.register(t.clone());
            }
        }
        tools
    }

    /// A parent for runs that are not started by an agent's tool call (`cadre serve`, the
    /// `@agent` direct run): it has the [top-level tools](Self::top_level_tools) and passes
    /// down the runtime's configured hooks, permissions and limits.
    pub fn top_level_parent(&self, run: Arc<RunContext>, cancel: CancellationToken) -> Parent {
        Parent {
            run,
            cancel,
            tools: Arc::new(self.top_level_tools()),
            inherited: self.top_inherited.clone(),
            root: self.cfg.main_workspace.clone(),
        }
    }

    /// Create a child of `agent` for `parent`: its agent, workspace and a fresh `sub-<uuid>`
    /// session, ready to take messages with [`start`](Self::start).
    /// A definition with `isolation: worktree` is refused here: its worktree is made by
    /// [`spawn`](Self::spawn) and [`spawn_live`](Self::spawn_live), which also remove it.
    pub fn create_child(&self, agent: &str, parent: &Parent) -> Result<Child, SpawnError> {
        self.create_child_holding(agent, parent, None)
    }

    /// [`create_child`](Self::create_child) holding `own` (from
    /// [`own_servers`](Self::own_servers)), for a caller that must take the servers before
    /// it can decide, under a lock, whether it needs the child.
    pub fn create_child_holding(
        &self,
        agent: &str,
        parent: &Parent,
        own: Option<Arc<ServerLease>>,
    ) -> Result<Child, SpawnError> {
        if let Some(def) = self.registry.get(agent)
            && def.isolation.is_some()
        {
            return Err(SpawnError::Isolation(format!(
                "agent {agent} runs in a git worktree (isolation: worktree): start it with \
                 `task` or `agent_spawn`"
            )));
        }
        self.build_child(agent, parent, None, own, None)
    }

    /// Check that a child of `agent` can be made for `parent` (the agent exists, the depth
    /// cap allows it, its model resolves, a remote agent has an executor) and give it its
    /// session id and its tool grant, without building it: the errors a caller must see at
    /// once, at the cost of a few strings.
    pub(crate) fn plan_child(
        &self,
        agent: &str,
        parent: &Parent,
        own: Option<Arc<ServerLease>>,
    ) -> Result<ChildPlan, SpawnError> {
        let def = self
            .registry
            .get(agent)
            .ok_or_else(|| SpawnError::UnknownAgent(agent.to_string()))?;
        let decided = self.decide(def, parent, own.as_deref())?;
        let model = match &def.remote {
            Some(spec) => {
                if self.cfg.remote.is_none() {
                    return Err(SpawnError::Remote(def.name.clone()));
                }
                format!("remote:{}", spec.url)
            }
            None => self.child_model(def, parent)?.spec,
        };
        Ok(ChildPlan {
            agent: def.name.clone(),
            model,
            session_id: new_sub_session_id(),
            depth: parent.run.depth + 1,
            remote: def.remote.clone(),
            decided,
            parent: parent.clone(),
            worktree: None,
            own_servers: own,
            reopen: false,
        })
    }

    /// Build a planned child (when its task gets a slot), in its worktree if it has one.
    pub(crate) fn build_planned(
        &self,
        plan: &ChildPlan,
        worktree: Option<Arc<Worktree>>,
    ) -> Result<Child, SpawnError> {
        let saved = |dir: &std::path::Path| Session::read_meta(dir, &plan.session_id).is_ok();
        let reopen = plan.reopen && self.cfg.sessions_dir.as_deref().is_some_and(saved);
        self.build(
            &plan.agent,
            &plan.parent,
            Some((plan.decided.clone(), plan.session_id.clone())),
            reopen.then_some(plan.session_id.as_str()),
            worktree,
            plan.own_servers.clone(),
        )
    }

    /// Build a child of `agent`, in `worktree` when it has one; with `resume`, reopen that
    /// saved session (its history comes back from the transcript) instead of starting a
    /// fresh one.
    pub(crate) fn build_child(
        &self,
        agent: &str,
        parent: &Parent,
        resume: Option<&str>,
        own: Option<Arc<ServerLease>>,
        worktree: Option<Arc<Worktree>>,
    ) -> Result<Child, SpawnError> {
        self.build(agent, parent, None, resume, worktree, own)
    }

    /// [`build_child`](Self::build_child) of a fresh child seated in its parent's team.
    pub(crate) fn build_seated(
        &self,
        agent: &str,
        parent: &Parent,
        own: Option<Arc<ServerLease>>,
        worktree: Option<Arc<Worktree>>,
        seat: Arc<crate::runtime::teams::TeamSeat>,
    ) -> Result<Child, SpawnError> {
        let def = self
            .registry
            .get(agent)
            .ok_or_else(|| SpawnError::UnknownAgent(agent.to_string()))?;
        let decided = self.decide(def, parent, own.as_deref())?.seated(seat);
        let planned = Some((decided, new_sub_session_id()));
        self.build(agent, parent, planned, None, worktree, own)
    }

    /// Build a child; `planned` is what its plan decided and the session id it gave it, if
    /// it was planned.
    fn build(
        &self,
        agent: &str,
        parent: &Parent,
        planned: Option<(Decided, String)>,
        resume: Option<&str>,
        worktree: Option<Arc<Worktree>>,
        own: Option<Arc<ServerLease>>,
    ) -> Result<Child, SpawnError> {
        let root = worktree.as_ref().map(|w| w.root());
        let def = self
            .registry
            .get(agent)
            .ok_or_else(|| SpawnError::UnknownAgent(agent.to_string()))?;
        let (decided, fresh_id) = match planned {
            Some((d, id)) => (d, Some(id)),
            None => (self.decide(def, parent, own.as_deref())?, None),
        };
        let (runner, model) = match &def.remote {
            Some(spec) => {
                let executor = self
                    .cfg
                    .remote
                    .clone()
                    .ok_or_else(|| SpawnError::Remote(def.name.clone()))?;
                let runner = ChildRunner::Remote {
                    spec: spec.clone(),
                    executor,
                    context_id: Arc::new(Mutex::new(None)),
                };
                (runner, format!("remote:{}", spec.url))
            }
            None => {
                let (agent, workspace) =
                    self.local_agent(def, parent, &decided, root.as_deref(), own.as_deref())?;
                let model = agent.config().model.spec.clone();
                (ChildRunner::Local { agent, workspace }, model)
            }
        };
        let session_err = |e: cadre_engine::SessionError| SpawnError::Session {
            agent: def.name.clone(),
            message: e.to_string(),
        };
        let session = match (resume, &self.cfg.sessions_dir) {
            (Some(id), Some(dir)) => Session::open(dir, id).map_err(session_err)?,
            (Some(id), None) => {
                return Err(SpawnError::Session {
                    agent: def.name.clone(),
                    message: format!("session {id} cannot be reopened: sessions are not saved"),
                });
            }
            (None, dir) => {
                let meta = SessionMeta {
                    id: fresh_id.unwrap_or_else(new_sub_session_id),
                    agent: def.name.clone(),
                    model: model.clone(),
                    created_at: unix_millis(),
                    parent_session_id: Some(parent.run.session_id.clone()),
                };
                match dir {
                    Some(dir) => Session::create(dir, meta).map_err(session_err)?,
                    None => Session::in_memory(meta),
                }
            }
        };
        let session_id = session.id().to_string();
        Ok(Child {
            name: def.name.clone(),
            model,
            runner,
            session_id,
            session: Arc::new(tokio::sync::Mutex::new(session)),
            depth: parent.run.depth + 1,
            grant: decided.grant,
            own_servers: own,
            worktree,
            messages: Arc::default(),
            team: decided.team,
        })
    }
}

/// The tools of `def`'s own MCP servers that its `tools` / `disallowedTools` let through
/// (the same rule as for inherited tools).
fn own_tools<'a>(
    def: &AgentDefinition,
    own: Option<&'a ServerLease>,
) -> impl Iterator<Item = &'a Arc<dyn cadre_tools::Tool>> {
    let tools = own.map(|l| l.tools.as_slice()).unwrap_or_default();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    let kept: Vec<String> = narrow_names(
        &names,
        def.tools.as_deref(),
        &def.disallowed_tools,
        DELEGATION_TOOLS,
    )
    .into_iter()
    .map(str::to_string)
    .collect();
    tools
        .iter()
        .filter(move |t| kept.iter().any(|k| k == t.name()))
}

/// The network tools among `tools` that `def` names in its `tools` list. Web tools follow
/// permission rules, not the process sandbox: a definition that names `web_fetch` (Claude
/// Code's `WebFetch`) keeps it under a sandbox without network; one it only inherits is
/// withheld there.
fn named_network_tools(def: &AgentDefinition, tools: &ToolRegistry) -> Vec<String> {
    let Some(named) = def.tools.as_deref() else {
        return Vec::new();
    };
    tools
        .iter()
        .filter(|t| t.uses_network() && named.iter().any(|n| n == t.name()))
        .map(|t| t.name().to_string())
        .collect()
}
