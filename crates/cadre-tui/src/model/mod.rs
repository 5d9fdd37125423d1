//! The UI's state: a plain model, changed by engine events ([`App::apply`]) and keys
//! ([`crate::keys`]), drawn by the pure functions of [`crate::render`]. Nothing here does I/O;
//! what must happen outside (run a turn, answer an approval, cancel a task) comes back as an
//! [`Action`] for the shell.

pub mod approvals;
pub mod input;
pub mod tasks;
pub mod transcript;

use approvals::Approvals;
use cadre_types::{EndState, Event, EventEnvelope, Usage};
use input::InputBox;
use std::collections::VecDeque;
use tasks::TaskBoard;
use transcript::{EntryKind, MAX_TOOL_TEXT, ToolEntry, Transcript, capped};

/// Inputs queued while a turn runs, at most.
pub const MAX_QUEUED: usize = 32;

/// Something the shell must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run a turn of the main agent on this prompt.
    Prompt(String),
    /// Run a sub-agent directly (`@name job`).
    Direct {
        /// The sub-agent.
        agent: String,
        /// The job.
        job: String,
    },
    /// Run the custom slash command this line invokes (`/review src`).
    Custom(String),
    /// Cancel the running turn.
    CancelTurn,
    /// Cancel a task.
    CancelTask(String),
    /// Send a follow-up message to the live child that ran a task.
    FollowUp {
        /// The task.
        task_id: String,
        /// The message.
        text: String,
    },
    /// Answer an approval request.
    Answer(approvals::Answer),
    /// Load the prompt and log of a task for the panel's detail view.
    LoadDetail(String),
    /// Switch the main model.
    SetModel(String),
    /// Start a new session; the one left ends for `reason` (a `SessionEnd` hook's words:
    /// `clear` for `/clear`).
    NewSession {
        /// Why the session in use ends.
        reason: &'static str,
    },
    /// List the sub-agents (`/agents`).
    ShowAgents,
    /// List saved sessions for the picker.
    ListSessions,
    /// Continue a saved session.
    Resume(String),
    /// Compact the conversation now, with optional instructions for the summary.
    Compact(Option<String>),
    /// Leave, with exit code 0.
    Exit,
}

/// The facts of the status bar that the model does not derive.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// The main model.
    pub model: String,
    /// The session id.
    pub session_id: String,
    /// The approval mode (`ask`, `auto-approve`, ...).
    pub approval_mode: String,
}

/// The task panel's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskPanel {
    /// The highlighted row.
    pub selected: usize,
    /// The task shown in detail.
    pub detail: Option<String>,
    /// Keep the detail scrolled to the newest log line and refreshed.
    pub follow: bool,
    /// The task that one more `x` cancels.
    pub cancel_armed: Option<String>,
    /// The follow-up being typed (`s`).
    pub follow_up: Option<String>,
    /// A one-line message (an error, a confirmation).
    pub message: Option<String>,
}

/// What the detail view shows besides the task's own fields (loaded by the shell).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskDetail {
    /// The task.
    pub task_id: String,
    /// The prompt the child got.
    pub prompt: Option<String>,
    /// Its bounded log.
    pub log: Vec<String>,
}

/// A saved session in the `/resume` picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionItem {
    /// The id.
    pub id: String,
    /// What to show: when, and the first prompt.
    pub label: String,
}

/// What covers the transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Overlay {
    /// Nothing: the transcript.
    #[default]
    None,
    /// The task panel.
    Tasks(TaskPanel),
    /// The `/resume` picker.
    Resume {
        /// The sessions, newest first.
        items: Vec<SessionItem>,
        /// The highlighted row.
        selected: usize,
    },
}

/// The whole UI state.
#[derive(Debug, Clone, Default)]
pub struct App {
    /// Status bar facts.
    pub status: Status,
    /// The conversation.
    pub transcript: Transcript,
    /// Sub-agent tasks.
    pub tasks: TaskBoard,
    /// Waiting approval requests.
    pub approvals: Approvals,
    /// The input box.
    pub input: InputBox,
    /// What covers the transcript.
    pub overlay: Overlay,
    /// The task detail loaded by the shell.
    pub detail: Option<TaskDetail>,
    /// A turn (or a direct run) is running.
    pub busy: bool,
    /// Inputs typed during the turn, sent after it in order.
    pub queued: VecDeque<String>,
    /// Every model call of this session (the main agent's and its sub-agents'), added up
    /// from the per-call usage events: each call is reported once, whoever made it.
    pub usage: Usage,
    /// The calls that sub-agents made (part of `usage`).
    pub subagent_usage: Usage,
    /// The time the view is drawn for, Unix ms (set by the shell on each tick).
    pub now_ms: u64,
    /// Sub-agent names for `@` completion.
    pub agents: Vec<String>,
    /// The workspace's custom slash commands, for `/help`, completion and submitting.
    pub custom: crate::custom_commands::CommandSet,
    /// The first-run message: the provider has no key; shown until a key is there.
    pub first_run: Option<String>,
    /// A transient message in the hint line.
    pub flash: Option<String>,
    /// The choices of the last Tab that matched several; shown while the word being typed
    /// can still become more than one of them.
    pub completions: Vec<String>,
    /// When Ctrl+C was last pressed at an idle prompt (Unix ms).
    pub last_interrupt: Option<u64>,
    /// Lines scrolled up from the bottom of the transcript (0: follow the end).
    pub scroll: usize,
    /// The foldable entry picked with Alt+Up/Down (absolute index).
    pub selected_entry: Option<usize>,
}

