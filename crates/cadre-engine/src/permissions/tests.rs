use super::*;
use PolicyDecision::*;
use std::path::PathBuf;

fn policy(mode: ApprovalMode, allow: &[&str], deny: &[&str], ask: &[&str]) -> PermissionPolicy {
    let v = |x: &[&str]| {
        x.iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
    };
    PermissionPolicy {
        mode,
        rules: PermissionRules::parse(&v(allow), &v(deny), &v(ask)).unwrap(),
    }
}

fn kind(d: PolicyDecision) -> &'static str {
    match d {
        Allow => "allow",
        Deny(_) => "deny",
        Ask(_) => "ask",
    }
}

fn path(p: &str) -> PermissionSubject {
    PermissionSubject::Path(PathBuf::from(p))
}

fn cmd(c: &str) -> PermissionSubject {
    PermissionSubject::command(c)
}

#[test]
fn default_mode_asks_for_mutating_tools_only() {
    let p = policy(ApprovalMode::Ask, &[], &[], &[]);
    assert_eq!(
        kind(p.decide("read_file", &path("a"), true, false)),
        "allow"
    );
    assert_eq!(kind(p.decide("bash", &cmd("ls"), false, false)), "ask");
    assert_eq!(
        kind(p.decide("write_file", &path("a"), false, false)),
        "ask"
    );
}

#[test]
fn deny_wins_over_allow_and_session_approval() {
    let p = policy(ApprovalMode::Ask, &["bash"], &["bash(rm *)"], &[]);
    assert_eq!(
        kind(p.decide("bash", &cmd("ls -la"), false, false)),
        "allow"
    );
    assert_eq!(
        kind(p.decide("bash", &cmd("rm -rf /"), false, false)),
        "deny"
    );
    assert_eq!(
        kind(p.decide("bash", &cmd("rm -rf /"), false, true)),
        "deny"
    );
    // A command a deny rule cannot be checked against asks even after a session approval.
    assert_eq!(kind(p.decide("bash", &cmd("rm $X"), false, false)), "deny");
    assert_eq!(
        kind(p.decide("bash", &cmd("$RM -rf /"), false, true)),
        "ask"
    );
}

type Case = (
    ApprovalMode,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static str,
    bool,
    bool,
    &'static str,
);

#[test]
fn table_of_modes_and_rules() {
    use ApprovalMode::*;
    let cases: &[Case] = &[
        // mode, allow, deny, ask, tool, read_only, session_approved, expected
        (ReadOnly, &["bash"], &[], &[], "bash", false, false, "deny"),
        (ReadOnly, &[], &[], &[], "grep", true, false, "allow"),
        (ReadOnly, &[], &["grep"], &[], "grep", true, false, "deny"),
        (AutoApprove, &[], &[], &[], "bash", false, false, "allow"),
        (
            AutoApprove,
            &[],
            &[],
            &["bash"],
            "bash",
            false,
            false,
            "ask",
        ),
        (
            AutoApprove,
            &[],
            &["bash"],
            &[],
            "bash",
            false,
            false,
            "deny",
        ),
        (Bypass, &[], &["bash"], &[], "bash", false, false, "allow"),
        (Ask, &[], &[], &[], "bash", false, true, "allow"),
        (
            Ask,
            &[],
            &[],
            &["read_file"],
            "read_file",
            true,
            false,
            "ask",
        ),
        (
            Ask,
            &["mcp__gh"],
            &[],
            &[],
            "mcp__gh__create",
            false,
            false,
            "allow",
        ),
        (
            Ask,
            &["mcp__gh__*"],
            &[],
            &[],
            "mcp__gh__x",
            false,
            false,
            "allow",
        ),
        (
            Ask,
            &["mcp__gh"],
            &[],
            &[],
            "mcp__ghx__y",
            false,
            false,
            "ask",
        ),
        (
            Ask,
            &[],
            &["mcp__gh"],
            &[],
            "mcp__gh__delete",
            false,
            true,
            "deny",
        ),
    ];
    for (i, (mode, allow, deny, ask, tool, ro, sess, want)) in cases.iter().enumerate() {
        let p = policy(*mode, allow, deny, ask);
        let subject = PermissionSubject::None;
        assert_eq!(
            kind(p.decide(tool, &subject, *ro, *sess)),
            *want,
            "case {i}"
        );
    }
}

