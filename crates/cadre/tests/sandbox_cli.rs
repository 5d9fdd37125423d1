//! `cadre run` with sandboxed sub-agents, end to end: a scripted parent delegates to a child
//! whose `bash` tries to write outside its root, read a credential, and reach a listening
//! port, on both backends; definitions cannot widen their parent's sandbox; a required
//! sandbox without its mechanism refuses to run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::net::TcpListener;
use std::path::PathBuf;

struct Case {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    home: PathBuf,
}

/// A workspace with an agent `worker` (bash only, `sandbox` as given), a directory outside
/// it and a home with a private key.
fn case(sandbox: Option<&str>, config: &str) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (ws, outside, home) = (base.join("ws"), base.join("outside"), base.join("home"));
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    let sandbox = sandbox
        .map(|s| format!("sandbox: {s}\n"))
        .unwrap_or_default();
    std::fs::write(
        ws.join(".cadre/agents/worker.md"),
        format!(
            "---\nname: worker\ndescription: runs shell commands\ntools: [bash]\n{sandbox}---\nRun what you are asked.\n"
        ),
    )
    .unwrap();
    std::fs::write(ws.join(".cadre/config.toml"), config).unwrap();
    Case {
        _dir: dir,
        ws,
        outside,
        home,
    }
}

/// A script: `main` delegates to `worker`, which runs `command` and reports its result;
/// `main` ends with what the task returned.
fn script(case: &Case, command: &str) -> PathBuf {
    let path = case.ws.join("script.toml");
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
[[scripts.turns]]
tool_calls = [{{ name = "bash", args = {{ command = {command:?} }} }}]
[[scripts.turns]]
text = "{{{{tool_results}}}}"
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Run the scripted delegation; (success, stdout, stderr).
fn run(case: &Case, command: &str, extra: &[&str]) -> (bool, String, String) {
    let script = script(case, command);
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace")
        .arg(&case.ws)
        .env_remove("CADRE_MODEL")
        .env_remove("CADRE_SANDBOX_SIMULATE_MISSING")
        .env("XDG_CONFIG_HOME", case.ws.join(".no-user-config"))
        .env("HOME", &case.home)
        .args([
            "--model",
            &format!("scripted:{}", script.display()),
            "run",
            "--permission-mode",
            "auto-approve",
        ])
        .args(extra)
        .arg("go");
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const BWRAP: &str = "[sandbox]\nbackend = \"bwrap\"\nrequired = true\n";
const LANDLOCK: &str = "[sandbox]\nrequired = true\n";

/// Whether the backend of `config` can run here: bubblewrap is optional (SKIPPED without it,
/// except under CI), the Landlock launcher is cadre itself.
fn backend_here(config: &str) -> bool {
    if config.contains("bwrap") && !cadre_testkit::optional::on_path("bwrap") {
        cadre_testkit::optional::skip_because("bwrap not installed");
        return false;
    }
    true
}

fn writes_stay_inside_the_childs_root(config: &str, refusal: &str) {
    if !backend_here(config) {
        return;
    }
    let c = case(None, config);
    let escaped = c.outside.join("escaped");
    let command = format!(
        "echo x > {}; cat ~/.ssh/id_ed25519; echo kept > inside.txt && pwd",
        escaped.display()
    );
    let (ok, out, err) = run(&c, &command, &[]);
    assert!(ok, "{out}\n{err}");
    assert!(!escaped.exists(), "the child wrote outside its root");
    assert!(out.contains(refusal), "the command's own error: {out}");
    assert!(!out.contains("PRIVATE KEY"), "{out}");
    // The child's root (the workspace it shares, as agents of `.cadre/agents/` do) is
    // where the write went.
    assert!(out.contains(&c.ws.display().to_string()), "{out}");
    assert_eq!(
        std::fs::read_to_string(c.ws.join("inside.txt")).unwrap(),
        "kept\n"
    );
}

#[test]
fn a_sandboxed_childs_writes_stay_inside_its_root() {
    writes_stay_inside_the_childs_root(LANDLOCK, "Permission denied");
}

#[test]
fn a_sandboxed_childs_writes_stay_inside_its_root_with_bwrap() {
    writes_stay_inside_the_childs_root(BWRAP, "Read-only file system");
}

/// The child connects to a fresh listener; (whether the listener saw it, the output).
fn connect(c: &Case) -> (bool, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ok, out, err) = run(
        c,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
        &[],
    );
    assert!(ok, "{out}\n{err}");
    // cadre has exited, so the child's attempt is over and a connection would be queued.
    (listener.accept().is_ok(), out)
}

fn the_network_needs_network_true(config: &str) {
    if !backend_here(config) {
        return;
    }
    let (seen, out) = connect(&case(None, config));
    assert!(!seen && !out.contains("connected\n"), "{out}");
    let (seen, out) = connect(&case(Some("{network: true}"), config));
    assert!(seen && out.contains("connected"), "{out}");
}

#[test]
fn a_sandboxed_child_reaches_the_network_only_with_network_true() {
    the_network_needs_network_true(LANDLOCK);
}

#[test]
fn a_sandboxed_child_reaches_the_network_only_with_network_true_with_bwrap() {
    the_network_needs_network_true(BWRAP);
}

#[test]
fn a_definition_asking_for_off_stays_inside_a_sandboxed_parent() {
    let c = case(Some("off"), LANDLOCK);
    let escaped = c.outside.join("escaped");
    let command = format!("echo x > {}", escaped.display());
    let (ok, out, err) = run(&c, &command, &["--sandbox", "workspace-write"]);
    assert!(ok, "{out}\n{err}");
    assert!(
        !escaped.exists(),
        "`sandbox: off` widened the parent's sandbox"
    );
    assert!(out.contains("Permission denied"), "{out}");
    // Under an unsandboxed parent the same definition does run unconfined.
    let (ok, out, err) = run(&c, &command, &[]);
    assert!(ok, "{out}\n{err}");
    assert!(escaped.exists(), "{out}");
}

#[test]
fn a_required_sandbox_without_its_mechanism_refuses_to_run() {
    let c = case(None, LANDLOCK);
    let marker = c.outside.join("ran");
    let script = script(&c, &format!("touch {}", marker.display()));
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--workspace")
        .arg(&c.ws)
        .env("XDG_CONFIG_HOME", c.ws.join(".no-user-config"))
        .env("CADRE_SANDBOX_SIMULATE_MISSING", "landlock")
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--permission-mode", "auto-approve", "go"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("required = true") && err.contains("no Landlock"),
        "{err}"
    );
    assert!(!marker.exists());
    // Not required: it runs, and says what is missing.
    std::fs::write(c.ws.join(".cadre/config.toml"), "").unwrap();
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--workspace")
        .arg(&c.ws)
        .env("XDG_CONFIG_HOME", c.ws.join(".no-user-config"))
        .env("CADRE_SANDBOX_SIMULATE_MISSING", "landlock")
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--permission-mode", "auto-approve", "go"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: sandbox: the kernel has no Landlock"),
        "{err}"
    );
}

