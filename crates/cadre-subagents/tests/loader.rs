//! Definition files in every supported format, and every way a file can be broken.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod defs_support;

use cadre_subagents::{DefinitionSource, RemoteProtocol, WorkspaceMode};
use defs_support::{Ws, error_lines, warnings_of};
use std::path::PathBuf;

const CADRE_STYLE: &str = "---
name: reviewer
description: |
  Reviews a change for bugs.
  Use after edits.
tools:
  - read_file
  - grep
  - Glob
disallowed_tools: [bash]
model: anthropic:claude-sonnet-4-5
max_turns: 12
max_tokens: 50000
timeout_seconds: 300
skills: [style-guide]
can_delegate: true
workspace:
  mode: isolated
---

You review code.

---

The line above stays in the prompt.
";

#[test]
fn cadre_format_with_yaml_lists_and_block_scalars() {
    let ws = Ws::new();
    let path = ws.write(".cadre/agents/reviewer.md", CADRE_STYLE);
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    let d = reg.get("reviewer").unwrap();
    assert_eq!(
        d.description,
        "Reviews a change for bugs.\nUse after edits."
    );
    assert_eq!(
        d.tools.as_deref(),
        Some(&["read_file".to_string(), "grep".into(), "glob".into()][..])
    );
    assert_eq!(d.disallowed_tools, ["bash"]);
    assert_eq!(d.model.as_deref(), Some("anthropic:claude-sonnet-4-5"));
    assert_eq!(d.max_turns, Some(12));
    assert_eq!(d.max_tokens, Some(50000));
    assert_eq!(d.wall_clock_secs, Some(300));
    assert_eq!(d.skills, ["style-guide"]);
    assert!(d.can_delegate);
    assert_eq!(d.workspace.mode, WorkspaceMode::Isolated);
    assert_eq!(d.workspace.path, None);
    assert_eq!(
        d.prompt,
        "You review code.\n\n---\n\nThe line above stays in the prompt."
    );
    assert_eq!(d.source, DefinitionSource::File(path));
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn sandbox_and_isolation_keys() {
    let ws = Ws::new();
    ws.write(
        ".cadre/agents/builder.md",
        "---\nname: builder\ndescription: builds\nsandbox: {network: true, writable_roots: [~/.cache]}\nisolation: worktree\non_orphan: resume\n---\nBuild.\n",
    );
    ws.write(
        ".claude/agents/reader.md",
        "---\nname: reader\ndescription: reads\nsandbox: read-only\n---\nRead.\n",
    );
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    let b = reg.get("builder").unwrap();
    let spec = b.sandbox.as_ref().unwrap();
    assert_eq!(spec.mode, cadre_sandbox::SandboxMode::WorkspaceWrite);
    assert!(spec.network);
    assert_eq!(spec.writable_roots, ["~/.cache"]);
    assert_eq!(b.isolation, Some(cadre_subagents::Isolation::Worktree));
    assert_eq!(b.on_orphan, Some(cadre_store::OrphanPolicy::Resume));
    assert!(b.warnings.is_empty(), "{:?}", b.warnings);
    let r = reg.get("reader").unwrap();
    assert_eq!(
        r.sandbox,
        Some(cadre_sandbox::SandboxSpec::mode(
            cadre_sandbox::SandboxMode::ReadOnly
        ))
    );
    assert_eq!(r.isolation, None);
    assert_eq!(r.on_orphan, None);
}

#[test]
fn claude_format_with_comma_lists_aliases_and_ignored_keys() {
    let ws = Ws::new();
    ws.write(
        ".claude/agents/explorer.md",
        "---\nname: explorer\ndescription: Finds code fast.\ntools: Read, Grep, Glob, LS, NotebookEdit\ndisallowedTools: Write, MultiEdit\nmodel: sonnet\nmaxTurns: 7\ncolor: cyan\n---\nExplore.\n",
    );
    let reg = ws.registry_with(None, &[("sonnet", "anthropic:claude-sonnet-4-5")]);
    let d = reg.get("explorer").unwrap();
    assert_eq!(
        d.tools.as_deref(),
        Some(
            &[
                "read_file".to_string(),
                "grep".into(),
                "glob".into(),
                "list_dir".into()
            ][..]
        )
    );
    assert_eq!(d.disallowed_tools, ["write_file", "edit_file"]);
    assert_eq!(d.model.as_deref(), Some("anthropic:claude-sonnet-4-5"));
    assert_eq!(d.max_turns, Some(7));
    // Claude Code agents work on the project unless they say otherwise.
    assert_eq!(d.workspace.mode, WorkspaceMode::Shared);
    // `color` is silent; NotebookEdit is dropped with a warning.
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(d.warnings[0].contains("NotebookEdit"), "{:?}", d.warnings);
}

#[test]
fn all_dropped_tools_mean_no_tools_never_inherit() {
    let ws = Ws::new();
    ws.write(
        ".claude/agents/web.md",
        "---\nname: web\ndescription: Web research.\ntools: WebSearch, NotebookEdit, KillBash\n---\n",
    );
    ws.write(
        ".claude/agents/all.md",
        "---\nname: all\ndescription: Everything.\ntools: '*'\n---\n",
    );
    ws.write(
        ".claude/agents/none.md",
        "---\nname: none\ndescription: Nothing.\ntools: []\n---\n",
    );
    ws.write(
        ".claude/agents/absent.md",
        "---\nname: absent\ndescription: Inherits.\n---\n",
    );
    ws.write(
        ".claude/agents/blank.md",
        "---\nname: blank\ndescription: Empty string.\ntools: ''\n---\n",
    );
    ws.write(
        ".claude/agents/nulltools.md",
        "---\nname: nulltools\ndescription: Null.\ntools:\n---\n",
    );
    let reg = ws.registry();
    assert_eq!(reg.get("web").unwrap().tools, Some(vec![]));
    assert_eq!(warnings_of(&reg, "web").len(), 3);
    assert_eq!(reg.get("all").unwrap().tools, None);
    assert_eq!(reg.get("none").unwrap().tools, Some(vec![]));
    assert_eq!(reg.get("absent").unwrap().tools, None);
    assert_eq!(reg.get("blank").unwrap().tools, Some(vec![]));
    assert_eq!(reg.get("nulltools").unwrap().tools, None);
}

#[test]
fn models_inherit_alias_and_specs() {
    let ws = Ws::new();
    for (name, model) in [
        ("a", "inherit"),
        ("b", "opus"),
        ("c", "haiku"),
        ("d", "openai/gpt-4o"),
        ("e", "ollama:qwen3:8b"),
        ("f", "gpt-5"),
        ("g", "Sonnet"),
        ("h", "claude-sonnet-4-20250514"),
    ] {
        ws.write(
            &format!(".cadre/agents/{name}.md"),
            &format!("---\nname: {name}\ndescription: x\nmodel: {model}\n---\n"),
        );
    }
    let reg = ws.registry_with(None, &[("opus", "anthropic:claude-opus-4-1")]);
    let model = |n: &str| reg.get(n).unwrap().model.clone();
    assert_eq!(model("a"), None);
    assert_eq!(model("b").as_deref(), Some("anthropic:claude-opus-4-1"));
    // Claude Code's aliases are built in, in any case; `[models.aliases]` wins over them.
    assert_eq!(model("c").as_deref(), Some("anthropic:claude-haiku-4-5"));
    assert_eq!(model("g").as_deref(), Some("anthropic:claude-sonnet-4-5"));
    // A full Claude id means Anthropic.
    assert_eq!(
        model("h").as_deref(),
        Some("anthropic:claude-sonnet-4-20250514")
    );
    assert!(warnings_of(&reg, "c").is_empty());
    assert_eq!(model("d").as_deref(), Some("openai/gpt-4o"));
    assert!(warnings_of(&reg, "d").is_empty());
    assert_eq!(model("e").as_deref(), Some("ollama:qwen3:8b"));
    // A bare word that is no alias is kept, with a warning.
    assert_eq!(model("f").as_deref(), Some("gpt-5"));
    assert!(warnings_of(&reg, "f")[0].contains("not a known alias"));
}

#[test]
fn crlf_and_bom_files_load() {
    let ws = Ws::new();
    let text = "---\r\nname: crlf\r\ndescription: >\r\n  Folded\r\n  text\r\ntools: read_file, grep\r\n---\r\nLine one\r\n---\r\nLine two\r\n";
    ws.write(".cadre/agents/crlf.md", text);
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(text.replace("crlf", "bom").as_bytes());
    ws.write_bytes(".cadre/agents/bom.md", &bom);
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    for name in ["crlf", "bom"] {
        let d = reg.get(name).unwrap();
        assert_eq!(d.description, "Folded text");
        assert_eq!(
            d.tools.as_deref(),
            Some(&["read_file".to_string(), "grep".into()][..])
        );
        assert_eq!(d.prompt, "Line one\n---\nLine two");
    }
}

#[test]
fn java_seed_format_uses_the_file_stem_and_isolated_default() {
    let ws = Ws::new();
    ws.write(
        "subagents/code-review.md",
        "---\ndescription: Code review expert\nworkspace:\n  mode: isolated\n  path: ./defs/reviewer\nmodel: openai:gpt-4o-mini\nmaxIters: 8\ntools: [read_file, grep_files]\n---\n",
    );
    ws.write(
        "subagents/inline.md",
        "---\nname: other-name\ndescription: Inline\n---\nYou help.\n",
    );
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    let d = reg.get("code-review").unwrap();
    assert_eq!(d.workspace.mode, WorkspaceMode::Isolated);
    assert_eq!(d.workspace.path, Some(PathBuf::from("defs/reviewer")));
    assert_eq!(d.max_turns, Some(8));
    assert_eq!(
        d.tools.as_deref(),
        Some(&["read_file".to_string(), "grep".into()][..])
    );
    assert!(d.prompt.is_empty());
    let d = reg.get("inline").unwrap();
    assert!(reg.get("other-name").is_none());
    assert_eq!(d.workspace.mode, WorkspaceMode::Isolated);
    assert_eq!(d.prompt, "You help.");
    assert_eq!(d.warnings.len(), 1);
    assert!(d.warnings[0].contains("other-name"));
}

#[test]
fn harness9_format_loads_shared() {
    let ws = Ws::new();
    ws.write(
        ".harness9/agents/security-auditor.md",
        "---\nname: security-auditor\ndescription: Audits security.\ntools: read_file, bash\ndisallowed_tools: write_file, edit_file\nmodel: openai/gpt-4o\nmax_turns: 30\nskills: security-review\n---\n\nYou audit.\n",
    );
    let reg = ws.registry();
    let d = reg.get("security-auditor").unwrap();
    assert_eq!(d.workspace.mode, WorkspaceMode::Shared);
    assert_eq!(d.skills, ["security-review"]);
    assert_eq!(d.disallowed_tools, ["write_file", "edit_file"]);
    assert_eq!(d.max_turns, Some(30));
    assert_eq!(d.prompt, "You audit.");
}

#[test]
fn remote_definitions() {
    let ws = Ws::new();
    ws.write(
        ".cadre/agents/remote.md",
        "---\nname: remote\ndescription: Remote researcher\nurl: http://node-b:8080\nheaders:\n  Authorization: Bearer ${TOKEN}\nprotocol: a2a\n---\n",
    );
    let reg = ws.registry();
    let r = reg.get("remote").unwrap().remote.clone().unwrap();
    assert_eq!(r.url, "http://node-b:8080");
    assert_eq!(r.headers["Authorization"], "Bearer ${TOKEN}");
    assert_eq!(r.protocol, RemoteProtocol::A2a);
}

#[test]
fn unknown_keys_warn_but_load() {
    let ws = Ws::new();
    ws.write(
        ".cadre/agents/x.md",
        "---\nname: x\ndescription: d\nmodle: opus\nmemory: project\nworkspace: {mode: shared, size: 3}\n---\n",
    );
    let reg = ws.registry();
    let w = warnings_of(&reg, "x");
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].contains("modle"));
    assert!(w[1].contains("memory"));
    assert!(w[2].contains("size"));
    assert_eq!(reg.warnings().len(), 3);
    assert_eq!(reg.warnings()[0].agent, "x");
}

