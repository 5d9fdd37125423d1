//! A corpus of agent files in the Claude Code, OpenCode, Gemini CLI and Codex formats
//! (`tests/fixtures/compat/`, written for these tests), loaded unchanged: every mapping of
//! docs/agents.md — names, models and aliases, tools and their restricted forms, rules,
//! approval modes, OpenCode's maps and modes, Codex roles — and CLAUDE.md as memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_llm::{ProviderConfig, ProviderRegistry};
use cadre_subagents::{AgentRegistry, RequestedMode, WorkspaceMode};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compat")
        .canonicalize()
        .unwrap()
}

/// Providers whose Anthropic entry has a key (`with_key`) or none, and an OpenAI-compatible
/// default on a local base URL that needs none. Variable names, not the environment, decide.
fn providers(with_key: bool) -> Arc<ProviderRegistry> {
    let mut cfgs = HashMap::new();
    cfgs.insert(
        "anthropic".to_string(),
        ProviderConfig {
            api_key_env: Some(
                if with_key {
                    "PATH"
                } else {
                    "CADRE_TEST_NO_SUCH_KEY"
                }
                .into(),
            ),
            ..Default::default()
        },
    );
    cfgs.insert(
        "openai".to_string(),
        ProviderConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..Default::default()
        },
    );
    Arc::new(ProviderRegistry::new(cfgs, "openai"))
}

fn load(with_key: bool) -> AgentRegistry {
    AgentRegistry::builder()
        .workspace(corpus())
        .user_dir(None)
        .providers(providers(with_key))
        .load()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(std::string::ToString::to_string).collect()
}

#[test]
fn every_file_of_every_format_loads() {
    let reg = load(true);
    assert!(reg.errors().is_empty(), "{:#?}", reg.errors());
    assert_eq!(
        reg.names(),
        [
            "code-reviewer",
            "code_explorer",
            "docs-writer",
            "explorer",
            "fetcher",
            "general-purpose",
            "git-helper",
            "nameless-helper",
            "planner",
            "powershell-5.1-expert",
            "security-auditor",
            "tester",
        ]
    );
    let primaries: Vec<&str> = reg.primaries().map(|d| d.name.as_str()).collect();
    assert_eq!(primaries, ["build"], "listed, not delegable");
    assert!(reg.get("build").is_none());
    assert!(reg.lookup("build").is_some());
}

#[test]
fn claude_code_files() {
    let reg = load(true);
    let d = reg.get("code-reviewer").unwrap();
    assert_eq!(
        d.description,
        "Use this agent when: a change is ready. Examples: <example>Context: the user finished a feature.</example>"
    );
    // `Bash(*)` is the whole tool; the comment after `sonnet` is a comment.
    assert_eq!(
        d.tools,
        Some(strings(&["read_file", "grep", "glob", "bash"]))
    );
    assert!(d.permissions.only.is_empty());
    assert_eq!(d.model.as_deref(), Some("anthropic:claude-sonnet-4-5"));
    assert_eq!(d.permissions.mode, Some(RequestedMode::AcceptEdits));
    assert_eq!(d.workspace.mode, WorkspaceMode::Shared);
    assert!(d.prompt.starts_with("You review changes"));
    assert!(
        d.warnings
            .iter()
            .any(|w| w.contains("`color` is given more than once")),
        "{:?}",
        d.warnings
    );

    // Dots and capitals: looked up in lower case, in any case.
    let d = reg.get("PowerShell-5.1-Expert").unwrap();
    assert_eq!(d.name, "powershell-5.1-expert");
    assert_eq!(d.model, None);
    assert_eq!(d.tools, Some(strings(&["read_file", "write_file", "bash"])));

    // No `name`: the file stem, with a warning.
    let d = reg.get("nameless-helper").unwrap();
    assert_eq!(
        d.warnings,
        ["no `name`: the file name `nameless-helper` is used"]
    );
    assert_eq!(d.model.as_deref(), Some("anthropic:claude-haiku-4-5"));

    // Restricted forms keep their tool under rules; `:*` is Claude Code's prefix form.
    let d = reg.get("git-helper").unwrap();
    assert_eq!(d.tools, Some(strings(&["read_file", "bash"])));
    assert_eq!(
        d.permissions.only,
        strings(&["bash(git *)", "bash(npm run test)", "bash(npm run test *)"])
    );
    assert_eq!(d.permissions.deny, strings(&["bash(git push *)"]));
    assert!(d.disallowed_tools.is_empty(), "only those calls are denied");
    assert_eq!(
        d.model.as_deref(),
        Some("anthropic:claude-sonnet-4-20250514")
    );
    assert_eq!(d.max_turns, Some(6));

    // WebFetch and TodoWrite are built in; WebSearch, not configured here, is dropped,
    // never widening.
    let d = reg.get("fetcher").unwrap();
    assert_eq!(
        d.tools,
        Some(strings(&["read_file", "web_fetch", "todo_write"]))
    );
    assert_eq!(
        d.warnings
            .iter()
            .filter(|w| w.contains("is not available here"))
            .count(),
        1,
        "{:?}",
        d.warnings
    );
    assert_eq!(d.model.as_deref(), Some("anthropic:claude-opus-4-5"));
}

