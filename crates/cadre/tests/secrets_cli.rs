//! cadre's own secrets (the serve token, the providers' key variables) do not reach the
//! `bash` tool's environment unless `[tools] pass_env` passes them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli_support;

use cli_support::cadre;
use std::path::{Path, PathBuf};

const SCRIPT: &str = r#"
[[turns]]
tool_calls = [{ name = "bash", args = { command = "echo \"token=[$CADRE_SERVE_TOKEN] openai=[$OPENAI_API_KEY] anthropic=[$ANTHROPIC_API_KEY] provider=[$MY_PROVIDER_KEY] serve=[$MY_SERVE_TOKEN] other=[$UNRELATED_VAR] remote=[$REMOTE_TOKEN] othertok=[$OTHER_TOKEN]\"" } }]
[[turns]]
text = "saw: {{tool_results}}"
"#;

/// Run `script` in `ws` with cadre's secrets (and one unrelated variable) in its
/// environment and automatic approvals; return what it printed.
fn run_with_secrets(ws: &Path, script: &Path) -> String {
    let out = cadre(ws)
        .env("CADRE_SERVE_TOKEN", "serve-secret")
        .env("OPENAI_API_KEY", "sk-openai-secret")
        .env("ANTHROPIC_API_KEY", "sk-ant-secret")
        .env("MY_PROVIDER_KEY", "provider-secret")
        .env("MY_SERVE_TOKEN", "custom-serve-secret")
        .env("UNRELATED_VAR", "visible")
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--approval", "auto", "show the environment"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Run the script with secrets in cadre's environment and `config` as the project config;
/// return what the bash tool printed.
fn bash_sees(config: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(dir.path().join(".cadre/config.toml"), config).unwrap();
    run_with_secrets(dir.path(), &script)
}

const PROVIDER: &str = "[serve]\ntoken_env = \"MY_SERVE_TOKEN\"\n\
    [providers.mine]\nkind = \"openai\"\napi_key_env = \"MY_PROVIDER_KEY\"\n";

#[test]
fn bash_does_not_see_cadres_secrets() {
    let out = bash_sees(PROVIDER);
    assert!(
        out.contains("token=[] openai=[] anthropic=[] provider=[] serve=[] other=[visible]"),
        "{out}"
    );
}

#[test]
fn pass_env_lets_named_secrets_through() {
    let config =
        format!("[tools]\npass_env = [\"OPENAI_API_KEY\", \"MY_PROVIDER_KEY\"]\n{PROVIDER}");
    let out = bash_sees(&config);
    assert!(
        out.contains(
            "token=[] openai=[sk-openai-secret] anthropic=[] provider=[provider-secret] serve=[] other=[visible]"
        ),
        "{out}"
    );
}

/// `server-everything` from `.ci/run` (`target/mcp-npm`, or `$CADRE_MCP_EVERYTHING`).
fn everything() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = std::env::var_os("CADRE_MCP_EVERYTHING")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            root.join(
                "target/mcp-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )
        });
    if path.exists() {
        return Some(path);
    }
    let msg = format!(
        "server-everything missing at {} (see .ci/run)",
        path.display()
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPED: {msg}\n");
    None
}

