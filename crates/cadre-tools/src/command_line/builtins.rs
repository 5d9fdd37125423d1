//! Shell builtins and variables whose effect goes beyond their words: a variable name with
//! an array subscript is arithmetic, and arithmetic runs the command substitutions in it
//! (`printf -v 'a[$(cmd)]'`, `read`, `declare`, `[[ -v ]]`, `let`); some variables are code
//! bash or the programs it starts run (`PS4`, `PROMPT_COMMAND`, `BASH_ENV`, `GIT_PAGER`);
//! `mapfile -C`, `hash -p`, `enable -f` and `source` of a stream run code the line does not
//! spell out. Each of these marks the line unknown.

use super::walk::Walker;
use super::words::{Word, WordKind};

/// Variables through which bash, or programs it starts, run code or change how the rest of
/// the line is read (prompts are expanded, with command substitutions, under `set -x`).
const CODE_VARIABLES: &[&str] = &[
    "BASHOPTS",
    "BASH_ENV",
    "EDITOR",
    "ENV",
    "GIT_ASKPASS",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_SYSTEM",
    "GIT_EDITOR",
    "GIT_EXEC_PATH",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_TEMPLATE_DIR",
    "IFS",
    "LD_AUDIT",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "LESSCLOSE",
    "LESSOPEN",
    "MANPAGER",
    "NODE_OPTIONS",
    "PAGER",
    "PERL5OPT",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PYTHONSTARTUP",
    "RUBYOPT",
    "SHELLOPTS",
    "SSH_ASKPASS",
    "VISUAL",
];

/// Prefixes of such variables: exported functions, and git's `-c` by environment.
const CODE_VARIABLE_PREFIXES: &[&str] = &["BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"];

/// Whether assigning `name` can make bash or a program it starts run code.
pub(super) fn code_variable(name: &str) -> bool {
    CODE_VARIABLES.contains(&name) || CODE_VARIABLE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Mark the line unknown when an assignment sets a code variable.
pub(super) fn assigned(name: &str, walker: &mut Walker) {
    if code_variable(name) {
        walker.unknown(format!(
            "it sets {name}, through which bash or the programs it starts run code"
        ));
    }
}

/// A plain shell variable name: no subscript, nothing expanded.
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Mark the line unknown unless `word`, which `builtin` reads as a variable name, is a
/// plain name of no code variable.
fn name(word: &Word, builtin: &str, walker: &mut Walker) {
    if word.kind != WordKind::Literal || !is_identifier(&word.text) {
        walker.unknown(format!(
            "`{builtin}` is given the variable name {}, not a plain name (a subscript is \
             arithmetic, which can run commands)",
            word.text
        ));
    } else {
        assigned(&word.text, walker);
    }
}

/// Options read getopt-style, and what follows them.
struct Options {
    /// Each option letter, with its value when it takes one.
    options: Vec<(char, Option<Word>)>,
    operands: Vec<Word>,
    /// A word in option position is only known at run time (it could be any option).
    dynamic: bool,
}

/// Read `args` as getopt reads them: letters in `with_value` take the rest of their word or
/// the next word; `--` or the first word not starting with `-` ends the options.
fn options(args: &[Word], with_value: &str) -> Options {
    let mut out = Options {
        options: Vec::new(),
        operands: Vec::new(),
        dynamic: false,
    };
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let t = word.text.as_str();
        if word.kind == WordKind::Expanded {
            out.dynamic = true;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if t.len() < 2 || !t.starts_with('-') {
            break;
        }
        for (at, c) in t.char_indices().skip(1) {
            if with_value.contains(c) {
                let rest = &t[at + c.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i).cloned()
                } else {
                    Some(Word::new(rest, word.kind))
                };
                out.options.push((c, value));
                break;
            }
            out.options.push((c, None));
        }
        i += 1;
    }
    out.operands = args.get(i..).unwrap_or(&[]).to_vec();
    out
}

