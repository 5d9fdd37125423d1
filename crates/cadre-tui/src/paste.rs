//! Pastes: a bracketed paste (one event), and a burst of keys that arrived together (a
//! terminal without bracketed paste types the text, with CR for each line break). Both become
//! one paste in the input box, so a line break inside a paste never submits it.

use crate::model::{App, Overlay};
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Key presses in one read that make a burst: nobody types two keys within one read of
/// the terminal, a paste does.
pub const BURST_KEYS: usize = 2;

/// Key presses in `batch` (what one read of the terminal gave).
pub fn key_presses(batch: &[Event]) -> usize {
    batch
        .iter()
        .filter(|e| matches!(e, Event::Key(k) if k.kind != KeyEventKind::Release))
        .count()
}

/// The events of one read, with each run of text keys in a burst turned into one
/// [`Event::Paste`] (Enter a line break, Tab a tab). A batch that is not a burst, and the
/// other keys of a burst (arrows, Ctrl+...), are passed through as they came.
pub fn coalesce(batch: Vec<Event>) -> Vec<Event> {
    if key_presses(&batch) < BURST_KEYS {
        return batch;
    }
    let mut out = Vec::new();
    let mut text = String::new();
    for ev in batch {
        if let Event::Key(k) = &ev
            && k.kind == KeyEventKind::Release
        {
            continue;
        }
        if let Event::Paste(p) = &ev {
            text.push_str(p);
            continue;
        }
        match key_text(&ev) {
            Some(c) => text.push(c),
            None => {
                if !text.is_empty() {
                    out.push(Event::Paste(std::mem::take(&mut text)));
                }
                out.push(ev);
            }
        }
    }
    if !text.is_empty() {
        // Text typed quickly and then Enter (one line, one line break at its end) is sent,
        // as typed; a paste of several lines is not.
        // Likewise a Tab that ends the burst completes what was typed.
        match (text.strip_suffix('\n'), text.strip_suffix('\t')) {
            (Some(line), _) if !line.contains(['\n', '\r']) => {
                out.push(Event::Paste(line.to_string()));
                out.push(Event::Key(KeyEvent::new(
                    KeyCode::Enter,
                    KeyModifiers::NONE,
                )));
            }
            (_, Some(word)) if !word.contains(['\n', '\r']) => {
                out.push(Event::Paste(word.to_string()));
                out.push(Event::Key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE)));
            }
            _ => out.push(Event::Paste(text)),
        }
    }
    out
}

/// The character a key of a pasted text stands for.
fn key_text(ev: &Event) -> Option<char> {
    let Event::Key(k) = ev else {
        return None;
    };
    if k.modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
    {
        return None;
    }
    match k.code {
        KeyCode::Char(c) => Some(c),
        KeyCode::Enter => Some('\n'),
        KeyCode::Tab => Some('\t'),
        _ => None,
    }
}

/// Put a paste where the person is typing: the input box (collapsed when long), or the
/// follow-up being typed in the task panel. While a question is open a paste is ignored, so
/// pasted text never answers it.
pub fn on_paste(app: &mut App, text: &str) {
    if !app.approvals.is_empty() {
        app.flash = Some("the paste was ignored: answer the question first".into());
        return;
    }
    match &mut app.overlay {
        Overlay::Tasks(panel) => {
            if let Some(f) = &mut panel.follow_up {
                f.push_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
            }
        }
        Overlay::Resume { .. } => {}
        Overlay::None => {
            if app.input.search.is_some() {
                app.input.search_end(true);
            }
            app.input.paste(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> Event {
        Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn typed(s: &str) -> Vec<Event> {
        s.chars()
            .map(|c| match c {
                '\r' => key(KeyCode::Enter),
                c => key(KeyCode::Char(c)),
            })
            .collect()
    }

    #[test]
    fn a_burst_of_keys_is_one_paste_whose_enters_are_line_breaks() {
        let out = coalesce(typed("one\rtwo\r"));
        assert_eq!(out, [Event::Paste("one\ntwo\n".into())]);
        let mut app = App::default();
        for ev in out {
            if let Event::Paste(t) = ev {
                on_paste(&mut app, &t);
            }
        }
        assert_eq!(app.input.lines(), ["[pasted 2 lines]"]);
        assert_eq!(app.input.text(), "one\ntwo\n");
        assert!(!app.busy, "nothing was submitted");
    }

    #[test]
    fn one_line_typed_quickly_then_enter_is_sent_and_pieces_of_a_paste_join() {
        let mut expect = vec![Event::Paste("first prompt".into())];
        expect.extend(typed("\r"));
        assert_eq!(coalesce(typed("first prompt\r")), expect);
        let tab = Event::Key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        let mut batch = typed("@expl");
        batch.push(tab.clone());
        assert_eq!(coalesce(batch), [Event::Paste("@expl".into()), tab]);
        // The rest of a paste read past crossterm joins the keys before it.
        let mut batch = typed("one\rtw");
        batch.push(Event::Paste("o\rthree\r".into()));
        assert_eq!(coalesce(batch), [Event::Paste("one\ntwo\rthree\r".into())]);
    }

    #[test]
    fn a_single_key_and_the_other_keys_of_a_burst_pass_through() {
        assert_eq!(coalesce(typed("\r")), typed("\r"));
        let mut batch = typed("ab");
        batch.push(key(KeyCode::Up));
        batch.extend(typed("c"));
        assert_eq!(
            coalesce(batch),
            [
                Event::Paste("ab".into()),
                key(KeyCode::Up),
                Event::Paste("c".into())
            ]
        );
        let ctrl_c = Event::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert_eq!(
            coalesce(vec![ctrl_c.clone(), ctrl_c.clone()]),
            [ctrl_c.clone(), ctrl_c]
        );
    }

    #[test]
    fn a_paste_never_answers_an_open_question() {
        let mut app = App::default();
        app.approvals
            .push(crate::model::approvals::PendingApproval {
                id: 1,
                request: cadre_types::ApprovalRequest {
                    call_id: "c1".into(),
                    tool: "bash".into(),
                    args: serde_json::json!({}),
                    subject: Some("ls".into()),
                    reason: "bash can change the workspace".into(),
                    risk: cadre_types::RiskLevel::Medium,
                    agent: "main".into(),
                    task_id: None,
                    replaces: None,
                },
            });
        on_paste(&mut app, "y\n");
        assert!(app.input.is_empty());
        assert_eq!(app.approvals.len(), 1);
    }
}
