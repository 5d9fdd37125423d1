//! A child job's run proper: its agent on its conversation, continued from a checkpoint
//! when the task was adopted from a lost node, or a remote agent's run seen as a local one.

use crate::runtime::checkpoint::Checkpointer;
use crate::runtime::child_job::{AbortOnDrop, ChildJob};
use crate::runtime::lease::OwnerLease;
use crate::runtime::remote::{OnRemoteId, RemoteApprovals, RemoteExecutor, RemoteRequest};
use crate::runtime::{Child, ChildRunner};
use cadre_engine::{Agent, RunOutcome, Session};
use cadre_store::{Checkpoint, TaskStore};
use cadre_tools::{RunContext, Spend, Workspace};
use cadre_types::{EndState, Event, EventEnvelope, Message, Usage};
use std::sync::{Arc, Mutex};

/// Why the calls a lost node had in flight stopped, as the resumed child's model reads it.
const LOST: &str = "the node running it was lost";

impl ChildJob {
    /// Run `child` on `session` for this task: from `restored` (the checkpoint of an
    /// adopted task), from its reopened transcript (`adopted` before a checkpoint), or
    /// from the task's prompt.
    pub(super) async fn execute(
        &mut self,
        child: &Child,
        session: &mut Session,
        run: Arc<RunContext>,
        lease: &Arc<OwnerLease>,
        (adopted, restored): (bool, Option<Checkpoint>),
    ) -> RunOutcome {
        let id = &self.task_id;
        match (&child.runner, restored) {
            (ChildRunner::Local { agent, workspace }, Some(cp)) => {
                self.run_from_checkpoint(agent, workspace, session, run, lease, cp)
                    .await
            }
            // Adopted before its first reply was checkpointed, its transcript reopened here:
            // that holds the task message the lost process gave it, so the child goes on
            // from there rather than being given the message a second time.
            (ChildRunner::Local { agent, workspace }, None)
                if adopted && !session.messages().is_empty() =>
            {
                let (ws, cancel) = (workspace.clone(), self.cancel.clone());
                let observer =
                    Checkpointer::new(self.store.clone(), id, self.epoch).leased(lease.clone());
                let resume = cadre_engine::Resume {
                    spent: Usage::default(),
                    why: LOST.to_string(),
                };
                agent
                    .resume_observed(session, &resume, run, ws, cancel, &observer)
                    .await
            }
            (ChildRunner::Local { agent, workspace }, None) => {
                let prompt = Some(std::mem::take(&mut self.prompt));
                let (ws, cancel) = (workspace.clone(), self.cancel.clone());
                if self.checkpoints {
                    let observer =
                        Checkpointer::new(self.store.clone(), id, self.epoch).leased(lease.clone());
                    agent
                        .run_observed(session, prompt, run, ws, cancel, &observer)
                        .await
                } else {
                    agent.run(session, prompt, run, ws, cancel).await
                }
            }
            (
                ChildRunner::Remote {
                    spec,
                    executor,
                    context_id,
                },
                _,
            ) => {
                let remote = Remote {
                    spec,
                    executor,
                    context_id,
                };
                self.run_remote(child, remote, session, run).await
            }
        }
    }

    /// Continue an adopted task's conversation from `cp`, its checkpoint.
    async fn run_from_checkpoint(
        &self,
        agent: &Agent,
        workspace: &Arc<Workspace>,
        session: &mut Session,
        run: Arc<RunContext>,
        lease: &Arc<OwnerLease>,
        cp: Checkpoint,
    ) -> RunOutcome {
        let (ws, cancel) = (workspace.clone(), self.cancel.clone());
        match super::checkpoint::restore(session, &cp.messages) {
            Ok(extends) => {
                let (generation, stored) = if extends {
                    (cp.generation, cp.messages.len())
                } else {
                    (cp.generation + 1, 0)
                };
                let observer = Checkpointer::continuing(
                    self.store.clone(),
                    &self.task_id,
                    self.epoch,
                    generation,
                    session.compactions(),
                    stored,
                )
                .leased(lease.clone());
                let resume = cadre_engine::Resume {
                    spent: cp.usage,
                    why: LOST.to_string(),
                };
                agent
                    .resume_observed(session, &resume, run, ws, cancel, &observer)
                    .await
            }
            Err(e) => RunOutcome {
                state: EndState::Failed {
                    error: format!("cannot restore the checkpoint: {e}"),
                },
                output: String::new(),
                turns: 0,
                usage: cp.usage,
            },
        }
    }

