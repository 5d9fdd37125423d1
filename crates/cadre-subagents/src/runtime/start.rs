//! Starting work: a one-off task (`task`), a message to a child (`agent_send`) and a live
//! child with its first task (`agent_spawn`), each checked, created in the store and
//! launched.
//!
//! A delegation fan-out holds one of these futures per call while the store's writer works
//! through the creates, so what they keep across that wait is kept small: the steps before
//! it run before the future is made (an `async fn` keeps its by-value arguments twice), and
//! rare steps (worktrees) are boxed rather than laid out beside every call's wait.

use crate::runtime::live::LiveChild;
use crate::runtime::servers::ChildRoot;
use crate::runtime::tracker::Registered;
use crate::runtime::worktree::{Worktree, WorktreeSpec, live_name};
use crate::runtime::{
    Child, ChildMessage, JobChild, JobStart, LiveRequest, Parent, SpawnError, SpawnRequest,
    Started, SubagentRuntime,
};
use cadre_engine::Session;
use cadre_store::{LiveChildEntry, NewTask, StoreError, TaskRecord, Transport};
use cadre_types::{new_task_id, unix_millis};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// A task ready to be created in the store, and what its launch needs afterwards.
struct PreparedJob {
    task: NewTask,
    child: JobChild,
    checkpoints: bool,
    registered: Registered,
    conversation: Option<tokio::sync::OwnedMutexGuard<Session>>,
    message: Option<ChildMessage>,
}

impl PreparedJob {
    /// The same job, its task recorded as asked for by the parent's tool call `call_id`.
    fn for_call(mut self, call_id: Option<String>) -> Self {
        self.task.parent_call_id = call_id;
        self
    }

    /// What [`SubagentRuntime::launch`] takes once the task is `created`.
    fn start(self, created: TaskRecord, parent: &Parent) -> JobStart<'_> {
        JobStart {
            task_id: self.task.id,
            child: self.child,
            background: self.task.background,
            parent,
            checkpoints: self.checkpoints,
            epoch: 0,
            resumed: None,
            created,
            registered: self.registered,
            conversation: self.conversation,
            message: self.message,
        }
    }
}

/// Remove the worktree of a live child that could not be made: nothing ran in it, so it
/// goes with its branch. Boxed: rare, and larger than the rest of the start.
async fn discard(worktree: Option<&Worktree>) {
    if let Some(w) = worktree {
        Box::pin(w.close("unused")).await;
    }
}

/// A worktree is made on this machine, so an agent that runs elsewhere cannot have one.
fn worktree_is_local(agent: &str, remote: bool) -> Result<(), SpawnError> {
    if remote {
        return Err(SpawnError::Isolation(format!(
            "agent {agent} runs remotely; isolation: worktree applies to local agents"
        )));
    }
    Ok(())
}

/// A store's refusal of a taken label, as the caller's error naming the label.
fn label_clash(e: SpawnError, label: Option<&str>) -> SpawnError {
    match e {
        SpawnError::Store(StoreError::LabelInUse(_)) => {
            SpawnError::LabelInUse(label.unwrap_or_default().to_string())
        }
        other => other,
    }
}

impl SubagentRuntime {
    /// Start a one-off child (the `task` tool). It is checked now and built when it gets a
    /// slot; it runs in its own task, and foreground callers wait with [`wait`](Self::wait).
    pub async fn spawn(&self, req: SpawnRequest, parent: &Parent) -> Result<Started, SpawnError> {
        let isolation = req
            .isolation
            .or_else(|| self.registry.get(&req.agent).and_then(|d| d.isolation));
        let at = match isolation {
            Some(crate::Isolation::Worktree) => ChildRoot::WorktreeToBe,
            None => ChildRoot::Planned,
        };
        let own = self.own_servers_at(&req.agent, parent, at).await;
        let mut plan = Box::new(self.plan_child(&req.agent, parent, own)?);
        if isolation == Some(crate::Isolation::Worktree) {
            worktree_is_local(&plan.agent, plan.remote.is_some())?;
            let spec = WorktreeSpec::prepare(&parent.root, &self.cfg.main_workspace);
            plan.worktree = Some(Box::pin(spec).await?);
        }
        // The parent finds the task by its call again when it resumes after a crash. The
        // job is made in the call, not kept in a local: that would hold it twice across
        // the create's wait.
        self.create_and_launch(
            self.prepare_job(
                JobChild::Planned(plan),
                req.prompt,
                req.description,
                req.background,
                parent,
            )
            .for_call(req.call_id),
            parent,
            None,
        )
        .await
    }

