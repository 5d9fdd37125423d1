//! Adopting orphans: a task whose policy is `resume` and whose node stopped beating it is
//! taken over here (a compare-and-swap on its owner and fencing epoch in the store, so of
//! the nodes that try exactly one wins), its child is built again from its definition, and
//! it continues from its checkpoint. The lost node's writes are refused from then on.

use super::{JobChild, JobStart, Parent, Resumed, SubagentRuntime};
use crate::runtime::child_job::AbortOnDrop;
use cadre_store::{OrphanPolicy, StoreResult, TaskRecord, Transition};
use cadre_tools::RunContext;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Open background tasks of a session that [`SubagentRuntime::look_elsewhere`] reads at most
/// (the rest are counted, not looked at).
pub const ELSEWHERE_LIMIT: usize = 256;

/// A session's background tasks as a parent waiting for them sees those not run here
/// ([`SubagentRuntime::look_elsewhere`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Elsewhere {
    /// Open, run by another node or process.
    pub running: usize,
    /// Lost by their owner and adopted here just now: they run here from now on.
    pub adopted: usize,
    /// Ended, their results not delivered yet.
    pub undelivered: usize,
    /// Open, but their owner is silent for the orphan timeout and nothing here or in a
    /// sweeper will end them (a remote agent's task, one whose agent is not defined here):
    /// not worth waiting for; their owner's node takes them up when it starts again.
    pub stranded: usize,
}

/// Looks for resumable orphans at an interval and adopts them. Stops when dropped.
pub struct Adopter {
    _task: AbortOnDrop,
}

impl std::fmt::Debug for Adopter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Adopter")
    }
}