/// The Python of the MCP SDK venv (`.ci/run` installs it), or `None` outside CI.
fn mcp_python() -> Option<PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::env::var_os("CADRE_MCP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/mcp-venv"));
    let py = venv.join("bin/python");
    if py.exists() {
        return Some(py);
    }
    let msg = format!(
        "MCP Python SDK venv missing at {} (see .ci/run)",
        venv.display()
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPED: {msg}\n");
    None
}

#[test]
fn an_mcp_server_with_a_sandbox_writes_only_inside_the_workspace() {
    let Some(py) = mcp_python() else { return };
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cadre-mcp/tests/fixtures/py_server.py")
        .canonicalize()
        .unwrap();
    let c = case(None, "");
    // The fixture server records its start in the directory it is given.
    let server = |name: &str, markers: &std::path::Path, sandbox: &str| {
        format!(
            "[mcp_servers.{name}]\ncommand = {:?}\nargs = [{:?}, {:?}]\nstartup_timeout_secs = 60\n{sandbox}\n",
            py.display().to_string(),
            fixture.display().to_string(),
            markers.display().to_string()
        )
    };
    let config = [
        server(
            "inside",
            &c.ws.join("markers"),
            "sandbox = \"workspace-write\"",
        ),
        server(
            "outside",
            &c.outside.join("markers"),
            "sandbox = \"workspace-write\"",
        ),
        server("free", &c.outside.join("free"), ""),
    ]
    .concat();
    std::fs::write(c.ws.join(".cadre/config.toml"), config).unwrap();
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--workspace")
        .arg(&c.ws)
        .env("XDG_CONFIG_HOME", c.ws.join(".no-user-config"))
        .args(["mcp", "list", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let state = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(state("inside"), "running", "{stderr}");
    assert!(c.ws.join("markers/starts").exists());
    // Sandboxed, it cannot write outside the workspace: it dies at start, having written
    // nothing there.
    assert!(state("outside").starts_with("failed"), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(!c.outside.join("markers").exists());
    // Without a sandbox the same server writes where it likes.
    assert_eq!(state("free"), "running", "{stderr}");
    assert!(c.outside.join("free/starts").exists());
}
