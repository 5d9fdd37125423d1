//! The shell around the model: owns the terminal, the harness and the session; feeds engine
//! events, approval requests, keys and ticks to the [`App`]; carries out the [`Action`]s it
//! returns; and draws at most [`FRAME_INTERVAL`] apart, only when something changed.

mod agents;
mod channels;
mod custom;
mod delivery;
pub mod history;
mod terminal;

pub use agents::AgentsListing;
pub use channels::{ChannelSink, DialogApprovals};
#[cfg(test)]
pub use terminal::set_holds_terminal_for_test;
pub use terminal::{holds_terminal, restore_terminal};

use crate::keys;
use crate::model::approvals::PendingApproval;
use crate::model::transcript::{EntryKind, ToolEntry};
use crate::model::{Action, App, Overlay, SessionItem, Status, TaskDetail};
use crate::render::{self, View};
use cadre_engine::{RunOutcome, Session};
use cadre_subagents::{Harness, Parent, RunOptions, TaskRecord};
use cadre_tools::{ApprovalHandler, RunContext};
use cadre_types::{ApprovalDecision, EventEnvelope, EventSink, new_session_id, unix_millis};
use ratatui::crossterm::event::{Event as TermEvent, MouseButton, MouseEventKind};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The shortest time between two frames (the frame-rate cap).
pub const FRAME_INTERVAL: Duration = Duration::from_millis(16);
/// How often the clock and the task list are refreshed.
const TICK: Duration = Duration::from_millis(250);
/// Events applied per loop iteration at most before the keys get a turn.
const EVENT_BATCH: usize = 4_096;

/// Writes a permission rule to the project's configuration; returns the file it went to,
/// or why not (the error and its sources are shown).
pub type SaveAllowRule = Box<
    dyn Fn(&str) -> Result<std::path::PathBuf, Box<dyn std::error::Error + Send + Sync>> + Send,
>;

/// What the UI starts with.
pub struct TuiOptions {
    /// The main agent and its runtime.
    pub harness: Harness,
    /// The session to work in (new, or resumed).
    pub session: Session,
    /// The input history file (`.cadre/history`).
    pub history_file: PathBuf,
    /// The approval mode, for the status bar.
    pub approval_mode: String,
    /// Carries out "always" in the approval dialog.
    pub save_allow_rule: SaveAllowRule,
    /// Cancelled to leave (SIGTERM, SIGHUP): the running turn is cancelled and waited for,
    /// open questions are refused, and the terminal is restored, as on `/exit`.
    pub stop: CancellationToken,
    /// What start-up found worth a warning (agent files skipped or overridden, fallback
    /// models): shown as notices when the UI opens.
    pub warnings: Vec<String>,
    /// What `/agents` shows; without it, the names.
    pub agents_listing: Option<AgentsListing>,
}

/// How the UI ended.
#[derive(Debug, Clone)]
pub struct TuiExit {
    /// The session in use at the end (to print the resume hint).
    pub session_id: String,
    /// Whether it is saved (a session nothing was sent in is removed).
    pub saved: bool,
}

/// Why the UI could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal could not be set up or drawn on.
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// How a turn ended, with the session it borrowed.
enum TurnEnd {
    Prompt(RunOutcome),
    Direct {
        agent: String,
        result: Result<Box<TaskRecord>, String>,
    },
    /// `/compact`: what it did is the `compaction` event; only a failure is reported here.
    Compact(Result<(), String>),
}

struct Turn {
    handle: JoinHandle<(Session, TurnEnd)>,
    cancel: CancellationToken,
}

struct Shell {
    harness: Arc<Harness>,
    /// The session, while no turn holds it.
    session: Option<Session>,
    session_id: String,
    app: App,
    view: View,
    turn: Option<Turn>,
    replies: HashMap<u64, oneshot::Sender<ApprovalDecision>>,
    next_reply: u64,
    sink: Arc<ChannelSink>,
    approvals: Arc<dyn ApprovalHandler>,
    history_file: PathBuf,
    save_allow_rule: SaveAllowRule,
    agents_listing: Option<AgentsListing>,
    /// Actions from keys and events, carried out after the event that produced them.
    pending: Vec<Action>,
    /// The running turn is one of its own for background results ([`delivery`]).
    delivering: bool,
    /// A delivery turn failed: the next results wait for the person's next prompt.
    deliveries_paused: bool,
    dirty: bool,
    exit: bool,
}

