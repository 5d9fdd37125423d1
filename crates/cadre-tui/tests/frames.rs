//! Snapshots of whole frames drawn on ratatui's `TestBackend` from model states built the way
//! the engine's events build them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_subagents::{TaskRecord, TaskStatus};
use cadre_tui::model::approvals::PendingApproval;
use cadre_tui::model::{App, Overlay, Status, TaskDetail, TaskPanel};
use cadre_tui::render::{View, draw};
use cadre_types::{
    ApprovalRequest, EndState, Event, EventEnvelope, RiskLevel, SubagentUpdate, TodoItem,
    TodoStatus, UpdateKind, Usage,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const NOW: u64 = 1_700_000_060_000;
const START: u64 = 1_700_000_000_000;

fn app() -> App {
    let mut a = App::new(
        Status {
            model: "openai:gpt-4o-mini".into(),
            session_id: "s-1234abcd-0000-0000-0000-000000000000".into(),
            approval_mode: "ask".into(),
        },
        vec!["auditor".into(), "explorer".into()],
        Vec::new(),
    );
    a.now_ms = NOW;
    a
}

fn main_event(event: Event) -> EventEnvelope {
    EventEnvelope {
        session_id: "s-1234abcd".into(),
        agent: "main".into(),
        task_id: None,
        event,
    }
}

fn update(
    agent: &str,
    task: &str,
    kind: UpdateKind,
    text: &str,
    tool: Option<&str>,
) -> EventEnvelope {
    main_event(Event::SubagentUpdate {
        update: SubagentUpdate {
            agent: agent.into(),
            task_id: Some(task.into()),
            session_id: format!("sub-{task}"),
            kind,
            text: text.into(),
            tool: tool.map(str::to_string),
            usage: None,
            end: None,
        },
    })
}

fn frame(app: &App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut view = View::default();
    term.draw(|f| draw(f, app, &mut view)).unwrap();
    format!("{}", term.backend())
}

fn snapshot(
    id: &str,
    task: &str,
    agent: &str,
    status: TaskStatus,
    background: bool,
    tokens: u64,
) -> TaskRecord {
    let mut t = cadre_store::NewTask::new(agent, "s-1234abcd", task);
    t.id = id.into();
    t.child_session_id = Some(format!("sub-{id}"));
    t.description = task.into();
    t.background = background;
    let mut r = t.into_record("node", "1:1", START);
    r.status = status;
    r.result = status
        .is_terminal()
        .then(|| "Two modules: inventory.py and report.py.".to_string());
    r.updated_at = START + 12_500;
    r.usage = priced(tokens, tokens / 10);
    r
}

/// A model call's usage at $1 per million tokens in and $2 out.
fn priced(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cost_nano_usd: input * 1_000 + output * 2_000,
        ..Usage::default()
    }
}

fn tool_start(app: &mut App, id: &str, tool: &str, args: serde_json::Value) {
    app.now_ms = START;
    app.apply(&main_event(Event::ToolStart {
        call_id: id.into(),
        tool: tool.into(),
        args: args.to_string(),
        replaces: None,
    }));
    app.now_ms = NOW;
}