#[test]
fn opencode_files() {
    let reg = load(true);
    let d = reg.get("docs-writer").unwrap();
    assert_eq!(d.model.as_deref(), Some("anthropic:claude-sonnet-4-5"));
    assert_eq!(d.tools, None, "tools: {{write: true}} turns nothing off");
    assert_eq!(d.disallowed_tools, strings(&["bash"]));
    assert_eq!(d.permissions.ask, strings(&["write_file", "edit_file"]));
    assert!(d.warnings.iter().any(|w| w.contains("temperature")));
    // `webfetch: deny` denies the built-in web_fetch.
    assert!(
        d.permissions.deny.iter().any(|r| r == "web_fetch")
            || d.disallowed_tools.iter().any(|t| t == "web_fetch"),
        "{:?} {:?}",
        d.permissions,
        d.disallowed_tools
    );

    let d = reg.get("explorer").unwrap();
    assert_eq!(
        d.tools,
        Some(strings(&["read_file", "grep", "glob", "list_dir"]))
    );
    assert_eq!(d.model.as_deref(), Some("openai:gpt-4o-mini"));
    assert_eq!(
        d.permissions.only,
        strings(&["bash(git diff*)", "bash(git log*)"])
    );
    assert_eq!(d.permissions.ask, strings(&["bash(git log*)"]));
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);

    let build = reg.lookup("build").unwrap();
    assert!(build.primary);
}

#[test]
fn gemini_cli_files() {
    let reg = load(true);
    let d = reg.get("security-auditor").unwrap();
    assert_eq!(
        d.tools,
        Some(strings(&[
            "read_file",
            "grep",
            "list_dir",
            "bash",
            "edit_file"
        ]))
    );
    assert_eq!(d.max_turns, Some(10));
    assert_eq!(d.wall_clock_secs, Some(300));
    // No `gemini` provider here: it inherits, with the reason.
    assert_eq!(d.model, None);
    assert!(
        d.warnings
            .iter()
            .any(|w| w.contains("`gemini:gemini-2.5-pro`") && w.contains("inherits")),
        "{:?}",
        d.warnings
    );
}

#[test]
fn codex_roles() {
    let reg = load(true);
    let d = reg.get("planner").unwrap();
    assert_eq!(d.description, "Plans a change before anyone edits.");
    assert_eq!(d.model.as_deref(), Some("openai:o3"));
    assert_eq!(d.permissions.mode, Some(RequestedMode::Plan));
    assert_eq!(
        d.prompt,
        "Read the code and write a plan. Do not edit files."
    );
    let d = reg.get("tester").unwrap();
    assert_eq!(d.model.as_deref(), Some("openai:gpt-5-codex"));
    assert_eq!(d.permissions.mode, None);
    assert_eq!(d.prompt, "Run the tests and fix what fails.");
    let d = reg.get("code_explorer").unwrap();
    assert_eq!(d.permissions.mode, Some(RequestedMode::Plan));
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn aliases_without_their_providers_key_inherit_with_one_warning() {
    let reg = load(false);
    for name in [
        "code-reviewer",
        "nameless-helper",
        "git-helper",
        "fetcher",
        "docs-writer",
    ] {
        let d = reg.get(name).unwrap();
        assert_eq!(d.model, None, "{name}");
        let fallbacks: Vec<&String> = d
            .warnings
            .iter()
            .filter(|w| w.contains("inherits its parent's model"))
            .collect();
        assert_eq!(fallbacks.len(), 1, "{name}: {:?}", d.warnings);
        assert!(
            fallbacks[0].contains("set CADRE_TEST_NO_SUCH_KEY"),
            "{fallbacks:?}"
        );
    }
    // OpenAI-compatible guesses reach the local default.
    assert_eq!(
        reg.get("explorer").unwrap().model.as_deref(),
        Some("openai:gpt-4o-mini")
    );
}

#[test]
fn claude_md_is_the_project_memory_when_there_is_no_agents_md() {
    let p = cadre_engine::prompt::main_system_prompt(&corpus());
    assert_eq!(p.matches("run `make check` before you finish").count(), 1);
    assert!(p.contains("# Project instructions (CLAUDE.md)"));
    assert!(
        !cadre_engine::prompt::main_system_prompt_with(&corpus(), &["AGENTS.md"])
            .contains("make check")
    );
}
