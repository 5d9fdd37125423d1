//! The real `cadre` binary run in a test's workspace, the way every CLI test wants it: no
//! user configuration, and none of the model, provider, store or logging setup of the
//! environment the tests run in.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

/// Variables of the environment that would change what a run does; removed from every run
/// (a test sets the ones it means after this).
pub const SETUP_VARS: [&str; 12] = [
    "CADRE_MODEL",
    "CADRE_STORE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "RUST_LOG",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SERVICE_NAME",
    "TRACEPARENT",
];

/// `cadre --workspace WS`, blocking (assert_cmd), with a user config directory and a home
/// inside `ws` that do not exist, so nothing of the developer's own (`~/.claude/settings.json`
/// hooks and rules, user agents, commands) reaches the test.
pub fn cadre(ws: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    for var in SETUP_VARS {
        cmd.env_remove(var);
    }
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd.env("HOME", ws.join(".no-home"));
    cmd
}

/// The same as [`cadre`] for async tests (tokio), stdin empty, killed when dropped.
pub fn cadre_async(ws: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace")
        .arg(ws)
        .env("XDG_CONFIG_HOME", ws.join(".no-user-config"))
        .env("HOME", ws.join(".no-home"))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for var in SETUP_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// What `cmd` printed, within a minute.
pub async fn output(mut cmd: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("cadre finished within a minute")
        .expect("cadre started")
}

/// Bytes a process printed, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A workspace (`proj/`) and a home of its own beside it, so nothing of the machine's
/// `~/.claude` is read; for tests of what cadre takes from a Claude Code project.
pub struct HomeCase {
    _dir: tempfile::TempDir,
    /// The workspace (canonical).
    pub ws: PathBuf,
    /// The home directory.
    pub home: PathBuf,
}

impl HomeCase {
    /// Both directories, empty.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("proj");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let ws = ws.canonicalize().unwrap();
        Self {
            _dir: dir,
            ws,
            home,
        }
    }

    /// [`cadre`] in the workspace with this home and the scripted model playing `script`,
    /// killed after `deadline`.
    pub fn scripted(&self, script: &str, deadline: Duration) -> assert_cmd::Command {
        let path = self.ws.join("script.toml");
        std::fs::write(&path, script).unwrap();
        let mut cmd = cadre(&self.ws);
        cmd.arg("--model")
            .arg(format!("scripted:{}", path.display()));
        cmd.env_remove("CLAUDE_CONFIG_DIR");
        cmd.env("HOME", &self.home);
        cmd.env("XDG_CONFIG_HOME", self.home.join(".config"));
        cmd.timeout(deadline);
        cmd
    }
}

/// Write `text` to `path`, making its directories.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
