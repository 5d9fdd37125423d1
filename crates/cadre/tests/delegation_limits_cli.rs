//! `cadre run` end to end on what delegation may not do: widen a parent's tools at any depth,
//! spend beyond the run's budgets, go past the depth cap without saying so, or hand the
//! parent a result above `[subagents] max_result_bytes` instead of its head and a file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::cadre;

/// A workspace with agent files, an optional `.cadre/config.toml` and a script; returns the
/// `--model` value.
fn workspace(agents: &[(&str, &str)], config: &str, script: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let agents_dir = dir.path().join(".cadre/agents");
    std::fs::create_dir_all(&agents_dir).unwrap();
    for (name, text) in agents {
        std::fs::write(agents_dir.join(format!("{name}.md")), text).unwrap();
    }
    std::fs::write(dir.path().join(".cadre/config.toml"), config).unwrap();
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script).unwrap();
    (dir, format!("scripted:{}", path.display()))
}

const READER: &str = "---\nname: reader\ndescription: Reads files.\ntools: [read_file]\ncan_delegate: true\nworkspace: {mode: shared}\n---\nYou read files.\n";

fn widening_script(surface: &str) -> String {
    let (main_call, reader_call) = if surface == "lifecycle" {
        (
            r#"{ name = "agent_spawn", args = { agent_id = "reader", task = "read", timeout_seconds = 60 } }"#,
            r#"{ name = "agent_spawn", args = { agent_id = "general-purpose", task = "write", timeout_seconds = 60 } }"#,
        )
    } else {
        (
            r#"{ name = "task", args = { subagent_type = "reader", prompt = "read" } }"#,
            r#"{ name = "task", args = { subagent_type = "general-purpose", prompt = "write" } }"#,
        )
    };
    format!(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{main_call}]
[[scripts.turns]]
text = "main: {{{{tool_results}}}}"
[[scripts]]
agent = "reader"
[[scripts.turns]]
tool_calls = [{reader_call}]
[[scripts.turns]]
text = "reader: {{{{tool_results}}}}"
[[scripts]]
agent = "general-purpose"
[[scripts.turns]]
tool_calls = [{{ name = "bash", args = {{ command = "echo x > widened.txt" }} }}]
[[scripts.turns]]
text = "gp: {{{{tool_results}}}}"
"#
    )
}

#[test]
fn general_purpose_under_a_read_only_delegator_cannot_run_bash_on_either_surface() {
    for surface in ["task", "lifecycle"] {
        let (dir, model) = workspace(
            &[("reader", READER)],
            &format!("[subagents]\ntools = \"{surface}\"\n"),
            &widening_script(surface),
        );
        let out = cadre(dir.path())
            .args([
                "--model",
                &model,
                "run",
                "--permission-mode",
                "bypass",
                "go",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{surface}: {stderr}");
        assert!(
            stdout.contains("gp: "),
            "{surface}: general-purpose ran: {stdout}"
        );
        assert!(
            stdout.contains("unknown tool `bash`"),
            "{surface}: {stdout}"
        );
        assert!(
            !dir.path().join("widened.txt").exists(),
            "{surface}: the delegator's general-purpose ran bash: {stdout}"
        );
    }
}

fn jsonl(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn shared_agent(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: The {name} agent.\nworkspace: {{mode: shared}}\n---\nYou are {name}.\n"
    )
}

const TWO_CHILDREN: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
usage = { input_tokens = 10, output_tokens = 0 }
tool_calls = [{ name = "task", args = { subagent_type = "c1", prompt = "first" } }]
[[scripts.turns]]
usage = { input_tokens = 10, output_tokens = 0 }
tool_calls = [{ name = "task", args = { subagent_type = "c2", prompt = "second" } }]
[[scripts.turns]]
text = "main done"

[[scripts]]
agent = "c1"
[[scripts.turns]]
usage = { input_tokens = 2200, output_tokens = 0 }
text = "c1 partial"
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
usage = { input_tokens = 0, output_tokens = 0 }
text = "c1 done"

[[scripts]]
agent = "c2"
[[scripts.turns]]
usage = { input_tokens = 2200, output_tokens = 0 }
text = "c2 partial"
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
usage = { input_tokens = 0, output_tokens = 0 }
text = "c2 done"
"#;

#[test]
fn a_token_budget_counts_the_children_and_the_run_ends_limit_reached_with_exit_3() {
    let (c1, c2) = (shared_agent("c1"), shared_agent("c2"));
    let (dir, model) = workspace(
        &[("c1", &c1), ("c2", &c2)],
        "[limits]\nmax_tokens = 3000\n",
        TWO_CHILDREN,
    );
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("token budget reached"), "{stderr}");
    let events = jsonl(&out.stdout);
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["state"], "limit_reached", "{done}");
    assert_eq!(done["limit"], "tokens", "{done}");
    assert_eq!(done["complete"], false, "{done}");
    assert_eq!(done["reason"], "budget", "{done}");
    let total = |v: &serde_json::Value| {
        v["input_tokens"].as_u64().unwrap() + v["output_tokens"].as_u64().unwrap()
    };
    assert!(total(&done["usage"]) >= 4400, "{done}");
    let usage_total = events
        .iter()
        .filter(|e| e["type"] == "usage" && e["agent"] == "main")
        .map(|e| total(&e["total"]))
        .max()
        .unwrap();
    assert!(usage_total >= 4400, "usage.total {usage_total}");
    // c1 finished; c2 was stopped with its partial output.
    let update = |agent: &str, kind: &str| {
        events.iter().any(|e| {
            e["type"] == "subagent_update"
                && e["update"]["agent"] == agent
                && e["update"]["kind"] == kind
        })
    };
    assert!(update("c1", "done"));
    assert!(update("c2", "error"));
    let c2_result = events
        .iter()
        .find(|e| {
            e["type"] == "tool_result"
                && e["agent"] == "main"
                && e["output"].as_str().unwrap().contains("c2 partial")
        })
        .expect("main got c2's partial output");
    assert!(
        c2_result["output"]
            .as_str()
            .unwrap()
            .contains("limit reached (token budget)"),
        "{c2_result}"
    );
}

