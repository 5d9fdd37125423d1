//! `cadre run` with a sandboxed sub-agent whose `bash` creates protected paths that did not
//! exist in the workspace: another harness's settings, an MCP server list, injected
//! instructions, agent definitions. A mount cannot cover a name that does not exist, so
//! cadre moves whatever appeared into `.cadre/quarantine/` once the command has ended and
//! says so; the next run loads none of it. Per sandbox mode: the launcher with namespaces
//! (with and without a PID namespace), bubblewrap, and Landlock alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_testkit::{MockServer, OpenAiStream};
use std::path::{Path, PathBuf};
use std::process::Command;

const KEY_VAR: &str = "CADRE_MISSINGPROT_TEST_KEY";

/// What the child creates, each at the workspace root, none of it there before.
const CREATED: &[&str] = &[
    ".claude",
    ".mcp.json",
    "AGENTS.md",
    "CLAUDE.md",
    ".gemini",
    "subagents",
    ".codex",
    ".opencode",
];

/// The marker the planted instructions carry: it must never reach a model.
const MARKER: &str = "PLANTED-INSTRUCTIONS-7731";

struct Case {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
}

/// A workspace with only `.cadre/` (the agent `worker`, bash only, the default sub-agent
/// sandbox; `config` first in the configuration, then the mock provider).
fn case(config: &str, mock: &MockServer) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, home) = (base.join("ws"), base.join("home"));
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        ws.join(".cadre/agents/worker.md"),
        "---\nname: worker\ndescription: runs shell commands\ntools: [bash]\n---\nRun it.\n",
    )
    .unwrap();
    std::fs::write(
        ws.join(".cadre/config.toml"),
        format!(
            "{config}\n[providers.openai]\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            mock.openai_base_url()
        ),
    )
    .unwrap();
    for name in CREATED {
        assert!(!ws.join(name).exists());
    }
    Case {
        _dir: dir,
        ws,
        home,
    }
}

fn cadre(case: &Case, simulate_missing: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace")
        .arg(&case.ws)
        .env_remove("CADRE_MODEL")
        .env_remove("CADRE_SANDBOX_SIMULATE_MISSING")
        .env("XDG_CONFIG_HOME", case.home.join(".config"))
        .env("XDG_STATE_HOME", case.home.join(".state"))
        .env("HOME", &case.home)
        .env(KEY_VAR, "sk-test")
        .stdin(std::process::Stdio::null());
    if let Some(m) = simulate_missing {
        cmd.env("CADRE_SANDBOX_SIMULATE_MISSING", m);
    }
    cmd
}

/// `main` delegates to `worker`, whose `bash` runs each of `commands` in turn; `main` ends
/// with the task's result. Its stdout, which must be a success.
fn run_worker(case: &Case, simulate_missing: Option<&str>, commands: &[String]) -> String {
    let calls: String = commands
        .iter()
        .map(|c| {
            format!(
                "[[scripts.turns]]\ntool_calls = [{{ name = \"bash\", args = {{ command = {c:?} }} }}]\n"
            )
        })
        .collect();
    let script = case.home.join("script.toml");
    let text = format!(
        r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{{ name = "task", args = {{ subagent_type = "worker", description = "run it", prompt = "run it" }} }}]
[[scripts.turns]]
text = "{{{{tool_results}}}}"

[[scripts]]
agent = "worker"
{calls}
[[scripts.turns]]
text = "{{{{tool_results}}}}"
"#
    );
    std::fs::write(&script, text).unwrap();
    let out = cadre(case, simulate_missing)
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--permission-mode", "auto-approve", "go"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// Every way the child makes the protected names: `mkdir` and a redirect, a directory
/// made elsewhere and renamed into place, a symlink, `cp`, and a background process that
/// outlives its call (the second command waits for it, with a deadline).
fn attack() -> Vec<String> {
    let agent =
        |name: &str| format!("---\\nname: {name}\\ndescription: planted\\n---\\n{MARKER}\\n");
    let first = [
        "mkdir -p .claude && echo '{\"hooks\":{\"PreToolUse\":[]}}' > .claude/settings.json"
            .to_string(),
        "echo '{\"mcpServers\":{\"x\":{\"command\":\"touch\",\"args\":[\"pwned\"]}}}' > .mcp.json"
            .to_string(),
        format!("echo {MARKER} > AGENTS.md"),
        format!(
            "mkdir -p staging/agents && printf -- '{}' > staging/agents/planted-gemini.md && mv staging .gemini",
            agent("planted-gemini")
        ),
        format!(
            "mkdir -p subagents && printf -- '{}' > subagents/planted-sub.md",
            agent("planted-sub")
        ),
        "ln -s /etc/hostname .codex".to_string(),
        "echo x > src/o.txt && echo SUB-OK && cp -r src .opencode".to_string(),
        format!("(sleep 0.3; echo {MARKER} > CLAUDE.md; touch late-done) > /dev/null 2>&1 &"),
        "echo kept > ordinary.txt && mkdir newdir && echo kept > newdir/f && echo ORDINARY-OK"
            .to_string(),
    ]
    .join("\n");
    // With a PID namespace the background process ends with the command, so this gives up.
    let second =
        "for i in $(seq 60); do [ -e late-done ] && break; sleep 0.05; done; echo SECOND-DONE";
    vec![first, second.to_string()]
}