impl SubagentRuntime {
    /// Adopt resumable orphans every `every` (jittered ±10%, the first look after one
    /// interval): tasks whose owner has not beaten them for `orphan_timeout`. Their
    /// children run as children of `parent` (its approvals, tools and what it passes down),
    /// under their own parent session. Every node should run one, whatever its own
    /// `on_orphan`: the policy is the task's, recorded when it was created.
    pub fn start_adopting(
        self: &Arc<Self>,
        parent: Parent,
        every: Duration,
        orphan_timeout: Duration,
    ) -> Adopter {
        let me: Weak<SubagentRuntime> = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            loop {
                let wait = cadre_store::jittered(every.max(Duration::from_millis(10)));
                tokio::time::sleep(wait).await;
                let Some(rt) = me.upgrade() else { return };
                let adopted = rt.adopt_orphans(&parent, orphan_timeout).await;
                if !adopted.is_empty() {
                    tracing::info!(count = adopted.len(), "adopted orphaned tasks: {adopted:?}");
                }
            }
        });
        Adopter {
            _task: AbortOnDrop(task),
        }
    }

    /// One look for resumable orphans: each whose agent is defined here is adopted and
    /// started again from its checkpoint. Returns the ids adopted. An orphan of an agent
    /// this node does not know is left for a node that does.
    pub async fn adopt_orphans(&self, parent: &Parent, orphan_timeout: Duration) -> Vec<String> {
        let orphans = match self.store.resumable_orphans(orphan_timeout).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(error = %e, "store: cannot list orphaned tasks");
                return Vec::new();
            }
        };
        let mut adopted = Vec::new();
        for orphan in orphans {
            if self.registry.get(&orphan.agent_id).is_none() {
                tracing::warn!(task = %orphan.id, agent = %orphan.agent_id, "orphan of an agent not defined here; left for another node");
                continue;
            }
            let won = self
                .store
                .adopt(&orphan.id, orphan.owner_epoch, orphan_timeout)
                .await;
            match won {
                Ok(Some(record)) => {
                    self.resume(record, &orphan.owner_node, parent).await;
                    adopted.push(orphan.id);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(task = %orphan.id, error = %e, "store: adopting failed"),
            }
        }
        adopted
    }

    /// Take up the unfinished tasks of `parent`'s session after the process that ran them
    /// was lost (`cadre run --resume`, the REPL's and TUI's `/resume`): each local one
    /// whose policy is `resume` and whose owner is gone is adopted and continued here from
    /// its checkpoint, as a task of `parent`, so the parent waits for it and gets its result
    /// like any other. An owner is gone when it is a dead process of this node (told by
    /// its process id and start time, at once) or when it has not beaten the task for
    /// [`RuntimeConfig::orphan_timeout`](crate::RuntimeConfig::orphan_timeout). Tasks of policy `fail` are failed by restart recovery or the
    /// sweeper; finished ones are delivered by the parent's next turn. Returns the ids
    /// adopted.
    pub async fn reattach(&self, parent: &Parent) -> Vec<String> {
        let session = parent.run.session_id.as_str();
        let tasks = match self.store.list_by_session(session).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(session, error = %e, "store: cannot list the session's tasks");
                return Vec::new();
            }
        };
        let mut adopted = Vec::new();
        for task in tasks {
            let id = task.id.clone();
            if self.adopt_if_lost(task, parent).await {
                adopted.push(id);
            }
        }
        adopted
    }

    /// Have the next top-level run of `session` [`reattach`](Self::reattach) the session's
    /// lost tasks when it starts, as children of that run: their usage (what they spent
    /// before and spend now) is then in the run's totals and charged to its budget, like
    /// that of the children it starts itself (`cadre run --resume`, and the REPL's and the
    /// TUI's `--resume`, `--continue` and `/resume`: their next prompt's run). The run says
    /// what it adopted in a notice.
    pub fn reattach_when_run_starts(&self, session: &str) {
        if let Ok(mut pending) = self.reattach_pending.lock() {
            pending.insert(session.to_string());
        }
    }

    /// The start of a run ([`TurnExtension::run_starts`](cadre_engine::TurnExtension)):
    /// a top-level run of a session marked by
    /// [`reattach_when_run_starts`](Self::reattach_when_run_starts) takes up its lost tasks.
    pub(crate) async fn run_starts(&self, run: &RunContext, cancel: &CancellationToken) {
        let marked = run.depth == 0
            && self
                .reattach_pending
                .lock()
                .is_ok_and(|mut p| p.remove(&run.session_id));
        if marked {
            let parent = self.top_level_parent(Arc::new(run.clone()), cancel.clone());
            let adopted = self.reattach(&parent).await;
            if !adopted.is_empty() {
                run.events.emit(cadre_types::EventEnvelope {
                    session_id: run.session_id.clone(),
                    agent: run.agent.clone(),
                    task_id: run.task_id.clone(),
                    event: cadre_types::Event::Notice {
                        message: format!(
                            "resumed {} task(s) of this session that a lost cadre left running: {}",
                            adopted.len(),
                            adopted.join(", ")
                        ),
                    },
                });
            }
        }
    }

    /// What the parent `run`, holding itself open for its session's background tasks, sees
    /// of those that run neither here nor wait in the spool (another node or process runs
    /// them), after adopting the lost ones among them as in [`reattach`](Self::reattach),
    /// as children of a [top-level parent](Self::top_level_parent) of `run`. Tasks beyond
    /// the first [`ELSEWHERE_LIMIT`] open ones count as running elsewhere.
    pub async fn look_elsewhere(
        &self,
        run: &RunContext,
        cancel: &CancellationToken,
    ) -> StoreResult<Elsewhere> {
        let summary = self
            .store
            .background_summary(&run.session_id, ELSEWHERE_LIMIT)
            .await?;
        let mut seen = Elsewhere {
            running: summary.open_total.saturating_sub(summary.open.len()),
            adopted: 0,
            undelivered: summary.undelivered,
            stranded: 0,
        };
        let mut parent = None;
        for task in summary.open {
            if self.local.contains(&task.id) || self.spool.record(&task.id).is_some() {
                continue;
            }
            let ends = self.owner_lives(&task) || self.taken_up_if_lost(&task);
            // Built only when there is something to adopt: most runs end with nothing open.
            let parent = parent.get_or_insert_with(|| {
                self.top_level_parent(Arc::new(run.clone()), cancel.clone())
            });
            if self.adopt_if_lost(task, parent).await {
                seen.adopted += 1;
            } else if ends {
                seen.running += 1;
            } else {
                seen.stranded += 1;
            }
        }
        Ok(seen)
    }

    /// Adopt `task` and continue it here as a task of `parent` when it is an unfinished
    /// local task of policy `resume` whose owner is gone (a dead process of this node, or
    /// silent for the orphan timeout) and whose agent is defined here. True if adopted.
    async fn adopt_if_lost(&self, task: TaskRecord, parent: &Parent) -> bool {
        if task.status.is_terminal()
            || !self.adoptable_here(&task)
            || self.local.contains(&task.id)
            // Ended here, its end not yet written: its owner is not lost.
            || self.spool.record(&task.id).is_some()
        {
            return false;
        }
        let timeout = if self.owner_died_here(&task) {
            Duration::ZERO
        } else {
            self.cfg.orphan_timeout
        };
        match self.store.adopt(&task.id, task.owner_epoch, timeout).await {
            Ok(Some(record)) => {
                self.resume(record, &task.owner_node, parent).await;
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(task = %task.id, error = %e, "store: adopting failed");
                false
            }
        }
    }

    /// True when `task`'s owner has beaten it within the orphan timeout.
    fn owner_lives(&self, task: &TaskRecord) -> bool {
        let seen = task.heartbeat_at.unwrap_or(task.created_at);
        let timeout = u64::try_from(self.cfg.orphan_timeout.as_millis()).unwrap_or(u64::MAX);
        cadre_types::unix_millis().saturating_sub(seen) < timeout && !self.owner_died_here(task)
    }

    /// True when something ends `task` once its owner is lost: a sweeper (a local task of
    /// policy `fail`; every node's maintenance runs one), or this node adopting it (policy
    /// `resume`, its agent defined here).
    fn taken_up_if_lost(&self, task: &TaskRecord) -> bool {
        (task.transport.is_local() && task.on_orphan == OrphanPolicy::Fail)
            || self.adoptable_here(task)
    }

    /// True when this node may adopt `task` once its owner is lost: a local task of policy
    /// `resume` whose agent is defined here.
    fn adoptable_here(&self, task: &TaskRecord) -> bool {
        task.transport.is_local()
            && task.on_orphan == OrphanPolicy::Resume
            && self.registry.get(&task.agent_id).is_some()
    }

    /// True when `task`'s owner is a process of this node that no longer runs.
    fn owner_died_here(&self, task: &TaskRecord) -> bool {
        if task.owner_node != self.store.node_id().as_str() {
            return false;
        }
        task.owner_instance
            .as_deref()
            .is_none_or(|i| i != cadre_store::current_instance() && !cadre_store::instance_alive(i))
    }

    /// Run an adopted task here: its child rebuilt for its own parent session, its
    /// conversation from the checkpoint. A child that cannot be built, or a checkpoint that
    /// cannot be read, fails the task (this node owns it now).
    async fn resume(&self, record: TaskRecord, lost_node: &str, parent: &Parent) {
        let id = record.id.clone();
        let epoch = record.owner_epoch;
        tracing::info!(task = %id, lost = lost_node, "resuming a task after its node was lost");
        let parent = adopted_parent(parent, &record, self.cfg.max_depth);
        let checkpoint = self.store.read_checkpoint(&id).await;
        let own = self.own_servers(&record.agent_id, &parent).await;
        let plan = self.plan_child(&record.agent_id, &parent, own);
        let (mut plan, checkpoint) = match (plan, checkpoint) {
            (Ok(plan), Ok(cp)) => (plan, cp),
            (Err(e), _) => return self.fail_adopted(&id, epoch, e.to_string()).await,
            (_, Err(e)) => {
                let why = format!("cannot read its checkpoint to resume it: {e}");
                return self.fail_adopted(&id, epoch, why).await;
            }
        };
        if let Some(sid) = &record.child_session_id {
            plan.session_id = sid.clone();
            let dir = self.cfg.sessions_dir.as_deref();
            plan.reopen = !dir.is_some_and(|d| forget_unwritten_transcript(d, sid));
        }
        let registered = self.register(&id, &parent, record.background, false);
        self.launch(JobStart {
            registered,
            conversation: None,
            message: None,
            task_id: id,
            child: JobChild::Planned(Box::new(plan)),
            created: record.clone(),
            background: record.background,
            parent: &parent,
            checkpoints: true,
            epoch,
            resumed: Some(Resumed {
                checkpoint,
                lost_node: lost_node.to_string(),
            }),
        });
    }

    async fn fail_adopted(&self, id: &str, epoch: u64, error: String) {
        tracing::warn!(task = %id, error = %error, "an adopted task cannot be resumed");
        let t = Transition::failed(error).fenced(epoch);
        if let Err(e) =
            cadre_store::transition_retrying(self.store.as_ref(), id, t, self.cfg.store_write_retry)
                .await
        {
            tracing::warn!(task = %id, error = %e, "store: cannot fail an adopted task");
        }
    }
}

