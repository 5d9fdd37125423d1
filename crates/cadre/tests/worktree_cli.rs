//! `isolation: worktree` end to end with `cadre run`: a scripted parent delegates to children
//! that work in their own git worktrees; their changes come back as commits on their branches
//! and the parent's tree and index stay as they were.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod worktree_support;

use worktree_support::{
    REPORT, branches_named, cadre_branches, cadre_cmd, git, parent_state, repo, run, script,
};

#[test]
fn a_worktree_childs_change_lands_on_its_branch_not_in_the_parents_tree() {
    let r = repo(Some("worktree"), true);
    let (ok, out, err) = run(
        &r,
        &[r#"{ subagent_type = "editor", description = "add a file", prompt = "write" }"#],
        &[(
            "write",
            // The long output is offloaded into the worktree's `.cadre/tool-outputs/`.
            r#"{ name = "write_file", args = { path = "new.txt", content = "from the child\n" } }, { name = "bash", args = { command = "seq 1 20000" } }"#,
            REPORT,
        )],
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        !r.ws.join("new.txt").exists(),
        "the change leaked into the parent's tree"
    );
    assert_eq!(
        parent_state(&r.ws),
        "",
        "the parent's tree or index changed"
    );
    let named = branches_named(&out);
    assert_eq!(named.len(), 1, "{out}");
    assert!(named[0].starts_with("cadre/editor/"), "{out}");
    assert_eq!(
        git(&r.ws, &["show", &format!("{}:new.txt", named[0])]),
        "from the child\n"
    );
    // Only the child's file: nothing of cadre's own state in the worktree.
    assert_eq!(
        git(&r.ws, &["diff", "--name-only", "HEAD", &named[0]]),
        "new.txt\n"
    );
    assert!(out.contains("new.txt | 1 +"), "the diffstat: {out}");
    assert_eq!(cadre_branches(&r.ws), named);
    // The worktree itself is gone; its branch is what remains.
    let left: Vec<_> = std::fs::read_dir(r.ws.join(".cadre/worktrees"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != ".gitignore")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(
        git(&r.ws, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}

#[test]
fn two_worktree_children_edit_the_same_file_on_two_branches() {
    let r = repo(None, true);
    let (ok, out, err) = run(
        &r,
        &[
            r#"{ subagent_type = "editor", description = "one", prompt = "alpha", isolation = "worktree" }"#,
            r#"{ subagent_type = "editor", description = "two", prompt = "beta", isolation = "worktree" }"#,
        ],
        &[
            (
                "alpha",
                r#"{ name = "bash", args = { command = "echo alpha > shared.txt" } }"#,
                REPORT,
            ),
            (
                "beta",
                r#"{ name = "bash", args = { command = "echo beta > shared.txt" } }"#,
                REPORT,
            ),
        ],
    );
    assert!(ok, "{out}\n{err}");
    let named = branches_named(&out);
    assert_eq!(named.len(), 2, "{out}");
    assert_ne!(named[0], named[1]);
    let mut contents: Vec<String> = named
        .iter()
        .map(|b| git(&r.ws, &["show", &format!("{b}:shared.txt")]))
        .collect();
    contents.sort();
    assert_eq!(contents, vec!["alpha\n", "beta\n"]);
    assert_eq!(
        std::fs::read_to_string(r.ws.join("shared.txt")).unwrap(),
        "base\n"
    );
    assert_eq!(parent_state(&r.ws), "");
}

#[test]
fn a_worktree_child_that_changes_nothing_leaves_no_branch() {
    let r = repo(Some("worktree"), true);
    let (ok, out, err) = run(
        &r,
        &[r#"{ subagent_type = "editor", description = "look", prompt = "look" }"#],
        &[(
            "look",
            r#"{ name = "bash", args = { command = "cat shared.txt && pwd" } }"#,
            REPORT,
        )],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("base"), "{out}");
    // It ran in its worktree, not in the parent's root.
    assert!(out.contains(".cadre/worktrees/task_"), "{out}");
    assert!(out.contains("Worktree: no files changed"), "{out}");
    assert!(
        cadre_branches(&r.ws).is_empty(),
        "{:?}",
        cadre_branches(&r.ws)
    );
}

#[test]
fn a_failed_worktree_child_keeps_its_branch_and_says_so() {
    let r = repo(Some("worktree"), true);
    // The child writes half its work, then its model fails.
    let (ok, out, err) = run(
        &r,
        &[r#"{ subagent_type = "editor", description = "half", prompt = "half" }"#],
        &[(
            "half",
            r#"{ name = "write_file", args = { path = "half.txt", content = "half done\n" } }"#,
            "error = \"the model went away\"",
        )],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("state=\"failed\""), "{out}");
    assert!(
        out.contains("the sub-agent failed; its work is kept on branch"),
        "{out}"
    );
    let named = branches_named(&out);
    assert_eq!(cadre_branches(&r.ws), named);
    assert_eq!(
        git(&r.ws, &["show", &format!("{}:half.txt", named[0])]),
        "half done\n"
    );
    assert!(!r.ws.join("half.txt").exists());
}

#[test]
fn a_cancelled_worktree_child_keeps_its_branch() {
    let r = repo(Some("worktree"), true);
    // The child writes half its work, then runs a command that does not end by itself; the
    // run is interrupted (Ctrl-C) while it waits.
    let model = script(
        &r,
        &[r#"{ subagent_type = "editor", description = "half", prompt = "half" }"#],
        &[(
            "half",
            r#"{ name = "write_file", args = { path = "half.txt", content = "half done\n" } }, { name = "bash", args = { command = "sleep 100", timeout_ms = 600000 } }"#,
            REPORT,
        )],
    );
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .arg("--workspace")
        .arg(&r.ws)
        .env_remove("CADRE_MODEL")
        .env("XDG_CONFIG_HOME", r.ws.join(".no-user-config"))
        .args(["--model", &model])
        .args(["run", "--permission-mode", "auto-approve", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (with a deadline) until the child's half is written in its worktree.
    let worktrees = r.ws.join(".cadre/worktrees");
    let written = || {
        std::fs::read_dir(&worktrees)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("half.txt").exists())
    };
    cadre_testkit::wait_until(
        "the child to write its half",
        std::time::Duration::from_secs(30),
        written,
    );
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    // The half is committed on the child's branch; the worktree is gone; the parent's
    // tree never had it.
    let branches = cadre_branches(&r.ws);
    assert_eq!(branches.len(), 1, "{branches:?}\n{err}");
    assert_eq!(
        git(&r.ws, &["show", &format!("{}:half.txt", branches[0])]),
        "half done\n"
    );
    assert!(!r.ws.join("half.txt").exists());
    assert!(!written(), "the worktree was removed");
    assert_eq!(parent_state(&r.ws), "");
}

#[test]
fn worktree_isolation_outside_git_is_a_clear_error() {
    let r = repo(Some("worktree"), false);
    let (ok, out, err) = run(
        &r,
        &[r#"{ subagent_type = "editor", description = "x", prompt = "write" }"#],
        &[(
            "write",
            r#"{ name = "bash", args = { command = "touch ran.txt" } }"#,
            REPORT,
        )],
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("isolation: worktree needs a git repository"),
        "{out}"
    );
    assert!(!r.ws.join("ran.txt").exists());
}

#[test]
fn a_sandboxed_worktree_child_writes_only_its_worktree() {
    let r = repo(Some("worktree"), true);
    let (ok, out, err) = run(
        &r,
        &[r#"{ subagent_type = "editor", description = "escape", prompt = "escape" }"#],
        &[(
            "escape",
            r#"{ name = "bash", args = { command = "echo mine > mine.txt; echo x > ../../../shared.txt; cat ../../../shared.txt" } }"#,
            REPORT,
        )],
    );
    assert!(ok, "{out}\n{err}");
    // The default sandbox of sub-agents has the worktree as its root: the parent's copy is
    // out of reach, the worktree's own file is committed.
    assert!(out.contains("Permission denied"), "{out}");
    assert_eq!(
        std::fs::read_to_string(r.ws.join("shared.txt")).unwrap(),
        "base\n"
    );
    let named = branches_named(&out);
    assert_eq!(
        git(&r.ws, &["show", &format!("{}:mine.txt", named[0])]),
        "mine\n"
    );
}

#[test]
fn worktrees_prune_commits_and_removes_leftovers() {
    let r = repo(None, true);
    // What a crash leaves: a worktree with uncommitted work, and a branch with nothing of
    // its own.
    let path = r.ws.join(".cadre/worktrees/task_deadbeef");
    let p = path.to_string_lossy().into_owned();
    git(
        &r.ws,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            "cadre/editor/deadbeef",
            &p,
            "HEAD",
        ],
    );
    std::fs::write(path.join("unsaved.txt"), "work\n").unwrap();
    git(&r.ws, &["branch", "cadre/editor/empty"]);
    let (ok, out) = cadre_cmd(&r.ws, &["worktrees", "list"]);
    assert!(ok, "{out}");
    assert!(
        out.contains(".cadre/worktrees/task_deadbeef") && out.contains("leftover"),
        "{out}"
    );
    assert!(out.contains("cadre/editor/empty"), "{out}");
    let (ok, out) = cadre_cmd(&r.ws, &["worktrees", "prune"]);
    assert!(ok, "{out}");
    assert!(!path.exists(), "{out}");
    assert_eq!(
        git(&r.ws, &["show", "cadre/editor/deadbeef:unsaved.txt"]),
        "work\n"
    );
    assert_eq!(
        cadre_branches(&r.ws),
        vec!["cadre/editor/deadbeef".to_string()]
    );
    let (ok, out) = cadre_cmd(&r.ws, &["worktrees", "list"]);
    assert!(ok && !out.contains("leftover"), "{out}");
}