/// Run the full-screen UI until the person leaves.
#[expect(
    clippy::too_many_lines,
    reason = "the UI's event loop: one select! over keys, events, asks, the turn and the tick, each arm one call"
)]
pub async fn run(opts: TuiOptions) -> Result<TuiExit, TuiError> {
    let (sink, mut events) = ChannelSink::new();
    let (approvals, mut asks) = DialogApprovals::new();
    let h = opts.harness;
    // The conversation stays open while background children run: their results come with
    // the next turn, or a turn of their own (`delivery`).
    h.runtime().release_top_level();
    let mut agents: Vec<String> = h
        .runtime()
        .registry()
        .list()
        .map(|d| d.name.clone())
        .collect();
    agents.sort();
    let status = Status {
        model: h.agent().config().model.spec.clone(),
        session_id: opts.session.id().to_string(),
        approval_mode: opts.approval_mode,
    };
    let mut app = App::new(status, agents, history::load(&opts.history_file));
    app.first_run = crate::first_run::message(&h.agent().config().model);
    app.now_ms = unix_millis();
    app.load_history(opts.session.messages());
    app.custom = crate::custom_commands::CommandSet::load(h.workspace());
    let command_warnings = app.custom.warnings.clone();
    for w in opts.warnings.iter().chain(&command_warnings) {
        app.notice(format!("⚠ {w}"));
    }
    let mut shell = Shell {
        harness: Arc::new(h),
        session_id: opts.session.id().to_string(),
        session: Some(opts.session),
        app,
        view: View::default(),
        turn: None,
        replies: HashMap::new(),
        next_reply: 0,
        sink: Arc::new(sink),
        approvals: Arc::new(approvals),
        history_file: opts.history_file,
        save_allow_rule: opts.save_allow_rule,
        agents_listing: opts.agents_listing,
        pending: Vec::new(),
        delivering: false,
        deliveries_paused: false,
        dirty: true,
        exit: false,
    };
    shell.reattach();
    let (mut term, guard) = terminal::enter()?;
    let mut input = terminal::input_events();
    let mut tick = tokio::time::interval(TICK);
    let mut last_frame = Instant::now() - FRAME_INTERVAL;
    let stop = opts.stop;
    while !shell.exit {
        if shell.dirty && last_frame.elapsed() >= FRAME_INTERVAL {
            shell.app.now_ms = unix_millis();
            terminal::draw(&mut term, |f| render::draw(f, &shell.app, &mut shell.view))?;
            // The view kept its top line still while lines arrived; scrolling goes on from there.
            shell.app.scroll = shell.view.scroll();
            last_frame = Instant::now();
            shell.dirty = false;
        }
        let next_frame = last_frame + FRAME_INTERVAL;
        let dirty = shell.dirty;
        tokio::select! {
            ev = input.recv() => match ev {
                Some(batch) => {
                    for ev in crate::paste::coalesce(batch) {
                        shell.on_terminal(ev);
                    }
                }
                None => shell.exit = true,
            },
            Some(env) = events.recv() => {
                shell.on_event(env);
                let mut n = 1;
                while n < EVENT_BATCH {
                    match events.try_recv() {
                        Ok(env) => shell.on_event(env),
                        Err(_) => break,
                    }
                    n += 1;
                }
            }
            Some((request, reply)) = asks.recv() => shell.on_ask(request, reply),
            done = async { (&mut shell.turn.as_mut()?.handle).await.ok() }, if shell.turn.is_some() => {
                shell.turn = None;
                match done {
                    Some((session, end)) => shell.on_turn_end(session, end).await,
                    None => {
                        shell.app.error("the turn stopped unexpectedly; starting a new session");
                        shell.act(Action::NewSession { reason: "other" }).await;
                    }
                }
            }
            _ = tick.tick() => shell.on_tick().await,
            _ = stop.cancelled() => shell.exit = true,
            _ = tokio::time::sleep_until(next_frame), if dirty => {}
        }
        let queued = std::mem::take(&mut shell.pending);
        for a in queued {
            shell.act(a).await;
        }
    }
    if let Some(t) = shell.turn.take() {
        // The turn's end (its session, cancelled tool processes) is waited for, so the
        // session on disk is complete.
        t.cancel.cancel();
        if let Ok((session, _)) = t.handle.await {
            shell.session = Some(session);
        }
    }
    for (_, reply) in shell.replies.drain() {
        let _ = reply.send(ApprovalDecision::Deny {
            feedback: Some("the session ended".into()),
        });
    }
    shell.harness.runtime().shutdown();
    drop(term);
    drop(guard);
    // What was logged since the last tick, now that standard error is the terminal again.
    for line in crate::logs::take_lines().0 {
        eprintln!("{line}");
    }
    let saved = !shell
        .session
        .as_ref()
        .is_some_and(Session::discard_if_empty);
    Ok(TuiExit {
        session_id: shell.session_id,
        saved,
    })
}

