//! What of a `git` command the walker models: git's own subcommands with their words. An
//! alias (any subcommand not git's own) can run any command (`!…`), and so can configuration
//! given on the line (`-c`, `git config KEY VALUE` for a later command: `core.fsmonitor`,
//! `core.pager`), and options and subcommands that take a command (`rebase -x`,
//! `bisect run`, `submodule foreach`, `--upload-pack`, `ext::` URLs). Each marks the line
//! unknown.

use super::walk::Walker;
use super::words::{Word, WordKind};

/// git's own commands (`git help -a`): git never lets an alias shadow one of these.
const COMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "difftool",
    "fetch",
    "filter-branch",
    "fmt-merge-msg",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "hash-object",
    "help",
    "index-pack",
    "init",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-tree",
    "mergetool",
    "mktag",
    "mktree",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-refs",
    "patch-id",
    "prune",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "replace",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "update-index",
    "update-ref",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// Global options that take the next word as their value.
const WITH_VALUE: &[&str] = &[
    "-C",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--list-cmds",
];

/// Options, of any subcommand, whose value is a command git runs.
const COMMAND_OPTIONS: &[&str] = &["--upload-pack", "--receive-pack", "--exec", "--extcmd"];

/// Check `git ARGS`.
pub(super) fn check(args: &[Word], walker: &mut Walker) {
    let mut k = 0;
    while let Some(word) = args.get(k) {
        let t = word.text.as_str();
        if t.starts_with("-c") || t.starts_with("--config-env") || t.starts_with("--exec-path=") {
            return walker.unknown(format!(
                "git {t} sets configuration, through which git runs commands"
            ));
        }
        if WITH_VALUE.contains(&t) {
            k += 2;
        } else if t.starts_with('-') && word.kind != WordKind::Expanded {
            k += 1;
        } else {
            break;
        }
    }
    let Some(sub) = args.get(k) else {
        return;
    };
    // An alias's name is letters, digits and `-`: anything else is no command at all.
    let alias_name = sub
        .text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if sub.kind != WordKind::Literal || !COMMANDS.contains(&sub.text.as_str()) && alias_name {
        return walker.unknown(format!(
            "`git {}` may be an alias, which can run any command",
            sub.text
        ));
    }
    let rest = &args[k + 1..];
    let has = |f: &dyn Fn(&str) -> bool| rest.iter().any(|w| f(&w.text));
    let runs =
        match sub.text.as_str() {
            "filter-branch" | "mergetool" => true,
            "bisect" => rest.first().is_some_and(|w| w.text == "run"),
            "submodule" => has(&|t| t == "foreach"),
            "rebase" | "difftool" => has(&|t| t == "-x" || t.starts_with("-x")),
            "clone" => has(&|t| t == "-u"),
            "config" => config_writes(rest),
            _ => false,
        } || has(&|t| COMMAND_OPTIONS.iter().any(|o| t.starts_with(o)) || t.starts_with("ext::"));
    if runs {
        walker.unknown(format!(
            "`git {}` is given a command to run, or configures one",
            sub.text
        ));
    }
}

/// Whether `git config ARGS` may set or edit configuration: anything but a plain read.
fn config_writes(args: &[Word]) -> bool {
    let reads = ["--get", "--list", "-l", "--show-origin", "--show-scope"];
    if args
        .iter()
        .any(|w| reads.iter().any(|r| w.text.starts_with(r)))
        || args
            .first()
            .is_some_and(|w| matches!(w.text.as_str(), "get" | "list"))
    {
        return false;
    }
    let mut operands = 0;
    let mut k = 0;
    while let Some(w) = args.get(k) {
        let t = w.text.as_str();
        if matches!(t, "-f" | "--file" | "--blob" | "--type") {
            k += 2;
            continue;
        }
        if t.starts_with('-') {
            if matches!(t, "-e" | "--edit") || t.starts_with("--add") || t.starts_with("--replace")
            {
                return true;
            }
        } else {
            operands += 1;
        }
        k += 1;
    }
    operands > 1
}
