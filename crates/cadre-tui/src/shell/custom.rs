//! A custom slash command's turn: the body expanded (its `!` lines and `@` files filled in
//! by the main agent's tools under its rules), then run by the main agent narrowed to the
//! command's `allowed-tools`.

use super::{Shell, Turn, TurnEnd};
use crate::custom_commands;
use cadre_engine::RunOutcome;
use cadre_subagents::RunOptions;
use tokio_util::sync::CancellationToken;

impl Shell {
    /// Start the turn of the custom command `line` invokes.
    pub(super) fn start_custom(&mut self, line: &str) {
        let Some((cmd, args)) = custom_commands::invoked(&self.app.custom, line) else {
            self.app.error(format!("no custom command for {line}"));
            self.app.busy = false;
            return;
        };
        let cmd = cmd.clone();
        if let Some(model) = &cmd.model {
            self.app.notice(format!(
                "⚠ /{}: `model: {model}` is not applied in this UI; the turn runs on {}",
                cmd.name, self.app.status.model
            ));
        }
        let agent = match &cmd.allowed_tools {
            Some(allowed) => {
                let mut warnings = Vec::new();
                let narrowed =
                    custom_commands::narrowed(self.harness.agent(), allowed, &mut warnings);
                for w in warnings {
                    self.app.notice(format!("⚠ /{}: {w}", cmd.name));
                }
                match narrowed {
                    Ok(a) => a,
                    Err(e) => {
                        self.app.error(format!("/{}: {e}", cmd.name));
                        self.app.busy = false;
                        return;
                    }
                }
            }
            None => self.harness.agent().clone(),
        };
        let Some(mut session) = self.session.take() else {
            self.app.error("a turn is running already");
            return;
        };
        let cancel = CancellationToken::new();
        let h = self.harness.clone();
        let opts = RunOptions {
            events: self.sink.clone(),
            approvals: self.approvals.clone(),
            cancel: cancel.clone(),
            user_id: std::env::var("USER").ok(),
        };
        let expanding = cancel.clone();
        let handle = tokio::spawn(async move {
            let out = match custom_commands::prompt_for(&h, &cmd, &args, expanding).await {
                Ok(prompt) => h.run_in_as(&agent, &mut session, &prompt, opts).await,
                Err(e) => RunOutcome {
                    state: cadre_types::EndState::Failed {
                        error: format!("/{}: {e}", cmd.name),
                    },
                    output: String::new(),
                    turns: 0,
                    usage: Default::default(),
                },
            };
            (session, TurnEnd::Prompt(out))
        });
        self.turn = Some(Turn { handle, cancel });
    }
}
