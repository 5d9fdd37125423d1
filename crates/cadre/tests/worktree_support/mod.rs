//! What the worktree tests share: a temporary repository with an agent `editor`, a
//! scripted parent and children played with `cadre run`, and git's view of the result.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// A temporary workspace.
pub struct Repo {
    _dir: tempfile::TempDir,
    /// Its root.
    pub ws: PathBuf,
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A workspace with an agent `editor` (`isolation` as given) and, with `git`, a repository
/// with one commit holding `shared.txt`.
pub fn repo(isolation: Option<&str>, with_git: bool) -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(ws.join("shared.txt"), "base\n").unwrap();
    let isolation = isolation
        .map(|i| format!("isolation: {i}\n"))
        .unwrap_or_default();
    std::fs::write(
        ws.join(".cadre/agents/editor.md"),
        format!(
            "---\nname: editor\ndescription: edits files\ntools: [bash, write_file, read_file]\n{isolation}---\nEdit as told.\n"
        ),
    )
    .unwrap();
    if with_git {
        git(&ws, &["init", "--quiet", "-b", "main"]);
        // `.cadre/` is not ignored: cadre's own state in a worktree (offloaded outputs) must
        // stay out of the child's commit by itself.
        std::fs::write(ws.join(".gitignore"), "script.toml\n").unwrap();
        git(&ws, &["add", "shared.txt", ".gitignore"]);
        git(
            &ws,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "-m",
                "base",
            ],
        );
    }
    Repo { _dir: dir, ws }
}

/// How a scripted child ends: with its tool results as its answer.
pub const REPORT: &str = "text = \"{{tool_results}}\"";

/// `main` makes the `task` calls (TOML inline tables), then ends with their results; each
/// child, matched by a word of its prompt, makes its calls and then plays its last turn.
/// Returns the `--model` value that plays it.
pub fn script(r: &Repo, tasks: &[&str], children: &[(&str, &str, &str)]) -> String {
    let mut script = format!(
        "[[scripts]]\nagent = \"main\"\n[[scripts.turns]]\ntool_calls = [{}]\n[[scripts.turns]]\ntext = \"{{{{tool_results}}}}\"\n",
        tasks
            .iter()
            .map(|t| format!("{{ name = \"task\", args = {t} }}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (word, calls, last) in children {
        script.push_str(&format!(
            "\n[[scripts]]\nagent = \"editor\"\nprompt_contains = \"{word}\"\n[[scripts.turns]]\ntool_calls = [{calls}]\n[[scripts.turns]]\n{last}\n"
        ));
    }
    let path = r.ws.join("script.toml");
    std::fs::write(&path, script).unwrap();
    format!("scripted:{}", path.display())
}

/// Writes scripts given as (agent, the word its first prompt contains, its turns as TOML
/// bodies) and returns the `--model` value that plays them.
pub fn script_of(r: &Repo, scripts: &[(&str, Option<&str>, &[&str])]) -> String {
    let mut text = String::new();
    for (agent, word, turns) in scripts {
        text.push_str(&format!("\n[[scripts]]\nagent = \"{agent}\"\n"));
        if let Some(word) = word {
            text.push_str(&format!("prompt_contains = \"{word}\"\n"));
        }
        for turn in *turns {
            text.push_str(&format!("[[scripts.turns]]\n{turn}\n"));
        }
    }
    let path = r.ws.join("script.toml");
    std::fs::write(&path, text).unwrap();
    format!("scripted:{}", path.display())
}

/// `cadre run go` with `model` and `extra` arguments (before `go`): (success, stdout,
/// stderr).
pub fn run_model(r: &Repo, model: &str, extra: &[&str]) -> (bool, String, String) {
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--workspace")
        .arg(&r.ws)
        .env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", r.ws.join(".no-user-config"))
        .args(["--model", model])
        .args(["run", "--permission-mode", "auto-approve"])
        .args(extra)
        .arg("go")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs [`script`]'s parent and children with `cadre run`: (success, stdout, stderr).
pub fn run(r: &Repo, tasks: &[&str], children: &[(&str, &str, &str)]) -> (bool, String, String) {
    let model = script(r, tasks, children);
    run_model(r, &model, &[])
}

/// The branches named in worktree reports (``on branch `NAME` ``).
pub fn branches_named(out: &str) -> Vec<String> {
    out.split("on branch `")
        .skip(1)
        .map(|rest| rest.split('`').next().unwrap().to_string())
        .collect()
}

pub fn cadre_branches(ws: &Path) -> Vec<String> {
    git(
        ws,
        &["branch", "--list", "cadre/*", "--format=%(refname:short)"],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// The parent's tree and index as git sees them (cadre's own state aside).
pub fn parent_state(ws: &Path) -> String {
    git(ws, &["status", "--porcelain", "--untracked-files=all"])
        .lines()
        .filter(|l| !l.starts_with("?? .cadre/"))
        .map(|l| format!("{l}\n"))
        .collect()
}

pub fn cadre_cmd(ws: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::cargo_bin("cadre")
        .unwrap()
        .arg("--workspace")
        .arg(ws)
        .env("XDG_CONFIG_HOME", ws.join(".no-user-config"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}