/// Each broken file is refused with its reason while the good file beside it loads.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one end-to-end scenario read top to bottom: its steps share what the earlier ones built"
)]
fn broken_files_are_reported_and_the_rest_load() {
    let ws = Ws::new();
    ws.write(
        ".cadre/agents/good.md",
        "---\nname: good\ndescription: fine\n---\nok\n",
    );
    let cases: &[(&str, &str, &str)] = &[
        ("no-front", "name: a\ndescription: b\n", "no front matter"),
        ("unclosed", "---\nname: a\ndescription: b\n", "not closed"),
        (
            "bad-yaml",
            "---\nname: [a\ndescription: b\n---\n",
            "invalid YAML",
        ),
        ("not-map", "---\n- a\n- b\n---\n", "not a mapping"),
        (
            "no-desc",
            "---\nname: a\n---\nbody\n",
            "missing `description`",
        ),
        (
            "empty-desc",
            "---\nname: a\ndescription: '  '\n---\n",
            "`description` is empty",
        ),
        (
            "no:name",
            "---\ndescription: b\n---\n",
            "missing `name`, and the file name",
        ),
        (
            "bad-name",
            "---\nname: Bad Name\ndescription: b\n---\n",
            "not a valid agent name",
        ),
        (
            "slash-name",
            "---\nname: a/b\ndescription: b\n---\n",
            "not a valid agent name",
        ),
        (
            "dots-name",
            "---\nname: '..'\ndescription: b\n---\n",
            "not a valid agent name",
        ),
        (
            "turns-text",
            "---\nname: a\ndescription: b\nmax_turns: ten\n---\n",
            "positive integer",
        ),
        (
            "turns-zero",
            "---\nname: a\ndescription: b\nmaxTurns: 0\n---\n",
            "positive integer",
        ),
        (
            "turns-twice",
            "---\nname: a\ndescription: b\nmaxTurns: 3\nmax_turns: 4\n---\n",
            "both",
        ),
        (
            "url-ws",
            "---\nname: a\ndescription: b\nurl: http://x\nworkspace: {mode: shared}\n---\n",
            "`url` cannot be combined with `workspace`",
        ),
        (
            "url-body",
            "---\nname: a\ndescription: b\nurl: http://x\n---\nA body.\n",
            "`url` cannot be combined with a prompt body",
        ),
        (
            "url-scheme",
            "---\nname: a\ndescription: b\nurl: ftp://x\n---\n",
            "http",
        ),
        (
            "path-body",
            "---\nname: a\ndescription: b\nworkspace: {path: defs/a}\n---\nA body.\n",
            "`workspace.path` cannot be combined",
        ),
        (
            "path-escape",
            "---\nname: a\ndescription: b\nworkspace: {path: ../../etc}\n---\n",
            "escapes the main workspace",
        ),
        (
            "path-abs",
            "---\nname: a\ndescription: b\nworkspace: {path: /etc}\n---\n",
            "escapes the main workspace",
        ),
        (
            "bad-mode",
            "---\nname: a\ndescription: b\nworkspace: {mode: sandboxed}\n---\n",
            "unknown workspace mode",
        ),
        (
            "bad-proto",
            "---\nname: a\ndescription: b\nurl: http://x\nprotocol: grpc\n---\n",
            "unknown protocol",
        ),
        (
            "bad-bool",
            "---\nname: a\ndescription: b\ncan_delegate: maybe\n---\n",
            "true or false",
        ),
        (
            "bad-tools",
            "---\nname: a\ndescription: b\ntools: [[a]]\n---\n",
            "`tools` entries must be names",
        ),
        (
            "bad-sandbox",
            "---\nname: a\ndescription: b\nsandbox: sideways\n---\n",
            "unknown sandbox mode `sideways`",
        ),
        (
            "sandbox-typo",
            "---\nname: a\ndescription: b\nsandbox: {mode: read-only, netwrk: true}\n---\n",
            "`sandbox`",
        ),
        (
            "bad-isolation",
            "---\nname: a\ndescription: b\nisolation: container\n---\n",
            "unknown isolation `container`",
        ),
        (
            "bad-orphan",
            "---\nname: a\ndescription: b\non_orphan: retry\n---\n",
            "expected `fail` or `resume`, found `retry`",
        ),
    ];
    for (file, text, _) in cases {
        ws.write(&format!(".cadre/agents/{file}.md"), text);
    }
    ws.write_bytes(".cadre/agents/binary.md", &[0xff, 0xfe, 0x00]);
    let reg = ws.registry();
    assert!(reg.get("good").is_some());
    assert_eq!(reg.names(), ["general-purpose", "good"]);
    let errors = error_lines(&reg);
    assert_eq!(errors.len(), cases.len() + 1, "{errors:#?}");
    for (file, _, reason) in cases {
        let line = errors
            .iter()
            .find(|l| l.starts_with(&format!("{file}.md: ")))
            .unwrap_or_else(|| panic!("no error for {file}: {errors:#?}"));
        assert!(
            line.contains(reason),
            "{file}: expected {reason:?} in {line:?}"
        );
    }
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with("binary.md: not valid UTF-8"))
    );
    // The error's Display names the full path.
    let shown = reg.errors()[0].to_string();
    assert!(shown.contains(".cadre/agents/"), "{shown}");
}