/// Check a builtin named `builtin` (the command word's file name) with `args`.
pub(super) fn check(builtin: &str, args: &[Word], walker: &mut Walker) {
    match builtin {
        "let" => walker.unknown("arithmetic evaluation (`let`)"),
        "printf" => {
            let o = options(args, "v");
            if o.dynamic
                || o.operands
                    .first()
                    .is_some_and(|w| w.kind == WordKind::Expanded)
            {
                walker.unknown("`printf` is given options only known at run time");
            }
            for (_, value) in o.options.iter().filter(|(c, _)| *c == 'v') {
                if let Some(w) = value {
                    name(w, builtin, walker);
                }
            }
        }
        "declare" | "typeset" | "local" | "export" | "readonly" => declare(builtin, args, walker),
        "read" => names(builtin, args, "adinNptu", "a", Operands::All, walker),
        "mapfile" | "readarray" => {
            let o = options(args, "dnOsuCc");
            if o.options.iter().any(|(c, _)| *c == 'C') {
                walker.unknown(format!("`{builtin} -C` runs a callback given as code"));
            }
            names(builtin, args, "dnOsuCc", "", Operands::First, walker);
        }
        "getopts" => {
            if let Some(w) = args.get(1) {
                name(w, builtin, walker);
            }
        }
        "wait" => names(builtin, args, "p", "p", Operands::None, walker),
        "unset" => names(builtin, args, "", "", Operands::All, walker),
        "test" | "[" => {
            for pair in args.windows(2) {
                if matches!(pair[0].text.as_str(), "-v" | "-R") {
                    name(&pair[1], builtin, walker);
                }
            }
        }
        "hash" if args.iter().any(|w| w.text.starts_with("-p")) => {
            walker.unknown("`hash -p` points a command name at another program")
        }
        "enable"
            if args
                .iter()
                .any(|w| w.text.starts_with('-') && w.text.contains('f')) =>
        {
            walker.unknown("`enable -f` loads a builtin from a shared object")
        }
        "shopt" if args.iter().any(|w| w.text == "expand_aliases") => {
            walker.unknown("aliases are expanded, so a later word can be any command")
        }
        "source" | "." => {
            if let Some(file) = args.iter().find(|w| w.text != "--") {
                code_file(file, builtin, walker);
            }
        }
        _ => {}
    }
}

/// Mark the line unknown when code is read from `file` that the walker cannot read: a
/// stream (standard input, a process substitution) or a name only known at run time.
pub(super) fn code_file(file: &Word, program: &str, walker: &mut Walker) {
    let t = file.text.as_str();
    if file.kind == WordKind::Expanded
        || t == "-"
        || t.starts_with("/dev/")
        || t.starts_with("/proc/")
    {
        walker.unknown(format!(
            "{program} runs code from {t}, which cannot be read before"
        ));
    }
}

/// Which operands of a builtin are variable names.
enum Operands {
    All,
    First,
    None,
}

/// Check the names a builtin assigns: the values of `name_options` and the `operands`.
fn names(
    builtin: &str,
    args: &[Word],
    with_value: &str,
    name_options: &str,
    operands: Operands,
    walker: &mut Walker,
) {
    let o = options(args, with_value);
    if o.dynamic {
        walker.unknown(format!(
            "`{builtin}` is given options only known at run time"
        ));
    }
    for (_, value) in o.options.iter().filter(|(c, _)| name_options.contains(*c)) {
        if let Some(w) = value {
            name(w, builtin, walker);
        }
    }
    let operands: &[Word] = match operands {
        Operands::All => &o.operands,
        Operands::First => o.operands.get(..1).unwrap_or(&[]),
        Operands::None => &[],
    };
    for w in operands {
        name(w, builtin, walker);
    }
}

/// `declare` and its kin: every argument is an option, `NAME` or `NAME=VALUE`.
fn declare(builtin: &str, args: &[Word], walker: &mut Walker) {
    let mut arrays = false;
    for w in args {
        let t = w.text.as_str();
        if t.len() > 1 && (t.starts_with('-') || t.starts_with('+')) {
            // `-i` makes later assignments arithmetic, `-n` makes the name a reference to
            // another (which may hold a subscript).
            if t.contains(['i', 'n']) && builtin != "export" {
                walker.unknown(format!(
                    "`{builtin} {t}` makes later values arithmetic or references"
                ));
            }
            arrays |= t.contains(['a', 'A']);
            continue;
        }
        let (var, value) = match t.split_once('=') {
            Some((var, value)) => (var, Some(value)),
            None => (t, None),
        };
        // The name's text keeps the source of anything expanded (`$n`), so judging the text
        // alone is enough.
        name(&Word::new(var, WordKind::Literal), builtin, walker);
        if let Some(value) = value
            && (value.starts_with('(') || arrays && w.kind == WordKind::Expanded)
        {
            walker.unknown(format!(
                "`{builtin}` reads {t} as a compound assignment, whose subscripts are arithmetic"
            ));
        }
    }
}
