//! The command line's edges: refused input (exit 2), no session left by a run the model never
//! answered, the model of a resumed session, readable task records, colour only on a
//! terminal, who refused a call, and progress lines with argument names; and no source or
//! test pointing at a document outside the repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::Path;

fn cadre(ws: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cadre").unwrap();
    cmd.arg("--workspace").arg(ws);
    cmd.env_remove("CADRE_MODEL")
        .env_remove("CADRE_STORE_URL")
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG");
    cmd.env("XDG_CONFIG_HOME", ws.join(".no-user-config"));
    cmd
}

/// A workspace with `script` as `name`, and the model spec that plays it.
fn script(ws: &Path, name: &str, script: &str) -> String {
    let path = ws.join(name);
    std::fs::write(&path, script).unwrap();
    format!("scripted:{}", path.display())
}

fn sessions(ws: &Path) -> Vec<String> {
    match std::fs::read_dir(ws.join(".cadre/sessions")) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

const ANSWER: &str = "[[turns]]\ntext = \"answer for {{user}}\"\n";

#[test]
fn empty_prompts_and_zero_turns_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(dir.path(), "s.toml", ANSWER);
    for prompt in ["", "   ", "\n\t "] {
        let out = cadre(dir.path())
            .args(["--model", &model, "run", prompt])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "prompt {prompt:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("the prompt is empty"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--max-turns", "0", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--max-turns"), "{stderr}");
    assert!(sessions(dir.path()).is_empty(), "nothing was run");
}

#[test]
fn a_run_the_model_never_answered_leaves_no_session_and_no_resume_hint() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(
        dir.path(),
        "s.toml",
        "[[turns]]\nerror = \"no such model\"\n",
    );
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("no such model"), "{stderr}");
    assert!(!stderr.contains("--resume"), "{stderr}");
    assert!(
        sessions(dir.path()).is_empty(),
        "{:?}",
        sessions(dir.path())
    );

    // A sub-agent run directly has its own session; none is made for the main agent.
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "--agent", "nobody", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        sessions(dir.path()).is_empty(),
        "{:?}",
        sessions(dir.path())
    );

    // A run that got an answer keeps its session and names it.
    let model = script(dir.path(), "ok.toml", ANSWER);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let listed = sessions(dir.path());
    assert_eq!(listed.len(), 1, "{listed:?}");
    let id = listed[0].trim_end_matches(".jsonl");
    assert!(stderr.contains(&format!("--resume {id}")), "{stderr}");
}

fn run_started_model(stdout: &[u8]) -> String {
    let text = String::from_utf8(stdout.to_vec()).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "run_started", "{text}");
    first["model"].as_str().unwrap().to_string()
}

