//! Building a child: definition to agent (workspace, prompt, narrowed tools, model, limits)
//! or to a remote runner, with its fresh session. A one-off child is first only *planned*
//! (checked, given its session id) and built when its task gets a slot.

use super::{Child, ChildPlan, ChildRunner, SpawnError, SubagentRuntime};
use crate::DELEGATION_TOOLS;
use crate::child_setup::{SetupError, child_prompt, plan_workspace};
use crate::definition::{AgentDefinition, DefinitionSource, FactoryInput};
use crate::guard::DelegationGuard;
use crate::narrowing::narrow;
use cadre_engine::{Agent, Limits, Offloader, Session, SessionMeta};
use cadre_tools::{RunContext, Workspace};
use cadre_types::{new_sub_session_id, unix_millis};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

impl SubagentRuntime {
    fn prepare(
        &self,
        def: &AgentDefinition,
        parent: &RunContext,
    ) -> Result<(Agent, PathBuf), SpawnError> {
        let depth = parent.depth + 1;
        if depth > self.cfg.max_depth {
            return Err(SpawnError::DepthExceeded(self.cfg.max_depth));
        }
        let plan = plan_workspace(def, &self.cfg.main_workspace)?;
        let spec = def.model.clone().unwrap_or_else(|| parent.model.clone());
        let model = self
            .providers
            .resolve(&spec)
            .map_err(|e| SpawnError::Model {
                agent: def.name.clone(),
                message: e.to_string(),
            })?;
        let can_delegate = def.can_delegate && depth < self.cfg.max_depth;
        let mut tools = narrow(
            &self.cfg.base_tools,
            def.tools.as_deref(),
            &def.disallowed_tools,
            DELEGATION_TOOLS,
        );
        if can_delegate {
            // Delegation tools are offered to delegating agents, still minus what they deny.
            let allowed = narrow(&self.delegation_tools(), None, &def.disallowed_tools, &[]);
            for t in allowed.iter() {
                tools.register(t.clone());
            }
        }
        let (skills_section, _missing) = self.skills.preload(&def.skills);
        let prompt = child_prompt(def, &plan, !can_delegate, &skills_section);
        let limits = if def.source == DefinitionSource::Builtin {
            self.cfg.parent_limits
        } else {
            Limits {
                max_turns: def.max_turns.unwrap_or(self.cfg.default_max_turns),
                wall_clock: def.wall_clock_secs.map(Duration::from_secs),
                max_tokens: def.max_tokens,
            }
        };
        if let Some(factory) = &def.factory {
            let input = FactoryInput {
                model,
                tools,
                workspace: plan.root.clone(),
                system_prompt: prompt,
            };
            let agent = factory(&input).map_err(|message| SpawnError::Factory {
                agent: def.name.clone(),
                message,
            })?;
            return Ok((agent, plan.root));
        }
        let mut b = Agent::builder(def.name.clone(), model)
            .system_prompt(prompt)
            .tools(tools)
            .limits(limits)
            .tool_timeout(self.cfg.tool_timeout)
            .max_parallel_tools(self.cfg.max_parallel_tools)
            .permissions(self.cfg.permissions.clone())
            .offloader(Offloader::new(&plan.root, self.cfg.offload_threshold));
        for h in &self.cfg.hooks {
            b = b.hook(h.clone());
        }
        if let Some(n) = self.cfg.max_output_tokens {
            b = b.max_output_tokens(n);
        }
        b = b.hook(Arc::new(DelegationGuard::new(
            can_delegate,
            self.cfg.max_depth,
        )));
        Ok((b.build(), plan.root))
    }

