//! `cadre agents list | show | check` on the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    for var in [
        "CADRE_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

/// [`cadre`] with an Anthropic key, so `sonnet` can reach Anthropic.
fn cadre_with_anthropic(ws: &Path) -> Command {
    let mut cmd = cadre(ws);
    cmd.env("ANTHROPIC_API_KEY", "sk-ant-test");
    cmd
}

fn write(ws: &Path, rel: &str, text: &str) {
    let path = ws.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(
        ws,
        ".cadre/config.toml",
        "model = \"openai:gpt-main\"\n[models.aliases]\nsonnet = \"anthropic:claude-sonnet-4-5\"\n",
    );
    write(
        ws,
        ".claude/agents/explorer.md",
        "---\nname: explorer\ndescription: Finds code.\ntools: Read, Grep, Glob, NotebookEdit\nmodel: sonnet\n---\nExplore.\n",
    );
    write(
        ws,
        ".cadre/agents/editor.md",
        "---\nname: editor\ndescription: Edits.\ndisallowed_tools: [bash, task]\ncan_delegate: true\nskills: [missing-skill]\n---\nEdit carefully.\n",
    );
    write(
        ws,
        "subagents/reviewer.md",
        "---\ndescription: Reviews.\nmaxIters: 4\ntools: [read_file, grep_files]\n---\nReview.\n",
    );
    dir
}

