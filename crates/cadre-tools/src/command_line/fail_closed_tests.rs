//! Constructs whose effect the walker does not model make the line unknown, so no allow rule
//! matches it and a deny rule asks; code it can read is walked, so a deny rule sees it. One
//! table per construct class; every payload is `touch /tmp/p`.

use super::*;

/// Whether the line is unknown, and if not, why that is wrong.
fn unknown(line: &str) -> Result<(), String> {
    let parsed = CommandLine::parse(line);
    if parsed.unknown().is_none() {
        return Err(format!(
            "{line:?} is not unknown: {:?}",
            parsed.allow_texts()
        ));
    }
    if parsed.allow_texts().is_some() {
        return Err(format!("{line:?} is unknown but has allow texts"));
    }
    Ok(())
}

/// Whether the line is unknown, a command of it runs `touch`, or a command word is only
/// known at run time (a deny rule then cannot be checked, and asks).
fn unknown_or_seen(line: &str) -> Result<(), String> {
    let parsed = CommandLine::parse(line);
    let seen = parsed
        .all_commands()
        .flat_map(SimpleCommand::spellings)
        .any(|s| s.command_word.as_deref().is_none_or(|w| w == "touch"));
    if parsed.unknown().is_some() || seen {
        Ok(())
    } else {
        Err(format!("{line:?} neither unknown nor shows its touch"))
    }
}

fn check_all(class: &str, lines: &[&str], check: fn(&str) -> Result<(), String>) {
    let failures: Vec<String> = lines.iter().filter_map(|l| check(l).err()).collect();
    assert!(failures.is_empty(), "{class}:\n{}", failures.join("\n"));
}

#[test]
fn array_subscripts_in_tests_are_unknown() {
    check_all(
        "[[ -v ]] / test -v",
        &[
            "git status && [[ -v 'a[$(touch /tmp/p)]' ]]",
            "git status; [[ -v 'a[$(touch /tmp/p)]' ]]",
            "if [[ -v 'a[$(touch /tmp/p)]' ]]; then git status; fi",
            "! [[ -v 'a[$(touch /tmp/p)]' ]] && git status",
            "git status || [[ -v 'a[$(touch /tmp/p)]' ]]",
            "git status `[[ -v 'a[$(touch /tmp/p)]' ]]`",
            "git status | tail -n 1 && [[ -v \"a[\\$(touch /tmp/p)]\" ]]",
            "[[ -R 'a[$(touch /tmp/p)]' ]]",
            "[[ ! -v a[\\$(touch\\ /tmp/p)] ]]",
            "[[ -v $NAME ]]",
            "test -v 'a[$(touch /tmp/p)]'",
            "[ -v 'a[$(touch /tmp/p)]' ]",
            "[ ! -v 'a[$(touch /tmp/p)]' ]",
        ],
        unknown,
    );
}

#[test]
fn here_document_bodies_with_continued_substitutions_are_unknown() {
    check_all(
        "here-documents",
        &[
            "git status; cat <<EOF\n$\\\n(touch /tmp/p)\nEOF",
            "cat <<-EOF\n\t$\\\n(touch /tmp/p)\n\tEOF\ngit status",
            "git status && cat <<EOF\n$\\\n{x[$\\\n(touch /tmp/p)]}\nEOF",
            "cat <<EOF\n`touch /tmp/p`\nEOF",
            "cat <<EOF\n$\\\n\\\n(touch /tmp/p)\nEOF",
            "cat <<EOF\n$\\\n[1+1]\nEOF",
        ],
        unknown,
    );
}

