//! Helpers for the `cadre serve` tests: workspaces with agent files and scripts, the real
//! binary started on a random loopback port (stderr captured), and the A2A SDK venv.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use cadre_testkit::poll_for;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Variables that must not leak in from the environment.
const CLEAN: [&str; 7] = [
    "CADRE_MODEL",
    "CADRE_SERVE_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "RUST_LOG",
];

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The venv's python, or `None` (after a loud notice) when the venv is missing outside CI.
/// The venv is `$CADRE_A2A_VENV`, else `<repo>/target/a2a-venv` (made by `.ci/run`).
pub fn venv_python() -> Option<PathBuf> {
    python_of(
        "CADRE_A2A_VENV",
        "target/a2a-venv",
        "'a2a-sdk[http-server]==1.3.0' 'uvicorn==0.54.0'",
    )
}

/// The python of the venv with the v0.3 line of the SDK: `$CADRE_A2A03_VENV`, else
/// `<repo>/target/a2a-venv03` (made by `.ci/run`); `None` as [`venv_python`].
pub fn venv03_python() -> Option<PathBuf> {
    python_of("CADRE_A2A03_VENV", "target/a2a-venv03", "'a2a-sdk==0.3.26'")
}

fn python_of(var: &str, default: &str, pins: &str) -> Option<PathBuf> {
    let venv = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(default));
    let python = venv.join("bin/python");
    if python.exists() {
        return Some(python);
    }
    let msg = format!(
        "a2a-sdk venv missing at {} (create it: python3 -m venv {default} && {default}/bin/pip install {pins})",
        venv.display()
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPED: {msg}\n");
    None
}

/// A fixture script of `cadre-remote` (the Python SDK programs).
pub fn fixture(name: &str) -> PathBuf {
    repo().join("crates/cadre-remote/tests/fixtures").join(name)
}

/// A workspace with `files` (path → content) written under it.
pub fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    dir
}

/// A `cadre` command in `ws` with a clean environment.
pub fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace").arg(ws);
    clean(&mut cmd, ws);
    cmd
}

/// The same, run with at most `files` open files (`ulimit -n`).
pub fn cadre_with_file_limit(ws: &Path, files: u32) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "ulimit -n \"$0\" && exec \"$@\""])
        .arg(files.to_string())
        .arg(env!("CARGO_BIN_EXE_cadre"))
        .arg("--workspace")
        .arg(ws);
    clean(&mut cmd, ws);
    cmd
}

fn clean(cmd: &mut Command, ws: &Path) {
    for v in CLEAN {
        cmd.env_remove(v);
    }
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd.stdin(Stdio::null());
}

/// A running `cadre serve`; killed when dropped.
pub struct Served {
    child: Child,
    pub url: String,
    stderr: Arc<Mutex<Vec<String>>>,
    /// Gets a message once the reader has taken the last line the server wrote.
    stderr_closed: mpsc::Receiver<()>,
}

impl Served {
    /// Start `cadre --model MODEL serve --addr 127.0.0.1:0` in `ws` with `env` and wait until
    /// it listens.
    pub fn start(ws: &Path, model: &str, env: &[(&str, &str)]) -> Served {
        Self::start_command(cadre(ws), model, env)
    }

    /// [`Served::start`] with `cmd` (from [`cadre`] or [`cadre_with_file_limit`]).
    pub fn start_command(cmd: Command, model: &str, env: &[(&str, &str)]) -> Served {
        Self::start_command_at(cmd, model, env, "127.0.0.1:0")
    }

    /// [`Served::start`] listening on `addr` (a fixed port: a restarted node keeps it).
    pub fn start_at(ws: &Path, model: &str, env: &[(&str, &str)], addr: &str) -> Served {
        Self::start_command_at(cadre(ws), model, env, addr)
    }