fn two_live_children() -> App {
    let mut a = app();
    a.start_turn("Review this project");
    a.apply(&main_event(Event::TextDelta {
        text: "I'll map the project and audit it in the background.".into(),
    }));
    tool_start(
        &mut a,
        "c1",
        "task",
        serde_json::json!({"subagent_type": "auditor", "description": "audit open work", "background": true, "prompt": "Find TODOs"}),
    );
    tool_start(
        &mut a,
        "c2",
        "task",
        serde_json::json!({"subagent_type": "explorer", "description": "map the project", "prompt": "List the files"}),
    );
    a.apply(&main_event(Event::ToolResult {
        call_id: "c1".into(),
        tool: "task".into(),
        output: "<task id=\"task_aaaa1111\" state=\"running\"/>".into(),
        is_error: false,
    }));
    a.now_ms = START;
    for ev in [
        update(
            "explorer",
            "task_bbbb2222",
            UpdateKind::Start,
            "List the files",
            None,
        ),
        update(
            "auditor",
            "task_aaaa1111",
            UpdateKind::Start,
            "Find TODOs",
            None,
        ),
        update(
            "explorer",
            "task_bbbb2222",
            UpdateKind::Delta,
            "Listing the project.",
            None,
        ),
        update(
            "explorer",
            "task_bbbb2222",
            UpdateKind::ToolStart,
            r#"{"pattern":"**/*.py"}"#,
            Some("glob"),
        ),
        update(
            "auditor",
            "task_aaaa1111",
            UpdateKind::ToolStart,
            r#"{"pattern":"TODO|FIXME"}"#,
            Some("grep"),
        ),
        update(
            "explorer",
            "task_bbbb2222",
            UpdateKind::ToolResult,
            "src/inventory.py\nsrc/report.py",
            Some("glob"),
        ),
        update(
            "auditor",
            "task_aaaa1111",
            UpdateKind::ToolResult,
            "src/inventory.py:9: # TODO",
            Some("grep"),
        ),
    ] {
        a.apply(&ev);
    }
    a.now_ms = NOW;
    // The main agent's call and the children's, as the engine reports each model call.
    for (usage, subagent) in [
        (priced(1_500, 150), None),
        (priced(1_200, 120), Some("auditor")),
        (priced(2_400, 240), Some("explorer")),
    ] {
        a.apply(&main_event(Event::Usage {
            usage,
            total: usage,
            subagent: subagent.map(str::to_string),
        }));
    }
    a.tasks.sync(&[
        snapshot(
            "task_aaaa1111",
            "audit open work",
            "auditor",
            TaskStatus::Running,
            true,
            1_200,
        ),
        snapshot(
            "task_bbbb2222",
            "map the project",
            "explorer",
            TaskStatus::Running,
            false,
            2_400,
        ),
    ]);
    a
}

#[test]
fn transcript_with_markdown_and_a_folded_tool_call() {
    let mut a = app();
    a.start_turn("Explain the inventory module");
    tool_start(
        &mut a,
        "c1",
        "read_file",
        serde_json::json!({"path": "src/inventory.py"}),
    );
    a.apply(&main_event(Event::ToolResult {
        call_id: "c1".into(),
        tool: "read_file".into(),
        output: "class Inventory:\n    def add(self, item, n):\n        ...".into(),
        is_error: false,
    }));
    a.apply(&main_event(Event::ThinkingDelta {
        text: "The user wants a summary.\nStart with the class.".into(),
    }));
    let md = "## Inventory\n\nThe module keeps **counts** per item:\n\n- `add` raises a count\n- `remove` lowers it\n\n```python\ndef total(self):\n    return sum(self.items.values())\n```\n";
    for chunk in md.split_inclusive(' ') {
        a.apply(&main_event(Event::TextDelta { text: chunk.into() }));
    }
    a.apply(&main_event(Event::Usage {
        usage: priced(1_830, 95),
        total: priced(1_830, 95),
        subagent: None,
    }));
    a.apply(&main_event(Event::Done {
        state: EndState::Completed,
        output: String::new(),
        turns: 2,
        usage: priced(1_830, 95),
    }));
    a.end_turn();
    insta::assert_snapshot!(frame(&a, 80, 30));
}

#[test]
fn plans_of_the_main_agent_and_of_a_sub_agent() {
    let mut a = app();
    a.start_turn("Fix the failing test");
    let item = |content: &str, status| TodoItem {
        content: content.into(),
        status,
    };
    a.apply(&main_event(Event::Todo {
        todos: vec![
            item("read the failing test", TodoStatus::Completed),
            item("fix the parser", TodoStatus::InProgress),
            item("run the suite", TodoStatus::Pending),
        ],
    }));
    a.apply(&EventEnvelope {
        session_id: "sub-1".into(),
        agent: "explorer".into(),
        task_id: Some("task_1".into()),
        event: Event::Todo {
            todos: vec![item("map the modules", TodoStatus::InProgress)],
        },
    });
    insta::assert_snapshot!(frame(&a, 60, 12));
}