impl App {
    /// A fresh UI.
    pub fn new(status: Status, agents: Vec<String>, history: Vec<String>) -> Self {
        Self {
            status,
            agents,
            input: InputBox::with_history(history),
            ..Self::default()
        }
    }

    /// Tokens and cost of the session with the children rolled up.
    pub fn total_usage(&self) -> Usage {
        self.usage
    }

    /// Say something in the transcript.
    pub fn notice(&mut self, text: impl Into<String>) {
        self.transcript.push(EntryKind::Notice(text.into()));
    }

    /// Show an error in the transcript.
    pub fn error(&mut self, text: impl Into<String>) {
        self.transcript.push(EntryKind::Error(text.into()));
    }

    /// Apply one engine event.
    pub fn apply(&mut self, env: &EventEnvelope) {
        let now = self.now_ms;
        match &env.event {
            Event::RunStarted { .. } | Event::TurnStarted { .. } => {}
            Event::Compaction {
                replaced_messages,
                tokens_before,
                tokens_after,
                model,
            } => self.notice(format!(
                "compacted the conversation: {replaced_messages} messages summarised by {model}, about {tokens_before} → {tokens_after} tokens"
            )),
            Event::TextDelta { text } => self.transcript.push_text(text),
            Event::ThinkingDelta { text } => self.transcript.push_thinking(text),
            Event::ToolStart {
                call_id,
                tool,
                args,
                replaces,
            } => self.transcript.push(EntryKind::Tool(ToolEntry {
                call_id: call_id.clone(),
                tool: tool.clone(),
                args: capped(args, MAX_TOOL_TEXT),
                result: None,
                expanded: false,
                children: Vec::new(),
                replaces: replaces.clone(),
            })),
            Event::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => {
                if let Some(i) = self.transcript.find_call(call_id) {
                    let out = capped(output, MAX_TOOL_TEXT);
                    self.transcript.edit(i, |k| {
                        if let EntryKind::Tool(t) = k {
                            t.result = Some((out, *is_error));
                        }
                    });
                }
            }
            Event::ApprovalRequired { .. } => {}
            Event::SubagentUpdate { update } => {
                let parent_task = env.task_id.as_deref();
                self.tasks.on_update(parent_task, update, now);
                if let Some(id) = update.task_id.as_deref() {
                    // The task may be known already (from the tracker), but not yet shown.
                    match self.transcript.find_child(id) {
                        Some(i) => self.transcript.edit(i, |_| {}),
                        None => self.attach_child(parent_task, &update.agent, id),
                    }
                }
            }
            // Not `total`: the run's total includes its children, whose calls arrive here
            // too, and a direct `@agent` run has a total of its own.
            Event::Usage {
                usage, subagent, ..
            } => {
                self.usage += *usage;
                if subagent.is_some() {
                    self.subagent_usage += *usage;
                }
            }
            Event::ResultsDelivered { task_ids } => {
                for id in task_ids {
                    let (agent, status) = match self.tasks.get(id) {
                        Some(t) => (t.agent.clone(), t.status.to_string()),
                        None => ("sub-agent".into(), "finished".into()),
                    };
                    self.notice(format!(
                        "result of {agent} ({}, {status}) delivered to the main agent",
                        crate::text::short_id(id)
                    ));
                }
            }
            Event::Todo { todos } => self.transcript.push(EntryKind::Plan {
                agent: env.agent.clone(),
                todos: todos.clone(),
            }),
            Event::Notice { message } => self.notice(message.clone()),
            Event::Error { message } => self.error(message.clone()),
            Event::Done { state, usage, .. } => {
                if env.task_id.is_none() {
                    self.transcript.push(EntryKind::TurnEnd {
                        // A failure's error is the line just above (its error event).
                        state: match state {
                            EndState::Failed { .. } => state.name().to_string(),
                            other => other.to_string(),
                        },
                        usage: *usage,
                    });
                }
            }
        }
        if self.scroll > 0 {
            // Keep the view still while new lines arrive below it.
            self.flash
                .get_or_insert_with(|| "new output below — End to follow".into());
        }
    }

