//! Programs that run code the line hands them in a form the walker does not read: a shell
//! or an interpreter reading its standard input or a code string (`bash -s`, `python -c`),
//! git running an alias or a configured command, awk's `system()`, sed's `e`, and options
//! of other programs that take a command (`script -c` is walked instead). Each of these
//! marks the line unknown.

use super::builtins::code_file;
use super::walk::Walker;
use super::words::{Word, WordKind};

/// Programs that run commands given to them in so many forms that none is modelled.
const ALWAYS_UNKNOWN: &[&str] = &[
    "at",
    "batch",
    "ex",
    "expect",
    "gdb",
    "irb",
    "jshell",
    "nvim",
    "parallel",
    "powershell",
    "pwsh",
    "screen",
    "tmux",
    "vi",
    "vim",
];

/// An interpreter: its short options that take code (or load code by name), those that
/// take a value, those that name the script (`python -m`), and its long code options.
struct Interpreter {
    code: &'static str,
    with_value: &'static str,
    script: &'static str,
    long_code: &'static [&'static str],
    long_with_value: &'static [&'static str],
}

fn interpreter(name: &str) -> Option<Interpreter> {
    let (code, with_value, script, long_code, long_with_value): (_, _, _, &[&str], &[&str]) =
        match name {
            n if n.starts_with("python") || n.starts_with("pypy") => ("c", "WXQ", "m", &[], &[]),
            n if n.starts_with("perl") => ("eEMm", "Ix", "", &[], &[]),
            "ruby" => ("e", "ICEFr", "", &[], &[]),
            "node" | "nodejs" | "bun" => (
                "ep",
                "rC",
                "",
                &["--eval", "--print"],
                &[
                    "--require",
                    "--import",
                    "--loader",
                    "--input-type",
                    "--conditions",
                ],
            ),
            "php" => ("rRBEd", "cz", "f", &[], &[]),
            "lua" | "luajit" => ("e", "l", "", &[], &[]),
            "Rscript" | "osascript" => ("e", "", "", &[], &[]),
            "tclsh" | "wish" => ("", "", "", &[], &[]),
            _ => return None,
        };
    Some(Interpreter {
        code,
        with_value,
        script,
        long_code,
        long_with_value,
    })
}

/// Whether `name` runs words given to it as code (so `xargs NAME` runs what it reads).
pub(super) fn runs_arguments_as_code(name: &str) -> bool {
    super::resolve::SHELLS.contains(&name)
        || interpreter(name).is_some()
        || ALWAYS_UNKNOWN.contains(&name)
        || [
            "eval", "source", ".", "git", "awk", "gawk", "mawk", "nawk", "sed", "script", "su",
            "runuser", "flock", "env", "xargs", "find", "watch", "trap", "alias", "busybox",
            "sudo", "doas", "make", "tar", "rsync",
        ]
        .contains(&name)
}

/// Check program `name` run with `args`.
pub(super) fn check(name: &str, args: &[Word], walker: &mut Walker) {
    if ALWAYS_UNKNOWN.contains(&name) {
        walker.unknown(format!("{name} runs commands the walker does not read"));
        return;
    }
    if let Some(i) = interpreter(name) {
        interpreted(name, &i, args, walker);
        return;
    }
    let runs_option = |prefixes: &[&str]| {
        args.iter()
            .any(|w| prefixes.iter().any(|p| w.text.starts_with(p)))
    };
    let option_runs = match name {
        "git" => return super::git::check(args, walker),
        "awk" | "gawk" | "mawk" | "nawk" => return awk(name, args, walker),
        "sed" => return sed(args, walker),
        "tar" => runs_option(&[
            "--to-command",
            "--checkpoint-action",
            "--use-compress-program",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
            "-I",
            "-F",
        ]),
        "rsync" => {
            runs_option(&["--rsh", "--rsync-path"])
                || args.iter().any(|w| short_cluster_has(&w.text, 'e'))
        }
        "make" | "gmake" => runs_option(&["--eval", "-E"]),
        "zip" => runs_option(&["-TT", "--unzip-command"]),
        _ => false,
    };
    if option_runs {
        walker.unknown(format!("{name} is given a command to run in an option"));
    }
}

/// Whether `text` is a cluster of short options (`-avze`) holding `letter`.
fn short_cluster_has(text: &str, letter: char) -> bool {
    text.len() > 1 && text.starts_with('-') && !text.starts_with("--") && text[1..].contains(letter)
}