#[test]
fn two_live_children_with_progress_and_the_running_tasks_strip() {
    insta::assert_snapshot!(frame(&two_live_children(), 100, 30));
}

#[test]
fn task_panel_list_and_detail() {
    let mut a = two_live_children();
    a.overlay = Overlay::Tasks(TaskPanel {
        selected: 1,
        ..TaskPanel::default()
    });
    insta::assert_snapshot!("task_panel_list", frame(&a, 100, 16));
    a.overlay = Overlay::Tasks(TaskPanel {
        detail: Some("task_aaaa1111".into()),
        follow: true,
        cancel_armed: Some("task_aaaa1111".into()),
        message: Some("press x again to cancel task_aaaa1111".into()),
        ..TaskPanel::default()
    });
    a.detail = Some(TaskDetail {
        task_id: "task_aaaa1111".into(),
        prompt: Some("Find every TODO and FIXME under src/ with file and line.".into()),
        log: vec![
            "started: Find every TODO and FIXME under src/".into(),
            "▸ grep({\"pattern\":\"TODO|FIXME\"})".into(),
            "◂ grep: src/inventory.py:9: # TODO".into(),
        ],
    });
    insta::assert_snapshot!("task_panel_detail", frame(&a, 100, 20));
}

#[test]
fn the_task_panel_never_shows_zero_dollars_for_a_running_task_of_unknown_cost() {
    let mut a = app();
    let mut fresh = snapshot(
        "task_cccc3333",
        "not called yet",
        "fresh",
        TaskStatus::Running,
        true,
        0,
    );
    fresh.usage = Usage::default();
    let mut unpriced = snapshot(
        "task_dddd4444",
        "unpriced model",
        "unpriced",
        TaskStatus::Running,
        true,
        0,
    );
    unpriced.usage = Usage {
        input_tokens: 700,
        output_tokens: 70,
        ..Usage::default()
    }
    .priced(None);
    a.tasks.sync(&[fresh, unpriced]);
    a.overlay = Overlay::Tasks(TaskPanel::default());
    let shown = frame(&a, 120, 16);
    // The session's own status bar (a priced model, nothing spent) may say $0.0000.
    for l in shown.lines().filter(|l| l.contains("task_")) {
        assert!(!l.contains("$0.0000"), "{shown}");
    }
    let row = |agent: &str| {
        shown
            .lines()
            .find(|l| l.contains(agent) && l.contains(" tok "))
            .unwrap_or_else(|| panic!("a row of {agent}: {shown}"))
            .to_string()
    };
    assert!(row("fresh").contains("tok  —"), "{shown}");
    assert!(row("unpriced").contains("cost unknown"), "{shown}");
}

#[test]
fn approval_dialog_for_a_sub_agent_with_a_diff() {
    let mut a = two_live_children();
    let args = serde_json::json!({
        "path": "src/inventory.py",
        "old_string": "    def add(self, item, n):\n        self.items[item] += n\n",
        "new_string": "    def add(self, item, n):\n        if n < 0:\n            raise ValueError(n)\n        self.items[item] += n\n",
    });
    for (id, agent, task) in [
        (1, "explorer", "task_bbbb2222"),
        (2, "auditor", "task_aaaa1111"),
    ] {
        a.approvals.push(PendingApproval {
            id,
            request: ApprovalRequest {
                call_id: format!("call_{id}"),
                tool: "edit_file".into(),
                args: args.clone(),
                subject: Some("src/inventory.py".into()),
                reason: "edit_file can change the workspace".into(),
                risk: RiskLevel::Medium,
                agent: agent.into(),
                task_id: Some(task.into()),
                replaces: None,
            },
        });
    }
    a.approvals.choice = 1;
    insta::assert_snapshot!(frame(&a, 100, 30));
}

