//! What a simple command really runs: the readings of its command word (a path reduced to
//! its file name, wrappers such as `sudo` or `env` stripped) and the code it hands to other
//! programs in its arguments (`bash -c`, `eval`, `find -exec`).

use super::walk::Walker;
use super::words::{Word, WordKind};
use super::{SimpleCommand, Spelling, builtins, join, programs};

/// Programs that run another command given in their arguments. After one of them, every
/// later word may be the command word, whatever their options are.
const WRAPPERS: &[&str] = &[
    "builtin", "busybox", "chroot", "chrt", "command", "coproc", "doas", "env", "exec", "flock",
    "ionice", "nice", "nohup", "nsenter", "setsid", "stdbuf", "strace", "sudo", "taskset", "time",
    "timeout", "unbuffer", "unshare", "xargs",
];

/// Words after a wrapper checked as the command it runs; a longer wrapped command is
/// unknown, so the checks (each reads the words after it) stay linear in the line.
pub(crate) const MAX_WRAPPED_POSITIONS: usize = 32;

/// Shells, whose `-c` takes code.
pub(super) const SHELLS: &[&str] = &[
    "ash", "bash", "dash", "fish", "ksh", "mksh", "posh", "sh", "yash", "zsh",
];

impl SimpleCommand {
    /// A simple command from its parts, with its spellings worked out.
    pub(super) fn new(
        assignments: Vec<Word>,
        words: Vec<Word>,
        file_redirects: bool,
        runtime_args: bool,
    ) -> Self {
        let mut cmd = Self {
            assignments,
            words,
            file_redirects,
            runtime_args,
            spellings: Vec::new(),
        };
        cmd.spellings = spellings(&cmd);
        cmd
    }
}

/// The file name of a literal command word (`/bin/rm` → `rm`), `None` when it is not fixed.
fn command_name(word: &Word) -> Option<&str> {
    (word.kind == WordKind::Literal)
        .then(|| word.text.rsplit('/').next().unwrap_or(&word.text))
        .filter(|name| !name.is_empty())
}

/// The positions that may hold the command word: the first word, and after a wrapper every
/// later word.
fn command_positions(words: &[Word]) -> Vec<usize> {
    let Some(first) = words.first() else {
        return Vec::new();
    };
    if command_name(first).is_some_and(|n| WRAPPERS.contains(&n)) {
        (0..words.len()).collect()
    } else {
        vec![0]
    }
}

fn spellings(cmd: &SimpleCommand) -> Vec<Spelling> {
    let mut out: Vec<Spelling> = Vec::new();
    let mut add = |text: String, command_word: Option<&str>| {
        if !out.iter().any(|s| s.text == text) {
            out.push(Spelling {
                text,
                command_word: command_word.map(str::to_string),
            });
        }
    };
    let head = cmd.words.first();
    add(cmd.text(), head.and_then(command_name));
    for start in command_positions(&cmd.words) {
        let words = &cmd.words[start..];
        let name = command_name(&words[0]);
        add(join(words.iter()), name);
        if let Some(name) = name
            && name != words[0].text
        {
            let mut text = name.to_string();
            for w in &words[1..] {
                text.push(' ');
                text.push_str(&w.text);
            }
            add(text, Some(name));
        }
    }
    out
}

/// Find the code `cmd` hands to other programs and walk it as indirect commands.
pub(super) fn code_in_arguments(cmd: &SimpleCommand, walker: &mut Walker) {
    if cmd
        .words
        .first()
        .is_some_and(|w| w.kind != WordKind::Literal)
    {
        return;
    }
    let positions = command_positions(&cmd.words);
    if positions.len() > MAX_WRAPPED_POSITIONS {
        walker.unknown("a wrapped command has too many words to check each as the command it runs");
    }
    for start in positions.into_iter().take(MAX_WRAPPED_POSITIONS) {
        let words = &cmd.words[start..];
        let Some(name) = command_name(&words[0]) else {
            continue;
        };
        let args = &words[1..];
        match name {
            n if SHELLS.contains(&n) => match shell_input(args) {
                ShellInput::Code(code) => code_word(code, n, walker),
                ShellInput::Script(file) => builtins::code_file(file, n, walker),
                ShellInput::Stdin => {
                    walker.unknown(format!("{n} reads code from its standard input"))
                }
                ShellInput::Nothing => {}
            },
            "su" | "runuser" | "flock" => {
                if let Some(code) = option_value(args, "-c", "--command") {
                    code_word(&code, name, walker);
                }
            }
            "script" => match script_command(args) {
                Some(code) => code_word(&code, name, walker),
                None => walker.unknown("script runs a shell reading its standard input"),
            },
            "env" => {
                if let Some(code) = option_value(args, "-S", "--split-string") {
                    code_word(&code, name, walker);
                }
                for arg in args {
                    if let Some((var, _)) = arg.text.split_once('=') {
                        builtins::assigned(var, walker);
                    }
                }
            }
            "eval" | "watch" => {
                let operands: Vec<Word> = match name {
                    "watch" => watch_operands(args),
                    _ => args.to_vec(),
                };
                if !operands.is_empty() {
                    let kind = operands.iter().map(|w| w.kind).max();
                    let code = Word::new(join(operands.iter()), kind.unwrap_or(WordKind::Literal));
                    code_word(&code, name, walker);
                }
            }
            "trap" => {
                let args = match args.first() {
                    Some(w) if w.text == "--" => &args[1..],
                    _ => args,
                };
                if let Some(code) = args.first().filter(|w| !w.text.starts_with('-'))
                    && args.len() > 1
                {
                    code_word(code, name, walker);
                }
            }
            "alias" => {
                for arg in args {
                    if let Some((_, value)) = arg.text.split_once('=') {
                        code_word(&Word::new(value, arg.kind), name, walker);
                    }
                }
            }
            "find" => find_exec(args, walker),
            "xargs" => {
                if let Some(target) = xargs_target(args)
                    && programs::runs_arguments_as_code(target)
                {
                    walker.unknown(format!(
                        "xargs hands words read at run time to {target}, which runs them as code"
                    ));
                }
                // xargs appends arguments read at run time to whatever command follows it.
                walker.push_indirect(SimpleCommand::new(Vec::new(), args.to_vec(), false, true));
            }
            _ => {}
        }
        builtins::check(name, args, walker);
        programs::check(name, args, walker);
    }
}