    /// Run the task on a remote agent, its prompt and answer kept in `session` and its
    /// end told as a local run's is.
    async fn run_remote(
        &mut self,
        child: &Child,
        remote: Remote<'_>,
        session: &mut Session,
        run: Arc<RunContext>,
    ) -> RunOutcome {
        let (id, sid) = (&self.task_id, &child.session_id);
        let context = remote.context_id.lock().ok().and_then(|c| c.clone());
        let _ = session.push(Message::user(self.prompt.clone()));
        let request = RemoteRequest {
            agent: child.name.clone(),
            spec: remote.spec.clone(),
            prompt: std::mem::take(&mut self.prompt),
            task_id: id.clone(),
            session_id: sid.clone(),
            context_id: context,
            on_remote_id: Some(record_remote_id(&self.store, id)),
            approvals: RemoteApprovals(run.approvals.clone()),
        };
        let events = run.events.clone();
        // The remote run spends from the parent's budget: stopped when it runs out,
        // and charged with what it reports at its end.
        let stop = self.cancel.clone();
        let budget = run.budget.clone();
        let _watch = budget.is_limited().then(|| {
            let (stop, budget) = (stop.clone(), budget.clone());
            AbortOnDrop(tokio::spawn(async move {
                budget.exhausted().await;
                stop.cancel();
            }))
        });
        let mut outcome = remote.executor.run(request, events.clone(), stop).await;
        budget.charge(Spend::tokens(outcome.usage));
        if outcome.state == EndState::Cancelled
            && let Some(limit) = budget.exceeded()
        {
            outcome.state = EndState::LimitReached { limit };
        }
        if let (Some(c), Ok(mut slot)) = (outcome.context_id.clone(), remote.context_id.lock()) {
            *slot = Some(c);
        }
        if !outcome.output.is_empty() {
            let _ = session.push(Message::assistant(outcome.output.clone()));
        }
        // The local view of a remote run ends like a local one.
        events.emit(EventEnvelope {
            session_id: sid.clone(),
            agent: child.name.clone(),
            task_id: Some(id.clone()),
            event: Event::Done {
                state: outcome.state.clone(),
                output: outcome.output.clone(),
                turns: 0,
                usage: outcome.usage,
            },
        });
        RunOutcome {
            state: outcome.state,
            output: outcome.output,
            turns: 0,
            usage: outcome.usage,
        }
    }
}

/// A remote child's runner: where it runs, who talks to it, its conversation there.
struct Remote<'a> {
    spec: &'a crate::definitions::definition::RemoteSpec,
    executor: &'a Arc<dyn RemoteExecutor>,
    context_id: &'a Arc<Mutex<Option<String>>>,
}

/// A callback that records the remote task id in the store (in the background; a failed
/// write is only logged, the run goes on).
fn record_remote_id(store: &Arc<dyn TaskStore>, task_id: &str) -> OnRemoteId {
    let store = store.clone();
    let task_id = task_id.to_string();
    OnRemoteId::new(move |remote_id: &str| {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = store.clone();
        let task_id = task_id.clone();
        let remote_id = remote_id.to_string();
        rt.spawn(async move {
            if let Err(e) = store.set_remote_task_id(&task_id, &remote_id).await {
                tracing::warn!(task = %task_id, error = %e, "cannot record the remote task id");
            }
        });
    })
}