#[test]
fn subject_globs_match_commands_and_paths() {
    let p = policy(
        ApprovalMode::Ask,
        &["bash(git status*)", "write_file(src/**)"],
        &[],
        &[],
    );
    assert_eq!(
        kind(p.decide("bash", &cmd("git status -s"), false, false)),
        "allow"
    );
    assert_eq!(
        kind(p.decide("bash", &cmd("git push"), false, false)),
        "ask"
    );
    assert_eq!(
        kind(p.decide("write_file", &path("src/a/b.rs"), false, false)),
        "allow"
    );
    assert_eq!(
        kind(p.decide("write_file", &path("docs/x.md"), false, false)),
        "ask"
    );
    let none = PermissionSubject::None;
    assert_eq!(kind(p.decide("write_file", &none, false, false)), "ask");
}

#[test]
fn unparseable_commands_ask_in_auto_approve_and_are_denied_read_only() {
    let broken = cmd("git status '");
    let auto = policy(ApprovalMode::AutoApprove, &[], &[], &[]);
    assert_eq!(kind(auto.decide("bash", &broken, false, false)), "ask");
    // Run-time values alone only ask when a rule needs checking.
    assert_eq!(
        kind(auto.decide("bash", &cmd("echo $((1+2))"), false, false)),
        "allow"
    );
    let read_only = policy(ApprovalMode::ReadOnly, &["bash"], &[], &[]);
    assert_eq!(
        kind(read_only.decide("bash", &broken, false, false)),
        "deny"
    );
}

#[test]
fn deny_reasons_name_the_rule_and_what_it_matched() {
    let p = policy(ApprovalMode::AutoApprove, &[], &["bash(rm -rf *)"], &[]);
    let Deny(reason) = p.decide(
        "bash",
        &cmd("git status; /bin/rm  -rf victim"),
        false,
        false,
    ) else {
        panic!("denied");
    };
    assert_eq!(
        reason,
        "bash is denied by the permission rule `bash(rm -rf *)` (it matches `rm -rf victim`)"
    );
}

#[test]
fn reading_tool_deny_rules_hide_paths_from_all_reading_tools() {
    let p = policy(
        ApprovalMode::Ask,
        &[],
        &["read_file(secrets/**)", "write_file(src/**)"],
        &[],
    );
    assert_eq!(p.rules.hidden().patterns(), ["secrets/**"]);
    assert_eq!(
        kind(p.decide("grep", &path("secrets"), true, false)),
        "deny"
    );
    assert_eq!(
        kind(p.decide("list_dir", &path("secrets/a"), true, false)),
        "deny"
    );
    assert_eq!(kind(p.decide("glob", &path("."), true, false)), "allow");
    // Write rules hide nothing, and hidden paths only concern reading tools.
    assert_eq!(kind(p.decide("grep", &path("src"), true, false)), "allow");
    assert_eq!(
        kind(p.decide("edit_file", &path("secrets/key"), false, true)),
        "allow"
    );
    let all = policy(ApprovalMode::Ask, &[], &["*(secrets/**)"], &[]);
    assert_eq!(all.rules.hidden().patterns(), ["secrets/**"]);
    let bypass = policy(ApprovalMode::Bypass, &[], &["read_file(secrets/**)"], &[]);
    assert_eq!(
        kind(bypass.decide("read_file", &path("secrets/k"), true, false)),
        "allow"
    );
}

#[test]
fn bad_rules_are_reported() {
    assert!(PermissionRules::parse(&["bash(ls".into()], &[], &[]).is_err());
    assert!(PermissionRules::parse(&["(x)".into()], &[], &[]).is_err());
    assert!(PermissionRules::parse(&[], &["read_file(a[)".into()], &[]).is_err());
    assert!("sideways".parse::<ApprovalMode>().is_err());
    assert_eq!(
        "read-only".parse::<ApprovalMode>(),
        Ok(ApprovalMode::ReadOnly)
    );
}