/// Remove `session`'s file when it holds nothing (nothing was ever sent in it): it is not
/// worth resuming, and `--continue` would take it for the latest. True when removed.
impl Shell {
    fn on_terminal(&mut self, ev: TermEvent) {
        self.dirty = true;
        self.app.now_ms = unix_millis();
        let actions = match ev {
            TermEvent::Key(k) => {
                let before = self.app.input.history().len();
                let a = keys::on_key(&mut self.app, k, self.view.page);
                if self.app.input.history().len() > before
                    && let Some(last) = self.app.input.history().last()
                {
                    history::append(&self.history_file, last);
                }
                a
            }
            TermEvent::Paste(text) => {
                crate::paste::on_paste(&mut self.app, &text);
                Vec::new()
            }
            TermEvent::Mouse(m) => {
                match m.kind {
                    MouseEventKind::ScrollUp => self.app.scroll = self.app.scroll.saturating_add(3),
                    MouseEventKind::ScrollDown => {
                        self.app.scroll = self.app.scroll.saturating_sub(3)
                    }
                    MouseEventKind::Down(MouseButton::Left) => {
                        if self.app.overlay == Overlay::None
                            && self.app.approvals.is_empty()
                            && let Some(i) = self.view.entry_at(m.row)
                        {
                            self.app.toggle_entry(i);
                        }
                    }
                    _ => {}
                }
                Vec::new()
            }
            TermEvent::Resize(..) => Vec::new(),
            _ => Vec::new(),
        };
        self.pending.extend(actions);
    }

    fn on_event(&mut self, env: EventEnvelope) {
        self.app.now_ms = unix_millis();
        self.app.apply(&env);
        self.dirty = true;
    }

    fn on_ask(
        &mut self,
        request: cadre_types::ApprovalRequest,
        reply: oneshot::Sender<ApprovalDecision>,
    ) {
        self.next_reply += 1;
        let id = self.next_reply;
        self.replies.insert(id, reply);
        self.app.approvals.push(PendingApproval { id, request });
        self.dirty = true;
    }