/// An interpreter runs code given in an option, or read from its standard input when no
/// script is named; a script named is a file, which the walker does not read.
fn interpreted(name: &str, i: &Interpreter, args: &[Word], walker: &mut Walker) {
    let exempt = args
        .iter()
        .any(|w| matches!(w.text.as_str(), "--version" | "-V" | "--help" | "-h"));
    let mut k = 0;
    while k < args.len() {
        let word = &args[k];
        let t = word.text.as_str();
        if word.kind == WordKind::Expanded {
            walker.unknown(format!("{name} is given options only known at run time"));
            return;
        }
        if t == "--" {
            k += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let option = format!("--{}", long.split('=').next().unwrap_or(long));
            if i.long_code.contains(&option.as_str()) {
                walker.unknown(format!("{name} {option} runs code given as a string"));
                return;
            }
            k += if i.long_with_value.contains(&option.as_str()) && !t.contains('=') {
                2
            } else {
                1
            };
            continue;
        }
        if t.len() < 2 || !t.starts_with('-') {
            break;
        }
        for (at, c) in t.char_indices().skip(1) {
            if i.code.contains(c) {
                walker.unknown(format!("{name} -{c} runs code given as a string"));
                return;
            }
            if i.script.contains(c) {
                return;
            }
            if i.with_value.contains(c) {
                if t[at + c.len_utf8()..].is_empty() {
                    k += 1;
                }
                break;
            }
        }
        k += 1;
    }
    match args.get(k) {
        Some(script) => code_file(script, name, walker),
        None if !exempt => {
            walker.unknown(format!("{name} reads code from its standard input"));
        }
        None => {}
    }
}

/// awk's program runs commands through `system()`, pipes (`print | "sh"`, `"cmd" | getline`)
/// and gawk's `@load`; a program file (`-f`) is not read.
fn awk(name: &str, args: &[Word], walker: &mut Walker) {
    let mut programs: Vec<&Word> = Vec::new();
    let mut from_file = false;
    let mut k = 0;
    while k < args.len() {
        let t = args[k].text.as_str();
        match t {
            "--" => {
                k += 1;
                break;
            }
            "-F" | "-v" | "-i" | "--include" | "--assign" | "--field-separator" => k += 2,
            "-f" | "-E" | "--file" | "--exec" => {
                from_file = true;
                k += 2;
            }
            "-e" | "--source" => {
                programs.extend(args.get(k + 1));
                k += 2;
            }
            "-l" | "--load" => {
                walker.unknown(format!("{name} {t} loads an extension"));
                return;
            }
            _ if t.len() > 1 && t.starts_with('-') => k += 1,
            _ => break,
        }
    }
    if !from_file && programs.is_empty() {
        programs.extend(args.get(k));
    }
    for p in programs {
        if p.kind != WordKind::Literal {
            walker.unknown(format!("{name} runs a program only known at run time"));
        } else if ["system", "|", "@load"].iter().any(|s| p.text.contains(s)) {
            walker.unknown(format!(
                "{name}'s program can run commands (`system`, a pipe or `@load`)"
            ));
        }
    }
}

/// sed runs commands with its `e` command and the `e` flag of `s`.
fn sed(args: &[Word], walker: &mut Walker) {
    let mut scripts: Vec<Word> = Vec::new();
    let mut from_file = false;
    let mut k = 0;
    while k < args.len() {
        let word = &args[k];
        let t = word.text.as_str();
        if t == "--" {
            k += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (option, value) = match long.split_once('=') {
                Some((o, v)) => (o, Some(Word::new(v, word.kind))),
                None => (long, None),
            };
            let takes = matches!(option, "expression" | "file" | "line-length");
            let value = if takes && value.is_none() {
                k += 1;
                args.get(k).cloned()
            } else {
                value
            };
            match option {
                "expression" => scripts.extend(value),
                "file" => from_file = true,
                _ => {}
            }
            k += 1;
            continue;
        }
        if t.len() < 2 || !t.starts_with('-') {
            break;
        }
        for (at, c) in t.char_indices().skip(1) {
            let rest = &t[at + c.len_utf8()..];
            match c {
                'e' | 'f' | 'l' => {
                    let value = if rest.is_empty() {
                        k += 1;
                        args.get(k).cloned()
                    } else {
                        Some(Word::new(rest, word.kind))
                    };
                    match c {
                        'e' => scripts.extend(value),
                        'f' => from_file = true,
                        _ => {}
                    }
                    break;
                }
                // `-i[SUFFIX]`: the rest of the word is the suffix.
                'i' => break,
                _ => {}
            }
        }
        k += 1;
    }
    if !from_file && scripts.is_empty() {
        scripts.extend(args.get(k).cloned());
    }
    for s in scripts {
        if s.kind != WordKind::Literal {
            walker.unknown("sed runs a script only known at run time");
        } else if super::sed::runs_commands(&s.text) {
            walker.unknown("sed's script runs commands (`e`), or cannot be read");
        }
    }
}
