//! cadre's own secrets (the serve token, the providers' key variables) do not reach the
//! `bash` tool's environment unless `[tools] pass_env` passes them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;

const SCRIPT: &str = r#"
[[turns]]
tool_calls = [{ name = "bash", args = { command = "echo \"token=[$CADRE_SERVE_TOKEN] openai=[$OPENAI_API_KEY] anthropic=[$ANTHROPIC_API_KEY] provider=[$MY_PROVIDER_KEY] serve=[$MY_SERVE_TOKEN] other=[$UNRELATED_VAR]\"" } }]
[[turns]]
text = "saw: {{tool_results}}"
"#;

/// Run the script with secrets in cadre's environment and `config` as the project config;
/// return what the bash tool printed.
fn bash_sees(config: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    std::fs::create_dir_all(dir.path().join(".cadre")).unwrap();
    std::fs::write(dir.path().join(".cadre/config.toml"), config).unwrap();
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--workspace")
        .arg(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join(".no-user-config"))
        .env_remove("CADRE_MODEL")
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