#[test]
fn confining_rules_refuse_other_calls_in_every_mode() {
    for mode in [
        ApprovalMode::AutoApprove,
        ApprovalMode::Bypass,
        ApprovalMode::Ask,
    ] {
        let p = PermissionPolicy {
            mode,
            rules: PermissionRules::parse(&[], &[], &[])
                .unwrap()
                .confined_to(&["bash(git *)".into()])
                .unwrap(),
        };
        assert_ne!(
            kind(p.decide("bash", &cmd("git status"), false, false)),
            "deny"
        );
        assert_eq!(
            kind(p.decide("bash", &cmd("rm -rf x"), false, true)),
            "deny"
        );
        // Every simple command of the line must be inside.
        assert_eq!(
            kind(p.decide("bash", &cmd("git status && rm -rf x"), false, true)),
            "deny"
        );
        assert_eq!(
            kind(p.decide("bash", &PermissionSubject::None, false, false)),
            "deny"
        );
        // Other tools are not confined.
        assert_ne!(kind(p.decide("read_file", &path("a"), true, false)), "deny");
        let Deny(why) = p.decide("bash", &cmd("ls"), false, false) else {
            panic!("not denied")
        };
        assert_eq!(why, "bash is limited for this agent to `bash(git *)`");
    }
    // Merged onto a parent's rules, both hold, and the parent's hidden paths stay hidden.
    let parent = PermissionRules::parse(
        &[],
        &["bash(git push*)".into(), "read_file(secret/**)".into()],
        &[],
    )
    .unwrap();
    let child = PermissionRules::parse(&[], &[], &[])
        .unwrap()
        .confined_to(&["bash(git *)".into()])
        .unwrap();
    let p = PermissionPolicy {
        mode: ApprovalMode::AutoApprove,
        rules: parent.merged(&child).unwrap(),
    };
    assert_eq!(
        kind(p.decide("bash", &cmd("git push x"), false, false)),
        "deny"
    );
    assert_eq!(
        kind(p.decide("bash", &cmd("git log"), false, false)),
        "allow"
    );
    assert_eq!(kind(p.decide("bash", &cmd("make"), false, false)), "deny");
    assert!(p.rules.hidden().hides(std::path::Path::new("secret/k")));
}

#[test]
fn url_rules_match_the_normalised_url_whole() {
    let url = |u: &str| PermissionSubject::Text(u.to_string());
    let p = policy(
        ApprovalMode::Ask,
        &["web_fetch(https://docs.rs/*)"],
        &["web_fetch(https://evil.example/*)"],
        &[],
    );
    let fetch = |u: &str| kind(p.decide("web_fetch", &url(u), false, false));
    assert_eq!(fetch("https://docs.rs/tokio/latest/tokio/"), "allow");
    assert_eq!(fetch("https://evil.example/a/b"), "deny");
    // Neither rule covers it: a mutating-looking call asks in the default mode.
    assert_eq!(fetch("https://other.example/"), "ask");
}

#[test]
fn a_tilde_word_with_a_quoted_character_is_asked_for_even_when_auto_approving() {
    // `~r\m` and `~/bi\n/rm` are read as words with run-time values (the splitter keeps
    // the backslash of a tilde word): a deny rule cannot tell whether they name `rm`, so
    // the line is asked for, and an allow rule does not let it run unasked.
    for line in ["~r\\m -rf /x", "~/bi\\n/rm -rf /x"] {
        for mode in [ApprovalMode::Ask, ApprovalMode::AutoApprove] {
            let p = policy(mode, &["bash"], &["bash(rm *)"], &[]);
            assert_eq!(
                kind(p.decide("bash", &cmd(line), false, true)),
                "ask",
                "{mode:?} {line}"
            );
        }
    }
    // Without the tilde the backslash is quote removal, and the deny rule names the command.
    let p = policy(ApprovalMode::AutoApprove, &["bash"], &["bash(rm *)"], &[]);
    assert_eq!(
        kind(p.decide("bash", &cmd("/bin/r\\m -rf /x"), false, true)),
        "deny"
    );
}

/// Lines hiding code in a construct the walker does not model, by construct class (payload
/// `touch /tmp/p`). Under allow rules naming every carrier command, none is allowed; under a
/// deny rule on `touch` in `auto-approve` mode, each asks or is denied.
const HIDING: &[(&str, &[&str])] = &[
    (
        "array subscripts in tests",
        &[
            "git status && [[ -v 'a[$(touch /tmp/p)]' ]]",
            "if [[ -v 'a[$(touch /tmp/p)]' ]]; then git status; fi",
            "! [[ -v 'a[$(touch /tmp/p)]' ]] || git status",
            "git status `[[ -v 'a[$(touch /tmp/p)]' ]]`",
            "git status | tail -1; test -v 'a[$(touch /tmp/p)]'",
        ],
    ),
    (
        "here-document bodies",
        &[
            "git status; cat <<EOF\n$\\\n(touch /tmp/p)\nEOF",
            "cat <<-EOF\n\t$\\\n(touch /tmp/p)\n\tEOF",
            "cat <<EOF\n$\\\n{a[$\\\n(touch /tmp/p)]}\nEOF",
        ],
    ),
    (
        "code on a shell's stdin or sourced",
        &[
            "bash <<< 'touch /tmp/p'",
            "echo 'touch /tmp/p' | bash",
            "bash -s <<EOF\ntouch /tmp/p\nEOF",
            ". <(echo 'touch /tmp/p')",
            "source /dev/stdin <<< 'touch /tmp/p'",
        ],
    ),
    (
        "names evaluated as arithmetic",
        &[
            "printf -v 'a[$(touch /tmp/p)]' x",
            "declare 'a[$(touch /tmp/p)]=1'",
            "read 'a[$(touch /tmp/p)]' <<< x",
            "let 'a[$(touch /tmp/p)]=1'",
            "unset 'a[$(touch /tmp/p)]'",
        ],
    ),
    (
        "prompt expansion and code variables",
        &[
            "PS4='$(touch /tmp/p)'; set -x; git status",
            "x='$(touch /tmp/p)'; echo ${x@P}",
            "x='a[$(touch /tmp/p)]'; echo ${!x}",
            "mapfile -C 'touch /tmp/p' -c 1 a <<< x",
            "PROMPT_COMMAND='touch /tmp/p' bash -i",
            "IFS=/ git status",
        ],
    ),
    (
        "programs running command strings",
        &[
            "git -c alias.x='!touch /tmp/p' x",
            "git x",
            "git config core.fsmonitor 'touch /tmp/p'",
            "awk 'BEGIN{system(\"touch /tmp/p\")}'",
            "sed 's|x|touch /tmp/p|e' f",
            "python3 -c 'open(\"/tmp/p\", \"w\")'",
            "perl -e 'open(F, \">/tmp/p\")'",
            "node -e 'require(\"fs\").writeFileSync(\"/tmp/p\", \"\")'",
            "echo 'touch /tmp/p' | xargs -0 bash -c",
        ],
    ),
];

