//! The permission-rule matcher: rules and subjects from arbitrary text never panic, and the
//! decisions keep their promises: `bypass` allows, a bare deny rule denies, and a deny rule
//! spelled exactly like one of a line's simple commands denies that line.
//!
//! Input: lines. The first line picks the mode and the subject kind (its first two bytes);
//! lines starting with `+`, `-` or `?` are allow, deny and ask rules; the last line is the
//! subject (a command, or a workspace-relative path).
#![no_main]

use cadre_engine::{ApprovalMode, PermissionPolicy, PermissionRules, PolicyDecision};
use cadre_tools::PermissionSubject;
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;

const MODES: [ApprovalMode; 4] = [
    ApprovalMode::Ask,
    ApprovalMode::AutoApprove,
    ApprovalMode::ReadOnly,
    ApprovalMode::Bypass,
];
const TOOLS: [(&str, bool); 4] = [
    ("bash", false),
    ("read_file", true),
    ("write_file", false),
    ("mcp__github__create_issue", false),
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines: Vec<&str> = text.split('\n').collect();
    let header = lines.remove(0).as_bytes();
    let subject_text = lines.pop().unwrap_or("");
    let mode = MODES[usize::from(header.first().copied().unwrap_or(0)) % MODES.len()];
    let (tool, read_only) = TOOLS[usize::from(header.get(1).copied().unwrap_or(0)) % TOOLS.len()];
    let (mut allow, mut deny, mut ask) = (Vec::new(), Vec::new(), Vec::new());
    for l in &lines {
        let rule = l.get(1..).unwrap_or("").to_string();
        match l.as_bytes().first() {
            Some(b'+') => allow.push(rule),
            Some(b'-') => deny.push(rule),
            Some(b'?') => ask.push(rule),
            _ => {}
        }
    }
    let Ok(rules) = PermissionRules::parse(&allow, &deny, &ask) else {
        return;
    };
    let subject = if tool == "bash" {
        PermissionSubject::command(subject_text)
    } else {
        PermissionSubject::Path(PathBuf::from(subject_text))
    };
    let policy = PermissionPolicy { mode, rules };
    let decision = policy.decide(tool, &subject, read_only, header.get(2) == Some(&b's'));
    if mode == ApprovalMode::Bypass {
        assert_eq!(decision, PolicyDecision::Allow);
        return;
    }

    // A bare deny rule for the tool denies every call of it.
    let mut denied = deny.clone();
    denied.push(tool.to_string());
    let strict = PermissionPolicy {
        mode,
        rules: PermissionRules::parse(&allow, &denied, &ask).unwrap_or_else(|e| panic!("{e}")),
    };
    assert!(matches!(
        strict.decide(tool, &subject, read_only, true),
        PolicyDecision::Deny(_)
    ));

    // A deny rule naming one of the line's commands literally denies the line.
    if let PermissionSubject::Command(line) = &subject
        && let Some(cmd) = line.all_commands().next()
    {
        let spelled = cmd.spellings().last().map(|s| s.text.clone()).unwrap_or_default();
        // A rule's pattern reads `\` as an escape (as globs do on Unix) and `globset::escape`
        // leaves backslashes alone: double them to name a spelling that keeps one (a tilde
        // word such as `~ca\go`).
        let literal = format!(
            "bash({})",
            globset::escape(&spelled.replace('\\', "\\\\"))
        );
        let mut deny = deny.clone();
        deny.push(literal);
        if let Ok(rules) = PermissionRules::parse(&allow, &deny, &ask) {
            let p = PermissionPolicy { mode, rules };
            assert!(
                matches!(p.decide(tool, &subject, read_only, true), PolicyDecision::Deny(_)),
                "deny rule for {spelled:?} did not deny {subject_text:?}"
            );
        }
    }
});