    /// Put a new child under the call that started it. Each delegation call starts one
    /// child: the call whose result names the task (a background start), else the newest call
    /// without a child that names the agent, else the newest open one; a grandchild goes
    /// under the call holding its parent task; else the child gets a line of its own.
    fn attach_child(&mut self, parent_task: Option<&str>, agent: &str, task_id: &str) {
        let entries = self.transcript.entries();
        let free = |pred: &dyn Fn(&ToolEntry) -> bool| {
            entries.iter().rposition(|e| match &e.kind {
                EntryKind::Tool(t) => t.children.is_empty() && is_delegation(&t.tool) && pred(t),
                _ => false,
            })
        };
        let by_result = || {
            free(&|t: &ToolEntry| {
                t.result
                    .as_ref()
                    .is_some_and(|(out, _)| out.contains(task_id))
            })
        };
        let by_name = || free(&|t: &ToolEntry| names_agent(t, agent));
        let open = || free(&|t: &ToolEntry| t.result.is_none());
        let target = match parent_task {
            Some(p) => self.transcript.find_child(p),
            None => by_result().or_else(by_name).or_else(open),
        };
        let i = match target {
            Some(i) => i,
            None => {
                self.transcript.push(EntryKind::Tool(ToolEntry {
                    call_id: String::new(),
                    tool: format!("@{agent}"),
                    args: String::new(),
                    result: None,
                    expanded: false,
                    children: Vec::new(),
                    replaces: None,
                }));
                self.transcript.entries().len() - 1
            }
        };
        self.transcript.attach(i, task_id);
    }

    /// Show a resumed session's history: prompts, replies and tool calls with their results
    /// (injected notices and delivered results are shown as notices).
    pub fn load_history(&mut self, messages: &[cadre_types::Message]) {
        use cadre_types::Message;
        for m in messages {
            match m {
                Message::System { .. } => {}
                Message::User { content } if content.starts_with('<') => {
                    self.notice(crate::text::short(content, 100))
                }
                Message::User { content } => self.transcript.push(EntryKind::User(content.clone())),
                Message::Assistant {
                    content,
                    thinking,
                    tool_calls,
                    ..
                } => {
                    if let Some(t) = thinking.as_deref().filter(|t| !t.is_empty()) {
                        self.transcript.push_thinking(t);
                    }
                    if !content.is_empty() {
                        self.transcript.push(EntryKind::Assistant(capped(
                            content,
                            transcript::MAX_MESSAGE_TEXT,
                        )));
                    }
                    for c in tool_calls {
                        self.transcript.push(EntryKind::Tool(ToolEntry {
                            call_id: c.id.clone(),
                            tool: c.name.clone(),
                            args: capped(&c.arguments, MAX_TOOL_TEXT),
                            result: None,
                            expanded: false,
                            children: Vec::new(),
                            replaces: None,
                        }));
                    }
                }
                Message::Tool {
                    tool_call_id,
                    content,
                    is_error,
                    ..
                } => {
                    if let Some(i) = self.transcript.find_call(tool_call_id) {
                        let out = capped(content, MAX_TOOL_TEXT);
                        self.transcript.edit(i, |k| {
                            if let EntryKind::Tool(t) = k {
                                t.result = Some((out, *is_error));
                            }
                        });
                    }
                }
            }
        }
    }

    /// A turn is starting for `line` (as typed).
    pub fn start_turn(&mut self, line: &str) {
        self.busy = true;
        self.transcript.push(EntryKind::User(line.to_string()));
        self.scroll = 0;
    }

    /// A compaction asked for with `/compact` begins: the session is busy until it ends.
    pub fn start_compaction(&mut self, instructions: Option<&str>) {
        self.busy = true;
        self.notice(match instructions {
            Some(i) => format!("compacting the conversation (keeping in particular: {i})…"),
            None => "compacting the conversation…".to_string(),
        });
        self.scroll = 0;
    }

    /// Put the queued inputs back into the input box, oldest first and before what is being
    /// typed, so a cancelled turn loses none of them.
    pub fn take_back_queued(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let mut parts: Vec<String> = self.queued.drain(..).collect();
        if !self.input.is_empty() {
            parts.push(self.input.text());
        }
        self.input.set(&parts.join("\n"));
    }

    /// The turn ended; returns the next queued input, if any.
    pub fn end_turn(&mut self) -> Option<String> {
        self.busy = false;
        self.queued.pop_front()
    }