/// Lines whose code is walked: a deny rule sees the command, an allow rule for the carrier
/// is the user's own choice.
const WALKED: &[&str] = &[
    "script -qc 'touch /tmp/p' /dev/null",
    "trap -- 'touch /tmp/p' EXIT",
    "bash -c $'touch\\x20/tmp/p'",
    "$'\\x74ouch' /tmp/p",
    "eval $'touch /tmp/p'",
    "env -S 'touch /tmp/p'",
    "git() { touch /tmp/p; }; git status",
    "alias git='touch /tmp/p'",
];

/// Allow rules naming every command the hiding lines are made of.
const CARRIERS: &[&str] = &[
    "bash(git *)",
    "bash(test *)",
    "bash(tail *)",
    "bash(cat *)",
    "bash(echo *)",
    "bash(bash *)",
    "bash(. *)",
    "bash(source *)",
    "bash(printf *)",
    "bash(declare *)",
    "bash(read *)",
    "bash(let *)",
    "bash(unset *)",
    "bash(PS4=*)",
    "bash(set *)",
    "bash(x=*)",
    "bash(mapfile *)",
    "bash(PROMPT_COMMAND=*)",
    "bash(IFS=*)",
    "bash(awk *)",
    "bash(sed *)",
    "bash(python3 *)",
    "bash(perl *)",
    "bash(node *)",
    "bash(xargs *)",
];

#[test]
fn code_the_walker_cannot_see_is_never_allowed_and_a_deny_rule_asks() {
    let allowing = policy(ApprovalMode::Ask, CARRIERS, &[], &[]);
    let denying = policy(ApprovalMode::AutoApprove, &[], &["bash(touch *)"], &[]);
    let mut failures = Vec::new();
    for (class, lines) in HIDING {
        for line in *lines {
            let allowed = kind(allowing.decide("bash", &cmd(line), false, false));
            let denied = kind(denying.decide("bash", &cmd(line), false, true));
            if allowed == "allow" || denied == "allow" {
                failures.push(format!("{class}: {line:?}: {allowed} / {denied}"));
            }
        }
    }
    for line in WALKED {
        let denied = kind(denying.decide("bash", &cmd(line), false, true));
        if denied == "allow" {
            failures.push(format!("walked: {line:?}: {denied}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ordinary_lines_stay_allowed() {
    let p = policy(
        ApprovalMode::Ask,
        &[
            "bash(git status*)",
            "bash(git diff *)",
            "bash(git log *)",
            "bash(cargo test*)",
            "bash(ls *)",
            "bash(head*)",
            "bash(npm run *)",
            "bash(sed -n *)",
            "bash(awk *)",
            "bash(python3 -m pytest*)",
        ],
        &["bash(rm *)"],
        &[],
    );
    for line in [
        "git status",
        "git status -s",
        "cargo test -p x",
        "ls -la | head",
        "npm run test",
        "git diff HEAD~1 -- src/",
        "git log --oneline -5 | head -3",
        "sed -n '1,5p' Cargo.toml",
        "awk '{print $1}' Cargo.toml",
        "python3 -m pytest -q",
        "cargo test 2>&1 | head -50",
    ] {
        assert_eq!(
            kind(p.decide("bash", &cmd(line), false, false)),
            "allow",
            "{line:?}"
        );
    }
}
