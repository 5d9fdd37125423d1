//! `cadre-bench tui`: frame times of the full-screen UI, drawn by its real model and render
//! code on ratatui's `TestBackend` (the terminal's own time to show a frame is not included).
//!
//! * scroll — a transcript of `--lines` wrapped lines (Markdown replies with code blocks, and
//!   tool calls) scrolled from the end to the top a page at a time: the first frame, then
//!   every page;
//! * stream — a reply streamed at `--deltas-per-sec` into a long transcript, with the UI's
//!   frame cap: per frame the deltas that arrived are applied and the frame drawn; a key is
//!   typed every frame and its handling is timed with the draw after it (the key's latency).

use crate::cli::TuiArgs;
use crate::stats::{Summary, ms, summarize};
use cadre_tui::keys;
use cadre_tui::model::{App, Status};
use cadre_tui::render::{View, draw};
use cadre_types::{Event, EventEnvelope};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Serialize;
use std::time::Instant;

/// The results.
#[derive(Debug, Serialize)]
struct Report {
    width: u16,
    height: u16,
    transcript_lines: usize,
    first_frame_ms: f64,
    scroll_frames: usize,
    scroll: Summary,
    steady_frame: Summary,
    stream_deltas: usize,
    stream_frames: usize,
    stream_frame: Summary,
    key_to_frame: Summary,
    frame_interval_ms: f64,
}

fn env(event: Event) -> EventEnvelope {
    EventEnvelope {
        session_id: "s-bench".into(),
        agent: "main".into(),
        task_id: None,
        event,
    }
}

const REPLY: &str = "## Step\n\nThe module keeps **counts** per item and a `total`; this paragraph is long enough to wrap once or twice on a terminal of a hundred and twenty columns, like real replies do.\n\n- first point\n- second point\n\n```rust\nfn total(items: &[u32]) -> u32 {\n    items.iter().sum()\n}\n```\n";

/// Add `rounds` rounds of a prompt, a tool call with its result and a Markdown reply.
fn long_transcript(app: &mut App, rounds: usize) {
    for i in 0..rounds {
        app.start_turn(&format!("question {i}"));
        let id = format!("c{i}");
        app.apply(&env(Event::ToolStart {
            call_id: id.clone(),
            tool: "read_file".into(),
            args: format!("{{\"path\":\"src/file{i}.rs\"}}"),
            replaces: None,
        }));
        app.apply(&env(Event::ToolResult {
            call_id: id,
            tool: "read_file".into(),
            output: "line\n".repeat(30),
            is_error: false,
        }));
        app.apply(&env(Event::TextDelta { text: REPLY.into() }));
        app.end_turn();
    }
}

/// Run the benchmark and print a JSON report.
pub fn run(args: &TuiArgs) -> anyhow::Result<()> {
    let (w, h) = (args.width, args.height);
    let status = Status {
        model: "openai:gpt-4o-mini".into(),
        session_id: "s-bench".into(),
        approval_mode: "ask".into(),
    };
    let mut app = App::new(status, vec!["explorer".into()], Vec::new());
    // About 17 lines a round at 120 columns; the count drawn is reported.
    long_transcript(&mut app, args.lines / 17 + 1);
    let mut term = Terminal::new(TestBackend::new(w, h))?;
    let mut view = View::default();

    // Scroll: the first frame (nothing cached), then a page at a time to the top.
    let t = Instant::now();
    term.draw(|f| draw(f, &app, &mut view))?;
    let first = ms(t.elapsed());
    let mut scroll = Vec::new();
    let page = view.page.max(1);
    let mut last_scroll = usize::MAX;
    while app.scroll != last_scroll {
        last_scroll = app.scroll;
        let key = KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE);
        let t = Instant::now();
        keys::on_key(&mut app, key, page);
        term.draw(|f| draw(f, &app, &mut view))?;
        scroll.push(ms(t.elapsed()));
        if view.rows.first().map(|r| r.1) == Some(app.transcript.dropped()) && scroll.len() > 1 {
            // At the top: one more page changes nothing.
            let before = view.rows.clone();
            keys::on_key(&mut app, key, page);
            term.draw(|f| draw(f, &app, &mut view))?;
            if view.rows == before {
                break;
            }
        }
    }
    let lines = view.cached_lines();
    app.scroll = 0;
    let mut steady = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        term.draw(|f| draw(f, &app, &mut view))?;
        steady.push(ms(t.elapsed()));
    }

    // Stream: deltas arrive at the given rate; a frame every FRAME_INTERVAL draws what came.
    let interval = cadre_tui::shell::FRAME_INTERVAL;
    let per_frame = args.deltas_per_sec as f64 * interval.as_secs_f64();
    let frames = (args.deltas as f64 / per_frame).ceil() as usize;
    app.start_turn("stream a long answer");
    let chunks: Vec<&str> = REPLY.split_inclusive(' ').collect();
    let mut sent = 0usize;
    let mut owed = 0.0;
    let mut stream = Vec::new();
    let mut key_latency = Vec::new();
    for _ in 0..frames {
        owed += per_frame;
        let t = Instant::now();
        while owed >= 1.0 && sent < args.deltas {
            let text = chunks[sent % chunks.len()].to_string();
            app.apply(&env(Event::TextDelta { text }));
            sent += 1;
            owed -= 1.0;
        }
        term.draw(|f| draw(f, &app, &mut view))?;
        stream.push(ms(t.elapsed()));
        // A key typed meanwhile: handled, then drawn.
        let t = Instant::now();
        keys::on_key(
            &mut app,
            KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE),
            page,
        );
        term.draw(|f| draw(f, &app, &mut view))?;
        key_latency.push(ms(t.elapsed()));
    }
    let report = Report {
        width: w,
        height: h,
        transcript_lines: lines,
        first_frame_ms: first,
        scroll_frames: scroll.len(),
        scroll: summarize(&scroll),
        steady_frame: summarize(&steady),
        stream_deltas: sent,
        stream_frames: frames,
        stream_frame: summarize(&stream),
        key_to_frame: summarize(&key_latency),
        frame_interval_ms: ms(interval),
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
