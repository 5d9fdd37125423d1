//! `isolation: worktree` for live children (`agent_spawn`) end to end with `cadre run`: the
//! child keeps one worktree for its whole life, each message's changes become a commit on
//! its branch, and `agent_close` removes the worktree (and a branch without commits).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod worktree_support;

use std::path::Path;
use worktree_support::{
    REPORT, branches_named, cadre_branches, git, parent_state, repo, run_model, script_of,
};

/// The worktrees under `.cadre/worktrees/` (its `.gitignore` aside).
fn worktree_dirs(ws: &Path) -> Vec<String> {
    std::fs::read_dir(ws.join(".cadre/worktrees"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != ".gitignore")
        .collect()
}

/// The commits ids a reply names (`(commit <id>,`).
fn commits_named(out: &str) -> Vec<String> {
    out.split("(commit ")
        .skip(1)
        .map(|rest| rest.split(',').next().unwrap().to_string())
        .collect()
}

#[test]
fn a_live_worktree_child_commits_each_message_on_its_branch() {
    // Isolation asked for by the spawn argument: the definition does not say it.
    let r = repo(None, true);
    let main: &[&str] = &[
        r#"tool_calls = [{ name = "agent_spawn", args = { agent_id = "editor", label = "ed", task = "first", isolation = "worktree", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}"
tool_calls = [{ name = "agent_send", args = { label = "ed", message = "second", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}"
tool_calls = [{ name = "agent_close", args = { label = "ed" } }]"#,
        r#"text = "{{tool_results}}""#,
    ];
    let child: &[&str] = &[
        r#"tool_calls = [{ name = "write_file", args = { path = "notes.txt", content = "one\n" } }]"#,
        REPORT,
        // Its default sandbox has the worktree as its root: the parent's copy is out of reach.
        r#"tool_calls = [{ name = "bash", args = { command = "echo two >> notes.txt && pwd; echo x > ../../../shared.txt" } }]"#,
        REPORT,
    ];
    let model = script_of(
        &r,
        &[("main", None, main), ("editor", Some("first"), child)],
    );
    let (ok, out, err) = run_model(&r, &model, &[]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("Permission denied"), "{out}");
    assert_eq!(
        std::fs::read_to_string(r.ws.join("shared.txt")).unwrap(),
        "base\n"
    );
    // Both replies name the same branch and a commit each.
    let named = branches_named(&out);
    assert!(named.len() >= 3, "{out}");
    assert!(named.iter().all(|b| b == &named[0]), "{named:?}");
    assert!(named[0].starts_with("cadre/editor/"), "{out}");
    let commits = commits_named(&out);
    assert!(commits.len() >= 2, "{out}");
    assert_ne!(commits[0], commits[1], "{out}");
    assert!(out.contains("notes.txt | 1 +"), "the first diffstat: {out}");
    assert!(
        out.contains("notes.txt | 2 +"),
        "the second diffstat: {out}"
    );
    // The child worked in its worktree, not in the parent's root.
    assert!(out.contains(".cadre/worktrees/agent_"), "{out}");
    // Two commits on the branch, one per message, each naming its task.
    let log = git(
        &r.ws,
        &["log", "--format=%s", &format!("main..{}", named[0])],
    );
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(subjects.len(), 2, "{log}");
    assert!(
        subjects
            .iter()
            .all(|s| s.starts_with("cadre: editor task task_")),
        "{log}"
    );
    assert_eq!(&commits[1], &git(&r.ws, &["rev-parse", &named[0]]).trim());
    assert_eq!(
        git(&r.ws, &["show", &format!("{}:notes.txt", named[0])]),
        "one\ntwo\n"
    );
    // The parent's tree and index never had it.
    assert!(!r.ws.join("notes.txt").exists());
    assert_eq!(parent_state(&r.ws), "");
    // Closed: the worktree is gone, the branch with its commits stays.
    assert!(out.contains("status: closed"), "{out}");
    assert!(out.contains("Worktree: removed;"), "{out}");
    assert!(
        worktree_dirs(&r.ws).is_empty(),
        "{:?}",
        worktree_dirs(&r.ws)
    );
    assert_eq!(cadre_branches(&r.ws), vec![named[0].clone()]);
    assert_eq!(
        git(&r.ws, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}

#[test]
fn a_live_worktree_child_closed_without_changes_leaves_no_branch() {
    // Isolation from the definition.
    let r = repo(Some("worktree"), true);
    let main: &[&str] = &[
        r#"tool_calls = [{ name = "agent_spawn", args = { agent_id = "editor", label = "ed", task = "look", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}"
tool_calls = [{ name = "agent_list", args = {} }]"#,
        r#"text = "{{tool_results}}"
tool_calls = [{ name = "agent_close", args = { label = "ed" } }]"#,
        r#"text = "{{tool_results}}""#,
    ];
    let child: &[&str] = &[
        r#"tool_calls = [{ name = "bash", args = { command = "cat shared.txt && pwd" } }]"#,
        REPORT,
    ];
    let model = script_of(&r, &[("main", None, main), ("editor", Some("look"), child)]);
    let (ok, out, err) = run_model(&r, &model, &[]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains(".cadre/worktrees/agent_"), "{out}");
    assert!(out.contains("Worktree: no files changed yet"), "{out}");
    assert!(out.contains("worktree_branch: cadre/editor/"), "{out}");
    assert!(
        out.contains("Worktree: no files changed; the worktree and its branch were removed."),
        "{out}"
    );
    assert!(
        cadre_branches(&r.ws).is_empty(),
        "{:?}",
        cadre_branches(&r.ws)
    );
    assert!(
        worktree_dirs(&r.ws).is_empty(),
        "{:?}",
        worktree_dirs(&r.ws)
    );
}

#[test]
fn a_live_worktree_child_outside_git_is_a_clear_error() {
    let r = repo(Some("worktree"), false);
    let main: &[&str] = &[
        r#"tool_calls = [{ name = "agent_spawn", args = { agent_id = "editor", task = "write", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}""#,
    ];
    let child: &[&str] = &[
        r#"tool_calls = [{ name = "bash", args = { command = "touch ran.txt" } }]"#,
        REPORT,
    ];
    let model = script_of(
        &r,
        &[("main", None, main), ("editor", Some("write"), child)],
    );
    let (ok, out, err) = run_model(&r, &model, &[]);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("isolation: worktree needs a git repository"),
        "{out}"
    );
    assert!(!r.ws.join("ran.txt").exists());
    assert!(!out.contains("agent_key:"), "no child was made: {out}");
}

#[test]
fn a_restored_live_worktree_child_goes_on_on_its_branch() {
    let r = repo(Some("worktree"), true);
    // Run 1 spawns the child (one commit) and ends; run 2 resumes the session, sends the
    // child a second message and closes it.
    let main: &[&str] = &[
        r#"tool_calls = [{ name = "agent_spawn", args = { agent_id = "editor", label = "ed", task = "first", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}""#,
        r#"tool_calls = [{ name = "agent_send", args = { label = "ed", message = "second", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}"
tool_calls = [{ name = "agent_close", args = { label = "ed" } }]"#,
        r#"text = "{{tool_results}}""#,
    ];
    let child: &[&str] = &[
        r#"tool_calls = [{ name = "write_file", args = { path = "notes.txt", content = "one\n" } }]"#,
        REPORT,
        r#"tool_calls = [{ name = "bash", args = { command = "echo two >> notes.txt" } }]"#,
        REPORT,
    ];
    let model = script_of(
        &r,
        &[("main", None, main), ("editor", Some("first"), child)],
    );
    let (ok, out, err) = run_model(&r, &model, &[]);
    assert!(ok, "{out}\n{err}");
    let branch = branches_named(&out)[0].clone();
    // The live child outlives the run: its worktree stays until it is closed.
    assert_eq!(worktree_dirs(&r.ws).len(), 1);
    let (ok, listed) = worktree_support::cadre_cmd(&r.ws, &["worktrees", "list"]);
    assert!(ok && listed.contains("live child"), "{listed}");
    // A clean-up keeps a live child's worktree.
    let (ok, pruned) = worktree_support::cadre_cmd(&r.ws, &["worktrees", "prune"]);
    assert!(ok && pruned.contains("a live child's"), "{pruned}");
    assert_eq!(worktree_dirs(&r.ws).len(), 1, "{pruned}");
    // One removed by hand comes back on its branch when the child is used again.
    let dir = r.ws.join(".cadre/worktrees").join(&worktree_dirs(&r.ws)[0]);
    git(
        &r.ws,
        &["worktree", "remove", "--force", dir.to_str().unwrap()],
    );
    let session = err
        .split("--resume ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap()
        .to_string();
    let (ok, out, err) = run_model(&r, &model, &["--resume", &session]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("notes.txt | 2 +"), "{out}");
    assert_eq!(branches_named(&out)[0], branch, "{out}");
    assert_eq!(
        git(&r.ws, &["show", &format!("{branch}:notes.txt")]),
        "one\ntwo\n"
    );
    assert_eq!(
        git(&r.ws, &["rev-list", "--count", &format!("main..{branch}")]).trim(),
        "2"
    );
    assert!(out.contains("status: closed"), "{out}");
    assert!(worktree_dirs(&r.ws).is_empty());
    assert_eq!(cadre_branches(&r.ws), vec![branch]);
    assert_eq!(parent_state(&r.ws), "");
}

#[test]
fn closing_a_busy_live_worktree_child_stops_its_task_and_removes_the_worktree() {
    let r = repo(Some("worktree"), true);
    // The child's message runs in the background; once the child has written its half (the
    // parent waits for the file's text, with a deadline: the file exists a moment before
    // its text is in it), the parent closes it while its command still runs (it would not
    // end by itself for a long while).
    let main: &[&str] = &[
        r#"tool_calls = [{ name = "agent_spawn", args = { agent_id = "editor", label = "ed", task = "busy", timeout_seconds = 0 } }]"#,
        r#"tool_calls = [{ name = "bash", args = { command = "for i in $(seq 600); do grep -qs half .cadre/worktrees/*/half.txt && exit 0; sleep 0.05; done; exit 1" } }]"#,
        r#"text = "{{tool_results}}"
tool_calls = [{ name = "agent_close", args = { label = "ed" } }]"#,
        r#"text = "{{tool_results}}""#,
    ];
    let child: &[&str] = &[
        r#"tool_calls = [{ name = "bash", args = { command = "echo half > half.txt; sleep 300", timeout_ms = 600000 } }]"#,
        REPORT,
    ];
    let model = script_of(&r, &[("main", None, main), ("editor", Some("busy"), child)]);
    let (ok, out, err) = run_model(&r, &model, &[]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("status: closed"), "{out}");
    assert!(
        worktree_dirs(&r.ws).is_empty(),
        "{:?}",
        worktree_dirs(&r.ws)
    );
    assert_eq!(
        git(&r.ws, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    // What it had written when it was stopped is committed on its branch, which stays.
    assert!(out.contains("Worktree: removed;"), "{out}");
    let branches = cadre_branches(&r.ws);
    assert_eq!(branches.len(), 1, "{out}");
    assert_eq!(
        git(&r.ws, &["show", &format!("{}:half.txt", branches[0])]),
        "half\n"
    );
    assert!(!r.ws.join("half.txt").exists());
    assert_eq!(parent_state(&r.ws), "");
}
