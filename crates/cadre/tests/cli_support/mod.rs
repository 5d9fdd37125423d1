//! The real `cadre` binary run in a test's workspace, the way every CLI test wants it: no
//! user configuration, and none of the model, provider, store or logging setup of the
//! environment the tests run in.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
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