#[test]
fn code_fed_to_a_shell_on_stdin_or_sourced_is_unknown() {
    check_all(
        "shell stdin, source",
        &[
            "bash <<< 'touch /tmp/p'",
            "echo 'touch /tmp/p' | bash",
            "echo 'touch /tmp/p' | sh -s",
            "printf 'touch /tmp/p' | bash -",
            "bash -s <<EOF\ntouch /tmp/p\nEOF",
            "bash -s arg <<'EOF'\ntouch /tmp/p\nEOF",
            "echo 'touch /tmp/p' | /bin/sh -i",
            "echo 'touch /tmp/p' | env bash",
            ". <(echo 'touch /tmp/p')",
            "source <(echo 'touch /tmp/p')",
            "source /dev/stdin <<< 'touch /tmp/p'",
            ". /dev/fd/0 <<< 'touch /tmp/p'",
            "bash /dev/stdin <<< 'touch /tmp/p'",
            "bash /proc/self/fd/0 <<< 'touch /tmp/p'",
            "bash <(echo 'touch /tmp/p')",
            "exec > >(bash); echo 'touch /tmp/p'",
            "coproc bash",
            // Hostile spellings of the shell.
            "echo 'touch /tmp/p' | \\bash",
            "echo 'touch /tmp/p' | b''ash",
            "echo 'touch /tmp/p' | \"/bin/ba\"sh",
            "echo 'touch /tmp/p' | command -p bash",
            "echo 'touch /tmp/p' | sudo -u root env -i /usr/bin/bash",
            "echo 'touch /tmp/p' | exec -a x bash",
        ],
        unknown,
    );
}

#[test]
fn builtins_that_evaluate_subscripts_or_arithmetic_are_unknown() {
    check_all(
        "names and arithmetic",
        &[
            "printf -v 'a[$(touch /tmp/p)]' x",
            "printf -v'a[$(touch /tmp/p)]' x",
            "printf -v \"$N\" x",
            "declare 'a[$(touch /tmp/p)]=1'",
            "typeset 'a[$(touch /tmp/p)]'=1",
            "local 'a[$(touch /tmp/p)]'",
            "export 'a[$(touch /tmp/p)]=1'",
            "readonly 'a[$(touch /tmp/p)]=1'",
            "declare -a 'x=([$(touch /tmp/p)]=1)'",
            "declare -i x; x='a[$(touch /tmp/p)]'",
            "declare -n r='a[$(touch /tmp/p)]'; echo $r",
            "read 'a[$(touch /tmp/p)]' <<< x",
            "read -r -p x 'a[$(touch /tmp/p)]' <<< x",
            "read -a 'a[$(touch /tmp/p)]' <<< x",
            "let 'a[$(touch /tmp/p)]=1'",
            "let x=1",
            "unset 'a[$(touch /tmp/p)]'",
            "mapfile 'a[$(touch /tmp/p)]' <<< x",
            "readarray -t 'a[$(touch /tmp/p)]' <<< x",
            "getopts a 'a[$(touch /tmp/p)]'",
            "wait -p 'a[$(touch /tmp/p)]'",
            "a=(); a[$(touch /tmp/p)]=1",
            "echo ${x:y}",
            "echo ${x: -1}",
        ],
        unknown,
    );
}

#[test]
fn prompt_expansion_and_code_running_variables_are_unknown() {
    check_all(
        "prompts and variables",
        &[
            "PS4='$(touch /tmp/p)'; set -x; git status",
            "export PS4='$(touch /tmp/p)'; set -x",
            "declare PS4='$(touch /tmp/p)'",
            "x='$(touch /tmp/p)'; echo ${x@P}",
            "echo \"${x@P}\"",
            "PROMPT_COMMAND='touch /tmp/p' bash -i",
            "BASH_ENV=<(echo 'touch /tmp/p') bash -c 'git status'",
            "ENV=/tmp/x sh -c ls",
            "IFS=/ git status",
            "env 'BASH_FUNC_git%%=() { touch /tmp/p; }' bash -c 'git status'",
            "env PS4='$(touch /tmp/p)' bash -xc ls",
            "GIT_PAGER='touch /tmp/p' git log",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch /tmp/p' git status",
            "LD_PRELOAD=/tmp/x.so ls",
            "read PS4 <<< '$(touch /tmp/p)'",
            "printf -v PS1 x",
            "for PS4 in '$(touch /tmp/p)'; do set -x; ls; done",
            "x='a[$(touch /tmp/p)]'; echo ${!x}",
            "echo ${!prefix*}",
            "mapfile -C 'touch /tmp/p' -c 1 a <<< x",
            "mapfile -tC'touch /tmp/p' a <<< x",
            "shopt -s expand_aliases",
            "hash -p /usr/bin/touch ls; ls /tmp/p",
            "enable -f /tmp/x.so x",
        ],
        unknown,
    );
}

