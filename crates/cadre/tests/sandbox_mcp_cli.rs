//! `cadre run` with an MCP server that a sub-agent's own file declares (`mcpServers`), under
//! the real OS sandbox (Landlock): the server runs in the sandbox of the child that starts
//! it, so a read-only child cannot write through it; a server asking for a wider sandbox
//! than its child's is refused, naming the file and the server; and a grandchild narrower
//! than the server's sandbox is not offered the server's tools it would inherit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

struct Case {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

/// The fixture server (plain Python) that writes the file a call names.
fn writer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/writer_mcp.py")
        .canonicalize()
        .unwrap()
}

/// The `mcpServers` entry of server `writer`, with `extra` lines (`sandbox: ...`).
fn writer_entry(extra: &str) -> String {
    format!(
        "mcpServers:\n  - writer:\n      command: python3\n      args: [{:?}]\n{extra}",
        writer().display().to_string()
    )
}

/// A workspace with the required Landlock sandbox, agent files `agents` (name, front matter
/// after `name:`) and a directory outside the workspace.
fn case(agents: &[(&str, String)]) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(base.join("home")).unwrap();
    for (name, front) in agents {
        std::fs::write(
            ws.join(format!(".cadre/agents/{name}.md")),
            format!("---\nname: {name}\ndescription: uses its server\n{front}---\nDo what you are asked.\n"),
        )
        .unwrap();
    }
    std::fs::write(
        ws.join(".cadre/config.toml"),
        "[sandbox]\nrequired = true\n",
    )
    .unwrap();
    Case {
        _dir: dir,
        ws,
        outside,
    }
}

/// A script turn of `agent` delegating to `to`, then ending with what it got.
fn delegates(agent: &str, to: &str) -> String {
    format!(
        r#"
[[scripts]]
agent = "{agent}"
[[scripts.turns]]
tool_calls = [{{ name = "task", args = {{ subagent_type = "{to}", description = "go", prompt = "go" }} }}]
[[scripts.turns]]
text = "{agent} got: {{{{tool_results}}}}"
"#
    )
}

/// A script turn of `agent` calling the server's tool on `path`, then ending with the result.
fn writes(agent: &str, path: &Path) -> String {
    format!(
        r#"
[[scripts]]
agent = "{agent}"
[[scripts.turns]]
tool_calls = [{{ name = "mcp__writer__write", args = {{ path = {:?} }} }}]
[[scripts.turns]]
text = "{agent} got: {{{{tool_results}}}}"
"#,
        path.display().to_string()
    )
}

