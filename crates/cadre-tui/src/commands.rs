//! What one line of input means, for both interactive surfaces (the full-screen UI and the
//! line REPL): a slash command, an `@agent job` direct run, or a prompt for the main agent.
//! The command table lives here once, so `/help`, completion and parsing agree.

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    /// List the commands and keys.
    Help,
    /// List the sub-agents.
    Agents,
    /// Open the task panel (list this session's tasks).
    Tasks,
    /// Show the model, or switch to `NAME` for the next turns.
    Model(Option<String>),
    /// Summarise the older turns now, with optional instructions for the summary
    /// (`/compact keep the API decisions`).
    Compact(Option<String>),
    /// Start a new session.
    Clear,
    /// Pick a saved session to continue, or continue the one named.
    Resume(Option<String>),
    /// Tokens (and cost, once known) of this session.
    Cost,
    /// Quit.
    Exit,
}

/// One entry of the command table.
#[derive(Debug, Clone, Copy)]
pub struct CommandInfo {
    /// The name with its slash, `/help`.
    pub name: &'static str,
    /// The argument synopsis, `[NAME]`.
    pub args: &'static str,
    /// One line of help.
    pub help: &'static str,
}

/// Every command, in the order `/help` lists them.
const TABLE: &[CommandInfo] = &[
    CommandInfo {
        name: "/help",
        args: "",
        help: "commands and keys",
    },
    CommandInfo {
        name: "/agents",
        args: "",
        help: "the sub-agents you can delegate to or run with @name",
    },
    CommandInfo {
        name: "/tasks",
        args: "",
        help: "this session's tasks (Ctrl+T)",
    },
    CommandInfo {
        name: "/model",
        args: "[NAME]",
        help: "show the model, or switch to PROVIDER:MODEL for the next turns",
    },
    CommandInfo {
        name: "/clear",
        args: "",
        help: "start a new session",
    },
    CommandInfo {
        name: "/resume",
        args: "[ID]",
        help: "continue a saved session (a picker without ID)",
    },
    CommandInfo {
        name: "/cost",
        args: "",
        help: "tokens and cost of this session, sub-agents included",
    },
    CommandInfo {
        name: "/compact",
        args: "[INSTRUCTIONS]",
        help: "summarise older turns now to free context (what to keep, optionally)",
    },
    CommandInfo {
        name: "/exit",
        args: "",
        help: "quit (the session is saved)",
    },
];

/// The commands on offer.
pub fn commands() -> &'static [CommandInfo] {
    TABLE
}

/// What a line of input asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Nothing (blank).
    Empty,
    /// A slash command.
    Command(SlashCommand),
    /// `@name job`: run that sub-agent directly.
    Direct {
        /// The sub-agent.
        agent: String,
        /// The job (may be empty).
        job: String,
    },
    /// A prompt for the main agent.
    Prompt(String),
}

/// Why a line could not be understood. Never sent to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// `/something` that is no command.
    #[error("unknown command {0} — /help lists the commands")]
    UnknownCommand(String),
    /// `@` without a name.
    #[error("@ needs a sub-agent name: @name job")]
    MissingAgent,
}

/// Parse one line of input.
///
/// ```
/// use cadre_tui::commands::{parse_line, Line, SlashCommand};
/// assert_eq!(parse_line("/model openai:gpt-4o"), Ok(Line::Command(SlashCommand::Model(Some("openai:gpt-4o".into())))));
/// assert_eq!(parse_line("@explorer map it"), Ok(Line::Direct { agent: "explorer".into(), job: "map it".into() }));
/// assert!(parse_line("/nope").is_err());
/// ```
pub fn parse_line(line: &str) -> Result<Line, LineError> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Ok(Line::Empty);
    }
    if let Some(rest) = trimmed.strip_prefix('@') {
        let (name, job) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if name.is_empty() {
            return Err(LineError::MissingAgent);
        }
        return Ok(Line::Direct {
            agent: name.to_string(),
            job: job.trim().to_string(),
        });
    }
    if let Some(rest) = trimmed.strip_prefix('/') {
        let (name, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let arg = Some(arg.trim().to_string()).filter(|a| !a.is_empty());
        let cmd = match name {
            "help" | "?" => SlashCommand::Help,
            "agents" => SlashCommand::Agents,
            "tasks" => SlashCommand::Tasks,
            "model" => SlashCommand::Model(arg),
            "compact" => SlashCommand::Compact(arg),
            "clear" | "new" => SlashCommand::Clear,
            "resume" => SlashCommand::Resume(arg),
            "cost" => SlashCommand::Cost,
            "exit" | "quit" => SlashCommand::Exit,
            _ => return Err(LineError::UnknownCommand(format!("/{name}"))),
        };
        return Ok(Line::Command(cmd));
    }
    // The prompt keeps its inner line breaks and indentation.
    Ok(Line::Prompt(line.trim_end().to_string()))
}

/// The help text: one line per command, then the keys of the surface.
pub fn help_text() -> String {
    let mut s = String::from(
        "Type a request for the main agent, or @agent job to run a sub-agent directly.\n",
    );
    for c in commands() {
        let head = if c.args.is_empty() {
            c.name.to_string()
        } else {
            format!("{} {}", c.name, c.args)
        };
        s.push_str(&format!("  {head:<24} {}\n", c.help));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_commands_are_errors_and_known_ones_parse() {
        assert_eq!(
            parse_line("/frobnicate now"),
            Err(LineError::UnknownCommand("/frobnicate".into()))
        );
        assert_eq!(
            parse_line("  /tasks "),
            Ok(Line::Command(SlashCommand::Tasks))
        );
        assert_eq!(
            parse_line("/resume"),
            Ok(Line::Command(SlashCommand::Resume(None)))
        );
        assert_eq!(parse_line("   "), Ok(Line::Empty));
        assert_eq!(parse_line("@ job"), Err(LineError::MissingAgent));
        assert_eq!(
            parse_line("fix\n  the bug\n"),
            Ok(Line::Prompt("fix\n  the bug".into()))
        );
    }

    #[test]
    fn compact_takes_its_instructions_from_the_rest_of_the_line() {
        assert_eq!(
            parse_line("/compact"),
            Ok(Line::Command(SlashCommand::Compact(None)))
        );
        assert_eq!(
            parse_line("/compact  keep the API decisions "),
            Ok(Line::Command(SlashCommand::Compact(Some(
                "keep the API decisions".into()
            ))))
        );
        assert!(help_text().contains("/compact [INSTRUCTIONS]"));
        assert_eq!(commands().last().map(|c| c.name), Some("/exit"));
    }
}
