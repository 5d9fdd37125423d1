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

use crate::model::transcript::{Entry, EntryKind};
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
    /// The content line at the top of a scrolled-back transcript, so new lines arriving below
    /// (or an entry growing) do not move what the user is reading.
    anchor: Option<Anchor>,
    /// Lines the last frame was scrolled up from the bottom (0: following the end).
    scroll: usize,
}

/// A scrolled-back view's top line: line `line` of entry `abs`, drawn when the app's scroll
/// offset was `scroll`.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    abs: usize,
    line: usize,
    scroll: usize,
}

impl View {
    /// Wrapped lines held in the cache (every entry drawn so far).
    pub fn cached_lines(&self) -> usize {
        self.cache.values().map(|(_, l)| l.len()).sum()
    }

    /// Lines the last frame was scrolled up from the bottom, the anchored top line kept still
    /// while lines arrived below it. The shell copies it back into `App::scroll` after each
    /// frame, so PageUp/PageDown and the wheel move from what is on screen.
    pub fn scroll(&self) -> usize {
        self.scroll
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

/// The number of wrapped lines of entry `abs`, rendering and caching them when stale.
fn entry_len(app: &App, view: &mut View, abs: usize, e: &Entry, width: usize) -> usize {
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
    view.cache.get(&abs).map_or(0, |(_, l)| l.len())
}

/// How far up from the bottom to draw: following the end at 0; else the last frame's top
/// line kept on top (moved by what the user scrolled since), however much arrived below it.
fn scroll_offset(app: &App, view: &mut View, height: usize, width: usize) -> usize {
    let base = app.transcript.dropped();
    let entries = app.transcript.entries();
    let anchor = match view.anchor {
        Some(a) if app.scroll > 0 && a.abs >= base && a.abs < base + entries.len() => a,
        _ => return app.scroll,
    };
    // Lines from the anchored line to the end.
    let mut below = 0;
    for (i, e) in entries.iter().enumerate().skip(anchor.abs - base).rev() {
        let len = entry_len(app, view, base + i, e, width);
        below += if base + i == anchor.abs {
            len.saturating_sub(anchor.line)
        } else {
            len
        };
    }
    let moved = app.scroll as i64 - anchor.scroll as i64;
    usize::try_from(below as i64 - height as i64 + moved).unwrap_or(0)
}

fn transcript(frame: &mut Frame<'_>, app: &App, view: &mut View, area: Rect) {
    let width = area.width as usize;
    if width != view.width {
        view.cache.clear();
        view.width = width;
        // Wrapped lines changed: the anchor's line number means nothing any more.
        view.anchor = None;
    }
    let base = app.transcript.dropped();
    let entries = app.transcript.entries();
    view.cache.retain(|&k, _| k >= base);
    let height = area.height as usize;
    let offset = scroll_offset(app, view, height, width);
    // Heights of every entry, bottom-up until the screen (plus the scroll offset) is full.
    let need = height + offset;
    let mut taken: Vec<usize> = Vec::new();
    let mut total = 0;
    for (i, e) in entries.iter().enumerate().rev() {
        let abs = base + i;
        total += entry_len(app, view, abs, e, width);
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
    let scroll = offset.min(lines.len().saturating_sub(height));
    let end = lines.len() - scroll;
    let start = end.saturating_sub(height);
    let visible = &lines[start..end];
    view.scroll = scroll;
    view.anchor = visible
        .first()
        .filter(|_| scroll > 0)
        .map(|&(abs, _)| Anchor {
            abs,
            line: start - lines.iter().position(|(a, _)| *a == abs).unwrap_or(start),
            scroll,
        });
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
