//! One `tool` or `tool(glob)` rule and how it matches a call's subject: a path glob, or a
//! command glob matched against each simple command of a shell line.

use cadre_tools::{CommandLine, PermissionSubject, path_pattern};
use globset::{Glob, GlobMatcher};

/// A rule that could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("bad permission rule {rule:?}: {reason}")]
pub struct RuleError {
    rule: String,
    reason: String,
}

impl RuleError {
    pub(super) fn new(rule: &str, reason: &str) -> Self {
        Self {
            rule: rule.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// A parsed rule.
#[derive(Debug, Clone)]
pub(super) struct Rule {
    /// The rule as written, for messages.
    pub(super) text: String,
    tool: GlobMatcher,
    server_prefix: Option<String>,
    pub(super) subject: Option<SubjectGlob>,
}

/// The part in parentheses, compiled for paths and for commands.
#[derive(Debug, Clone)]
pub(super) struct SubjectGlob {
    /// As written.
    pub(super) raw: String,
    path: GlobMatcher,
    command: GlobMatcher,
    /// The pattern's first word, matched against command words to tell whether a command
    /// with run-time values could match.
    command_word: GlobMatcher,
}

impl Rule {
    pub(super) fn parse(text: &str) -> Result<Self, RuleError> {
        let err = |reason: &str| RuleError::new(text, reason);
        let text_trim = text.trim();
        let (tool, subject) = match text_trim.find('(') {
            Some(open) => {
                let inner = text_trim[open + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| err("missing closing parenthesis"))?;
                (&text_trim[..open], Some(inner))
            }
            None => (text_trim, None),
        };
        if tool.is_empty() {
            return Err(err("empty tool name"));
        }
        let compile = |g: Result<Glob, globset::Error>| {
            g.map(|g| g.compile_matcher())
                .map_err(|e| err(&e.to_string()))
        };
        let subject = subject
            .map(|raw| {
                let command = normalize_whitespace(raw);
                let first = command.split(' ').next().unwrap_or("");
                Ok::<_, RuleError>(SubjectGlob {
                    raw: raw.to_string(),
                    path: compile(path_pattern(raw))?,
                    command: compile(Glob::new(&command))?,
                    command_word: compile(Glob::new(first))?,
                })
            })
            .transpose()?;
        let has_meta = tool.contains(['*', '?', '[', '{']);
        Ok(Self {
            text: text_trim.to_string(),
            tool: compile(Glob::new(tool))?,
            server_prefix: (!has_meta
                && tool.starts_with("mcp__")
                && tool.matches("__").count() == 1)
                .then(|| format!("{tool}__")),
            subject,
        })
    }

    /// Whether the tool part names `tool`.
    pub(super) fn names(&self, tool: &str) -> bool {
        self.tool.is_match(tool)
            || self
                .server_prefix
                .as_deref()
                .is_some_and(|p| tool.starts_with(p))
    }

    /// As a deny or ask rule: what of `subject` the rule matches (`Some("")` for a rule
    /// without parentheses), or `None`.
    pub(super) fn guard_hit(&self, tool: &str, subject: &PermissionSubject) -> Option<String> {
        if !self.names(tool) {
            return None;
        }
        let Some(glob) = &self.subject else {
            return Some(String::new());
        };
        match subject {
            PermissionSubject::None => None,
            PermissionSubject::Path(p) => glob.path.is_match(p).then(|| p.display().to_string()),
            PermissionSubject::Command(line) => glob.command_hit(line),
            PermissionSubject::Text(t) => glob.command.is_match(t).then(|| t.clone()),
        }
    }

    /// As an allow rule for a path or a text: whether it allows acting on `subject`.
    /// Commands are judged per simple command by the caller.
    pub(super) fn allows_path(&self, subject: &PermissionSubject) -> bool {
        match (&self.subject, subject) {
            (None, _) => true,
            (Some(g), PermissionSubject::Path(p)) => g.path.is_match(p),
            (Some(g), PermissionSubject::Text(t)) => g.command.is_match(t),
            _ => false,
        }
    }

    /// As an allow rule: whether it allows the simple command whose text is `text`.
    pub(super) fn allows_command(&self, text: &str) -> bool {
        self.subject
            .as_ref()
            .is_none_or(|g| g.command.is_match(text))
    }
}

impl SubjectGlob {
    /// The first reading of `line` this glob matches: the whole line (whitespace
    /// normalised), or a spelling of any of its commands.
    fn command_hit(&self, line: &CommandLine) -> Option<String> {
        let whole = normalize_whitespace(line.text());
        if self.command.is_match(&whole) {
            return Some(whole);
        }
        // Words may hold whitespace of their own (`echo "a  b"`): compare as the pattern is.
        line.all_commands()
            .flat_map(cadre_tools::SimpleCommand::spellings)
            .map(|s| normalize_whitespace(&s.text))
            .find(|text| self.command.is_match(text))
    }

    /// Why this glob might match `line` once it runs although it matches nothing now: a
    /// part that cannot be known, or a command with run-time values whose command word the
    /// glob's first word matches (or is itself only known at run time).
    pub(super) fn could_match(&self, line: &CommandLine) -> Option<String> {
        if let Some(why) = line.unknown() {
            return Some(why.to_string());
        }
        line.all_commands().filter(|c| !c.is_known()).find_map(|c| {
            c.spellings()
                .iter()
                .find(|s| {
                    s.command_word
                        .as_deref()
                        .is_none_or(|w| self.command_word.is_match(w))
                })
                .map(|s| format!("`{}` takes values only known when it runs", s.text))
        })
    }
}

/// Runs of whitespace as one space, without leading or trailing whitespace.
fn normalize_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