/// Walk a word that a program runs as shell code.
fn code_word(code: &Word, program: &str, walker: &mut Walker) {
    // A pattern (`{}` of `find -exec`, a glob) is code only known at run time too.
    if code.kind != WordKind::Literal {
        walker.unknown(format!("{program} runs code only known at run time"));
    } else {
        walker.nested(&code.text, false);
    }
}

/// Where a shell started with these arguments reads its code from.
enum ShellInput<'a> {
    /// The `-c` string.
    Code(&'a Word),
    /// A script file (or stream) named.
    Script(&'a Word),
    /// Its standard input: no script is named, or `-s`.
    Stdin,
    /// Nothing runs (`--version`, `-c` without a string).
    Nothing,
}

/// Where the shell started with `args` (`bash -lc CODE`, `sh -s`, `bash x.sh`) reads code.
fn shell_input(args: &[Word]) -> ShellInput<'_> {
    let mut with_c = false;
    let mut with_s = false;
    let mut skip_next = false;
    for arg in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        let t = arg.text.as_str();
        if matches!(t, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            skip_next = true;
        } else if matches!(t, "--version" | "--help") {
            return ShellInput::Nothing;
        } else if t == "--" {
            continue;
        } else if t.len() > 1 && (t.starts_with('-') || t.starts_with('+')) {
            with_c |= !t.starts_with("--") && t.contains('c');
            with_s |= !t.starts_with("--") && t.contains('s');
        } else if with_c {
            return ShellInput::Code(arg);
        } else if with_s {
            return ShellInput::Stdin;
        } else {
            return ShellInput::Script(arg);
        }
    }
    if with_c {
        ShellInput::Nothing
    } else {
        ShellInput::Stdin
    }
}

/// The command `script` runs: `-c CMD`, `-qc CMD`, `--command CMD` or `--command=CMD`.
fn script_command(args: &[Word]) -> Option<Word> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let t = arg.text.as_str();
        if t == "--command" {
            return iter.next().cloned();
        }
        if let Some(v) = t.strip_prefix("--command=") {
            return Some(Word::new(v, arg.kind));
        }
        if t.len() > 1
            && t.starts_with('-')
            && !t.starts_with("--")
            && let Some(at) = t.find('c')
        {
            let rest = &t[at + 1..];
            return if rest.is_empty() {
                iter.next().cloned()
            } else {
                Some(Word::new(rest, arg.kind))
            };
        }
    }
    None
}

/// The name of the command `xargs ARGS` runs (`echo` when none is given).
fn xargs_target(args: &[Word]) -> Option<&str> {
    let mut k = 0;
    while let Some(w) = args.get(k) {
        let t = w.text.as_str();
        if matches!(t, "-I" | "-d" | "-E" | "-L" | "-n" | "-P" | "-s" | "-a") {
            k += 2;
        } else if t.starts_with('-') {
            k += 1;
        } else {
            return command_name(w).or(Some(""));
        }
    }
    None
}

/// The value of `short VALUE`, `long VALUE` or `long=VALUE` in `args`.
fn option_value(args: &[Word], short: &str, long: &str) -> Option<Word> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let t = arg.text.as_str();
        if t == short || t == long {
            return iter.next().cloned();
        }
        if let Some(v) = t.strip_prefix(long).and_then(|v| v.strip_prefix('=')) {
            return Some(Word::new(v, arg.kind));
        }
    }
    None
}

/// `watch`'s command words: what follows its options (`-n SECONDS`, `-d`, ...).
fn watch_operands(args: &[Word]) -> Vec<Word> {
    let mut rest = args;
    while let Some(first) = rest.first() {
        let t = first.text.as_str();
        if matches!(t, "-n" | "--interval" | "-q" | "--equexit") {
            rest = rest.get(2..).unwrap_or(&[]);
        } else if t.starts_with('-') && t != "-" {
            rest = &rest[1..];
        } else {
            break;
        }
    }
    rest.to_vec()
}

/// The commands of `find ... -exec CMD ARGS ;` (also `-execdir`, `-ok`, `-okdir`), whose
/// `{}` becomes file names at run time.
fn find_exec(args: &[Word], walker: &mut Walker) {
    let mut i = 0;
    while i < args.len() {
        if matches!(
            args[i].text.as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir"
        ) {
            let start = i + 1;
            let mut end = start;
            while end < args.len() && !matches!(args[end].text.as_str(), ";" | "+") {
                end += 1;
            }
            let words: Vec<Word> = args[start..end]
                .iter()
                .map(|w| {
                    let mut w = w.clone();
                    if w.text.contains("{}") {
                        w.kind = w.kind.max(WordKind::Pattern);
                    }
                    w
                })
                .collect();
            if !words.is_empty() {
                let cmd = SimpleCommand::new(Vec::new(), words, false, false);
                code_in_arguments(&cmd, walker);
                walker.push_indirect(cmd);
            }
            i = end;
        }
        i += 1;
    }
}
