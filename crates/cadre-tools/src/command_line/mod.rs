//! Bash command lines as permission rules see them: every simple command a line runs (also
//! inside substitutions, subshells, functions, loops and conditions), each word after quote
//! removal, the spellings a deny rule is matched against (`/bin/rm` as `rm`, wrappers such as
//! `sudo`, `env` or `nice` stripped), the commands hidden in arguments (`bash -c`, `eval`,
//! `find -exec`), and whatever cannot be known before the line runs. The walker fails
//! closed: a construct whose effect it does not model makes the line unknown.
//!
//! The syntax is brush-parser's; this module only reads its tree. The semantics the policy
//! builds on these facts are documented in `docs/configuration.md`.

mod builtins;
mod git;
mod guards;
mod programs;
mod resolve;
mod sed;
mod walk;
mod words;

#[cfg(test)]
use resolve::MAX_WRAPPED_POSITIONS;
pub use words::{Word, WordKind};

/// Lines longer than this are not analysed (they count as unknown).
pub const MAX_LINE_BYTES: usize = 64 * 1024;
/// Deeper bracket nesting than this is not analysed: the parser backtracks over every open
/// `(` (subshell, `((`, process substitution), so its work doubles with each level.
const MAX_NESTING: usize = 12;
/// Array subscripts nested in parameter expansions (`${a[${b[1]}]}`) analysed at most: the
/// parser reads a subscript as arithmetic and backtracks over it, so its work grows about
/// fifteenfold with each level (four levels took seconds, five most of a minute; found by
/// fuzzing).
const MAX_SUBSCRIPT_NESTING: usize = 2;
/// Command strings nested in command strings (`bash -c "eval '...'"`) analysed at most.
const MAX_DEPTH: u32 = 8;

/// A parsed bash command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    text: String,
    direct: Vec<SimpleCommand>,
    indirect: Vec<SimpleCommand>,
    unknown: Option<String>,
    unparsed: bool,
    not_per_command: bool,
}

impl CommandLine {
    /// Parse `text`. Never fails: what cannot be parsed or known is reported by
    /// [`CommandLine::unknown`].
    ///
    /// ```
    /// use cadre_tools::CommandLine;
    /// let line = CommandLine::parse("git status; /bin/rm  -rf 'victim'");
    /// let texts: Vec<String> = line.commands().iter().map(|c| c.text()).collect();
    /// assert_eq!(texts, ["git status", "/bin/rm -rf victim"]);
    /// assert!(line.commands()[1].spellings().iter().any(|s| s.text == "rm -rf victim"));
    /// ```
    pub fn parse(text: &str) -> Self {
        walk::parse(text, 0)
    }

    /// The line as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The simple commands the shell runs itself: those of every list, pipeline, subshell,
    /// group, loop, condition, function body and command or process substitution (a
    /// substitution's commands come before the command it is part of).
    pub fn commands(&self) -> &[SimpleCommand] {
        &self.direct
    }

    /// Commands found inside other commands' arguments, which the shell does not parse
    /// itself: `bash -c CODE`, `eval`, `trap`, `alias`, `watch`, `env -S`, `su -c`,
    /// `runuser -c`, `flock -c`, `script -c`, `find -exec`, `xargs CMD`.
    pub fn indirect_commands(&self) -> &[SimpleCommand] {
        &self.indirect
    }

    /// Every command: [`commands`](Self::commands), then
    /// [`indirect_commands`](Self::indirect_commands).
    pub fn all_commands(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.direct.iter().chain(&self.indirect)
    }

    /// Why part of the line cannot be known before it runs, if it cannot: a syntax error,
    /// arithmetic, a command string built at run time, or any construct whose effect the
    /// walker does not model (a subscript a builtin evaluates, prompt expansion, code on a
    /// shell's standard input, a git alias, ...).
    pub fn unknown(&self) -> Option<&str> {
        self.unknown.as_deref()
    }

    /// False when the line, or code found in it, cannot be parsed (a syntax error, or too
    /// long or too deeply nested to analyse); [`unknown`](Self::unknown) then says why.
    pub fn is_parsed(&self) -> bool {
        !self.unparsed
    }

    /// The texts that per-command allow rules must match, one per direct command; `None`
    /// when the line cannot be allowed command by command: part of it is unknown, it is
    /// empty, a group or loop redirects to or from a file, a `for` loop assigns a variable,
    /// or some command takes values at run time (`$VAR`, `$(...)`), redirects to or from a
    /// file, or has a command word that is not a fixed word.
    pub fn allow_texts(&self) -> Option<Vec<String>> {
        if self.unknown.is_some() || self.not_per_command || self.direct.is_empty() {
            return None;
        }
        self.direct
            .iter()
            .map(|c| c.allowable().then(|| c.text()))
            .collect()
    }
}

/// One simple command: assignments, then the command word and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    assignments: Vec<Word>,
    words: Vec<Word>,
    file_redirects: bool,
    runtime_args: bool,
    spellings: Vec<Spelling>,
}

/// One way of reading a simple command that a deny rule is matched against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spelling {
    /// Words joined by single spaces.
    pub text: String,
    /// The command word of this reading (a path reduced to its file name), or `None` when
    /// it is only known at run time.
    pub command_word: Option<String>,
}

impl SimpleCommand {
    /// The assignments before the command word (`FOO=1`).
    pub fn assignments(&self) -> &[Word] {
        &self.assignments
    }

    /// The command word and arguments.
    pub fn words(&self) -> &[Word] {
        &self.words
    }

    /// Assignments and words after quote removal, joined by single spaces: what an allow
    /// rule matches. Words with run-time values keep their source text (`$HOME`).
    pub fn text(&self) -> String {
        join(self.assignments.iter().chain(&self.words))
    }

    /// The readings a deny or ask rule is matched against: [`text`](Self::text), the words
    /// without assignments, with the command word reduced to its file name, and, after a
    /// wrapper (`sudo`, `env`, `nice`, `xargs`, ...), every later word as the command word.
    pub fn spellings(&self) -> &[Spelling] {
        &self.spellings
    }

    /// True when every word's value is fixed before the line runs (no variables,
    /// substitutions, globs, or arguments added at run time as with `xargs`).
    pub fn is_known(&self) -> bool {
        !self.runtime_args
            && self
                .assignments
                .iter()
                .chain(&self.words)
                .all(|w| w.kind == WordKind::Literal)
    }

    /// True when its text can be judged by an allow rule: the command word is a fixed word,
    /// no word takes a value at run time, and nothing is redirected to or from a file.
    fn allowable(&self) -> bool {
        let head_fixed = self
            .words
            .first()
            .is_none_or(|w| w.kind == WordKind::Literal);
        head_fixed
            && !self.file_redirects
            && (!self.words.is_empty() || !self.assignments.is_empty())
            && self
                .assignments
                .iter()
                .chain(&self.words)
                .all(|w| w.kind != WordKind::Expanded)
    }
}

fn join<'a>(words: impl Iterator<Item = &'a Word>) -> String {
    let mut out = String::new();
    for w in words {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&w.text);
    }
    out
}

#[cfg(test)]
mod fail_closed_tests;
#[cfg(test)]
mod tests;