/// The most of a transcript read to tell whether it holds a whole record.
const UNWRITTEN_PEEK: u64 = 64 * 1024;

/// Remove the transcript of session `sid` under `dir` when it holds no whole record: the
/// lost process created the file and died before writing its first record (records are
/// buffered until the first message is written), so nothing was recorded there, and the
/// adopted child starts its session afresh under the same id. True when removed. An id
/// that is not a plain session id (it came from the store) is left alone.
fn forget_unwritten_transcript(dir: &std::path::Path, sid: &str) -> bool {
    let plain = !sid.is_empty()
        && sid.len() <= 128
        && sid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return false;
    }
    let path = dir.join(format!("{sid}.jsonl"));
    let Ok(file) = std::fs::File::open(&path) else {
        return false;
    };
    let mut head = Vec::new();
    let read =
        std::io::Read::read_to_end(&mut std::io::Read::take(file, UNWRITTEN_PEEK), &mut head);
    let unwritten = read.is_ok() && (head.len() as u64) < UNWRITTEN_PEEK && !head.contains(&b'\n');
    if !unwritten {
        return false;
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {
            tracing::info!(
                session = sid,
                "an adopted child's transcript was never written; started afresh"
            );
            true
        }
        Err(e) => {
            tracing::warn!(session = sid, error = %e, "cannot remove an unwritten transcript");
            false
        }
    }
}