/// Run `script` in `case`; (success, stdout, stderr).
fn run(case: &Case, script: &str) -> (bool, String, String) {
    let path = case.ws.join("script.toml");
    std::fs::write(&path, script).unwrap();
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--workspace")
        .arg(&case.ws)
        .env_remove("CADRE_MODEL")
        .env_remove("CADRE_SANDBOX_SIMULATE_MISSING")
        .env("XDG_CONFIG_HOME", case.ws.join(".no-user-config"))
        .env("HOME", case.ws.join("../home"))
        .args(["--model", &format!("scripted:{}", path.display())])
        .args(["run", "--permission-mode", "auto-approve", "go"])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_declared_server_without_a_sandbox_runs_in_its_childs() {
    let c = case(&[(
        "worker",
        format!(
            "tools: [mcp__writer]\nsandbox: read-only\n{}",
            writer_entry("")
        ),
    )]);
    let escaped = c.outside.join("escaped");
    let script = delegates("main", "worker") + &writes("worker", &escaped);
    let (ok, out, err) = run(&c, &script);
    assert!(ok, "{out}\n{err}");
    assert!(
        !escaped.exists(),
        "a read-only child wrote outside the workspace through its server: {out}"
    );
    // The server ran (the call reached it) and the kernel refused its write.
    assert!(
        out.contains("cannot write") && out.contains("Permission denied"),
        "{out}\n{err}"
    );
    // Not even the workspace: the child is read-only, so its server is.
    let inside = c.ws.join("inside.txt");
    let (ok, out, err) = run(
        &c,
        &(delegates("main", "worker") + &writes("worker", &inside)),
    );
    assert!(ok, "{out}\n{err}");
    assert!(!inside.exists(), "{out}");
}

#[test]
fn a_declared_server_asking_for_more_than_its_child_has_is_refused() {
    for (sandbox, asks) in [
        ("      sandbox: workspace-write\n", "`workspace-write`"),
        ("      sandbox: off\n", "`off`"),
        (
            "      sandbox: {mode: read-only, network: true}\n",
            "the network",
        ),
    ] {
        let c = case(&[(
            "worker",
            format!(
                "tools: [mcp__writer]\nsandbox: read-only\n{}",
                writer_entry(sandbox)
            ),
        )]);
        let inside = c.ws.join("inside.txt");
        let (ok, out, err) = run(
            &c,
            &(delegates("main", "worker") + &writes("worker", &inside)),
        );
        assert!(ok, "{out}\n{err}");
        assert!(!inside.exists(), "{sandbox}: {out}");
        let all = format!("{out}\n{err}");
        let file = c.ws.join(".cadre/agents/worker.md").display().to_string();
        assert!(
            all.contains("skipped MCP server writer")
                && all.contains(&file)
                && all.contains(asks)
                && all.contains("read-only sandbox without the network"),
            "{sandbox}: {all}"
        );
    }
}

#[test]
fn a_declared_server_may_ask_for_less_than_its_child_has() {
    // A workspace-write child whose server asks for read-only: the server cannot write
    // the workspace, though the child could.
    let c = case(&[(
        "worker",
        format!(
            "tools: [mcp__writer]\n{}",
            writer_entry("      sandbox: read-only\n")
        ),
    )]);
    let inside = c.ws.join("inside.txt");
    let (ok, out, err) = run(
        &c,
        &(delegates("main", "worker") + &writes("worker", &inside)),
    );
    assert!(ok, "{out}\n{err}");
    assert!(!inside.exists(), "{out}");
    assert!(out.contains("Permission denied"), "{out}\n{err}");
}

#[test]
fn a_grandchild_narrower_than_the_server_does_not_inherit_its_tools() {
    // `worker` (workspace-write) declares the server and delegates to `reader`
    // (read-only), which is granted the server's tool by name.
    let c = case(&[
        (
            "worker",
            format!(
                "tools: [task, mcp__writer]\ncan_delegate: true\n{}",
                writer_entry("")
            ),
        ),
        (
            "reader",
            "tools: [mcp__writer__write]\nsandbox: read-only\n".to_string(),
        ),
    ]);
    let inside = c.ws.join("inside.txt");
    let script =
        delegates("main", "worker") + &delegates("worker", "reader") + &writes("reader", &inside);
    let (ok, out, err) = run(&c, &script);
    assert!(ok, "{out}\n{err}");
    assert!(
        !inside.exists(),
        "a read-only grandchild wrote through its parent's server: {out}"
    );
    assert!(
        out.contains("mcp__writer__write is not available")
            && out.contains("wider sandbox than this agent's (read-only)"),
        "{out}\n{err}"
    );
    // The worker itself writes the workspace through it: its server runs in its sandbox.
    let (ok, out, err) = run(
        &c,
        &(delegates("main", "worker") + &writes("worker", &inside)),
    );
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        std::fs::read_to_string(&inside).unwrap(),
        "escaped\n",
        "{out}"
    );
}

#[test]
fn a_declared_server_keeps_the_configured_and_the_definitions_protected_paths_read_only() {
    // `worker` runs in the default sub-agent sandbox (workspace-write): its server may write
    // the workspace, but not what `[permissions] protected_paths` or its own
    // `protected_paths` keep from the file tools, nor cadre's config.
    let c = case(&[(
        "worker",
        format!(
            "tools: [mcp__writer]\nprotected_paths: [\"keep/\"]\n{}",
            writer_entry("")
        ),
    )]);
    let config = c.ws.join(".cadre/config.toml");
    std::fs::write(
        &config,
        "[sandbox]\nrequired = true\n[permissions]\nprotected_paths = [\"deploy/\"]\n",
    )
    .unwrap();
    let before = std::fs::read(&config).unwrap();
    for dir in ["deploy", "keep"] {
        std::fs::create_dir_all(c.ws.join(dir)).unwrap();
        std::fs::write(c.ws.join(dir).join("app.toml"), "KEEP\n").unwrap();
    }
    for target in [
        c.ws.join("deploy/app.toml"),
        c.ws.join("keep/app.toml"),
        config.clone(),
    ] {
        let (ok, out, err) = run(
            &c,
            &(delegates("main", "worker") + &writes("worker", &target)),
        );
        assert!(ok, "{out}\n{err}");
        assert!(
            out.contains("cannot write"),
            "{}: {out}\n{err}",
            target.display()
        );
    }
    for dir in ["deploy", "keep"] {
        let kept = std::fs::read_to_string(c.ws.join(dir).join("app.toml")).unwrap();
        assert_eq!(kept, "KEEP\n", "{dir}/app.toml was rewritten by the server");
    }
    assert_eq!(std::fs::read(&config).unwrap(), before);
    // The rest of the workspace stays writable for it.
    let inside = c.ws.join("inside.txt");
    let (ok, out, err) = run(
        &c,
        &(delegates("main", "worker") + &writes("worker", &inside)),
    );
    assert!(ok, "{out}\n{err}");
    assert!(inside.exists(), "{out}\n{err}");
}