#[test]
fn resume_keeps_the_sessions_model_unless_model_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let first = script(
        dir.path(),
        "first.toml",
        "[[turns]]\ntext = \"one\"\n[[turns]]\ntext = \"two\"\n[[turns]]\ntext = \"three\"\n",
    );
    // The scripted model plays the turn after the assistant messages already in the session.
    let other = script(
        dir.path(),
        "other.toml",
        "[[turns]]\ntext = \"a\"\n[[turns]]\ntext = \"b\"\n[[turns]]\ntext = \"c\"\n",
    );
    let out = cadre(dir.path())
        .args(["--model", &first, "run", "--output", "jsonl", "start"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let id = sessions(dir.path())[0]
        .trim_end_matches(".jsonl")
        .to_string();

    // The environment's model does not replace the session's own.
    let out = cadre(dir.path())
        .env("CADRE_MODEL", &other)
        .args(["run", "--output", "jsonl", "--resume", &id, "more"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(run_started_model(&out.stdout), first);

    // `--model` does.
    let out = cadre(dir.path())
        .args(["--model", &other, "run", "--output", "jsonl"])
        .args(["--resume", &id, "switch"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(run_started_model(&out.stdout), other);

    let out = cadre(dir.path())
        .args(["run", "--resume", "s-nope", "more"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("no session s-nope")
    );
}

const DELEGATE: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [{ name = "task", args = { subagent_type = "general-purpose", description = "count the notes", prompt = "count them", background = false } }]
[[scripts.turns]]
text = "done: {{tool_results}}"

[[scripts]]
agent = "general-purpose"
[[scripts.turns]]
text = "three notes"
"#;

#[test]
fn progress_lines_name_the_arguments_and_task_records_read_well() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(dir.path(), "s.toml", DELEGATE);
    let out = cadre(dir.path())
        .args(["--model", &model, "run", "delegate"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("▸ task(general-purpose: count the notes)"),
        "{stderr}"
    );

    let out = cadre(dir.path()).args(["tasks", "list"]).output().unwrap();
    assert!(out.status.success());
    let list = String::from_utf8(out.stdout).unwrap();
    let mut lines = list.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["TASK", "STATUS", "AGENT", "CREATED", "DESCRIPTION"],
        "{list}"
    );
    let row = lines.next().unwrap();
    let id = row.split_whitespace().next().unwrap().to_string();
    assert!(id.starts_with("task_"), "{row}");
    assert!(row.contains("completed") && row.contains("count the notes"));

    let out = cadre(dir.path())
        .args(["tasks", "show", &id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(&shown).is_err());
    let created = shown
        .lines()
        .find_map(|l| l.strip_prefix("created"))
        .unwrap_or_else(|| panic!("no created line: {shown}"))
        .trim();
    assert!(iso_utc(created), "{created:?} in\n{shown}");
    assert!(shown.contains("general-purpose"), "{shown}");
    assert!(shown.contains("result:\n  three notes"), "{shown}");

    let out = cadre(dir.path())
        .args(["tasks", "show", "--json", &id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let raw: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(raw["task_id"], id.as_str());
    assert!(raw["created_at"].as_u64().unwrap() > 1_600_000_000_000);
}

/// `YYYY-MM-DDTHH:MM:SSZ`.
fn iso_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[test]
fn stderr_has_no_colour_unless_it_is_a_terminal_without_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let model = script(dir.path(), "s.toml", ANSWER);
    // Logs at info level are written during the run ("run ended").
    let out = cadre(dir.path())
        .env("RUST_LOG", "info")
        .args(["--model", &model, "run", "go"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("run ended"), "{stderr}");
    assert!(!stderr.contains('\x1b'), "colour on a pipe: {stderr:?}");

    // On a terminal (util-linux `script` gives the program a pty), colour unless NO_COLOR.
    let bin = assert_cmd::cargo::cargo_bin("cadre");
    let command = format!(
        "{} --workspace {} --model {} run go",
        bin.display(),
        dir.path().display(),
        model
    );
    let on_pty = |no_color: Option<&str>| {
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qec", &command, "/dev/null"])
            .env("RUST_LOG", "info")
            .env("XDG_CONFIG_HOME", dir.path().join(".no-user-config"))
            .env_remove("NO_COLOR");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = on_pty(None);
    assert!(coloured.contains("run ended"), "{coloured}");
    assert!(
        coloured.contains("\x1b["),
        "a terminal gets colour: {coloured:?}"
    );
    let plain = on_pty(Some("1"));
    assert!(plain.contains("run ended"), "{plain}");
    assert!(!plain.contains('\x1b'), "NO_COLOR: {plain:?}");
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A comment that points at a document outside the repository ("SPEC §4.2", "the Java
/// seed") tells a reader nothing once that document is gone or has moved on: comments say
/// the reason in place. This file names the phrases, so it is left out.
#[test]
fn sources_and_tests_name_no_document_outside_the_repository() {
    let phrases = [
        "SPEC §",
        "SPEC.md",
        "the seed",
        "The seed",
        "Java seed",
        "Go seed",
    ];
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap().flatten() {
        rust_files(&krate.path().join("src"), &mut files);
        rust_files(&krate.path().join("tests"), &mut files);
    }
    assert!(files.len() > 100, "the walk found the sources: {files:?}");
    let mut found = Vec::new();
    for f in &files {
        if f.ends_with("cadre/tests/cli_hygiene.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(p) = phrases.iter().find(|p| line.contains(*p)) {
                found.push(format!("{}:{}: {p:?}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "outside references:\n{}",
        found.join("\n")
    );
}