fn json_list(ws: &Path) -> Vec<serde_json::Value> {
    let out = cadre_with_anthropic(ws)
        .args(["agents", "list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn list_json_has_the_contract_shape() {
    let dir = workspace();
    let list = json_list(dir.path());
    let names: Vec<&str> = list.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["editor", "explorer", "general-purpose", "reviewer"]);
    for e in &list {
        for key in ["name", "description", "source", "tools", "model"] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
        assert!(e["tools"].is_array());
    }
    let by = |n: &str| list.iter().find(|e| e["name"] == n).unwrap().clone();
    let explorer = by("explorer");
    assert_eq!(explorer["source"], ".claude/agents/explorer.md");
    assert_eq!(explorer["model"], "anthropic:claude-sonnet-4-5");
    assert_eq!(
        explorer["tools"],
        serde_json::json!(["read_file", "glob", "grep"])
    );
    let editor = by("editor");
    assert_eq!(
        editor["model"], "openai:gpt-main",
        "inherit resolves to the main model"
    );
    assert_eq!(
        editor["tools"],
        serde_json::json!([
            "read_file",
            "write_file",
            "edit_file",
            "glob",
            "grep",
            "list_dir",
            "todo_write",
            "web_fetch"
        ])
    );
    let gp = by("general-purpose");
    assert_eq!(gp["source"], "builtin");
    assert_eq!(gp["tools"].as_array().unwrap().len(), 9);
    let reviewer = by("reviewer");
    assert_eq!(reviewer["source"], "subagents/reviewer.md");
    assert_eq!(reviewer["tools"], serde_json::json!(["read_file", "grep"]));
}

#[test]
fn list_table_prints_warnings_on_stderr_and_succeeds() {
    let dir = workspace();
    write(dir.path(), ".cadre/agents/broken.md", "---\nname: broken\n");
    let out = cadre_with_anthropic(dir.path())
        .args(["agents", "list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stdout.starts_with("NAME"), "{stdout}");
    let explorer = stdout.lines().find(|l| l.starts_with("explorer ")).unwrap();
    assert!(
        explorer.contains(".claude/agents/explorer.md"),
        "{explorer}"
    );
    assert!(
        explorer.contains("anthropic:claude-sonnet-4-5"),
        "{explorer}"
    );
    assert!(explorer.contains("read_file, glob, grep"), "{explorer}");
    let gp = stdout
        .lines()
        .find(|l| l.starts_with("general-purpose"))
        .unwrap();
    // The same resolved model as `list --json` shows.
    assert!(gp.contains(" openai:gpt-main "), "{gp}");
    assert!(
        stderr.contains(".cadre/agents/broken.md: front matter is not closed"),
        "{stderr}"
    );
    assert!(stderr.contains("NotebookEdit"), "{stderr}");
}

#[test]
fn show_prints_everything_and_unknown_names_exit_2() {
    let dir = workspace();
    let out = cadre(dir.path())
        .args(["agents", "show", "reviewer"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let root: PathBuf = dir.path().canonicalize().unwrap();
    for needle in [
        "subagents/reviewer.md",
        "Reviews.",
        "read_file, grep",
        "inherit (openai:gpt-main)",
        &format!(
            "isolated -> {}",
            root.join(".cadre/agents/reviewer/workspace").display()
        ),
        "max turns:    4",
        "can delegate: no",
        "Review.",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
    let out = cadre(dir.path())
        .args(["agents", "show", "editor"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("missing-skill (missing)"), "{text}");
    assert!(text.contains("can delegate: yes"), "{text}");
    assert!(
        text.contains(&format!("shared -> {}", root.display())),
        "{text}"
    );

    let out = cadre(dir.path())
        .args(["agents", "show", "nobody"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("unknown agent `nobody`"), "{stderr}");
    assert!(
        stderr.contains("editor, explorer, general-purpose, reviewer"),
        "{stderr}"
    );
}

#[test]
fn check_exit_codes() {
    let dir = workspace();
    let out = cadre(dir.path())
        .args(["agents", "check"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.lines().any(|l| l == "4 agents OK"), "{stdout}");
    assert!(
        stdout.contains("warning: .cadre/agents/editor.md: skill `missing-skill` not found"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: .claude/agents/explorer.md: tool `NotebookEdit`"),
        "{stdout}"
    );

    write(
        dir.path(),
        ".cadre/agents/bad.md",
        "---\nname: bad\ndescription: x\nmax_turns: lots\n---\n",
    );
    write(
        dir.path(),
        "subagents/escape.md",
        "---\ndescription: x\nworkspace: {path: ../../x}\n---\n",
    );
    let out = cadre(dir.path())
        .args(["agents", "check"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(".cadre/agents/bad.md: ") && l.contains("max_turns")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("subagents/escape.md: ") && l.contains("escapes")),
        "{stdout}"
    );
    assert!(stdout.contains("4 agents OK, 2 broken files"), "{stdout}");
}

#[test]
fn user_dir_agents_load_below_the_project() {
    let dir = workspace();
    let user = dir.path().join(".no-user-config/cadre/agents");
    write(
        &user,
        "explorer.md",
        "---\nname: explorer\ndescription: user one\n---\n",
    );
    write(
        &user,
        "personal.md",
        "---\nname: personal\ndescription: mine\n---\n",
    );
    let list = json_list(dir.path());
    let by = |n: &str| list.iter().find(|e| e["name"] == n).unwrap().clone();
    assert_eq!(by("explorer")["description"], "Finds code.");
    assert_eq!(by("personal")["description"], "mine");
}

#[test]
fn opencode_user_dirs_load_below_cadres_user_dir() {
    let dir = workspace();
    let config = dir.path().join(".no-user-config");
    write(
        &config,
        "opencode/agent/oc-one.md",
        "---\ndescription: from agent/\nmode: subagent\n---\nOne.\n",
    );
    write(
        &config,
        "opencode/agents/oc-two.md",
        "---\ndescription: from agents/\nmode: all\n---\nTwo.\n",
    );
    write(
        &config,
        "opencode/agents/personal.md",
        "---\ndescription: opencode's\nmode: subagent\n---\n",
    );
    write(
        &config,
        "cadre/agents/personal.md",
        "---\nname: personal\ndescription: cadre's\n---\n",
    );
    let list = json_list(dir.path());
    let by = |n: &str| {
        list.iter()
            .find(|e| e["name"] == n)
            .unwrap_or_else(|| panic!("no {n} in {list:?}"))
            .clone()
    };
    assert_eq!(by("oc-one")["description"], "from agent/");
    assert_eq!(by("oc-two")["description"], "from agents/");
    assert_eq!(by("personal")["description"], "cadre's");
}

#[test]
fn the_examples_directory_checks_clean() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/agents");
    let out = cadre_with_anthropic(&examples)
        .args(["agents", "check"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("warning"), "{stdout}");
    assert!(stdout.contains("9 agents OK"), "{stdout}");
}

#[test]
fn check_names_both_files_of_every_override() {
    let dir = workspace();
    let ws = dir.path();
    write(
        ws,
        ".claude/agents/a-review.md",
        "---\nname: review\ndescription: first\n---\n",
    );
    write(
        ws,
        ".claude/agents/b-review.md",
        "---\nname: review\ndescription: second\n---\n",
    );
    write(
        ws,
        ".claude/agents/general-purpose.md",
        "---\nname: general-purpose\ndescription: mine\ntools: []\n---\n",
    );
    let out = cadre(ws).args(["agents", "check"]).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("warning: review: ")
            && l.contains(".claude/agents/b-review.md overrides .claude/agents/a-review.md")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l
            == "warning: general-purpose: .claude/agents/general-purpose.md overrides builtin"),
        "{stdout}"
    );
    let out = cadre(ws).args(["agents", "list"]).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("b-review.md overrides"), "{stderr}");
}

#[test]
fn show_prints_a_long_description_whole() {
    let dir = workspace();
    let long = format!("{} end-of-description", "lorem ".repeat(400));
    write(
        dir.path(),
        ".cadre/agents/verbose.md",
        &format!("---\nname: verbose\ndescription: {long}\n---\nx\n"),
    );
    let out = cadre(dir.path())
        .args(["agents", "show", "verbose"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("end-of-description"), "{stdout}");
    assert!(
        stdout.contains("the parent model is offered the first 1000"),
        "{stdout}"
    );
}

#[test]
fn an_alias_without_its_providers_key_inherits_the_same_in_every_view() {
    let dir = workspace();
    let list = {
        let out = cadre(dir.path())
            .args(["agents", "list", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap()
    };
    let explorer = list.iter().find(|e| e["name"] == "explorer").unwrap();
    assert_eq!(explorer["model"], "openai:gpt-main");
    let out = cadre(dir.path()).args(["agents", "list"]).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let row = stdout.lines().find(|l| l.starts_with("explorer ")).unwrap();
    assert!(row.contains(" openai:gpt-main "), "{row}");
    let warning = "model `sonnet` means `anthropic:claude-sonnet-4-5`, which cannot be used here (no API key for provider anthropic: set ANTHROPIC_API_KEY); the agent inherits its parent's model";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
    let out = cadre(dir.path())
        .args(["agents", "show", "explorer"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("inherit (openai:gpt-main)"), "{stdout}");
    assert_eq!(stdout.matches(warning).count(), 1, "{stdout}");
}

#[test]
fn list_warns_about_a_writable_directory_definition_asking_sandbox_off() {
    let dir = workspace();
    let widening =
        |name: &str| format!("---\nname: {name}\ndescription: Widens.\nsandbox: off\n---\nBody.\n");
    write(dir.path(), "subagents/loose.md", &widening("loose"));
    write(
        dir.path(),
        ".gemini/agents/general-purpose.md",
        &widening("general-purpose"),
    );
    for json in [false, true] {
        let mut cmd = cadre_with_anthropic(dir.path());
        cmd.args(["agents", "list"]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("subagents/loose.md: `sandbox: off` dropped: the model can write"),
            "json={json}: {stderr}"
        );
        assert!(
            stderr.contains(
                "general-purpose: .gemini/agents/general-purpose.md not loaded: it would replace \
                 the built-in agent"
            ),
            "json={json}: {stderr}"
        );
    }
    let list = json_list(dir.path());
    let gp = list
        .iter()
        .find(|e| e["name"] == "general-purpose")
        .unwrap();
    assert_eq!(gp["source"], "builtin");
}