#[test]
fn subagents_stem_must_be_a_valid_id() {
    let ws = Ws::new();
    ws.write("subagents/Bad Name.md", "---\ndescription: b\n---\n");
    ws.write("subagents/Good_Name.md", "---\ndescription: b\n---\n");
    let reg = ws.registry();
    assert_eq!(reg.errors().len(), 1);
    assert!(reg.errors()[0].reason.contains("file name"));
    assert!(reg.get("good_name").is_some(), "ids are lower-cased");
}

#[test]
fn only_markdown_files_at_the_first_level_load() {
    let ws = Ws::new();
    ws.write(".cadre/agents/a.md", "---\nname: a\ndescription: b\n---\n");
    ws.write(".cadre/agents/notes.txt", "not a definition");
    ws.write(
        ".cadre/agents/nested/b.md",
        "---\nname: b\ndescription: b\n---\n",
    );
    ws.write(
        ".cadre/agents/a/workspace/c.md",
        "---\nname: c\ndescription: c\n---\n",
    );
    let reg = ws.registry();
    assert_eq!(reg.names(), ["a", "general-purpose"]);
    assert!(reg.errors().is_empty());
}

#[test]
fn workspace_path_inside_through_absolute_path_is_fine() {
    let ws = Ws::new();
    let abs = ws.root().join("defs/x");
    ws.write(
        ".cadre/agents/x.md",
        &format!(
            "---\nname: x\ndescription: b\nworkspace:\n  path: {}\n---\n",
            abs.display()
        ),
    );
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    assert_eq!(
        reg.get("x").unwrap().workspace.path,
        Some(PathBuf::from("defs/x"))
    );
}