/// The parent an adopted task's child runs under: `parent` (this node's), speaking for the
/// task's own parent session, agent and user, one level above the depth the child ran at,
/// so the child is rebuilt with what it had there and no more (a child at the cap gets no
/// delegation tools). A depth the record does not know, or one beyond this node's cap, is
/// taken as the cap: permissions only narrow.
fn adopted_parent(parent: &Parent, record: &TaskRecord, max_depth: u32) -> Parent {
    let mut run = (*parent.run).clone();
    run.session_id = record.parent_session_id.clone();
    run.agent = record
        .parent_agent_id
        .clone()
        .unwrap_or_else(|| "main".to_string());
    run.user_id = record.user_id.clone();
    run.task_id = None;
    run.depth = record
        .depth
        .unwrap_or(max_depth)
        .min(max_depth)
        .saturating_sub(1);
    Parent {
        run: Arc::new(run),
        ..parent.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::forget_unwritten_transcript;

    #[test]
    fn only_a_transcript_without_a_whole_record_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("sub-empty.jsonl"), "").unwrap();
        std::fs::write(d.join("sub-torn.jsonl"), "{\"kind\":\"me").unwrap();
        std::fs::write(d.join("sub-kept.jsonl"), "{\"kind\":\"meta\"}\n").unwrap();
        assert!(forget_unwritten_transcript(d, "sub-empty"));
        assert!(forget_unwritten_transcript(d, "sub-torn"));
        assert!(!forget_unwritten_transcript(d, "sub-kept"));
        assert!(!forget_unwritten_transcript(d, "sub-missing"));
        assert!(!d.join("sub-empty.jsonl").exists());
        assert!(d.join("sub-kept.jsonl").exists());
    }

    #[test]
    fn a_hostile_session_id_touches_nothing_outside() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        let outside = dir.path().join("victim.jsonl");
        std::fs::write(&outside, "").unwrap();
        for sid in ["../victim", "..", "", "a/b", "victim\0", " ../victim"] {
            assert!(!forget_unwritten_transcript(&sessions, sid), "{sid:?}");
        }
        assert!(outside.exists());
    }
}