    /// [`spawn`](Self::spawn) into the caller's team `team` (created on first use; the
    /// caller leads it). The child joins as its agent's name.
    pub async fn spawn_in_team(
        &self,
        req: SpawnRequest,
        team: &str,
        parent: &Parent,
    ) -> Result<Started, SpawnError> {
        let seat = Box::pin(self.seat_for(&req.agent, &req.agent, team, parent)).await?;
        let isolation = req
            .isolation
            .or_else(|| self.registry.get(&req.agent).and_then(|d| d.isolation));
        if isolation.is_some() {
            return Err(SpawnError::Isolation(
                "a team member cannot run in its own worktree yet".into(),
            ));
        }
        let own = self
            .own_servers_at(&req.agent, parent, ChildRoot::Planned)
            .await;
        let mut plan = Box::new(self.plan_child(&req.agent, parent, own)?);
        plan.decided = plan.decided.clone().seated(seat);
        self.create_and_launch(
            self.prepare_job(
                JobChild::Planned(plan),
                req.prompt,
                req.description,
                req.background,
                parent,
            )
            .for_call(req.call_id),
            parent,
            None,
        )
        .await
    }

    /// Join a child of `agent` labelled `label` to `parent`'s team `team`: its seat.
    async fn seat_for(
        &self,
        agent: &str,
        label: &str,
        team: &str,
        parent: &Parent,
    ) -> Result<Arc<crate::runtime::teams::TeamSeat>, SpawnError> {
        let def = self
            .registry
            .get(agent)
            .ok_or_else(|| SpawnError::UnknownAgent(agent.to_string()))?;
        let member = cadre_store::NewMember {
            label: label.to_string(),
            agent: def.name.clone(),
            task_id: None,
        };
        let seat = crate::runtime::teams::join(
            self.store.as_ref(),
            &parent.run.session_id,
            &parent.run.agent,
            team,
            member,
            def.can_message.clone(),
            self.cfg.max_team_size,
        )
        .await?;
        self.led.add(&parent.run.session_id, team);
        Ok(Arc::new(seat))
    }

    /// Give `child` a message to work on, as a new task. The child keeps its history; a child
    /// already busy takes the message when its current task ends.
    pub async fn start(
        &self,
        child: &Child,
        prompt: String,
        description: String,
        background: bool,
        parent: &Parent,
    ) -> Result<Started, SpawnError> {
        self.start_job(
            JobChild::Ready(child.clone()),
            prompt,
            description,
            background,
            parent,
            None,
        )
        .await
    }