/// What server-everything's `get-env` tool (its whole environment as JSON) reports when
/// cadre runs with secrets in its environment, the server's `env` being `env` (JSON) and
/// `[tools] pass_env` being `pass_env` (TOML).
fn mcp_server_sees(index: &Path, env: &str, pass_env: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        "[[turns]]\ntool_calls = [{ name = \"mcp__everything__get-env\", args = {} }]\n\
         [[turns]]\ntext = \"{{tool_results}}\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{"everything": {{"command": "node", "args": [{:?}, "stdio"], "env": {env}}}}}}}"#,
            index.display().to_string()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    // The environment JSON stays inline instead of going to an offload file.
    std::fs::write(
        dir.path().join(".cadre/config.toml"),
        format!("[tools]\npass_env = {pass_env}\noffload_threshold = 10000000\n{PROVIDER}"),
    )
    .unwrap();
    let stdout = run_with_secrets(dir.path(), &script);
    let start = stdout
        .find('{')
        .unwrap_or_else(|| panic!("no JSON: {stdout}"));
    let end = stdout.rfind('}').unwrap();
    serde_json::from_str(&stdout[start..=end]).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn a_stdio_mcp_server_does_not_see_cadres_secrets_unless_its_env_names_them() {
    let Some(index) = everything() else { return };
    let env = mcp_server_sees(
        &index,
        r#"{"ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}", "SET_HERE": "x"}"#,
        "[]",
    );
    for secret in [
        "CADRE_SERVE_TOKEN",
        "OPENAI_API_KEY",
        "MY_PROVIDER_KEY",
        "MY_SERVE_TOKEN",
    ] {
        assert!(
            env.get(secret).is_none(),
            "{secret} reached the server: {env}"
        );
    }
    assert_eq!(
        env["ANTHROPIC_API_KEY"], "sk-ant-secret",
        "its own env sets it"
    );
    assert_eq!(env["SET_HERE"], "x");
    assert_eq!(env["UNRELATED_VAR"], "visible");
}

#[test]
fn pass_env_lets_named_secrets_through_to_mcp_servers_too() {
    let Some(index) = everything() else { return };
    let env = mcp_server_sees(&index, "{}", r#"["OPENAI_API_KEY"]"#);
    assert_eq!(env["OPENAI_API_KEY"], "sk-openai-secret");
    assert!(env.get("CADRE_SERVE_TOKEN").is_none(), "{env}");
}

/// What the main agent's `bash` (sandbox off) finds of cadre's secrets in cadre's own
/// `/proc` files, with cadre started by `wrap` (empty: directly).
fn parent_sees(wrap: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[turns]]
tool_calls = [{ name = "bash", args = { command = "tr '\\0' '\\n' < /proc/$PPID/environ | grep -c -- S3CR3T; echo environ=$?; head -c 1 /proc/$PPID/mem >/dev/null 2>&1; echo mem=$?; env | grep -c -- S3CR3T" } }]
[[turns]]
text = "saw: {{tool_results}}"
"#,
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("cadre");
    let mut cmd =
        std::process::Command::new(wrap.first().copied().unwrap_or(bin.to_str().unwrap()));
    if !wrap.is_empty() {
        cmd.args(&wrap[1..]).arg(&bin);
    }
    for var in cli_support::SETUP_VARS {
        cmd.env_remove(var);
    }
    let out = cmd
        .arg("--workspace")
        .arg(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join(".no-user-config"))
        .env("CADRE_SERVE_TOKEN", "serve-S3CR3T")
        .env("OPENAI_API_KEY", "sk-openai-S3CR3T")
        .env("REMOTE_TOKEN", "remote-S3CR3T")
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--approval", "auto", "look"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn cadres_own_environment_block_holds_no_secret() {
    // Even a reader allowed into /proc/PPID/environ (root) finds the values blanked.
    let out = parent_sees(&[]);
    // The checkout path may contain "secret": the values carry a marker of their own.
    assert!(!out.contains("S3CR3T"), "{out}");
    // `grep -c` printed 0 matches in cadre's block (or it could not be read) and in bash's env.
    assert!(
        !out.contains("environ=0"),
        "a secret in /proc/$PPID/environ: {out}"
    );
}

#[test]
fn cadres_memory_and_environment_are_unreadable_to_its_bash() {
    // As root, CAP_SYS_PTRACE would open any process: drop it for cadre and its children.
    let root = nix::unistd::geteuid().is_root();
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    if root && !setpriv.exists() {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "setpriv missing"
        );
        eprintln!("SKIPPED (setpriv not installed)");
        return;
    }
    let wrap: &[&str] = if root {
        &[
            "/usr/bin/setpriv",
            "--bounding-set",
            "-sys_ptrace",
            "--inh-caps",
            "-sys_ptrace",
        ]
    } else {
        &[]
    };
    let out = parent_sees(wrap);
    assert!(out.contains("mem=1"), "/proc/$PPID/mem was readable: {out}");
    assert!(!out.contains("environ=0"), "{out}");
}

