//! Drawing: the model to a frame. Everything here reads the [`App`]; the only state is the
//! [`View`], a cache of each entry's wrapped lines keyed by the entry's version and the width,
//! so a frame costs the visible lines plus one lookup per entry, not a re-render.

pub mod diff;
mod entry;
pub mod markdown;
mod panels;
mod status;
mod table;
pub use status::hint_text;
pub mod wrap;

use crate::model::transcript::EntryKind;
use crate::model::{App, Overlay};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use std::collections::HashMap;

pub use entry::{status_style, task_summary};

/// What the renderer keeps between frames.
#[derive(Debug, Default)]
pub struct View {
    width: usize,
    /// Wrapped lines per entry (absolute index): (cache key, lines).
    cache: HashMap<usize, (u64, Vec<Line<'static>>)>,
    /// The transcript rows on screen: (row, absolute entry index), for clicks.
    pub rows: Vec<(u16, usize)>,
    /// Height of the transcript area in the last frame (a page, for PageUp/PageDown).
    pub page: usize,
    /// Top row of the transcript area in the last frame.
    pub top: u16,
}

impl View {
    /// Wrapped lines held in the cache (every entry drawn so far).
    pub fn cached_lines(&self) -> usize {
        self.cache.values().map(|(_, l)| l.len()).sum()
    }

    /// The entry drawn at screen row `row`, if any.
    pub fn entry_at(&self, row: u16) -> Option<usize> {
        self.rows.iter().find(|(r, _)| *r == row).map(|(_, i)| *i)
    }
}

fn key_of(app: &App, abs: usize, kind: &EntryKind, version: u64) -> u64 {
    let mut key = version.wrapping_mul(1_000_003);
    if app.selected_entry == Some(abs) {
        key ^= 0x5bd1_e995;
    }
    if let EntryKind::Tool(t) = kind {
        for id in &t.children {
            if let Some(c) = app.tasks.get(id) {
                key = key.wrapping_mul(31).wrapping_add(c.version);
                if !c.status.is_terminal() {
                    // Elapsed time changes while it runs: redraw once a second.
                    key = key.wrapping_mul(31).wrapping_add(app.now_ms / 1000);
                }
            }
        }
    }
    key
}

/// Draw the whole UI.
pub fn draw(frame: &mut Frame<'_>, app: &App, view: &mut View) {
    let area = frame.area();
    let strip = app.tasks.running_background().count().min(4) as u16
        + u16::from(app.tasks.running_background().count() > 4);
    let queued = app.queued.len().min(3) as u16;
    let input_lines = (app.input.lines().len() as u16).clamp(1, 8);
    let [
        main,
        strip_area,
        queued_area,
        input_area,
        status_area,
        hint_area,
    ] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(strip),
        Constraint::Length(queued),
        Constraint::Length(input_lines + 1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    transcript(frame, app, view, main);
    status::strip(frame, app, strip_area);
    status::queued(frame, app, queued_area);
    status::input(frame, app, input_area);
    status::status_bar(frame, app, status_area);
    status::hints(frame, app, hint_area);
    match &app.overlay {
        Overlay::Tasks(panel) => panels::tasks(frame, app, panel, main),
        Overlay::Resume { items, selected } => panels::resume(frame, items, *selected, main),
        Overlay::None => {}
    }
    if app.first_run.is_some() && app.transcript.entries().is_empty() {
        panels::first_run(frame, app, main);
    }
    if let Some(p) = app.approvals.current() {
        panels::approval(frame, app, p, main);
    }
}

fn transcript(frame: &mut Frame<'_>, app: &App, view: &mut View, area: Rect) {
    let width = area.width as usize;
    if width != view.width {
        view.cache.clear();
        view.width = width;
    }
    let base = app.transcript.dropped();
    let entries = app.transcript.entries();
    view.cache.retain(|&k, _| k >= base);
    // Heights of every entry, bottom-up until the screen (plus the scroll offset) is full.
    let height = area.height as usize;
    let need = height + app.scroll;
    let mut taken: Vec<usize> = Vec::new();
    let mut total = 0;
    for (i, e) in entries.iter().enumerate().rev() {
        let abs = base + i;
        let key = key_of(app, abs, &e.kind, e.version);
        let fresh = view.cache.get(&abs).is_some_and(|(k, _)| *k == key);
        if !fresh {
            let lines = entry::lines(
                &e.kind,
                &app.tasks,
                app.now_ms,
                app.selected_entry == Some(abs),
                width,
            );
            view.cache.insert(abs, (key, lines));
        }
        total += view.cache.get(&abs).map_or(0, |(_, l)| l.len());
        taken.push(abs);
        if total >= need {
            break;
        }
    }
    // The lines of the taken entries, oldest first; keep the window above the scroll offset.
    let mut lines: Vec<(usize, &Line<'static>)> = Vec::with_capacity(total);
    for &abs in taken.iter().rev() {
        if let Some((_, ls)) = view.cache.get(&abs) {
            lines.extend(ls.iter().map(|l| (abs, l)));
        }
    }
    let scroll = app.scroll.min(lines.len().saturating_sub(height));
    let end = lines.len() - scroll;
    let start = end.saturating_sub(height);
    let visible = &lines[start..end];
    view.rows = visible
        .iter()
        .enumerate()
        .map(|(r, (abs, _))| (area.y + r as u16, *abs))
        .collect();
    view.page = height.saturating_sub(2);
    view.top = area.y;
    let text: Vec<Line<'static>> = visible.iter().map(|(_, l)| (*l).clone()).collect();
    frame.render_widget(Paragraph::new(text), area);
}