#[test]
fn programs_that_run_command_strings_are_unknown_or_walked() {
    check_all(
        "programs running code",
        &[
            "script -q /dev/null",
            "git -c alias.x='!touch /tmp/p' x",
            "git -c core.fsmonitor='touch /tmp/p' status",
            "git --config-env=core.pager=X log",
            "git x",
            "git st",
            "git $SUB",
            "git config alias.st '!touch /tmp/p'",
            "git config --global core.pager 'touch /tmp/p'",
            "git rebase -x 'touch /tmp/p' HEAD~1",
            "git rebase --exec='touch /tmp/p' HEAD~1",
            "git bisect run touch /tmp/p",
            "git submodule foreach 'touch /tmp/p'",
            "git filter-branch --tree-filter 'touch /tmp/p'",
            "git clone --upload-pack='touch /tmp/p' a b",
            "git clone -u 'touch /tmp/p' a b",
            "git fetch 'ext::sh -c touch% /tmp/p'",
            "git --exec-path=/tmp status",
            "awk 'BEGIN{system(\"touch /tmp/p\")}'",
            "awk -F: 'BEGIN{print | \"sh\"}'",
            "gawk '@load \"x\"'",
            "awk \"$PROG\"",
            "sed -n '1e touch /tmp/p' f",
            "sed 's/x/touch \\/tmp\\/p/e' f",
            "sed -e 's|x|y|ge' f",
            "sed --expression='e touch /tmp/p' f",
            "sed -ne 'p;e touch /tmp/p' f",
            "sed \"$S\" f",
            "python3 -c 'import os; os.system(\"touch /tmp/p\")'",
            "\"py\"thon3 -c 1",
            "/usr/bin/env python3 -c 1",
            "python3 -W error -c 1",
            "python3 -Werror -c 1",
            "sudo -u root perl -e 1",
            "git -C . --git-dir=.git -c alias.x='!touch /tmp/p' x",
            "\\git -c alias.x='!touch /tmp/p' x",
            "python -Sc 'print(1)'",
            "echo 'import os' | python3",
            "python3 - <<< 'print(1)'",
            "python3 -W ignore <<< 'print(1)'",
            "perl -e 'system(\"touch /tmp/p\")'",
            "perl -ne 'print' f",
            "perl -MPOSIX x.pl",
            "node -e 'require(\"fs\").writeFileSync(\"/tmp/p\",\"\")'",
            "node -p 1",
            "node --eval=1",
            "ruby -e 'File.write(\"/tmp/p\",\"\")'",
            "php -r 'touch(\"/tmp/p\");'",
            "ls | xargs sh -c",
            "ls | xargs -I{} bash -c '{}'",
            "echo x | xargs git",
            "find . -exec sh -c '{}' \\;",
            "parallel ::: 'touch /tmp/p'",
            "tar -cf x.tar --to-command='touch /tmp/p' f",
            "tar -I 'touch /tmp/p' -cf x.tar f",
            "rsync -e 'sh -c \"touch /tmp/p\"' a b:c",
            "make --eval='$(shell touch /tmp/p)'",
        ],
        unknown,
    );
    // Code the walker can read is walked, so a deny rule on `touch` sees it.
    check_all(
        "walked code",
        &[
            "script -qc 'touch /tmp/p' /dev/null",
            "script -c 'touch /tmp/p'",
            "script --command='touch /tmp/p'",
            "bash -c 'touch /tmp/p'",
            "env -S 'touch /tmp/p'",
            "flock /tmp/l -c 'touch /tmp/p'",
            "runuser -u x -c 'touch /tmp/p'",
            "ls | xargs touch",
        ],
        unknown_or_seen,
    );
}

