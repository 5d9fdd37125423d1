//! Keys and mouse to model changes and [`Action`]s. Pure: no I/O, so every binding is
//! testable without a terminal.

use crate::commands::{Line, LineError, SlashCommand, commands, help_text, parse_line};
use crate::model::approvals::Choice;
use crate::model::{Action, App, MAX_QUEUED, Overlay, TaskPanel};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// A second Ctrl+C within this many milliseconds exits.
pub const DOUBLE_CTRL_C_MS: u64 = 2_000;

/// The key hints of `/help`.
pub const KEYS_HELP: &str = "Keys: Enter send · Alt+Enter or Shift+Enter new line · Up/Down history · Ctrl+R search history · Tab complete @agent and /command · Ctrl+T tasks · Ctrl+O fold/unfold the last tool call (Alt+Up/Down pick one, Enter on an empty line toggles it) · PageUp/PageDown scroll · Ctrl+C cancel the turn, or clear and (twice) exit";

/// Handle a key; returns what the shell must do.
pub fn on_key(app: &mut App, key: KeyEvent, page: usize) -> Vec<Action> {
    if key.kind == KeyEventKind::Release {
        return Vec::new();
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    if ctrl && key.code == KeyCode::Char('c') {
        return ctrl_c(app);
    }
    if !app.approvals.is_empty() {
        return approval_key(app, key);
    }
    match &app.overlay {
        Overlay::Tasks(_) => return panel_key(app, key),
        Overlay::Resume { .. } => return resume_key(app, key),
        Overlay::None => {}
    }
    if ctrl && key.code == KeyCode::Char('t') {
        app.overlay = Overlay::Tasks(TaskPanel::default());
        return Vec::new();
    }
    if app.input.search.is_some() {
        match key.code {
            KeyCode::Char('r') if ctrl => app.input.search_older(),
            KeyCode::Char(c) if !ctrl && !alt => app.input.search_type(Some(c)),
            KeyCode::Backspace => app.input.search_type(None),
            KeyCode::Enter | KeyCode::Right | KeyCode::End => app.input.search_end(true),
            _ => app.input.search_end(false),
        }
        return Vec::new();
    }
    match key.code {
        KeyCode::Enter if alt || key.modifiers.contains(KeyModifiers::SHIFT) => {
            app.input.insert('\n')
        }
        KeyCode::Char('j') if ctrl => app.input.insert('\n'),
        KeyCode::Enter => {
            if app.input.is_empty() {
                if let Some(i) = app.selected_entry {
                    app.toggle_entry(i);
                }
                return Vec::new();
            }
            let line = app.input.take();
            return submit(app, &line);
        }
        KeyCode::Char('r') if ctrl => app.input.search_older(),
        KeyCode::Char('o') if ctrl => {
            if let Some(&i) = app.foldable().last() {
                app.toggle_entry(app.selected_entry.unwrap_or(i));
            }
        }
        KeyCode::Char('a') if ctrl => app.input.home(),
        KeyCode::Char('e') if ctrl => app.input.end(),
        KeyCode::Char('u') if ctrl => app.input.kill_to_start(),
        KeyCode::Char('k') if ctrl => app.input.kill_to_end(),
        KeyCode::Char('w') if ctrl => app.input.delete_word(),
        KeyCode::Char('l') if ctrl => app.scroll = 0,
        KeyCode::Char(c) if !ctrl => app.input.insert(c),
        KeyCode::Tab => complete(app),
        KeyCode::Backspace => app.input.backspace(),
        KeyCode::Delete => app.input.delete(),
        KeyCode::Left => app.input.left(),
        KeyCode::Right => app.input.right(),
        KeyCode::Home => app.input.home(),
        KeyCode::End if ctrl => scroll_to_end(app),
        KeyCode::End => {
            app.input.end();
            scroll_to_end(app);
        }
        KeyCode::Up if alt => select_entry(app, -1),
        KeyCode::Down if alt => select_entry(app, 1),
        KeyCode::Up => app.input.up(),
        KeyCode::Down => app.input.down(),
        KeyCode::PageUp => app.scroll = app.scroll.saturating_add(page.max(1)),
        KeyCode::PageDown => {
            app.scroll = app.scroll.saturating_sub(page.max(1));
            if app.scroll == 0 {
                app.flash = None;
            }
        }
        KeyCode::Esc => {
            app.selected_entry = None;
            app.flash = None;
        }
        _ => {}
    }
    Vec::new()
}

fn scroll_to_end(app: &mut App) {
    app.scroll = 0;
    app.flash = None;
}

fn select_entry(app: &mut App, step: isize) {
    let foldable = app.foldable();
    if foldable.is_empty() {
        return;
    }
    let pos = app
        .selected_entry
        .and_then(|s| foldable.iter().position(|&f| f == s));
    let next = match (pos, step < 0) {
        (None, _) => foldable.len() - 1,
        (Some(p), true) => p.saturating_sub(1),
        (Some(p), false) => (p + 1).min(foldable.len() - 1),
    };
    app.selected_entry = Some(foldable[next]);
}

fn complete(app: &mut App) {
    let mut candidates: Vec<String> = app.agents.iter().map(|a| format!("@{a}")).collect();
    candidates.extend(commands().iter().map(|c| c.name.to_string()));
    let custom: Vec<String> = app.custom.iter().map(|c| format!("/{}", c.name)).collect();
    for c in custom {
        if !candidates.contains(&c) {
            candidates.push(c);
        }
    }
    let matches = app.input.complete(&candidates);
    app.completions = if matches.len() > 1 {
        matches
    } else {
        Vec::new()
    };
}

fn ctrl_c(app: &mut App) -> Vec<Action> {
    if app.busy {
        app.take_back_queued();
        return vec![Action::CancelTurn];
    }
    if let Overlay::Tasks(_) | Overlay::Resume { .. } = app.overlay {
        app.overlay = Overlay::None;
    }
    if app
        .last_interrupt
        .is_some_and(|t| app.now_ms.saturating_sub(t) < DOUBLE_CTRL_C_MS)
    {
        return vec![Action::Exit];
    }
    app.input.clear();
    app.last_interrupt = Some(app.now_ms);
    app.flash = Some("Ctrl+C again within 2 s exits (the session is saved)".into());
    Vec::new()
}

/// Handle a submitted line (typed, or taken from the queue after a turn).
pub fn submit(app: &mut App, line: &str) -> Vec<Action> {
    let parsed = match parse_line(line) {
        Ok(p) => Some(p),
        // A custom command only where no built-in one has the name.
        Err(LineError::UnknownCommand(_))
            if crate::custom_commands::invoked(&app.custom, line).is_some() =>
        {
            None
        }
        Err(e @ (LineError::UnknownCommand(_) | LineError::MissingAgent)) => {
            app.error(e.to_string());
            return Vec::new();
        }
    };
    let needs_idle = parsed.as_ref().is_none_or(|parsed| {
        matches!(
            parsed,
            Line::Prompt(_)
                | Line::Direct { .. }
                | Line::Command(
                    SlashCommand::Model(Some(_))
                        | SlashCommand::Clear
                        | SlashCommand::Resume(_)
                        | SlashCommand::Compact(_)
                )
        )
    });
    if needs_idle && app.busy {
        if app.queued.len() >= MAX_QUEUED {
            app.error(format!(
                "{MAX_QUEUED} inputs are queued already; wait for the turn to end"
            ));
            app.input.set(line);
        } else {
            // The hint line shows the queue (see `render::status::hint_text`).
            app.queued.push_back(line.to_string());
        }
        return Vec::new();
    }
    let Some(parsed) = parsed else {
        app.start_turn(line.trim());
        return vec![Action::Custom(line.trim().to_string())];
    };
    match parsed {
        Line::Empty => Vec::new(),
        Line::Prompt(p) => {
            app.start_turn(&p);
            vec![Action::Prompt(p)]
        }
        Line::Direct { agent, job } => {
            if !app.agents.contains(&agent) {
                app.error(format!("no sub-agent named {agent} — /agents lists them"));
                return Vec::new();
            }
            app.start_turn(line.trim());
            vec![Action::Direct { agent, job }]
        }
        Line::Command(cmd) => command(app, cmd),
    }
}

fn command(app: &mut App, cmd: SlashCommand) -> Vec<Action> {
    match cmd {
        SlashCommand::Help => {
            let custom = crate::custom_commands::help_text(&app.custom);
            let text = format!("{}{custom}{KEYS_HELP}", help_text());
            app.notice(text);
        }
        SlashCommand::Agents => return vec![Action::ShowAgents],
        SlashCommand::Tasks => app.overlay = Overlay::Tasks(TaskPanel::default()),
        SlashCommand::Model(None) => app.notice(format!("model: {}", app.status.model)),
        SlashCommand::Model(Some(spec)) => return vec![Action::SetModel(spec)],
        SlashCommand::Clear => return vec![Action::NewSession { reason: "clear" }],
        SlashCommand::Resume(None) => return vec![Action::ListSessions],
        SlashCommand::Resume(Some(id)) => return vec![Action::Resume(id)],
        SlashCommand::Cost => {
            let (all, children) = (app.total_usage(), app.subagent_usage);
            app.notice(format!(
                "this session: {}\nof which sub-agents: {}",
                all.summary(),
                children.summary()
            ));
        }
        SlashCommand::Compact(instructions) => {
            app.start_compaction(instructions.as_deref());
            return vec![Action::Compact(instructions)];
        }
        SlashCommand::Exit => return vec![Action::Exit],
    }
    Vec::new()
}

fn approval_key(app: &mut App, key: KeyEvent) -> Vec<Action> {
    if let Some(f) = &mut app.approvals.feedback {
        match key.code {
            KeyCode::Char(c) => f.push(c),
            KeyCode::Backspace => {
                f.pop();
            }
            KeyCode::Esc => app.approvals.feedback = None,
            KeyCode::Enter => {
                return app
                    .approvals
                    .answer(Choice::DenyWithFeedback)
                    .map(Action::Answer)
                    .into_iter()
                    .collect();
            }
            _ => {}
        }
        return Vec::new();
    }
    let n = Choice::ALL.len();
    let choice = match key.code {
        KeyCode::Char('y') | KeyCode::Char('1') => Some(Choice::Once),
        KeyCode::Char('s') | KeyCode::Char('2') => Some(Choice::Session),
        KeyCode::Char('a') | KeyCode::Char('3') => Some(Choice::Always),
        KeyCode::Char('n') | KeyCode::Char('4') | KeyCode::Esc => Some(Choice::Deny),
        KeyCode::Char('f') | KeyCode::Char('5') => Some(Choice::DenyWithFeedback),
        KeyCode::Enter => Some(Choice::ALL[app.approvals.choice.min(n - 1)]),
        KeyCode::Left | KeyCode::Up | KeyCode::BackTab => {
            app.approvals.choice = (app.approvals.choice + n - 1) % n;
            None
        }
        KeyCode::Right | KeyCode::Down | KeyCode::Tab => {
            app.approvals.choice = (app.approvals.choice + 1) % n;
            None
        }
        _ => None,
    };
    choice
        .and_then(|c| app.approvals.answer(c))
        .map(Action::Answer)
        .into_iter()
        .collect()
}

fn panel_key(app: &mut App, key: KeyEvent) -> Vec<Action> {
    let ids: Vec<String> = app.tasks.all().iter().map(|t| t.id.clone()).collect();
    let Overlay::Tasks(panel) = &mut app.overlay else {
        return Vec::new();
    };
    if let Some(text) = &mut panel.follow_up {
        match key.code {
            KeyCode::Char(c) => text.push(c),
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Esc => panel.follow_up = None,
            KeyCode::Enter => {
                let text = panel.follow_up.take().unwrap_or_default();
                let current = panel
                    .detail
                    .clone()
                    .or_else(|| ids.get(panel.selected).cloned());
                if let Some(task_id) = current
                    && !text.trim().is_empty()
                {
                    panel.message = Some("follow-up sent".into());
                    return vec![Action::FollowUp { task_id, text }];
                }
            }
            _ => {}
        }
        return Vec::new();
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let current = panel
        .detail
        .clone()
        .or_else(|| ids.get(panel.selected).cloned());
    if key.code != KeyCode::Char('x') {
        panel.cancel_armed = None;
    }
    match key.code {
        KeyCode::Char('t') if ctrl => app.overlay = Overlay::None,
        KeyCode::Esc | KeyCode::Char('q') => {
            if panel.detail.is_some() {
                panel.detail = None;
                panel.follow = false;
            } else {
                app.overlay = Overlay::None;
            }
        }
        KeyCode::Up | KeyCode::Char('k') if panel.detail.is_none() => {
            panel.selected = panel.selected.saturating_sub(1)
        }
        KeyCode::Down | KeyCode::Char('j') if panel.detail.is_none() => {
            panel.selected = (panel.selected + 1).min(ids.len().saturating_sub(1))
        }
        KeyCode::Enter => {
            if let Some(id) = current {
                panel.detail = Some(id.clone());
                return vec![Action::LoadDetail(id)];
            }
        }
        KeyCode::Char('f') => {
            if let Some(id) = current {
                panel.follow = !panel.follow || panel.detail.is_none();
                panel.detail = Some(id.clone());
                return vec![Action::LoadDetail(id)];
            }
        }
        KeyCode::Char('x') => {
            let Some(id) = current else {
                return Vec::new();
            };
            let ended = app.tasks.get(&id).is_some_and(|t| t.status.is_terminal());
            let Overlay::Tasks(panel) = &mut app.overlay else {
                return Vec::new();
            };
            if ended {
                panel.message = Some(format!("{} has ended already", crate::text::short_id(&id)));
            } else if panel.cancel_armed.as_deref() == Some(id.as_str()) {
                panel.cancel_armed = None;
                panel.message = Some(format!("cancelling {}…", crate::text::short_id(&id)));
                return vec![Action::CancelTask(id)];
            } else {
                panel.message = Some(format!(
                    "press x again to cancel {}",
                    crate::text::short_id(&id)
                ));
                panel.cancel_armed = Some(id);
            }
        }
        KeyCode::Char('s') if current.is_some() => {
            panel.follow_up = Some(String::new());
            panel.message = None;
        }
        _ => {}
    }
    Vec::new()
}

fn resume_key(app: &mut App, key: KeyEvent) -> Vec<Action> {
    let Overlay::Resume { items, selected } = &mut app.overlay else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Esc => app.overlay = Overlay::None,
        KeyCode::Up => *selected = selected.saturating_sub(1),
        KeyCode::Down => *selected = (*selected + 1).min(items.len().saturating_sub(1)),
        KeyCode::Enter => {
            if let Some(item) = items.get(*selected) {
                let id = item.id.clone();
                app.overlay = Overlay::None;
                return vec![Action::Resume(id)];
            }
        }
        _ => {}
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn typed(app: &mut App, s: &str) {
        for c in s.chars() {
            on_key(app, key(KeyCode::Char(c)), 10);
        }
    }

    fn app() -> App {
        App::new(Status::default(), vec!["explorer".into()], Vec::new())
    }

    #[test]
    fn the_completion_hint_goes_once_the_agent_name_is_complete() {
        let mut a = App::new(
            Status::default(),
            vec!["writer".into(), "writer-fast".into()],
            Vec::new(),
        );
        typed(&mut a, "@w");
        on_key(&mut a, key(KeyCode::Tab), 10);
        assert_eq!(a.input.text(), "@writer");
        let hint = crate::render::hint_text(&a);
        assert!(hint.contains("@writer  @writer-fast"), "{hint}");
        // Followed by a space, `@writer` is complete: the choices are stale.
        typed(&mut a, " ");
        let hint = crate::render::hint_text(&a);
        assert!(!hint.contains("@writer-fast"), "{hint}");
        // Accepting the completion (the only match left) ends it too.
        on_key(&mut a, ctrl('u'), 10);
        typed(&mut a, "@w");
        on_key(&mut a, key(KeyCode::Tab), 10);
        typed(&mut a, "-");
        on_key(&mut a, key(KeyCode::Tab), 10);
        assert_eq!(a.input.text(), "@writer-fast ");
        let hint = crate::render::hint_text(&a);
        assert!(!hint.contains("@writer"), "{hint}");
    }

    #[test]
    fn ctrl_c_puts_the_queued_messages_back_in_the_input_box_and_the_hint_goes() {
        let mut a = app();
        typed(&mut a, "first");
        on_key(&mut a, key(KeyCode::Enter), 10);
        for line in ["second", "third"] {
            typed(&mut a, line);
            assert!(on_key(&mut a, key(KeyCode::Enter), 10).is_empty());
        }
        assert!(crate::render::hint_text(&a).starts_with("queued (2)"));
        typed(&mut a, "draft");
        assert_eq!(on_key(&mut a, ctrl('c'), 10), [Action::CancelTurn]);
        assert!(a.queued.is_empty());
        assert_eq!(a.input.text(), "second\nthird\ndraft", "nothing is lost");
        assert!(!crate::render::hint_text(&a).contains("queued"));
        // The turn ends cancelled: nothing is sent by itself; Enter sends what was queued.
        assert_eq!(a.end_turn(), None);
        assert_eq!(
            on_key(&mut a, key(KeyCode::Enter), 10),
            [Action::Prompt("second\nthird\ndraft".into())]
        );
    }

    #[test]
    fn the_queued_hint_is_gone_once_the_queued_message_is_sent() {
        let mut a = app();
        typed(&mut a, "first");
        on_key(&mut a, key(KeyCode::Enter), 10);
        typed(&mut a, "second");
        on_key(&mut a, key(KeyCode::Enter), 10);
        assert!(crate::render::hint_text(&a).contains("queued (1)"));
        let next = a.end_turn().unwrap();
        submit(&mut a, &next);
        assert!(a.busy);
        assert!(!crate::render::hint_text(&a).contains("queued"));
    }

    #[test]
    fn input_typed_during_a_turn_is_queued_then_released_in_order() {
        let mut a = app();
        typed(&mut a, "first");
        assert_eq!(
            on_key(&mut a, key(KeyCode::Enter), 10),
            [Action::Prompt("first".into())]
        );
        typed(&mut a, "second");
        assert!(on_key(&mut a, key(KeyCode::Enter), 10).is_empty());
        typed(&mut a, "/tasks");
        on_key(&mut a, key(KeyCode::Enter), 10);
        assert!(
            matches!(a.overlay, Overlay::Tasks(_)),
            "/tasks works during a turn"
        );
        assert_eq!(a.queued, ["second"]);
        let next = a.end_turn().unwrap();
        assert_eq!(submit(&mut a, &next), [Action::Prompt("second".into())]);
    }

    #[test]
    fn an_unknown_command_is_an_error_not_a_prompt() {
        let mut a = app();
        typed(&mut a, "/frobnicate");
        assert!(on_key(&mut a, key(KeyCode::Enter), 10).is_empty());
        assert!(!a.busy);
        let last = a.transcript.entries().last().unwrap();
        assert!(
            matches!(&last.kind, crate::model::transcript::EntryKind::Error(e) if e.contains("unknown command /frobnicate"))
        );
    }

    #[test]
    fn ctrl_c_cancels_a_turn_and_twice_at_idle_exits() {
        let mut a = app();
        typed(&mut a, "go");
        on_key(&mut a, key(KeyCode::Enter), 10);
        assert_eq!(on_key(&mut a, ctrl('c'), 10), [Action::CancelTurn]);
        a.end_turn();
        typed(&mut a, "draft");
        a.now_ms = 10_000;
        assert!(on_key(&mut a, ctrl('c'), 10).is_empty());
        assert!(a.input.is_empty(), "the first clears the input");
        a.now_ms = 13_000;
        assert!(
            on_key(&mut a, ctrl('c'), 10).is_empty(),
            "too late: counts as a first"
        );
        a.now_ms = 14_000;
        assert_eq!(on_key(&mut a, ctrl('c'), 10), [Action::Exit]);
    }

    #[test]
    fn x_twice_cancels_a_running_task() {
        let mut a = app();
        a.tasks.on_update(
            None,
            &cadre_types::SubagentUpdate {
                agent: "explorer".into(),
                task_id: Some("task_1".into()),
                session_id: "sub-1".into(),
                kind: cadre_types::UpdateKind::Start,
                text: String::new(),
                tool: None,
                usage: None,
                end: None,
            },
            0,
        );
        on_key(&mut a, ctrl('t'), 10);
        assert!(on_key(&mut a, key(KeyCode::Char('x')), 10).is_empty());
        assert_eq!(
            on_key(&mut a, key(KeyCode::Char('x')), 10),
            [Action::CancelTask("task_1".into())]
        );
        on_key(&mut a, key(KeyCode::Esc), 10);
        assert_eq!(a.overlay, Overlay::None);
    }
}
