//! One scenario run through the real engine and sub-agent runtime: the parent delegates N
//! workers, each calls `noop` once and answers; background variants are held until every
//! task has ended. Checks that the run completed and counts what reached the parent.

use crate::responder::FANOUT_MARKER;
use crate::wiring::{MODEL_SPEC, WireOptions, wire};
use anyhow::{Context, Result, bail};
use cadre_engine::{AutoApprove, Session, SessionMeta};
use cadre_llm::ProviderRegistry;
use cadre_subagents::{SubagentRuntime, TaskStatus};
use cadre_tools::{RunContext, Workspace};
use cadre_types::{EndState, Message, NullSink, new_session_id, unix_millis};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What one scenario run did.
#[derive(Debug, Clone)]
pub struct ScenarioRun {
    /// Wall time from the parent's prompt until every sub-agent task had ended.
    pub elapsed: Duration,
    /// Wiring time (providers, registry, runtime, parent), not included in `elapsed`.
    pub setup: Duration,
    /// CPU time of the process (all threads) over `elapsed` only: without opening the
    /// store (its schema on a fresh file), the wiring and the clean-up after the run.
    pub timed_cpu: Duration,
    /// What the task store did over `elapsed`, when there is one.
    pub store_counts: Option<crate::wiring::StoreCounts>,
    /// Model turns of the parent (= its model requests).
    pub parent_turns: u32,
    /// Distinct completed results that reached the parent's conversation.
    pub delivered: usize,
    /// The parent's last request was refused with HTTP 413 by the mock server (its
    /// request body limit); the sub-agents all completed, the parent's final turn did not.
    pub parent_rejected: bool,
    /// The process's RSS (KiB) once every result was delivered, the runtime and the
    /// parent's session still alive.
    pub rss_after_delivery_kib: u64,
    /// The parent's conversation at that point, as JSON bytes: what the session holds by
    /// design (every call and result), apart from what the runtime keeps.
    pub conversation_bytes: usize,
    /// The process's RSS (KiB) once the parent's session was dropped too, the runtime (and
    /// its store) still alive: what the runtime keeps after delivery.
    pub rss_after_session_kib: u64,
    /// The live heap (KiB, with the `live-heap` feature) at the first reading above.
    pub live_after_delivery_kib: Option<u64>,
    /// The live heap (KiB, with the `live-heap` feature) at the second.
    pub live_after_session_kib: Option<u64>,
}

/// True when a run failed because the mock server refused a too-large request body: a 413,
/// or the connection closed while the body was still being sent (the server answers 413
/// and closes as soon as it has read 2 MiB). Only taken as such after every sub-agent
/// completed, i.e. on the parent's request after the fan-out.
pub fn is_body_limit(state: &EndState) -> bool {
    matches!(state, EndState::Failed { error }
        if error.contains("HTTP 413")
            || error.contains("error writing a body to connection")
            || error.contains("Broken pipe"))
}

/// Settings of a scenario run.
#[derive(Debug, Clone)]
pub struct ScenarioOptions {
    /// Number of sub-agents.
    pub n: usize,
    /// Sub-agents running at once.
    pub max_concurrent: usize,
    /// The providers; shared between runs they keep their connection pool warm.
    pub providers: Arc<ProviderRegistry>,
    /// JSONL sessions in a temporary directory.
    pub persist: bool,
    /// The task store to write through.
    pub store: crate::cli::StoreKind,
    /// Checkpoint children's conversations in the store.
    pub checkpoints: bool,
}

/// The parent's prompt for N sub-agents.
pub fn parent_prompt(n: usize) -> String {
    format!(
        "Start {FANOUT_MARKER}{n} worker sub-agents in parallel, one job each, and tell me when all are done."
    )
}

/// Wait until every task of the run is terminal (they all run in this process).
async fn drain(runtime: &SubagentRuntime) {
    runtime.wait_idle().await;
}