    async fn on_tick(&mut self) {
        self.app.now_ms = unix_millis();
        let dropped = self.sink.take_dropped();
        if dropped > 0 {
            self.app.error(format!(
                "{dropped} events were dropped because the screen fell behind"
            ));
        }
        // Requests whose asker is gone (its run ended) leave the dialog.
        let gone: Vec<u64> = self
            .replies
            .iter()
            .filter(|(_, r)| r.is_closed())
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.replies.remove(&id);
            self.app.approvals.remove(id);
        }
        let snaps = self.tasks().await;
        // A task that ended while nothing else runs changes only here.
        if self.app.tasks.sync(&snaps) {
            self.dirty = true;
        }
        if let Overlay::Tasks(p) = &self.app.overlay
            && p.follow
            && let Some(id) = p.detail.clone()
        {
            self.load_detail(&id).await;
        }
        // The elapsed times move while anything runs.
        if self.turn.is_some() || self.app.tasks.counts().0 > 0 || self.app.flash.is_some() {
            self.dirty = true;
        }
        self.show_log_lines();
        self.deliver_when_idle().await;
    }

    async fn on_turn_end(&mut self, session: Session, end: TurnEnd) {
        self.session = Some(session);
        match end {
            TurnEnd::Prompt(out) => {
                // How the turn ended is already in the transcript: the engine's error line
                // for a failure and the turn's end line, so it is not said a third time here.
                self.delivery_ended(matches!(out.state, cadre_types::EndState::Completed));
            }
            TurnEnd::Direct { agent, result } => match result {
                Ok(snap) => {
                    let text = snap
                        .result
                        .clone()
                        .or(snap.error.clone())
                        .unwrap_or_default();
                    if let Some(i) = self.app.transcript.find_child(&snap.id) {
                        let status = snap.status.to_string();
                        self.app.transcript.edit(i, |k| {
                            if let EntryKind::Tool(t) = k {
                                t.result = Some((status, snap.error.is_some()));
                            }
                        });
                    }
                    self.app.tasks.sync(std::slice::from_ref(&*snap));
                    self.app.transcript.push(EntryKind::Assistant(text));
                    self.app.notice(format!("@{agent} {}", snap.status));
                }
                Err(e) => self.app.error(format!("@{agent}: {e}")),
            },
            TurnEnd::Compact(Ok(())) => {}
            TurnEnd::Compact(Err(e)) => self
                .app
                .error(format!("/compact: {e}; the conversation is unchanged")),
        }
        let snaps = self.tasks().await;
        self.app.tasks.sync(&snaps);
        self.dirty = true;
        if let Some(next) = self.app.end_turn() {
            let actions = keys::submit(&mut self.app, &next);
            self.pending.extend(actions);
        }
    }

    /// The session's tasks as stored, with the tokens the running ones used so far.
    async fn tasks(&self) -> Vec<TaskRecord> {
        let runtime = self.harness.runtime();
        let mut tasks = runtime.tasks_of(&self.session_id).await;
        for t in tasks.iter_mut().filter(|t| !t.status.is_terminal()) {
            if let Some(u) = runtime.live_usage(&t.id) {
                t.usage = u;
            }
        }
        tasks
    }

    /// Have the next turn's run take up the session's tasks whose process was lost
    /// ([`cadre_subagents::SubagentRuntime::reattach_when_run_starts`]), as `cadre run
    /// --resume` does: they are that run's children, in its totals and its budget, and show
    /// in the task panel from then on.
    fn reattach(&self) {
        self.harness
            .runtime()
            .reattach_when_run_starts(&self.session_id);
    }

    fn parent(&self, cancel: &CancellationToken) -> Parent {
        let h = &self.harness;
        h.main_parent(
            Arc::new(RunContext {
                session_id: self.session_id.clone(),
                agent: "main".into(),
                model: h.agent().config().model.spec.clone(),
                task_id: None,
                user_id: std::env::var("USER").ok(),
                parent_session_id: None,
                depth: 0,
                tool_grant: cadre_tools::ToolGrant::unrestricted(),
                budget: cadre_tools::Budget::unlimited(),
                trace_id: new_session_id().replacen("s-", "", 1),
                events: self.sink.clone() as Arc<dyn EventSink>,
                approvals: self.approvals.clone(),
            }),
            cancel.clone(),
        )
    }

    fn start_turn(&mut self, prompt: Option<String>, direct: Option<(String, String)>) {
        let Some(mut session) = self.session.take() else {
            self.app.error("a turn is running already");
            return;
        };
        let cancel = CancellationToken::new();
        let h = self.harness.clone();
        let handle = match direct {
            Some((agent, job)) => {
                self.app.transcript.push(EntryKind::Tool(ToolEntry {
                    call_id: String::new(),
                    tool: format!("@{agent}"),
                    args: job.clone(),
                    result: None,
                    expanded: false,
                    children: Vec::new(),
                    replaces: None,
                }));
                let parent = self.parent(&cancel);
                tokio::spawn(async move {
                    let result = h
                        .runtime()
                        .run_direct(&agent, job, &parent)
                        .await
                        .map(Box::new)
                        .map_err(|e| e.to_string());
                    (session, TurnEnd::Direct { agent, result })
                })
            }
            None => {
                let opts = RunOptions {
                    events: self.sink.clone(),
                    approvals: self.approvals.clone(),
                    cancel: cancel.clone(),
                    user_id: std::env::var("USER").ok(),
                };
                tokio::spawn(async move {
                    let out = match prompt {
                        Some(p) => h.run_in(&mut session, &p, opts).await,
                        None => h.deliver_in(&mut session, opts).await,
                    };
                    (session, TurnEnd::Prompt(out))
                })
            }
        };
        self.turn = Some(Turn { handle, cancel });
    }

    /// Compact the session in a turn of its own (it holds the session, and Esc/Ctrl+C
    /// cancels it like any turn).
    fn start_compaction(&mut self, instructions: Option<String>) {
        let Some(mut session) = self.session.take() else {
            self.app.error("a turn is running already");
            return;
        };
        let cancel = CancellationToken::new();
        let h = self.harness.clone();
        let opts = RunOptions {
            events: self.sink.clone(),
            approvals: self.approvals.clone(),
            cancel: cancel.clone(),
            user_id: std::env::var("USER").ok(),
        };
        let handle = tokio::spawn(async move {
            let result = h
                .compact(&mut session, instructions.as_deref(), opts)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
            (session, TurnEnd::Compact(result))
        });
        self.turn = Some(Turn { handle, cancel });
    }

    async fn load_detail(&mut self, id: &str) {
        let runtime = self.harness.runtime();
        let prompt = runtime.task_record(id).await.map(|r| r.prompt);
        let log = runtime
            .progress_of(id)
            .iter()
            .map(cadre_subagents::runtime::progress::ProgressLine::render)
            .collect();
        self.app.detail = Some(TaskDetail {
            task_id: id.to_string(),
            prompt,
            log,
        });
        self.dirty = true;
    }

    fn panel_message(&mut self, text: String) {
        if let Overlay::Tasks(p) = &mut self.app.overlay {
            p.message = Some(text);
        } else {
            self.app.notice(text);
        }
    }

    fn replace_session(&mut self, session: Session) {
        let discarded = (self.session.as_ref()).is_some_and(|old| old.leave_for(&session));
        let old = std::mem::replace(&mut self.session_id, session.id().to_string());
        self.session = Some(session);
        self.app.transcript.clear();
        self.app.tasks.clear();
        self.app.usage = Default::default();
        self.app.subagent_usage = Default::default();
        self.app.status.session_id = self.session_id.clone();
        self.app.scroll = 0;
        self.app.selected_entry = None;
        self.app.notice(if discarded {
            format!("session {} (the previous one was empty)", self.session_id)
        } else {
            format!(
                "session {} — the previous one ({old}) is saved: cadre --resume {old}",
                self.session_id
            )
        });
    }

    /// Fire `SessionEnd` for session `id`, left for `reason`, off the UI's loop (a handler
    /// may take up to its timeout); what went wrong with a handler is logged, which the UI
    /// shows as a notice.
    fn session_ended(&self, id: String, reason: &'static str) {
        let Some(hooks) = self.harness.runtime().config().claude_hooks.clone() else {
            return;
        };
        tokio::spawn(async move {
            for w in hooks.session_end(&id, reason).await {
                tracing::warn!("{w}");
            }
        });
    }

    /// With no key for the model, nothing is sent: say why (again) and stay idle.
    fn refused_without_key(&mut self) -> bool {
        let Some(msg) = self.app.first_run.clone() else {
            return false;
        };
        self.app.busy = false;
        self.app.error(msg);
        true
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per user action, each a call or two"
    )]
    async fn act(&mut self, action: Action) {
        self.dirty = true;
        match action {
            Action::Prompt(p) => {
                self.deliveries_paused = false;
                if !self.refused_without_key() {
                    self.start_turn(Some(p), None);
                }
            }
            Action::Custom(line) => {
                self.deliveries_paused = false;
                if !self.refused_without_key() {
                    self.start_custom(&line);
                }
            }
            Action::Direct { agent, job } => {
                if !self.refused_without_key() {
                    self.start_turn(None, Some((agent, job)));
                }
            }
            Action::CancelTurn => {
                if let Some(t) = &self.turn {
                    t.cancel.cancel();
                }
                let running: Vec<String> = self
                    .app
                    .tasks
                    .running_background()
                    .map(|t| format!("{} ({})", t.agent, crate::text::short_id(&t.id)))
                    .collect();
                let keep = if running.is_empty() {
                    String::new()
                } else {
                    format!("; still running in the background: {}", running.join(", "))
                };
                self.app.notice(format!("cancelling the turn{keep}"));
            }
            Action::CancelTask(id) => {
                match self
                    .harness
                    .runtime()
                    .cancel_task(&self.session_id, &id)
                    .await
                {
                    Some(_) => self.panel_message(format!(
                        "cancel requested for {}",
                        crate::text::short_id(&id)
                    )),
                    None => self.panel_message(format!("no task {id} in this session")),
                }
            }
            Action::FollowUp { task_id, text } => self.follow_up(&task_id, text).await,
            Action::Answer(answer) => {
                let rules = answer.allow_rules.as_deref().unwrap_or_default();
                if answer.allow_rules.as_ref().is_some_and(Vec::is_empty) {
                    self.app.notice(
                        "no allow rule can cover this command (it writes a file or takes \
                         values at run time): allowed for this session only"
                            .to_string(),
                    );
                }
                for rule in rules {
                    match (self.save_allow_rule)(rule) {
                        Ok(place) => self.app.notice(format!(
                            "allowed from now on: {rule} (written to {})",
                            place.display()
                        )),
                        Err(e) => self.app.error(format!(
                            "could not save the rule {rule}: {}",
                            with_sources(&*e)
                        )),
                    }
                }
                if let Some(reply) = self.replies.remove(&answer.id) {
                    let _ = reply.send(answer.decision);
                }
            }
            Action::LoadDetail(id) => self.load_detail(&id).await,
            Action::SetModel(spec) => {
                if self.turn.is_some() {
                    self.app
                        .error("wait for the turn to end before switching the model");
                    return;
                }
                match Arc::get_mut(&mut self.harness) {
                    Some(h) => match h.set_model(&spec) {
                        Ok(spec) => {
                            self.app.status.model = spec.clone();
                            self.app.first_run =
                                crate::first_run::message(&h.agent().config().model);
                            match &self.app.first_run {
                                Some(msg) => self.app.error(msg.clone()),
                                None => self
                                    .app
                                    .notice(format!("model: {spec} from the next turn on")),
                            }
                        }
                        Err(e) => self.app.error(format!("/model {spec}: {e}")),
                    },
                    None => self.app.error("cannot switch the model while sub-agents use it; try again when they are done"),
                }
            }
            Action::NewSession { reason } => match self.harness.new_session() {
                Ok(s) => {
                    let left = self.session_id.clone();
                    self.replace_session(s);
                    self.session_ended(left, reason);
                }
                Err(e) => self.app.error(format!("cannot start a new session: {e}")),
            },
            Action::ShowAgents => self.show_agents(),
            Action::ListSessions => {
                let items = self.saved_sessions();
                self.app.overlay = Overlay::Resume { items, selected: 0 };
            }
            Action::Resume(id) => match self.harness.open_session(&id) {
                Ok(s) => {
                    let messages = s.messages().to_vec();
                    self.replace_session(s);
                    self.app.load_history(&messages);
                    self.reattach();
                }
                Err(e) => self.app.error(format!("cannot resume {id}: {e}")),
            },
            Action::Compact(instructions) => {
                if !self.refused_without_key() {
                    self.start_compaction(instructions);
                }
            }
            Action::Exit => self.exit = true,
        }
    }

    fn saved_sessions(&self) -> Vec<SessionItem> {
        let Some(dir) = self.harness.sessions_dir() else {
            return Vec::new();
        };
        Session::list_saved(dir)
            .into_iter()
            .take(30)
            .map(|(id, modified)| {
                let ago = modified
                    .elapsed()
                    .map(|d| crate::text::elapsed(d.as_millis() as u64) + " ago")
                    .unwrap_or_default();
                // The first prompt, from the transcript: not a compaction's summary.
                let first = Session::first_prompt(dir, &id)
                    .map(|p| crate::text::short(&p, 60))
                    .unwrap_or_default();
                SessionItem {
                    label: format!("{ago} · {first}"),
                    id,
                }
            })
            .collect()
    }

    async fn follow_up(&mut self, task_id: &str, text: String) {
        let runtime = self.harness.runtime().clone();
        let live = runtime
            .live()
            .list(&self.session_id)
            .into_iter()
            .find(|c| c.last_task().as_deref() == Some(task_id));
        let Some(live) = live else {
            let agent = self
                .app
                .tasks
                .get(task_id)
                .map(|t| t.agent.clone())
                .unwrap_or_default();
            self.panel_message(format!(
                "{agent} is not a live child: only children started with agent_spawn take follow-ups"
            ));
            return;
        };
        let parent = self.parent(&CancellationToken::new());
        let title = cadre_subagents::short_title(&text);
        match runtime.start(&live.child, text, title, true, &parent).await {
            Ok(started) => {
                live.set_last_task(&started.task_id);
                self.panel_message(format!(
                    "sent to {} as {}",
                    live.agent_id,
                    crate::text::short_id(&started.task_id)
                ));
            }
            Err(e) => self.panel_message(format!("follow-up failed: {e}")),
        }
    }
}
/// An error and its sources, `outer: inner: ...`.
fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
