//! The bottom of the screen: the running-tasks strip, queued inputs, the input box, the
//! status bar and the key hints.

use super::entry::task_summary;
use crate::model::App;
use crate::text::{short, short_id, tokens};
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// One line per running background task (four at most, then a count).
pub fn strip(frame: &mut Frame<'_>, app: &App, area: Rect) {
    if area.height == 0 {
        return;
    }
    let running: Vec<_> = app.tasks.running_background().collect();
    let mut lines: Vec<Line<'static>> = running
        .iter()
        .take(4)
        .map(|t| {
            let mut spans = vec![Span::styled("⟳ ", Style::default().fg(Color::Yellow))];
            spans.extend(task_summary(t, app.now_ms));
            if let Some(p) = t.progress.back() {
                spans.push(Span::styled(format!(" · {}", short(p, 60)), dim()));
            }
            Line::from(spans)
        })
        .collect();
    if running.len() > 4 {
        lines.push(Line::styled(
            format!("  … {} more running (Ctrl+T)", running.len() - 4),
            dim(),
        ));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// Inputs waiting for the turn to end.
pub fn queued(frame: &mut Frame<'_>, app: &App, area: Rect) {
    if area.height == 0 {
        return;
    }
    let lines: Vec<Line<'static>> = app
        .queued
        .iter()
        .take(3)
        .map(|q| Line::styled(format!("⧗ queued: {}", short(q, 100)), dim()))
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

/// The input box (or the history search), with the cursor.
pub fn input(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let (title, border) = if let Some(s) = &app.input.search {
        (format!(" search history: {} ", s.query), Color::Yellow)
    } else if app.busy {
        (
            " working — type to queue a message ".to_string(),
            Color::DarkGray,
        )
    } else {
        (String::new(), Color::Blue)
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(Style::default().fg(border))
        .title(title);
    let inner = block.inner(area);
    let lines: Vec<String> = match app.input.search_hit() {
        Some(hit) if app.input.search.is_some() => hit.lines().map(str::to_string).collect(),
        _ => app.input.lines(),
    };
    let (row, col) = app.input.cursor();
    let height = inner.height as usize;
    let first = (row + 1).saturating_sub(height);
    let text: Vec<Line<'static>> = lines
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, l)| {
            let head = if i == 0 { "› " } else { "  " };
            Line::from(vec![
                Span::styled(
                    head,
                    Style::default()
                        .fg(Color::Blue)
                        .add_modifier(Modifier::BOLD),
                ),
                Span::raw(l.clone()),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(text).block(block), area);
    if app.approvals.is_empty() && app.input.search.is_none() {
        let line: String = app.input.lines().get(row).cloned().unwrap_or_default();
        let x: usize = line
            .chars()
            .take(col)
            .map(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
            .sum();
        let x = (inner.x as usize + 2 + x).min((inner.x + inner.width).saturating_sub(1) as usize);
        frame.set_cursor_position(Position::new(x as u16, inner.y + (row - first) as u16));
    }
}

/// Model, session, tasks, tokens, cost, approval mode and waiting approvals.
pub fn status_bar(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let (running, pending, done) = app.tasks.counts_by_state();
    let u = app.total_usage();
    let sep = || Span::styled(" │ ", dim());
    let mut spans = vec![Span::styled(
        format!(" {} ", app.status.model),
        Style::default().fg(Color::Black).bg(Color::Cyan),
    )];
    // Waiting approvals come first: on a narrow screen the end of the bar is cut.
    let waiting = app.approvals.len();
    if waiting > 0 {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            format!(
                " ⚠ {waiting} approval{} waiting ",
                if waiting == 1 { "" } else { "s" }
            ),
            Style::default().fg(Color::Black).bg(Color::Yellow),
        ));
    }
    spans.extend([
        Span::styled(format!(" {}", short_id(&app.status.session_id)), dim()),
        sep(),
        Span::raw(if pending > 0 {
            format!("{running} running · {pending} pending · {done} done")
        } else {
            format!("{running} running · {done} done")
        }),
        sep(),
        Span::raw(format!("{} tok · {}", tokens(u.total()), u.cost_text())),
        sep(),
        Span::raw(app.status.approval_mode.clone()),
    ]);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The key hints for what the screen shows now (or a transient message).
pub fn hints(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let text = hint_text(app);
    frame.render_widget(
        Paragraph::new(Line::styled(format!(" {text}"), dim())),
        area,
    );
}

/// The hint line's text. The queue's hint is derived from the queue, so it is gone as soon
/// as the queue is empty (sent, or taken back with Ctrl+C).
pub fn hint_text(app: &App) -> String {
    if let Some(f) = &app.flash {
        f.clone()
    } else if let Some(choices) = completion_hint(app) {
        choices
    } else if app.busy && !app.queued.is_empty() && app.approvals.is_empty() {
        format!(
            "queued ({}): sent when the turn ends · Ctrl+C cancel the turn and take it back",
            app.queued.len()
        )
    } else if !app.approvals.is_empty() {
        "y once · s this session · a always · n deny · f deny with feedback · ←/→ + Enter".into()
    } else if app.input.search.is_some() {
        "type to search · Ctrl+R older · Enter take · Esc cancel".into()
    } else if app.busy {
        "Ctrl+C cancel the turn · Enter queue a message · Ctrl+T tasks · Ctrl+O unfold".into()
    } else {
        "Enter send · Alt+Enter new line · Tab complete · Ctrl+R history · Ctrl+T tasks · Ctrl+O unfold · /help".into()
    }
}

/// The choices of the last Tab, while the word before the cursor can still become more than
/// one of them: derived from the input, so a completed `@agent ` (or a submitted line) has
/// none.
fn completion_hint(app: &App) -> Option<String> {
    let word = app.input.completable_word()?;
    let left: Vec<&str> = app
        .completions
        .iter()
        .filter(|c| c.starts_with(&word))
        .map(String::as_str)
        .collect();
    (left.len() > 1).then(|| left.join("  "))
}