    fn start_command_at(mut cmd: Command, model: &str, env: &[(&str, &str)], addr: &str) -> Served {
        cmd.args(["--model", model, "serve", "--addr", addr]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let err = child.stderr.take().unwrap();
        let sink = lines.clone();
        let (read_all, stderr_closed) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
            let _ = read_all.send(());
        });
        let started = poll_for(Duration::from_secs(20), || {
            let found = lines.lock().unwrap().iter().find_map(|l| {
                l.split_once("listening on ")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .map(|u| u.trim_end_matches('/').to_string())
            });
            match (found, child.try_wait()) {
                (Some(u), _) => Some(Ok(u)),
                (None, Ok(Some(status))) => Some(Err(status)),
                (None, _) => None,
            }
        });
        let url = match started {
            Some(Ok(u)) => u,
            Some(Err(status)) => panic!(
                "cadre serve exited with {status}: {:?}",
                lines.lock().unwrap()
            ),
            None => panic!("cadre serve did not start: {:?}", lines.lock().unwrap()),
        };
        Served {
            child,
            url,
            stderr: lines,
            stderr_closed,
        }
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// SIGKILL, and reap it: the node is lost, with nothing written on its way out.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Send `signal` (`STOP`, `CONT`, …) to the server, as `kill -SIGNAL` does.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([format!("-{signal}"), pid])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// SIGTERM, then wait (bounded) for the exit; returns whether it exited successfully.
    pub fn terminate(&mut self, within: Duration) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.wait_exit(within)
    }

    /// Wait (bounded) for the exit, after a signal sent already; whether it succeeded.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        let Some(status) = poll_for(within, || self.child.try_wait().ok().flatten()) else {
            panic!(
                "cadre serve did not stop within {within:?}: {}",
                self.stderr()
            );
        };
        // Let the reader take the last lines. A child the server left behind may hold the
        // pipe open; the lines read by then are all a caller gets.
        let _ = self.stderr_closed.recv_timeout(Duration::from_secs(2));
        status.success()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Run a fixture with the venv's python; returns (success, JSON printed on stdout, stderr).
pub fn python(py: &Path, script: &str, args: &[&str]) -> (bool, serde_json::Value, String) {
    let out = Command::new(py)
        .arg(fixture(script))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(serde_json::Value::Null);
    (out.status.success(), json, format!("{stdout}\n{stderr}"))
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// One A2A v1.0 JSON-RPC call to `node`; the whole response.
pub async fn rpc(node: &str, method: &str, params: serde_json::Value) -> serde_json::Value {
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    json_of(
        reqwest::Client::new()
            .post(format!("{node}/"))
            .header("A2A-Version", "1.0")
            .json(&call),
    )
    .await
}

/// `POST url` with a JSON body; the JSON answer.
pub async fn post(url: &str, body: serde_json::Value) -> serde_json::Value {
    json_of(reqwest::Client::new().post(url).json(&body)).await
}

/// `GET url`; the JSON answer.
pub async fn get(url: &str) -> serde_json::Value {
    json_of(reqwest::Client::new().get(url)).await
}

async fn json_of(request: reqwest::RequestBuilder) -> serde_json::Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// True when PostgreSQL is installed; without it a test skips, loudly (and CI fails).
pub fn postgres_installed() -> bool {
    if cadre_store::testing::find_pg_bin().is_some() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "PostgreSQL missing in CI"
    );
    eprintln!("\n!!!!!!!! SKIPPED: PostgreSQL not installed\n");
    false
}

/// A fresh database on the shared throwaway cluster; `None` (loudly) without PostgreSQL
/// outside CI.
pub async fn database() -> Option<String> {
    if !postgres_installed() {
        return None;
    }
    let cluster = cadre_store::testing::shared_cluster().unwrap();
    Some(cluster.create_database().await.unwrap())
}

/// The messages of a chat request the mock model recorded.
pub fn messages(r: &cadre_testkit::RecordedRequest) -> Vec<serde_json::Value> {
    r.body["messages"].as_array().cloned().unwrap_or_default()
}

/// True for an agent's first turn: nothing answered yet.
pub fn first_turn(r: &cadre_testkit::RecordedRequest) -> bool {
    !messages(r).iter().any(|m| m["role"] == "assistant")
}

/// A streamed reply calling tool `name` with `args`.
pub fn call(name: &str, args: serde_json::Value) -> cadre_testkit::MockReply {
    cadre_testkit::OpenAiStream::new()
        .role()
        .tool_call(0, "call_1", name, &args.to_string())
        .finish("tool_calls")
        .usage(30, 10, 0)
        .done()
        .into_reply()
}

/// A streamed final answer `text`.
pub fn answer(text: &str) -> cadre_testkit::MockReply {
    cadre_testkit::OpenAiStream::new()
        .role()
        .text(text)
        .finish("stop")
        .usage(40, 5, 0)
        .done()
        .into_reply()
}
