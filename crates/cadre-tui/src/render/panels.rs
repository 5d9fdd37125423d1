//! What covers the transcript: the task panel (list and detail), the approval dialog, the
//! `/resume` picker and the first-run message.

use super::entry::{status_style, task_summary};
use super::{diff, wrap::wrap};
use crate::model::approvals::{Choice, PendingApproval};
use crate::model::{App, SessionItem, TaskPanel};
use crate::text::{elapsed, short, short_id, tokens};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// A rectangle of `w` × `h` centred in `area` (clipped to it).
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn boxed(frame: &mut Frame<'_>, area: Rect, title: &str, lines: Vec<Line<'static>>, color: Color) {
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(color))
        .title(Span::styled(title.to_string(), bold()));
    let inner_h = area.height.saturating_sub(2) as usize;
    // Keep the end in view (the newest log lines, the choices).
    let skip = lines.len().saturating_sub(inner_h);
    let lines: Vec<Line<'static>> = lines.into_iter().skip(skip).collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// The title for a box `width` columns wide inside: a title too long for the border keeps
/// its name there, and the keys after ` — ` become the first lines of `lines`, wrapped, so a
/// narrow terminal still shows them. Called before the box's height is taken.
fn fit_title(title: &str, width: usize, lines: &mut Vec<Line<'static>>) -> String {
    match title.split_once(" — ") {
        Some((name, keys)) if title.chars().count() > width => {
            let keys = wrap(Line::styled(format!(" {}", keys.trim()), dim()), width, 1);
            lines.splice(0..0, keys);
            format!("{name} ")
        }
        _ => title.to_string(),
    }
}

fn wrapped(text: &str, style: Style, width: usize, out: &mut Vec<Line<'static>>) {
    for l in text.lines() {
        out.extend(wrap(Line::styled(format!("  {l}"), style), width, 2));
    }
}

/// The task panel.
pub fn tasks(frame: &mut Frame<'_>, app: &App, panel: &TaskPanel, area: Rect) {
    let width = area.width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    let title;
    match panel.detail.as_deref().and_then(|id| app.tasks.get(id)) {
        Some(t) => {
            title = format!(
                " Task {} — f follow · x x cancel · s follow-up · Esc back ",
                t.id
            );
            let mut head = vec![Span::raw("  ")];
            head.extend(task_summary(t, app.now_ms));
            lines.extend(wrap(Line::from(head), width, 4));
            if panel.follow {
                lines.push(Line::styled(
                    "  following live",
                    Style::default().fg(Color::Yellow),
                ));
            }
            let detail = app.detail.as_ref().filter(|d| d.task_id == t.id);
            lines.push(Line::styled(" Prompt", bold()));
            match detail.and_then(|d| d.prompt.as_deref()) {
                Some(p) => wrapped(p, Style::default(), width, &mut lines),
                None => wrapped(&t.description, Style::default(), width, &mut lines),
            }
            lines.push(Line::styled(" Log", bold()));
            let log: Vec<String> = match detail {
                Some(d) if !d.log.is_empty() => d.log.clone(),
                _ => t.progress.iter().cloned().collect(),
            };
            if log.is_empty() {
                lines.push(Line::styled("  (nothing yet)", dim()));
            }
            for l in log {
                lines.extend(wrap(Line::styled(format!("  {l}"), dim()), width, 4));
            }
            match (&t.error, &t.result) {
                (Some(e), _) => {
                    lines.push(Line::styled(" Error", bold().fg(Color::Red)));
                    wrapped(e, Style::default().fg(Color::Red), width, &mut lines);
                }
                (None, Some(r)) => {
                    lines.push(Line::styled(" Result", bold()));
                    wrapped(r, Style::default(), width, &mut lines);
                }
                _ => {}
            }
        }
        None => {
            title = " Tasks — Enter open · f follow · x x cancel · s follow-up · Esc close ".into();
            if app.tasks.all().is_empty() {
                lines.push(Line::styled("  no tasks in this session yet", dim()));
            }
            for (i, t) in app.tasks.all().iter().enumerate() {
                let sel = i == panel.selected;
                let style = if sel {
                    Style::default().bg(Color::Rgb(40, 40, 60))
                } else {
                    Style::default()
                };
                let mut l = Line::from(vec![
                    Span::raw(if sel { "› " } else { "  " }),
                    Span::raw(format!("{:<14}", short_id(&t.id))),
                    Span::styled(
                        format!("{:<14}", short(&t.agent, 13)),
                        Style::default().fg(Color::Cyan),
                    ),
                    Span::styled(
                        format!("{:<10}", t.status.to_string()),
                        status_style(t.status),
                    ),
                    Span::raw(format!("{:>7}  ", elapsed(t.elapsed_ms(app.now_ms)))),
                    Span::raw(format!("{:>7} tok  ", tokens(t.usage.total()))),
                    Span::styled(
                        format!("{:<12}  ", t.usage.task_cost_text(t.status.is_terminal())),
                        dim(),
                    ),
                    Span::raw(if t.background { "bg  " } else { "fg  " }),
                    Span::styled(short(&t.description, 40), dim()),
                ]);
                l.style = style;
                lines.push(l);
            }
        }
    }
    if let Some(f) = &panel.follow_up {
        lines.push(Line::from(vec![
            Span::styled(" follow-up › ", Style::default().fg(Color::Yellow)),
            Span::raw(f.clone()),
        ]));
    } else if let Some(m) = &panel.message {
        lines.push(Line::styled(
            format!(" {m}"),
            Style::default().fg(Color::Yellow),
        ));
    }
    let title = fit_title(&title, width, &mut lines);
    boxed(frame, area, &title, lines, Color::Cyan);
}