#[test]
fn status_bar_with_rolled_up_tokens_and_waiting_approvals() {
    // The main agent's calls and each child's (5.1k in, 510 out, $0.0061), counted once each.
    let mut a = two_live_children();
    a.approvals.push(PendingApproval {
        id: 9,
        request: ApprovalRequest {
            call_id: "c".into(),
            tool: "bash".into(),
            args: serde_json::json!({"command": "rm -rf build"}),
            subject: Some("rm -rf build".into()),
            reason: "bash can change the workspace".into(),
            risk: RiskLevel::High,
            agent: "auditor".into(),
            task_id: Some("task_aaaa1111".into()),
            replaces: None,
        },
    });
    let full = frame(&a, 120, 30);
    let bottom: Vec<&str> = full.lines().rev().take(2).collect();
    insta::assert_snapshot!(bottom.into_iter().rev().collect::<Vec<_>>().join("\n"));
}

/// A provider with no key, as the OpenAI provider is without `OPENAI_API_KEY`.
struct Keyless;

impl cadre_llm::Provider for Keyless {
    fn name(&self) -> &str {
        "openai"
    }
    fn stream(&self, _: cadre_llm::ModelRequest) -> cadre_llm::ModelStream {
        unreachable!("the first-run check sends nothing")
    }
    fn missing_key(&self) -> Option<String> {
        Some("OPENAI_API_KEY".into())
    }
}

#[test]
fn first_run_message() {
    let mut a = app();
    a.first_run = cadre_tui::first_run::message(&cadre_llm::ResolvedModel {
        provider: std::sync::Arc::new(Keyless),
        model: "gpt-4o-mini".into(),
        spec: "openai:gpt-4o-mini".into(),
        price: None,
    });
    assert!(a.first_run.is_some());
    insta::assert_snapshot!(frame(&a, 100, 20));
}

#[test]
fn a_failed_model_call_is_said_once() {
    let mut a = app();
    a.start_turn("hello");
    let error = "openai request failed: HTTP 500: the provider is down";
    a.apply(&main_event(Event::Error {
        message: error.into(),
    }));
    a.apply(&main_event(Event::Done {
        state: EndState::Failed {
            error: error.into(),
        },
        output: String::new(),
        turns: 1,
        usage: Usage::default(),
    }));
    a.end_turn();
    let screen = frame(&a, 100, 20);
    assert_eq!(
        screen.matches("the provider is down").count(),
        1,
        "{screen}"
    );
    assert!(screen.contains("── failed ·"), "{screen}");
}

#[test]
fn help_keeps_the_space_between_words_at_every_width() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    // A wrap that falls on a space must not glue the words around it together.
    for w in 40..=120u16 {
        let mut a = app();
        for c in "/help".chars() {
            cadre_tui::keys::on_key(
                &mut a,
                KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE),
                10,
            );
        }
        cadre_tui::keys::on_key(
            &mut a,
            KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE),
            10,
        );
        let shown = frame(&a, w, 80);
        assert!(
            shown.contains("Keys:"),
            "help is shown at width {w}:\n{shown}"
        );
        let glued: String = shown.split_whitespace().collect::<Vec<_>>().join(" ");
        for bad in [
            "Ctrl+Ttasks",
            "Ctrl+Rsearch",
            "Enternew",
            "PageUp/PageDownscroll",
        ] {
            assert!(!glued.contains(bad), "{bad} at width {w}:\n{shown}");
        }
    }
}

/// Draw `app` on `term` the way the shell does: the frame, then the scroll offset it used.
fn redraw(term: &mut Terminal<TestBackend>, app: &mut App, view: &mut View) -> Vec<String> {
    term.draw(|f| draw(f, app, view)).unwrap();
    app.scroll = view.scroll();
    let buf = term.backend().buffer();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect()
}

