//! `cadre run` with sub-agents, end to end: the shipped demo (a scripted parent delegating to
//! two sub-agents, one in the background) and the `--agent` direct run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            if e.file_name() == "sessions" || e.file_name() == "tool-outputs" {
                continue;
            }
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn demo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("examples/demo"), dir.path());
    (dir, repo().join("examples/scripts/delegation.toml"))
}

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    cmd.env_remove("CADRE_MODEL");
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

#[test]
fn the_demo_delegates_foreground_and_background_with_updates_in_jsonl() {
    let (dir, script) = demo();
    let out = cadre(dir.path())
        .args([
            "--model",
            &format!("scripted:{}", script.display()),
            "run",
            "--output",
            "jsonl",
            "Review",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    let events: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let updates: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "subagent_update")
        .collect();
    for agent in ["explorer", "auditor"] {
        let mine: Vec<&&serde_json::Value> = updates
            .iter()
            .filter(|u| u["update"]["agent"] == agent)
            .collect();
        let kinds: Vec<&str> = mine
            .iter()
            .map(|u| u["update"]["kind"].as_str().unwrap())
            .collect();
        assert!(
            kinds.contains(&"start") && kinds.contains(&"tool_start") && kinds.contains(&"done"),
            "{agent}: {kinds:?}"
        );
        assert!(mine.iter().all(|u| {
            u["update"]["task_id"]
                .as_str()
                .unwrap()
                .starts_with("task_")
        }));
        assert!(mine.iter().all(|u| {
            u["update"]["session_id"]
                .as_str()
                .unwrap()
                .starts_with("sub-")
        }));
    }
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["state"], "completed");
    assert_eq!(done["turns"], 3);
    let output = done["output"].as_str().unwrap();
    assert!(
        output.contains("src/report.py:8:    # FIXME"),
        "the background audit's real grep result: {output}"
    );
    assert!(
        output.contains("exit code: 0"),
        "bash ran under the allow rule: {output}"
    );
    // Sub-agent tokens are rolled up into the parent's total.
    let own: u64 = events
        .iter()
        .filter(|e| e["type"] == "usage" && e["agent"] == "main" && e["subagent"].is_null())
        .map(|e| {
            e["usage"]["input_tokens"].as_u64().unwrap()
                + e["usage"]["output_tokens"].as_u64().unwrap()
        })
        .sum();
    let total = done["usage"]["input_tokens"].as_u64().unwrap()
        + done["usage"]["output_tokens"].as_u64().unwrap();
    assert!(
        total > own,
        "total {total} includes the children beyond the parent's own {own}"
    );
    // Both children's transcripts were saved as sub- sessions.
    let sessions: Vec<String> = std::fs::read_dir(dir.path().join(".cadre/sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        sessions.iter().filter(|s| s.starts_with("sub-")).count(),
        2,
        "{sessions:?}"
    );
}

#[test]
fn agent_flag_runs_one_sub_agent_directly() {
    let (dir, script) = demo();
    let out = cadre(dir.path())
        .args([
            "--model",
            &format!("scripted:{}", script.display()),
            "run",
            "--agent",
            "explorer",
            "Map it",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("Two modules: src/inventory.py"), "{stdout}");
    assert!(
        stderr.contains("[explorer] ▸ read_file(src/inventory.py)"),
        "{stderr}"
    );
    assert!(stderr.contains("— [explorer] completed"), "{stderr}");

    let out = cadre(dir.path())
        .args([
            "--model",
            &format!("scripted:{}", script.display()),
            "run",
            "--agent",
            "nobody",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unknown agent_id: nobody"));
}