const TWO_PROMPTS: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
usage = { input_tokens = 10, output_tokens = 1 }
tool_calls = [{ name = "task", args = { subagent_type = "helper", prompt = "help" } }]
[[scripts.turns]]
usage = { input_tokens = 10, output_tokens = 1 }
text = "first done"
[[scripts.turns]]
usage = { input_tokens = 10, output_tokens = 1 }
text = "second done"

[[scripts]]
agent = "helper"
[[scripts.turns]]
usage = { input_tokens = 1000, output_tokens = 0 }
text = "helped"
"#;

#[test]
fn the_repl_summary_of_a_prompt_counts_that_prompt_and_its_children_only() {
    let helper = shared_agent("helper");
    let (dir, model) = workspace(&[("helper", &helper)], "", TWO_PROMPTS);
    let out = cadre(dir.path())
        .args(["--model", &model])
        .write_stdin("one\ntwo\n/exit\n")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summaries: Vec<&str> = stderr.lines().filter(|l| l.starts_with("— ")).collect();
    assert_eq!(
        summaries,
        vec![
            "— completed · 2 turns · 1022 tokens (in 1020, out 2) · cost unknown",
            "— completed · 1 turn · 11 tokens (in 10, out 1) · cost unknown",
        ],
        "{stderr}"
    );
}

/// The children of `TWO_CHILDREN` at $1 per million input tokens: c1 spends $0.0022 of a
/// $0.003 budget, c2's first call takes the run past it.
#[test]
fn a_cost_budget_counts_the_children_and_the_run_ends_limit_reached_with_exit_3() {
    let (c1, c2) = (shared_agent("c1"), shared_agent("c2"));
    let (dir, model) = workspace(&[("c1", &c1), ("c2", &c2)], "", TWO_CHILDREN);
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!(
            "[limits]\nmax_cost_usd = 0.003\n[models.prices.{model:?}]\ninput = 1.0\noutput = 1.0\n"
        ),
    )
    .unwrap();
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cost budget reached"), "{stderr}");
    let events = jsonl(&out.stdout);
    let done = events.last().unwrap();
    assert_eq!(done["state"], "limit_reached", "{done}");
    assert_eq!(done["limit"], "cost", "{done}");
    assert!(
        done["usage"]["cost_usd"].as_f64().unwrap() >= 0.003,
        "{done}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "notice" && e["message"].as_str().unwrap().contains("price")),
        "every model here has a price"
    );
}

#[test]
fn a_cost_budget_with_an_unpriced_model_says_it_cannot_count_it() {
    let (dir, model) = workspace(&[], "[limits]\nmax_cost_usd = 1.0\n", TWO_PROMPTS);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--output", "jsonl", "go"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let events = jsonl(&out.stdout);
    let notice = events
        .iter()
        .find(|e| e["type"] == "notice")
        .expect("a notice");
    assert!(
        notice["message"]
            .as_str()
            .unwrap()
            .contains("does not count scripted:"),
        "{notice}"
    );
    let (dir, model) = workspace(&[], "[limits]\nmax_cost_usd = -1\n", TWO_PROMPTS);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("max_cost_usd must be a positive"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_result_above_the_configured_size_is_stored_as_a_file_and_the_parent_gets_its_head() {
    let big = "0123456789".repeat(60);
    let script = format!(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{{ name = "task", args = {{ subagent_type = "c1", prompt = "write a lot" }} }}]
[[scripts.turns]]
text = "main got: {{{{tool_results}}}}"

[[scripts]]
agent = "c1"
[[scripts.turns]]
text = "{big}"
"#
    );
    let c1 = shared_agent("c1");
    let (dir, model) = workspace(
        &[("c1", &c1)],
        "[subagents]\nmax_result_bytes = 200\n",
        &script,
    );
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = stdout
        .split("<result_file path=\"")
        .nth(1)
        .and_then(|p| p.split('"').next())
        .unwrap_or_else(|| panic!("no result file named: {stdout}"));
    let path = std::path::Path::new(path);
    assert!(
        path.starts_with(dir.path().canonicalize().unwrap().join(".cadre/results")),
        "{}",
        path.display()
    );
    assert_eq!(std::fs::read_to_string(path).unwrap().trim(), big);
    assert!(stdout.contains("bytes=\"600\""), "{stdout}");
    // The parent saw the head only, not the whole result.
    assert!(!stdout.contains(&big), "{stdout}");
}