    /// Start a task of `child`; with `live`, the live child is stored with the task.
    fn start_job<'a>(
        &'a self,
        child: JobChild,
        prompt: String,
        description: String,
        background: bool,
        parent: &'a Parent,
        live: Option<&'a LiveChildEntry>,
    ) -> impl Future<Output = Result<Started, SpawnError>> + 'a {
        let job = self.prepare_job(child, prompt, description, background, parent);
        self.create_and_launch(job, parent, live)
    }

    /// Create the task of `job` in the store (with `live`, the live child with it), then
    /// launch it.
    fn create_and_launch<'a>(
        &'a self,
        job: PreparedJob,
        parent: &'a Parent,
        live: Option<&'a LiveChildEntry>,
    ) -> impl Future<Output = Result<Started, SpawnError>> + 'a {
        // A database restart is waited out; a store that stays down is the caller's error.
        let within = self.cfg.store_write_retry.min(self.cfg.store_create_retry);
        // Not an `async fn`: that would keep `job` twice, as an argument and in its body.
        async move {
            let store = self.store.as_ref();
            let created = match live {
                None => cadre_store::create_retrying(store, &job.task, within).await?,
                Some(entry) => {
                    cadre_store::create_live_retrying(store, entry, &job.task, within).await?
                }
            };
            Ok(self.launch(job.start(created, parent)))
        }
    }

    /// Register a new task of `child` here and describe it for the store.
    fn prepare_job(
        &self,
        child: JobChild,
        prompt: String,
        description: String,
        background: bool,
        parent: &Parent,
    ) -> PreparedJob {
        let task_id = new_task_id();
        let (transport, remote_headers) = match child.remote() {
            Some(r) => (Transport::Remote { url: r.url.clone() }, r.headers.clone()),
            None => (Transport::Local, BTreeMap::new()),
        };
        let parent_agent = &parent.run.agent;
        let on_orphan = self
            .cfg
            .orphan_policy(self.registry.get(child.name()), child.resumable());
        // A task whose slot is free starts at once, so it is created `running`; a live
        // child's also needs to be the child's only message (an earlier one may be being
        // created, wait or run) and its conversation: else it is created `pending` and
        // waits its turn.
        let mut registered = self.register(&task_id, parent, background, true);
        let message = match &child {
            JobChild::Ready(c) => Some(ChildMessage::enter(c)),
            JobChild::Planned(_) => None,
        };
        let conversation = match (&child, &registered.permit, &message) {
            (JobChild::Ready(c), Some(_), Some((_, true))) => {
                c.session.clone().try_lock_owned().ok()
            }
            _ => None,
        };
        if matches!(child, JobChild::Ready(_)) && conversation.is_none() {
            registered.permit = None;
        }
        let task = NewTask {
            id: task_id,
            agent_id: child.name().to_string(),
            parent_agent_id: (parent_agent != "main").then(|| parent_agent.clone()),
            parent_session_id: parent.run.session_id.clone(),
            child_session_id: Some(child.session_id().to_string()),
            user_id: parent.run.user_id.clone(),
            prompt,
            description,
            background,
            transport,
            remote_headers,
            on_orphan,
            depth: child.depth(),
            // Set by the caller that has one (a `task` call).
            parent_call_id: None,
            // The spawning call's span: an adopter continues the trace from it.
            trace_parent: cadre_tools::otel::current_traceparent(),
            running: registered.permit.is_some(),
        };
        PreparedJob {
            task,
            child,
            checkpoints: self.cfg.checkpoints || on_orphan == cadre_store::OrphanPolicy::Resume,
            registered,
            conversation,
            message: message.map(|(m, _)| m),
        }
    }

    /// Create a live child with an optional label, scoped to the parent session (and
    /// recorded in the store, so it can be found again after a restart). With
    /// `isolation: worktree` it gets its git worktree now and keeps it until it is
    /// [closed](Self::close_live).
    pub async fn spawn_live(
        &self,
        req: LiveRequest,
        parent: &Parent,
    ) -> Result<(Arc<LiveChild>, Option<Started>), SpawnError> {
        // Boxed, as every start: a fan-out's starts wait together on the store's writer.
        Box::pin(self.spawn_live_in_team(req, None, parent)).await
    }

    /// [`spawn_live`](Self::spawn_live), with `team` into the caller's team of that name
    /// (created on first use; the caller leads it). The member's label in the team is its
    /// label, which defaults to its agent's name.
    pub async fn spawn_live_in_team(
        &self,
        mut req: LiveRequest,
        team: Option<&str>,
        parent: &Parent,
    ) -> Result<(Arc<LiveChild>, Option<Started>), SpawnError> {
        let seat = match team {
            Some(t) => {
                let label = req.label.get_or_insert_with(|| req.agent.clone()).clone();
                if self.live.label_taken(&parent.run.session_id, &label) {
                    return Err(SpawnError::LabelInUse(label));
                }
                // Boxed: joining (a store write) is not laid out in every live start.
                Some(Box::pin(self.seat_for(&req.agent, &label, t, parent)).await?)
            }
            None => None,
        };
        if let Some(l) = &req.label
            && self.live.label_taken(&parent.run.session_id, l)
        {
            return Err(SpawnError::LabelInUse(l.clone()));
        }
        let def = self
            .registry
            .get(&req.agent)
            .ok_or_else(|| SpawnError::UnknownAgent(req.agent.clone()))?;
        let key = format!("agent:{}:{}", def.name, uuid::Uuid::new_v4());
        let worktree = match req.isolation.or(def.isolation) {
            Some(crate::Isolation::Worktree) => {
                worktree_is_local(&def.name, def.remote.is_some())?;
                let made = self.live_worktree(parent, &key, &def.name);
                Some(Arc::new(Box::pin(made).await?))
            }
            None => None,
        };
        let own = {
            let root = worktree.as_ref().map(|w| w.root());
            let at = root.as_deref().map_or(ChildRoot::Planned, ChildRoot::At);
            self.own_servers_at(&req.agent, parent, at).await
        };
        let built = match seat {
            Some(seat) => self.build_seated(&req.agent, parent, own, worktree.clone(), seat),
            None => self.build_child(&req.agent, parent, None, own, worktree.clone()),
        };
        let child = match built {
            Ok(child) => child,
            Err(e) => {
                discard(worktree.as_deref()).await;
                return Err(e);
            }
        };
        let first = req.task.map(|t| (t, req.background));
        let started = self.record_live(key, req.label, child, parent, first).await;
        if started.is_err() {
            discard(worktree.as_deref()).await;
        }
        started
    }

    /// A new git worktree for the live child `key` of agent `agent`.
    async fn live_worktree(
        &self,
        parent: &Parent,
        key: &str,
        agent: &str,
    ) -> Result<Worktree, SpawnError> {
        let spec = WorktreeSpec::prepare(&parent.root, &self.cfg.main_workspace).await?;
        Ok(Worktree::create(&spec, &live_name(key), agent).await?)
    }

    /// Keep a new live child here and in the store; with a `first` message (and whether it
    /// runs in the background), start it as a task stored with the child.
    fn record_live<'a>(
        &'a self,
        key: String,
        label: Option<String>,
        child: Child,
        parent: &'a Parent,
        first: Option<(String, bool)>,
    ) -> impl Future<Output = Result<(Arc<LiveChild>, Option<Started>), SpawnError>> + 'a {
        let session = &parent.run.session_id;
        let entry = LiveChildEntry {
            agent_key: key.clone(),
            label: label.clone(),
            agent_id: child.name.clone(),
            parent_session_id: session.clone(),
            child_session_id: child.session_id.clone(),
            depth: child.depth,
            created_at: unix_millis(),
        };
        // Kept here before it is stored (and forgotten again if the store refuses it): its
        // first task's job may start as soon as the two are stored.
        let added = self
            .live
            .add(
                session,
                LiveChild {
                    key,
                    agent_id: child.name.clone(),
                    label,
                    child,
                    last_task: Mutex::new(None),
                },
            )
            .map_err(|e| SpawnError::LabelInUse(e.0));
        async move {
            let live = added?;
            let stored = match first {
                None => self
                    .store
                    .insert_live_child(&entry)
                    .await
                    .map(|()| None)
                    .map_err(SpawnError::Store),
                Some((message, background)) => {
                    let description = crate::short_title(&message);
                    let child = JobChild::Ready(live.child.clone());
                    self.start_job(
                        child,
                        message,
                        description,
                        background,
                        parent,
                        Some(&entry),
                    )
                    .await
                    .map(Some)
                }
            };
            match stored {
                Ok(started) => {
                    if let Some(s) = &started {
                        live.set_last_task(&s.task_id);
                    }
                    Ok((live, started))
                }
                Err(e) => {
                    self.live.remove(&parent.run.session_id, &live.key);
                    Err(label_clash(e, live.label.as_deref()))
                }
            }
        }
    }
}