    /// The entries that can be folded, as absolute indexes.
    pub fn foldable(&self) -> Vec<usize> {
        let base = self.transcript.dropped();
        (0..self.transcript.entries().len())
            .filter(|&i| self.transcript.is_foldable(i))
            .map(|i| i + base)
            .collect()
    }

    /// Fold or unfold the entry at absolute index `abs`.
    pub fn toggle_entry(&mut self, abs: usize) {
        if let Some(i) = abs.checked_sub(self.transcript.dropped()) {
            self.transcript.toggle(i);
        }
    }
}

/// Calls that give a sub-agent work (the tools that say where their arguments name the
/// agent and the work, and messages sent straight to an agent with `@agent`).
fn is_delegation(tool: &str) -> bool {
    crate::text::prompt_args(tool).is_some() || tool.starts_with('@')
}

/// Whether a delegation call names `agent` (its definition).
fn names_agent(t: &ToolEntry, agent: &str) -> bool {
    if t.tool.strip_prefix('@') == Some(agent) {
        return true;
    }
    let Some(keys) = crate::text::prompt_args(&t.tool) else {
        return false;
    };
    match serde_json::from_str::<serde_json::Value>(&t.args) {
        Ok(v) => keys
            .definition
            .iter()
            .any(|k| v.get(k).and_then(|x| x.as_str()) == Some(agent)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadre_types::{SubagentUpdate, UpdateKind};

    fn env(event: Event) -> EventEnvelope {
        EventEnvelope {
            session_id: "s-1".into(),
            agent: "main".into(),
            task_id: None,
            event,
        }
    }

    fn call(input: u64, output: u64, nano_usd: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cost_nano_usd: nano_usd,
            ..Usage::default()
        }
    }

    #[test]
    fn each_model_call_counts_once_in_the_session_total() {
        let mut app = App::default();
        app.start_turn("go");
        // The main agent's call, then a child's, reported with the run's total (which
        // includes the child), and the tracker's total of the child.
        app.apply(&env(Event::Usage {
            usage: call(100, 10, 1_000),
            total: call(100, 10, 1_000),
            subagent: None,
        }));
        app.apply(&env(Event::Usage {
            usage: call(50, 5, 500),
            total: call(150, 15, 1_500),
            subagent: Some("explorer".into()),
        }));
        let mut task = cadre_store::NewTask::new("explorer", "s-1", "map");
        task.id = "task_1".into();
        task.child_session_id = Some("sub-1".into());
        task.description = "map".into();
        let mut child = task.into_record("node", "1:1", 0);
        child.status = cadre_subagents::TaskStatus::Completed;
        child.usage = call(50, 5, 500);
        app.tasks.sync(std::slice::from_ref(&child));
        app.apply(&env(Event::Done {
            state: cadre_types::EndState::Completed,
            output: String::new(),
            turns: 1,
            usage: call(150, 15, 1_500),
        }));
        // A second turn, and a grandchild's call forwarded by the child.
        app.end_turn();
        app.start_turn("again");
        app.apply(&env(Event::Usage {
            usage: call(10, 1, 100),
            total: call(10, 1, 100),
            subagent: Some("grep-helper".into()),
        }));
        child.usage = call(60, 6, 600);
        app.tasks.sync(&[child]);
        let total = app.total_usage();
        assert_eq!((total.input_tokens, total.output_tokens), (160, 16));
        assert_eq!(total.cost_nano_usd, 1_600);
        let children = app.subagent_usage;
        assert_eq!((children.input_tokens, children.output_tokens), (60, 6));
    }

    #[test]
    fn a_child_the_tracker_reported_first_still_goes_under_its_call() {
        let mut app = App::default();
        app.apply(&env(Event::ToolStart {
            call_id: "c1".into(),
            tool: "task".into(),
            args: r#"{"subagent_type":"explorer","prompt":"map"}"#.into(),
            replaces: None,
        }));
        // The tick's sync saw the task before its first update arrived.
        let mut task = cadre_store::NewTask::new("explorer", "s-1", "map");
        task.id = "task_1".into();
        task.child_session_id = Some("sub-1".into());
        task.description = "map".into();
        let mut record = task.into_record("node", "1:1", 0);
        record.status = cadre_subagents::TaskStatus::Running;
        app.tasks.sync(&[record]);
        app.apply(&env(Event::SubagentUpdate {
            update: SubagentUpdate {
                agent: "explorer".into(),
                task_id: Some("task_1".into()),
                session_id: "sub-1".into(),
                kind: UpdateKind::Start,
                text: String::new(),
                tool: None,
                usage: None,
                end: None,
            },
        }));
        assert_eq!(app.transcript.find_child("task_1"), Some(0));
        let EntryKind::Tool(t) = &app.transcript.entries()[0].kind else {
            panic!("not a tool entry")
        };
        assert_eq!(t.children, ["task_1"]);
    }
}