#[cfg(unix)]
#[test]
fn workspace_path_through_a_symlink_out_is_refused() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.root().join("link")).unwrap();
    ws.write(
        ".cadre/agents/x.md",
        "---\nname: x\ndescription: b\nworkspace: {path: link/defs}\n---\n",
    );
    std::fs::create_dir_all(outside.path().join("defs")).unwrap();
    let reg = ws.registry();
    assert!(reg.get("x").is_none());
    assert!(
        reg.errors()[0].reason.contains("symlink"),
        "{:?}",
        reg.errors()
    );
}

#[test]
fn claude_generated_descriptions_with_colons_load_with_a_warning() {
    let ws = Ws::new();
    ws.write(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Use this agent after a change. Examples: <example>Context: the user edited a file.\\nuser: \"done\"\\nassistant: \"reviewing\"</example>\nmodel: inherit\ncolor: red\n---\nReview.\n",
    );
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    let d = reg.get("reviewer").unwrap();
    assert!(
        d.description
            .starts_with("Use this agent after a change. Examples: <example>Context:")
    );
    assert!(d.description.ends_with("</example>"), "{}", d.description);
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    assert!(d.warnings[0].contains("`description`"));
}

#[test]
fn duplicate_keys_are_errors_except_cosmetic_ones() {
    let ws = Ws::new();
    ws.write(
        ".cadre/agents/dup.md",
        "---\nname: a\nname: b\ndescription: d\n---\n",
    );
    ws.write(
        ".claude/agents/colors.md",
        "---\nname: colors\ncolor: red\ndescription: d\ncolor: blue\n---\n",
    );
    let reg = ws.registry();
    assert_eq!(reg.errors().len(), 1, "{:?}", reg.names());
    assert!(
        reg.errors()[0]
            .reason
            .contains("`name` is given more than once"),
        "{:?}",
        reg.errors()
    );
    assert_eq!(
        warnings_of(&reg, "colors"),
        ["`color` is given more than once; the last value is used"]
    );
}