    /// The agent and workspace of a local child of `def` under `parent`. Everything in them
    /// (prompt, narrowed tools, limits, hooks) follows from the definition, the depth and the
    /// model, so children with the same three share one built agent; factory-made and
    /// delegating agents are built every time. A cached isolated workspace that was deleted meanwhile
    /// is set up again.
    fn local_agent(
        &self,
        def: &AgentDefinition,
        parent: &RunContext,
    ) -> Result<(Agent, Arc<Workspace>), SpawnError> {
        // A delegating agent holds the delegation tools, which hold the runtime: caching it
        // here would make a cycle that keeps the runtime alive after its owner drops it.
        let can_delegate = def.can_delegate && parent.depth + 1 < self.cfg.max_depth;
        let cacheable = def.factory.is_none() && !can_delegate;
        let key = (
            def.name.clone(),
            parent.depth,
            def.model.clone().unwrap_or_else(|| parent.model.clone()),
        );
        if cacheable
            && let Some((agent, ws)) = self.built_agents().get(&key)
            && ws.root().is_dir()
        {
            return Ok((agent.clone(), ws.clone()));
        }
        let (built, root) = self.prepare(def, parent)?;
        let workspace = Arc::new(Workspace::new(&root).map_err(|e| {
            SpawnError::Setup(SetupError::Io {
                agent: def.name.clone(),
                path: root.clone(),
                source: e,
            })
        })?);
        if cacheable {
            self.built_agents()
                .insert(key, (built.clone(), workspace.clone()));
        }
        Ok((built, workspace))
    }

    /// Create a child of `agent` for `parent`: its agent, workspace and a fresh `sub-<uuid>`
    /// session, ready to take messages with [`start`](Self::start).
    pub fn create_child(&self, agent: &str, parent: &RunContext) -> Result<Child, SpawnError> {
        self.build_child(agent, parent, None)
    }

    /// Check that a child of `agent` can be made for `parent` (the agent exists, the depth
    /// cap allows it, its model resolves, a remote agent has an executor) and give it its
    /// session id, without building it: the errors a caller must see at once, at the cost of
    /// a few strings.
    pub(crate) fn plan_child(
        &self,
        agent: &str,
        parent: &Arc<RunContext>,
    ) -> Result<ChildPlan, SpawnError> {
        let def = self
            .registry
            .get(agent)
            .ok_or_else(|| SpawnError::UnknownAgent(agent.to_string()))?;
        if parent.depth + 1 > self.cfg.max_depth {
            return Err(SpawnError::DepthExceeded(self.cfg.max_depth));
        }
        let model = match &def.remote {
            Some(spec) => {
                if self.cfg.remote.is_none() {
                    return Err(SpawnError::Remote(def.name.clone()));
                }
                format!("remote:{}", spec.url)
            }
            None => {
                let spec = def.model.clone().unwrap_or_else(|| parent.model.clone());
                self.providers
                    .resolve(&spec)
                    .map_err(|e| SpawnError::Model {
                        agent: def.name.clone(),
                        message: e.to_string(),
                    })?;
                spec
            }
        };
        Ok(ChildPlan {
            agent: def.name.clone(),
            model,
            session_id: new_sub_session_id(),
            depth: parent.depth + 1,
            remote: def.remote.clone(),
            parent: parent.clone(),
        })
    }

    /// Build a planned child (when its task gets a slot).
    pub(crate) fn build_planned(&self, plan: &ChildPlan) -> Result<Child, SpawnError> {
        self.build(
            &plan.agent,
            &plan.parent,
            None,
            Some(plan.session_id.clone()),
        )
    }

    /// Build a child of `agent`; with `resume`, reopen that saved session (its history comes
    /// back from the transcript) instead of starting a fresh one.
    pub(crate) fn build_child(
        &self,
        agent: &str,
        parent: &RunContext,
        resume: Option<&str>,
    ) -> Result<Child, SpawnError> {
        self.build(agent, parent, resume, None)
    }

    fn build(
        &self,
        agent: &str,
        parent: &RunContext,
        resume: Option<&str>,
        fresh_id: Option<String>,
    ) -> Result<Child, SpawnError> {
        let def = self
            .registry
            .get(agent)
            .ok_or_else(|| SpawnError::UnknownAgent(agent.to_string()))?;
        let (runner, model) = match &def.remote {
            Some(spec) => {
                if parent.depth + 1 > self.cfg.max_depth {
                    return Err(SpawnError::DepthExceeded(self.cfg.max_depth));
                }
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
                let (agent, workspace) = self.local_agent(def, parent)?;
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
                    parent_session_id: Some(parent.session_id.clone()),
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
            depth: parent.depth + 1,
        })
    }
}