/// The approval dialog for the first waiting request.
pub fn approval(frame: &mut Frame<'_>, app: &App, p: &PendingApproval, area: Rect) {
    let r = &p.request;
    let w = area.width.saturating_sub(4).min(100);
    let width = w.saturating_sub(2) as usize;
    let who = match &r.task_id {
        _ if r.agent == "main" => "The main agent".to_string(),
        Some(t) => format!("Sub-agent {} (task {t})", r.agent),
        None => format!("Sub-agent {}", r.agent),
    };
    // Every line wraps to the dialog's width: a narrow terminal shows all of it, never cut.
    let mut lines = wrap(
        Line::from(vec![
            Span::styled(who, bold().fg(Color::Cyan)),
            Span::raw(" wants to run "),
            Span::styled(r.tool.clone(), bold()),
        ]),
        width,
        2,
    );
    lines.extend(wrap(
        Line::from(vec![
            Span::raw("risk: "),
            Span::styled(
                format!("{:?}", r.risk).to_lowercase(),
                match r.risk {
                    cadre_types::RiskLevel::Low => Style::default().fg(Color::Green),
                    cadre_types::RiskLevel::Medium => Style::default().fg(Color::Yellow),
                    cadre_types::RiskLevel::High => Style::default().fg(Color::Red),
                },
            ),
            Span::styled(format!(" — {}", r.reason), dim()),
        ]),
        width,
        2,
    ));
    if let Some(s) = &r.subject {
        lines.extend(wrap(Line::from(format!("on: {s}")), width, 4));
    }
    let args = r.args.to_string();
    match diff::tool_diff(&r.tool, &args, r.replaces.as_deref()) {
        Some(d) => {
            for l in d.into_iter().take(16) {
                lines.extend(wrap(l, width, 2));
            }
        }
        None => {
            let pretty = serde_json::to_string_pretty(&r.args).unwrap_or(args);
            for l in pretty.lines().take(12) {
                lines.extend(wrap(Line::styled(l.to_string(), dim()), width, 2));
            }
        }
    }
    lines.push(Line::default());
    // The choices break between two choices, never inside one.
    let mut choices: Vec<Span<'static>> = Vec::new();
    let mut col = 0;
    for (i, c) in Choice::ALL.iter().enumerate() {
        let style = if i == app.approvals.choice {
            Style::default().fg(Color::Black).bg(Color::Yellow)
        } else {
            Style::default()
        };
        let w = c.label().chars().count();
        if col > 0 && col + w > width {
            lines.push(Line::from(std::mem::take(&mut choices)));
            col = 0;
        }
        choices.push(Span::styled(c.label().to_string(), style));
        choices.push(Span::raw("  "));
        col += w + 2;
    }
    lines.push(Line::from(choices));
    if let Some(f) = &app.approvals.feedback {
        lines.extend(wrap(
            Line::from(vec![
                Span::styled("why not? › ", Style::default().fg(Color::Yellow)),
                Span::raw(f.clone()),
            ]),
            width,
            2,
        ));
    }
    let more = app.approvals.len() - 1;
    if more > 0 {
        lines.push(Line::styled(format!("{more} more waiting"), dim()));
    }
    let h = (lines.len() as u16 + 2).min(area.height);
    boxed(
        frame,
        centered(area, w, h),
        " Approval needed ",
        lines,
        Color::Yellow,
    );
}

/// The `/resume` picker.
pub fn resume(frame: &mut Frame<'_>, items: &[SessionItem], selected: usize, area: Rect) {
    let w = area.width.saturating_sub(4);
    let width = w.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if items.is_empty() {
        lines.push(Line::styled("  no saved sessions", dim()));
    }
    for (i, it) in items.iter().enumerate() {
        let mut l = Line::from(vec![
            Span::raw(if i == selected { "› " } else { "  " }),
            Span::raw(format!("{}  ", it.id)),
            Span::styled(it.label.clone(), dim()),
        ]);
        if i == selected {
            l.style = Style::default().bg(Color::Rgb(40, 40, 60));
        }
        lines.extend(wrap(l, width, 4));
    }
    let title = fit_title(
        " Resume a session — Enter open · Esc close ",
        width,
        &mut lines,
    );
    let h = (lines.len() as u16 + 2).min(area.height);
    boxed(frame, centered(area, w, h), &title, lines, Color::Cyan);
}

/// The first-run message: the provider has no key.
pub fn first_run(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let w = area.width.saturating_sub(4).min(90);
    let mut lines = Vec::new();
    for l in app.first_run.as_deref().unwrap_or("").lines() {
        lines.extend(wrap(
            Line::from(l.to_string()),
            w.saturating_sub(2) as usize,
            2,
        ));
    }
    let h = (lines.len() as u16 + 2).min(area.height);
    boxed(
        frame,
        centered(area, w, h),
        " Welcome to cadre ",
        lines,
        Color::Magenta,
    );
}
