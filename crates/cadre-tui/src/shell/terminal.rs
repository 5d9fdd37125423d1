//! The terminal: raw mode on the alternate screen with mouse and bracketed paste, restored
//! when the guard drops (and on a panic); terminal input read on a thread of its own.

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event, KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
    supports_keyboard_enhancement,
};
use std::io::Stdout;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// Whether the UI holds the terminal (raw mode, alternate screen), and with the keyboard
/// enhancement pushed: what [`restore_terminal`] undoes.
static HELD: AtomicBool = AtomicBool::new(false);
static ENHANCED: AtomicBool = AtomicBool::new(false);

/// The terminal type the UI draws on.
pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Whether the UI holds the terminal now (log output must not be written onto it).
pub fn holds_terminal() -> bool {
    HELD.load(Ordering::SeqCst)
}

/// Pretend the UI holds the terminal (or not), for tests of what depends on it.
#[cfg(test)]
pub fn set_holds_terminal_for_test(held: bool) {
    HELD.store(held, Ordering::SeqCst);
}

/// Restores the terminal when dropped.
pub struct TerminalGuard {
    enhanced: bool,
}

/// Give the terminal back as it was (cooked mode, the main screen), if the UI holds it: for
/// a process about to exit without unwinding (a second SIGTERM).
pub fn restore_terminal() {
    if HELD.swap(false, Ordering::SeqCst) {
        restore(ENHANCED.load(Ordering::SeqCst));
    }
}

fn restore(enhanced: bool) {
    HELD.store(false, Ordering::SeqCst);
    let mut out = std::io::stdout();
    if enhanced {
        let _ = execute!(out, PopKeyboardEnhancementFlags);
    }
    let _ = execute!(
        out,
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen
    );
    let _ = disable_raw_mode();
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore(self.enhanced);
    }
}

/// Enter the full-screen mode.
pub fn enter() -> std::io::Result<(Term, TerminalGuard)> {
    enable_raw_mode()?;
    let mut out = std::io::stdout();
    execute!(
        out,
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste
    )?;
    // Shift+Enter is only distinguishable where the terminal speaks the kitty protocol.
    let enhanced = supports_keyboard_enhancement().unwrap_or(false)
        && execute!(
            out,
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
        )
        .is_ok();
    let guard = TerminalGuard { enhanced };
    ENHANCED.store(enhanced, Ordering::SeqCst);
    HELD.store(true, Ordering::SeqCst);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore(enhanced);
        previous(info);
    }));
    let terminal = Terminal::new(CrosstermBackend::new(out))?;
    Ok((terminal, guard))
}

/// Draw one frame as a synchronized update, so terminals that support it never show half of it.
pub fn draw(term: &mut Term, f: impl FnOnce(&mut ratatui::Frame<'_>)) -> std::io::Result<()> {
    use ratatui::crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
    execute!(term.backend_mut(), BeginSynchronizedUpdate)?;
    let drawn = term.draw(f).map(|_| ());
    execute!(term.backend_mut(), EndSynchronizedUpdate)?;
    drawn
}

/// Once a read holds a burst of keys (a paste typed by the terminal), how long to wait for
/// the rest of it, which the terminal may write in several pieces.
const BURST_TAIL: Duration = Duration::from_millis(20);
/// Events in one batch at most.
const MAX_BATCH: usize = 1 << 18;

/// Read terminal input on a thread and send it to the UI loop, in batches: the events that
/// had arrived together (see [`crate::paste::coalesce`]). The thread ends when the receiver
/// is gone (after its next event) or input fails.
pub fn input_events() -> mpsc::Receiver<Vec<Event>> {
    let (tx, rx) = mpsc::channel(1024);
    let spawned = std::thread::Builder::new()
        .name("cadre-tui-input".into())
        .spawn(move || {
            while let Ok(ev) = event::read() {
                if tx.blocking_send(read_batch(ev)).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the terminal input thread");
    }
    rx
}

/// `first` and the events already waiting behind it (a zero-timeout poll, so a single typed
/// key is passed on at once); once that is a burst, also what follows within
/// [`BURST_TAIL`].
fn read_batch(first: Event) -> Vec<Event> {
    let mut batch = vec![first];
    let mut wait = Duration::ZERO;
    while batch.len() < MAX_BATCH && event::poll(wait).unwrap_or(false) {
        match event::read() {
            Ok(ev) => batch.push(ev),
            Err(_) => break,
        }
        if crate::paste::key_presses(&batch) >= crate::paste::BURST_KEYS {
            wait = BURST_TAIL;
        }
    }
    if wait == BURST_TAIL {
        take_stranded(&mut batch);
    }
    batch
}

/// crossterm reads the terminal 1 KiB at a time and, once it has parsed an event, waits for
/// the terminal to become readable again; a burst larger than that (a paste typed by the
/// terminal) leaves the rest unread until the next key. After a burst, what still waits on
/// the terminal is read here, as pasted text.
fn take_stranded(batch: &mut Vec<Event>) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    // crossterm reads standard input when it is the terminal (else /dev/tty, left alone).
    if !stdin.is_terminal() {
        return;
    }
    let tail = Timespec {
        tv_sec: 0,
        tv_nsec: BURST_TAIL.as_nanos() as i64,
    };
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    while raw.len() < MAX_BATCH {
        let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
        if !matches!(poll(&mut fds, Some(&tail)), Ok(n) if n > 0) {
            break;
        }
        match rustix::io::read(&stdin, &mut buf) {
            Ok(n) if n > 0 => raw.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    if !raw.is_empty() {
        batch.push(Event::Paste(String::from_utf8_lossy(&raw).into_owned()));
    }
}
