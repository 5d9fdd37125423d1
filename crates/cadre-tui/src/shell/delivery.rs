//! What reaches the conversation outside a turn: log lines (shown as notices), and
//! background results while the conversation is idle. The main agent's turn ends when its
//! model is done, whatever its background children still do; their results go into the
//! next turn's first request, or, when nothing is typed, into a turn of their own started
//! here. The store hands each result out once, so each is delivered exactly once.

use super::Shell;

impl Shell {
    /// Start a turn of its own for finished background tasks whose results were not
    /// delivered yet, when nothing else runs. After such a turn failed or was cancelled, wait
    /// for the person's next prompt (which carries them) rather than trying again.
    pub(super) async fn deliver_when_idle(&mut self) {
        if self.turn.is_some()
            || self.session.is_none()
            || self.app.busy
            || self.deliveries_paused
            || self.app.first_run.is_some()
        {
            return;
        }
        let undelivered = self
            .harness
            .runtime()
            .store()
            .background_summary(&self.session_id, 0)
            .await
            .map(|s| s.undelivered)
            .unwrap_or(0);
        if undelivered == 0 {
            return;
        }
        self.app.busy = true;
        self.delivering = true;
        self.dirty = true;
        self.start_turn(None, None);
    }

    /// A turn ended: a delivery turn that did not complete pauses deliveries.
    pub(super) fn delivery_ended(&mut self, completed: bool) {
        if std::mem::take(&mut self.delivering) && !completed {
            self.deliveries_paused = true;
        }
    }

    /// Log lines kept while the UI holds the terminal ([`crate::logs`]), as notices.
    pub(super) fn show_log_lines(&mut self) {
        let (lines, dropped) = crate::logs::take_lines();
        if dropped > 0 {
            self.app
                .notice(format!("⚠ {dropped} older log lines dropped"));
        }
        for line in lines {
            self.app.notice(format!("⚠ {line}"));
            self.dirty = true;
        }
    }
}
