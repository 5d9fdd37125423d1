use super::*;

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

const RM_GUARD: &str = r#"{"hooks": {"PreToolUse": [
    {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 5}]}
]}}"#;

#[test]
fn settings_files_and_config_tables_merge_in_order() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let ws = d.path().join("ws");
    write(&home, ".claude/settings.json", RM_GUARD);
    write(
        &ws,
        ".claude/settings.json",
        r#"{"permissions": {"allow": []}, "hooks": {"PostToolUse": [
            {"hooks": [{"type": "command", "command": "log.sh"}]}]}}"#,
    );
    write(
        &ws,
        ".claude/settings.local.json",
        r#"{"hooks": {"Stop": [{"matcher": "", "hooks": [{"command": "stop.sh"}]}]}}"#,
    );
    let toml = write(
        &ws,
        ".cadre/config.toml",
        "model = \"x\"\n[[hooks.PreToolUse]]\nmatcher = \"write_file|edit_file\"\n\
         [[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"fmt.sh\"\ntimeout = 2\n",
    );
    let sources = standard_sources(Some(&home), &ws, &[toml]);
    let (set, warnings) = HookSet::load(&sources);
    assert!(warnings.is_empty(), "{warnings:?}");
    let listed: Vec<(HookEvent, &str, String)> = set
        .entries()
        .iter()
        .map(|e| (e.event, e.matcher_text.as_str(), e.handler.describe()))
        .collect();
    assert_eq!(
        listed,
        vec![
            (HookEvent::PreToolUse, "Bash", "./guard.sh".to_string()),
            (HookEvent::PostToolUse, "", "log.sh".to_string()),
            (HookEvent::Stop, "", "stop.sh".to_string()),
            (
                HookEvent::PreToolUse,
                "write_file|edit_file",
                "fmt.sh".to_string()
            ),
        ]
    );
    assert!(
        set.entries()[0]
            .source
            .ends_with("home/.claude/settings.json")
    );
    assert_eq!(
        set.entries()[0].handler.timeout,
        Some(Duration::from_secs(5))
    );
    // Tool events match cadre's and Claude's spellings.
    let bash = super::super::matcher::tool_spellings("bash");
    assert_eq!(set.matching(HookEvent::PreToolUse, &bash).len(), 1);
    let edit = super::super::matcher::tool_spellings("edit_file");
    let hit = set.matching(HookEvent::PreToolUse, &edit);
    assert_eq!(hit.len(), 1);
    assert_eq!(hit[0].describe(), "fmt.sh");
    assert_eq!(set.matching(HookEvent::PostToolUse, &edit).len(), 1);
}

#[test]
fn identical_handlers_run_once() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.json", RM_GUARD);
    let b = write(d.path(), "b.json", RM_GUARD);
    // A second group that also matches `Bash`, with the same command.
    let c = write(
        d.path(),
        "c.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash|Write", "hooks": [
            {"type": "command", "command": "./guard.sh", "timeout": 5}]}]}}"#,
    );
    let (set, w) = HookSet::load(&[
        HookSource::Json(a),
        HookSource::Json(b),
        HookSource::Json(c),
    ]);
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(
        set.entries().len(),
        2,
        "the same file content twice is one entry"
    );
    assert_eq!(set.matching(HookEvent::PreToolUse, &["Bash"]).len(), 1);
}

#[test]
fn disable_all_hooks_turns_everything_off() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.json", RM_GUARD);
    let b = write(d.path(), "b.json", r#"{"disableAllHooks": true}"#);
    let (set, _) = HookSet::load(&[HookSource::Json(a.clone()), HookSource::Json(b)]);
    assert!(set.is_disabled() && set.is_empty());
    assert_eq!(set.entries().len(), 1, "still listed");
    assert!(set.matching(HookEvent::PreToolUse, &["Bash"]).is_empty());
    let t = write(d.path(), "c.toml", "[hooks]\ndisable_all = true\n");
    let (set, w) = HookSet::load(&[HookSource::Json(a), HookSource::Toml(t)]);
    assert!(w.is_empty(), "{w:?}");
    assert!(set.is_disabled());
}

#[test]
fn broken_files_and_groups_are_warnings_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let bad_json = write(d.path(), ".claude/settings.json", "{\"hooks\": {,,");
    let bad_toml = write(d.path(), "config.toml", "[[hooks.Stop]\n");
    let odd = write(
        d.path(),
        "odd.json",
        r#"{"hooks": {
            "PreTooluse": [],
            "Stop": [{"matcher": "(", "hooks": [{"command": "x"}]},
                     {"hooks": [{"type": "prompt", "prompt": "judge"}]},
                     {"hooks": [{"type": "command"}]},
                     {"hooks": [{"type": "http", "url": "file:///etc/passwd"}]},
                     {"hooks": [{"command": "ok.sh", "timeout": -1}]},
                     {"hooks": [{"command": "kept.sh"}]}],
            "PostToolUse": "rm -rf /"
        }}"#,
    );
    let dir_not_file = d.path().join("dir.json");
    std::fs::create_dir_all(&dir_not_file).unwrap();
    let missing = d.path().join("missing.json");
    let (set, w) = HookSet::load(&[
        HookSource::Json(bad_json.clone()),
        HookSource::Toml(bad_toml.clone()),
        HookSource::Json(odd),
        HookSource::Json(dir_not_file.clone()),
        HookSource::Json(missing),
    ]);
    let joined = w.join("\n");
    assert!(joined.contains(&bad_json.display().to_string()), "{joined}");
    assert!(joined.contains(&bad_toml.display().to_string()), "{joined}");
    assert!(
        joined.contains(&dir_not_file.display().to_string()),
        "{joined}"
    );
    assert!(
        joined.contains("unknown hook event `PreTooluse`"),
        "{joined}"
    );
    assert!(joined.contains("invalid matcher"), "{joined}");
    assert!(joined.contains("`prompt` is not supported"), "{joined}");
    assert!(joined.contains("without a `command`"), "{joined}");
    assert!(joined.contains("not an http(s) URL"), "{joined}");
    assert!(joined.contains("positive number"), "{joined}");
    assert!(
        joined.contains("hooks.PostToolUse is not a list"),
        "{joined}"
    );
    assert!(
        !joined.contains("missing.json"),
        "a missing file is fine: {joined}"
    );
    let kept: Vec<String> = set.entries().iter().map(|e| e.handler.describe()).collect();
    assert_eq!(kept, vec!["kept.sh"]);
}

#[test]
fn exec_form_and_http_handlers_parse() {
    let mut set = HookSet::default();
    let mut w = Vec::new();
    let doc: Value = serde_json::from_str(
        r#"{"hooks": {"Notification": [{"hooks": [
            {"type": "command", "command": "/usr/bin/notify-send", "args": ["cadre", "$(id)"]},
            {"type": "http", "url": "http://127.0.0.1:9/hook", "headers": {"X-A": "b"}}
        ]}]}}"#,
    )
    .unwrap();
    set.add_value("test", &doc, &mut w);
    assert!(w.is_empty(), "{w:?}");
    let kinds: Vec<&HandlerKind> = set.entries().iter().map(|e| &e.handler.kind).collect();
    assert_eq!(
        kinds[0],
        &HandlerKind::Command {
            command: "/usr/bin/notify-send".into(),
            args: vec!["cadre".into(), "$(id)".into()]
        }
    );
    assert!(matches!(kinds[1], HandlerKind::Http { headers, .. } if headers.len() == 1));
}