/// Completed results visible to the parent: foreground `task` results, delivered background
/// results and `task_output` answers (distinct task ids where the text names them).
fn delivered(messages: &[Message]) -> usize {
    let mut ids = HashSet::new();
    let mut anonymous = 0;
    for m in messages {
        match m {
            Message::Tool { content, .. } if content.starts_with("<task state=\"completed\"") => {
                anonymous += 1;
            }
            Message::Tool { content, .. } if content.contains("\nstatus: completed") => {
                if let Some(id) = content.lines().find_map(|l| l.strip_prefix("task_id: ")) {
                    ids.insert(id.to_string());
                }
            }
            Message::User { content } if content.starts_with("<background-task-results>") => {
                for part in content.split("<task id=\"").skip(1) {
                    if let Some((id, rest)) = part.split_once('"')
                        && rest.contains("state=\"completed\"")
                    {
                        ids.insert(id.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    anonymous + ids.len()
}

/// How many bytes `messages` take as JSON, counted as they are written: a buffer of them
/// (megabytes at N = 10 000) would be freed just before the next RSS reading.
fn json_size(messages: &[Message]) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, messages) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// Run the scenario once in a fresh temporary workspace with a fresh runtime, parent agent
/// and session (the providers, and so the HTTP connection pool, are the caller's).
#[expect(
    clippy::too_many_lines,
    reason = "one benchmark run set up and measured in order; split, the timed part would be harder to see"
)]
pub async fn run_once(opts: &ScenarioOptions) -> Result<ScenarioRun> {
    let dir = tempfile::tempdir().context("creating the scenario workspace")?;
    let ws = dir.path().canonicalize()?;
    let sessions_dir = opts.persist.then(|| ws.join(".cadre").join("sessions"));
    // Opening the store (and creating its schema) is set-up, not measured.
    let store = crate::wiring::open_store(opts.store, &ws).await?;
    let t0 = Instant::now();
    let wiring = wire(
        &ws,
        &WireOptions {
            providers: opts.providers.clone(),
            sessions_dir: sessions_dir.clone(),
            n: opts.n,
            max_concurrent: opts.max_concurrent,
            store: store.as_ref().map(|s| s.store.clone()),
            checkpoints: opts.checkpoints,
        },
    )?;
    let meta = SessionMeta {
        id: new_session_id(),
        agent: "main".into(),
        model: MODEL_SPEC.into(),
        created_at: unix_millis(),
        parent_session_id: None,
    };
    let session_id = meta.id.clone();
    let mut session = match &sessions_dir {
        Some(d) => Session::create(d, meta).context("creating the parent session")?,
        None => Session::in_memory(meta),
    };
    let run = Arc::new(RunContext {
        session_id: session_id.clone(),
        agent: "main".into(),
        model: MODEL_SPEC.into(),
        task_id: None,
        user_id: None,
        parent_session_id: None,
        depth: 0,
        tool_grant: cadre_tools::ToolGrant::unrestricted(),
        budget: cadre_tools::Budget::unlimited(),
        trace_id: "bench".into(),
        events: Arc::new(NullSink),
        approvals: Arc::new(AutoApprove),
    });
    let workspace = Arc::new(Workspace::new(&ws)?);
    let setup = t0.elapsed();

    let counted = store.as_ref().map(crate::wiring::OpenedStore::counts);
    let started = Instant::now();
    let cpu = crate::stats::cpu_time();
    let outcome = wiring
        .parent
        .run(
            &mut session,
            Some(parent_prompt(opts.n)),
            run,
            workspace,
            CancellationToken::new(),
        )
        .await;
    drain(&wiring.runtime).await;
    let elapsed = started.elapsed();
    let timed_cpu = crate::stats::cpu_time().saturating_sub(cpu);
    let store_counts = store.as_ref().zip(counted).map(|(s, before)| {
        let now = s.counts();
        crate::wiring::StoreCounts {
            writes: now.writes.saturating_sub(before.writes),
            task_reads: now.task_reads.saturating_sub(before.task_reads),
            commits: now.commits.saturating_sub(before.commits),
        }
    });

    let parent_rejected = outcome.turns >= 2 && is_body_limit(&outcome.state);
    if outcome.state != EndState::Completed && !parent_rejected {
        bail!("the parent run ended {:?}", outcome.state);
    }
    let tasks = wiring.runtime.tasks_of(&session_id).await;
    let completed = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    if tasks.len() != opts.n || completed != opts.n {
        let failed = tasks.iter().find(|t| t.status != TaskStatus::Completed);
        bail!(
            "{} tasks, {completed} completed, expected {}; first failure: {:?}",
            tasks.len(),
            opts.n,
            failed.map(|t| (&t.status, &t.error))
        );
    }
    // The check's 10 000 records (at N = 10 000, 10 MB) are the benchmark's, not cadre's.
    drop(tasks);
    let delivered = delivered(session.messages());
    let rss_after_delivery_kib = crate::stats::status_kib("VmRSS").unwrap_or(0);
    let live_after_delivery_kib = crate::allocator::live_heap_kib();
    let conversation_bytes = json_size(session.messages());
    drop(session);
    let rss_after_session_kib = crate::stats::status_kib("VmRSS").unwrap_or(0);
    let live_after_session_kib = crate::allocator::live_heap_kib();
    wiring.runtime.shutdown();
    Ok(ScenarioRun {
        elapsed,
        setup,
        timed_cpu,
        store_counts,
        parent_turns: outcome.turns,
        delivered,
        parent_rejected,
        rss_after_delivery_kib,
        conversation_bytes,
        rss_after_session_kib,
        live_after_delivery_kib,
        live_after_session_kib,
    })
}