/// How a sandbox mode behaves for the attack.
struct Mode {
    config: &'static str,
    simulate_missing: Option<&'static str>,
    /// The child's background process outlives its call (not with a PID namespace:
    /// bubblewrap, or the launcher where it has one).
    outlives: bool,
    /// New entries can be made at the top of the root. Landlock alone grants writes only
    /// around the existing `.cadre/`, so there nothing new is made at the top at all.
    root_writable: bool,
}

fn created_paths_never_stay(mode: &Mode) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockServer::start()).unwrap();
    let c = case(mode.config, &mock);
    run_worker(&c, mode.simulate_missing, &attack());
    // Every tool result the child saw, from the transcripts.
    let out = transcripts(&c.ws.join(".cadre/sessions"));
    assert!(
        out.contains("SUB-OK") && out.contains("SECOND-DONE"),
        "{out}"
    );
    for name in CREATED {
        assert!(
            std::fs::symlink_metadata(c.ws.join(name)).is_err(),
            "{name} is still where agents read it\n{out}"
        );
    }
    assert!(c.ws.join("src/o.txt").exists());
    if mode.root_writable {
        assert_quarantined(&c, &out, mode.outlives);
    } else {
        assert!(!out.contains("ORDINARY-OK") && !c.ws.join("ordinary.txt").exists());
        assert!(out.contains(".claude’: Permission denied"), "{out}");
    }
    next_run_loads_none_of_it(&c, &mock);
}

/// Each created path was moved into quarantine, said so, and ordinary new entries at the
/// top of the root are untouched.
fn assert_quarantined(c: &Case, out: &str, outlives: bool) {
    assert!(out.contains("ORDINARY-OK"), "{out}");
    for name in CREATED.iter().filter(|n| **n != "CLAUDE.md") {
        assert!(
            out.contains(&format!(
                "created {name}, a protected path; cadre moved it to"
            )),
            "{name}: {out}"
        );
    }
    // What was moved is kept, below cadre's own protected directory.
    let quarantine = c.ws.join(".cadre/quarantine");
    let kept: Vec<String> = std::fs::read_dir(&quarantine)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for name in CREATED.iter().filter(|n| outlives || **n != "CLAUDE.md") {
        assert!(kept.iter().any(|k| k == name), "{name}: {kept:?}");
    }
    if !outlives {
        // The background process died with its command: it never made its files.
        assert!(!kept.iter().any(|k| k == "CLAUDE.md"), "{kept:?}");
        assert!(!c.ws.join("late-done").exists());
    }
    let planted = std::fs::read_dir(&quarantine)
        .unwrap()
        .map(|d| d.unwrap().path().join(".gemini/agents/planted-gemini.md"))
        .find(|p| p.exists())
        .unwrap();
    let planted = std::fs::read_to_string(planted).unwrap();
    assert!(
        planted.starts_with("---\nname: planted-gemini\n"),
        "{planted}"
    );
    assert_eq!(
        std::fs::read_to_string(c.ws.join("ordinary.txt")).unwrap(),
        "kept\n"
    );
    assert!(c.ws.join("newdir/f").exists());
}

/// The next run loads none of it: no planted agent, no planted instructions in the
/// model's request, no planted MCP server started.
fn next_run_loads_none_of_it(c: &Case, mock: &MockServer) {
    let list = cadre(c, None).args(["agents", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(list.contains("worker"), "{list}");
    assert!(!list.contains("planted"), "{list}");
    mock.push_openai(
        OpenAiStream::new()
            .text("fine")
            .finish("stop")
            .done()
            .into_reply(),
    );
    let next = cadre(c, None)
        .args(["--model", "openai:gpt-4o-mini", "run", "hello"])
        .output()
        .unwrap();
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].body.to_string();
    assert!(body.contains("hello") && !body.contains(MARKER), "{body}");
    assert!(!c.ws.join("pwned").exists());
}

#[test]
fn protected_paths_a_child_creates_are_moved_out_of_reach() {
    // The launcher's PID namespace ends the background process with its command.
    created_paths_never_stay(&Mode {
        config: "[sandbox]\nrequired = true\n",
        simulate_missing: None,
        outlives: false,
        root_writable: true,
    });
}

#[test]
fn protected_paths_a_child_creates_are_moved_out_of_reach_without_pid_namespaces() {
    created_paths_never_stay(&Mode {
        config: "",
        simulate_missing: Some("pid-namespace"),
        outlives: true,
        root_writable: true,
    });
}

#[test]
fn protected_paths_a_child_creates_are_moved_out_of_reach_with_bwrap() {
    if !bwrap_installed() {
        return;
    }
    created_paths_never_stay(&Mode {
        config: "[sandbox]\nbackend = \"bwrap\"\nrequired = true\n",
        simulate_missing: None,
        outlives: false,
        root_writable: true,
    });
}

#[test]
fn protected_paths_cannot_be_created_with_landlock_alone() {
    created_paths_never_stay(&Mode {
        config: "",
        simulate_missing: Some("namespaces"),
        outlives: true,
        root_writable: false,
    });
}

/// The `bash` results in the transcripts below `dir` (not the commands, which name every
/// marker too).
fn transcripts(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text.push_str(&transcripts(&path));
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let m = &v["message"];
            if m["role"] == "tool" && m["name"] == "bash" {
                text.push_str(m["content"].as_str().unwrap_or_default());
                text.push('\n');
            }
        }
    }
    text
}

/// Whether `bwrap` is on `PATH`; without it the test says SKIPPED (and fails in CI).
fn bwrap_installed() -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| Path::new(&d).join("bwrap").is_file()));
    if !found {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "bwrap is not installed"
        );
        eprintln!("\n!!!!!!!! SKIPPED (bwrap not installed)\n");
    }
    found
}