#[test]
fn shell_tricks_around_command_words_are_unknown_or_walked() {
    check_all(
        "quoting, wrappers, functions, aliases, traps",
        &[
            "$'\\x74ouch' /tmp/p",
            "bash -c $'touch\\x20/tmp/p'",
            "eval $'touch /tmp/p'",
            "eval \"$C\"",
            "exec touch /tmp/p",
            "command touch /tmp/p",
            "builtin eval 'touch /tmp/p'",
            "command eval 'touch /tmp/p'",
            "trap 'touch /tmp/p' EXIT",
            "trap -- 'touch /tmp/p' EXIT",
            "trap \"$X\" EXIT",
            "git() { touch /tmp/p; }; git status",
            "function git { touch /tmp/p; }; git status",
            "alias git='touch /tmp/p'",
            "alias git=$'touch /tmp/p'",
            "bash -c touch*",
        ],
        unknown_or_seen,
    );
}

#[test]
fn ordinary_lines_stay_known_and_allowable() {
    for line in [
        "git status",
        "git status -s",
        "cargo test -p x",
        "ls -la | head",
        "npm run test",
        "git diff HEAD~1 -- src/",
        "git log --oneline -5",
        "git -C sub status",
        "git --no-pager log -1",
        "git config user.name",
        "git config --get core.editor",
        "git config --list",
        "git rebase main",
        "git add -u",
        "printf '%s\\n' a b",
        "printf -v out '%s' x",
        "read -r line",
        "read -rp 'name? ' name",
        "declare -a arr",
        "local x=1",
        "export RUST_LOG=debug",
        "export PATH=/usr/bin:/bin",
        "unset x",
        "mapfile -t lines",
        "sed -n '1,5p' f",
        "sed 's/a/b/g' f",
        "sed -i 's/version/ver/' f",
        "sed -e '/^$/d' -e 's/x/y/' f",
        "sed 'y/abc/xyz/' f",
        "awk '{print $1}' f",
        "awk -F: '$3 > 1000 {print $1}' /etc/passwd",
        "python3 script.py",
        "python3 -m pytest -q",
        "python3 --version",
        "node x.js",
        "perl script.pl",
        "bash script.sh",
        "bash -n script.sh",
        "sh ./configure --prefix=/x",
        "source ./env.sh",
        ". venv/bin/activate",
        "[[ -v HOME ]]",
        "[[ -n x && -f y ]]",
        "test -v HOME",
        "[ -f x ]",
        "cat <<EOF\nhi there\nEOF",
        "cat <<'EOF'\n$(not run)\nEOF",
        "cat <<EOF\nprice: 5\\\ndollars\nEOF",
        "xargs grep foo",
        "find . -name '*.rs' -exec grep -l x {} +",
        "tar -czf x.tgz src",
        "make -j4 test",
        "trap 'echo done' EXIT",
        "echo ${x:-default} ${#x} ${x%.rs}",
        "while IFS= read -r line; do echo \"$line\"; done",
        "echo PS4=x",
    ] {
        let parsed = CommandLine::parse(line);
        assert_eq!(parsed.unknown(), None, "{line:?}");
    }
}

/// After a wrapper every word may be the command word, so each is checked as one: past
/// [`MAX_WRAPPED_POSITIONS`] words the line is unknown instead, so checking a long line made
/// of checked programs (`sudo declare declare …`) stays linear.
#[test]
fn a_wrapper_with_too_many_words_is_unknown_instead_of_checked_word_by_word() {
    let words = |n: usize| format!("sudo {}", vec!["declare"; n].join(" "));
    assert_eq!(
        CommandLine::parse(&words(MAX_WRAPPED_POSITIONS - 1)).unknown(),
        None
    );
    assert!(
        CommandLine::parse(&words(MAX_WRAPPED_POSITIONS + 1))
            .unknown()
            .is_some()
    );
    // Without a wrapper only the first word is a command word: any length is checked.
    assert_eq!(CommandLine::parse(&words(200)[5..]).unknown(), None);
}
