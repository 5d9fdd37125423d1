//! The terminal: raw mode on the alternate screen with mouse and bracketed paste, restored
//! when the guard drops (and on a panic); terminal input read on a thread of its own.

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture, Event,
    KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
    supports_keyboard_enhancement,
};
use std::io::Stdout;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// Whether the UI holds the terminal (raw mode, alternate screen), and with the keyboard
/// enhancement pushed: what [`restore_terminal`] undoes.
static HELD: AtomicBool = AtomicBool::new(false);
static ENHANCED: AtomicBool = AtomicBool::new(false);

/// The terminal type the UI draws on.
pub type Term = Terminal<CrosstermBackend<Stdout>>;

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

/// Read terminal input on a thread and send it to the UI loop. The thread ends when the
/// receiver is gone (after its next event) or input fails.
pub fn input_events() -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(1024);
    let spawned = std::thread::Builder::new()
        .name("cadre-tui-input".into())
        .spawn(move || {
            while let Ok(ev) = ratatui::crossterm::event::read() {
                if tx.blocking_send(ev).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the terminal input thread");
    }
    rx
}