#[test]
fn a_scrolled_back_view_stays_put_while_lines_arrive_and_the_end_is_followed() {
    let mut a = app();
    for i in 0..50 {
        a.notice(format!("line {i}"));
    }
    let mut term = Terminal::new(TestBackend::new(60, 20)).unwrap();
    let mut view = View::default();
    redraw(&mut term, &mut a, &mut view);
    a.scroll = 10;
    let before = redraw(&mut term, &mut a, &mut view);
    assert!(before[0].contains("line "), "{before:#?}");
    for i in 50..150 {
        a.notice(format!("line {i}"));
        let now = redraw(&mut term, &mut a, &mut view);
        assert_eq!(now[0], before[0], "the top line moved after line {i}");
    }
    // Scrolling goes on from where the view is: one line down moves the top one line.
    a.scroll -= 1;
    let down = redraw(&mut term, &mut a, &mut view);
    assert_eq!(down[0], before[1]);
    // Following the end: the newest line stays in view as lines arrive.
    a.scroll = 0;
    redraw(&mut term, &mut a, &mut view);
    for i in 150..250 {
        a.notice(format!("line {i}"));
        let now = redraw(&mut term, &mut a, &mut view);
        assert!(
            now.iter().any(|l| l.contains(&format!("· line {i} "))),
            "line {i} is not in view:\n{now:#?}"
        );
        assert_eq!(view.scroll(), 0);
    }
}

#[test]
fn the_status_line_counts_pending_children_apart_from_running_ones() {
    let mut a = app();
    a.tasks.sync(&[
        snapshot(
            "task_aaaa1111",
            "one",
            "auditor",
            TaskStatus::Running,
            true,
            10,
        ),
        snapshot(
            "task_bbbb2222",
            "two",
            "auditor",
            TaskStatus::Pending,
            true,
            0,
        ),
        snapshot(
            "task_cccc3333",
            "three",
            "auditor",
            TaskStatus::Pending,
            true,
            0,
        ),
        snapshot(
            "task_dddd4444",
            "four",
            "auditor",
            TaskStatus::Completed,
            true,
            10,
        ),
    ]);
    let full = frame(&a, 140, 20);
    let bar = full.lines().find(|l| l.contains(" done")).unwrap();
    assert!(
        bar.contains("1 running · 2 pending · 1 done"),
        "status line: {bar}"
    );
}

/// The words of a frame, borders and line breaks aside.
fn words(frame: &str) -> Vec<String> {
    frame
        .split(|c: char| c.is_whitespace() || "│─┌┐└┘\"".contains(c))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn dialogs_wrap_to_a_narrow_terminal_and_cut_nothing() {
    let mut a = two_live_children();
    let reason = "bash can run any program: it may change files outside the workspace, reach the network, or remove what it finds there";
    a.approvals.push(PendingApproval {
        id: 1,
        request: ApprovalRequest {
            call_id: "call_1".into(),
            tool: "bash".into(),
            args: serde_json::json!({"command": "rm -rf build && make everything-that-is-needed"}),
            subject: Some("rm -rf build && make everything-that-is-needed".into()),
            reason: reason.into(),
            risk: RiskLevel::High,
            agent: "a-sub-agent-with-a-rather-long-name".into(),
            task_id: Some("task_aaaa1111".into()),
            replaces: None,
        },
    });
    for width in [50, 70] {
        let shown = frame(&a, width, 30);
        let seen = words(&shown);
        for w in reason.split(' ').chain([
            "a-sub-agent-with-a-rather-long-name",
            "everything-that-is-needed",
        ]) {
            assert!(
                seen.iter().any(|s| s == w),
                "{w:?} cut at {width}:\n{shown}"
            );
        }
        // A choice is never broken over two lines.
        assert!(shown.contains("[f] deny with feedback"), "{shown}");
    }
    a.approvals = Default::default();
    a.overlay = Overlay::Tasks(TaskPanel::default());
    let shown = frame(&a, 50, 16);
    for w in ["follow-up", "Esc", "close"] {
        assert!(words(&shown).iter().any(|s| s == w), "{w:?}:\n{shown}");
    }
}