#[test]
fn a_remote_agents_header_variable_does_not_reach_bash() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre/agents")).unwrap();
    std::fs::write(
        dir.path().join(".cadre/agents/far.md"),
        "---\nname: far\ndescription: Runs elsewhere.\nurl: http://127.0.0.1:9\nheaders:\n  Authorization: \"Bearer ${REMOTE_TOKEN}\"\n---\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".cadre/config.toml"), "").unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = cadre(dir.path())
        .env("REMOTE_TOKEN", "remote-S3CR3T")
        .env("UNRELATED_VAR", "visible")
        .env("OTHER_TOKEN", "other-visible")
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--approval", "auto", "look"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("other=[visible]"), "{stdout}");
    assert!(!stdout.contains("S3CR3T"), "{stdout}");
    assert!(stdout.contains("remote=[]"), "{stdout}");
    // A credential-like variable that is none of cadre's is given back to bash.
    assert!(stdout.contains("othertok=[other-visible]"), "{stdout}");
}

/// The plain-Python fixture server with an `env` tool.
fn writer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/writer_mcp.py")
        .canonicalize()
        .unwrap()
}

#[test]
fn an_mcp_servers_token_reaches_that_server_only_and_a_remote_agents_none() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let writer = writer().display().to_string();
    // `a` names two credentials (one of a plain-looking name); `b` names none.
    std::fs::write(
        ws.join(".mcp.json"),
        format!(
            r#"{{"mcpServers": {{
                "a": {{"command": "python3", "args": [{writer:?}],
                       "env": {{"GITHUB_TOKEN": "${{GITHUB_TOKEN}}", "GITHUB_PERSONAL_ACCESS_TOKEN": "${{GH_PAT}}"}}}},
                "b": {{"command": "python3", "args": [{writer:?}]}},
                "h": {{"url": "http://127.0.0.1:9/mcp", "headers": {{"X-Key": "${{HDR_VALUE}}"}}, "enabled": false}}
            }}}}"#
        ),
    )
    .unwrap();
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(
        ws.join(".cadre/agents/far.md"),
        "---\nname: far\ndescription: Runs elsewhere.\nurl: http://127.0.0.1:9\nheaders:\n  Authorization: \"Bearer ${REMOTE_TOKEN}\"\n---\n",
    )
    .unwrap();
    std::fs::write(ws.join(".cadre/config.toml"), "").unwrap();
    let names =
        "GITHUB_TOKEN GH_PAT GITHUB_PERSONAL_ACCESS_TOKEN HDR_VALUE REMOTE_TOKEN UNRELATED_VAR";
    let echo: String = names
        .split(' ')
        .map(|n| format!("{n}=[${n}]"))
        .collect::<Vec<_>>()
        .join(" ");
    let script = ws.join("script.toml");
    std::fs::write(
        &script,
        format!(
            r#"
[[turns]]
tool_calls = [
  {{ name = "mcp__a__env", args = {{ label = "a", names = "{names}" }} }},
  {{ name = "mcp__b__env", args = {{ label = "b", names = "{names}" }} }},
  {{ name = "bash", args = {{ command = "echo \"bash: {echo}\"" }} }},
]
[[turns]]
text = "saw: {{{{tool_results}}}}"
"#,
        ),
    )
    .unwrap();
    let out = cadre(ws)
        .env("GITHUB_TOKEN", "gh-S3CR3T")
        .env("GH_PAT", "pat-S3CR3T")
        .env("HDR_VALUE", "hdr-S3CR3T")
        .env("REMOTE_TOKEN", "remote-S3CR3T")
        .env("UNRELATED_VAR", "visible")
        .args(["--model", &format!("scripted:{}", script.display())])
        .args(["run", "--approval", "auto", "look"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nothing = "GITHUB_TOKEN=[] GH_PAT=[] GITHUB_PERSONAL_ACCESS_TOKEN=[] HDR_VALUE=[] REMOTE_TOKEN=[] UNRELATED_VAR=[visible]";
    assert!(
        stdout.contains(
            "a: GITHUB_TOKEN=[gh-S3CR3T] GH_PAT=[] GITHUB_PERSONAL_ACCESS_TOKEN=[pat-S3CR3T] HDR_VALUE=[] REMOTE_TOKEN=[] UNRELATED_VAR=[visible]"
        ),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("b: {nothing}")), "{stdout}");
    assert!(stdout.contains(&format!("bash: {nothing}")), "{stdout}");
}
