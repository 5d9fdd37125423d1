//! cadre's own git never runs a worktree child's code: a child that plants filters, an
//! embedded repository or a rewritten `.git` file gets its work committed (or refused, with
//! the reason in the result) and nothing it wrote runs outside its sandbox. The canary file
//! lies outside the workspace, where only cadre itself could create it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod worktree_support;

use std::path::{Path, PathBuf};
use worktree_support::{REPORT, branches_named, cadre_cmd, git, repo, run, run_model, script_of};

/// A file outside the workspace (and outside any child's sandbox).
fn canary(ws: &Path) -> PathBuf {
    ws.parent().unwrap().join("CANARY_OUTSIDE")
}

/// A shell command that creates the canary: what a hostile filter, hook or monitor runs.
fn touch(ws: &Path) -> String {
    // Temporary paths hold no quote or space, so this sits in any quoting of the plants.
    format!("touch {}; cat", canary(ws).display())
}

#[test]
fn a_childs_clean_filter_in_an_embedded_repo_and_its_attributes_never_run() {
    let r = repo(Some("worktree"), true);
    let evil = touch(&r.ws);
    // The user has filter and diff drivers configured (as git-lfs is); the child's
    // `.gitattributes` would switch them on for its files, and so would `info/attributes`.
    for (key, value) in [
        ("filter.evil.clean", evil.as_str()),
        ("filter.evil.smudge", evil.as_str()),
        ("filter.evil.process", evil.as_str()),
        ("filter.evil.required", "true"),
        ("diff.evil.textconv", evil.as_str()),
        ("diff.evil.command", evil.as_str()),
    ] {
        git(&r.ws, &["config", key, value]);
    }
    let info = r.ws.join(".git/info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(info.join("attributes"), "*.info filter=evil diff=evil\n").unwrap();
    // The child: an embedded repository whose own config has a clean filter, a file
    // monitor and hooks (a `git status` entering it would run them), and attributes naming
    // the user's drivers for every file.
    let plant = format!(
        "mkdir sub && cd sub && git init -q && echo one > f && \
         git -c user.name=c -c user.email=c@c add f && \
         git -c user.name=c -c user.email=c@c commit -qm s && echo two > f && \
         printf '* filter=evil diff=evil\\n' > .gitattributes && \
         git config filter.evil.clean \"{evil}\" && git config filter.evil.required true && \
         git config core.fsmonitor \"{evil}\" && mkdir -p hooks && \
         printf '#!/bin/sh\\n{evil}\\n' > hooks/pre-commit && chmod +x hooks/pre-commit && \
         git config core.hooksPath \"$PWD/hooks\" && cd .. && \
         printf '* filter=evil diff=evil\\n' > .gitattributes && echo mine > new.txt && \
         echo data > x.info && echo planted"
    );
    let plant = plant.replace('\\', "\\\\").replace('"', "\\\"");
    let (ok, out, err) = run(
        &r,
        &[r#"{ subagent_type = "editor", description = "plant", prompt = "plant" }"#],
        &[(
            "plant",
            &format!(r#"{{ name = "bash", args = {{ command = "{plant}" }} }}"#),
            REPORT,
        )],
    );
    // The command ran: it planted everything, or the sandbox kept it from the `.git` file.
    assert!(
        out.contains("planted") || out.contains(".git: Read-only file system"),
        "the child's command ran: {out}\n{err}"
    );
    assert!(
        !canary(&r.ws).exists(),
        "a filter, monitor or hook of the child ran outside its sandbox:\n{out}\n{err}"
    );
    // Later git commands of this test would run the user's drivers themselves.
    std::fs::remove_file(info.join("attributes")).unwrap();
    assert!(ok, "{out}\n{err}");
    // The work is committed as the child wrote it, unfiltered; the embedded repository is
    // a commit pointer, not entered.
    let named = branches_named(&out);
    assert_eq!(named.len(), 1, "{out}");
    let branch = &named[0];
    assert_eq!(
        git(&r.ws, &["show", &format!("{branch}:new.txt")]),
        "mine\n"
    );
    assert_eq!(git(&r.ws, &["show", &format!("{branch}:x.info")]), "data\n");
    let tree = git(&r.ws, &["ls-tree", branch]);
    assert!(
        tree.lines()
            .any(|l| l.starts_with("160000 commit") && l.ends_with("\tsub")),
        "{tree}"
    );
}

#[test]
fn a_live_child_that_rewrites_its_dot_git_is_refused_now_and_on_resume() {
    let r = repo(Some("worktree"), true);
    let evil = touch(&r.ws);
    // The child plants a git directory of its own (a filter, a monitor and hooks that
    // would create the canary) and points its worktree's `.git` at it.
    let plant = format!(
        "git init -q --bare evil.git && git -C evil.git config filter.evil.clean \"{evil}\" && \
         git -C evil.git config core.fsmonitor \"{evil}\" && \
         git -C evil.git config core.hooksPath \"$PWD/evil.git/hooks\" && \
         for h in pre-commit post-commit reference-transaction post-index-change; do \
         printf '#!/bin/sh\\n{evil}\\n' > evil.git/hooks/$h; chmod +x evil.git/hooks/$h; done && \
         printf '* filter=evil\\n' > .gitattributes && echo mine > new.txt && \
         printf 'gitdir: %s/evil.git\\n' \"$PWD\" > .git && echo planted"
    );
    let plant = plant.replace('\\', "\\\\").replace('"', "\\\"");
    let main: &[&str] = &[
        r#"tool_calls = [{ name = "agent_spawn", args = { agent_id = "editor", label = "ed", task = "first", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}""#,
        r#"tool_calls = [{ name = "agent_send", args = { label = "ed", message = "second", timeout_seconds = 120 } }]"#,
        r#"text = "{{tool_results}}""#,
    ];
    let first = format!(r#"tool_calls = [{{ name = "bash", args = {{ command = "{plant}" }} }}]"#);
    let child: &[&str] = &[
        &first,
        REPORT,
        r#"tool_calls = [{ name = "bash", args = { command = "echo more >> new.txt" } }]"#,
        REPORT,
    ];
    let model = script_of(
        &r,
        &[("main", None, main), ("editor", Some("first"), child)],
    );
    let (_, out, err) = run_model(&r, &model, &[]);
    // The command ran: it planted everything, or the sandbox kept it from the `.git` file.
    assert!(
        out.contains("planted") || out.contains(".git: Read-only file system"),
        "the child's command ran: {out}\n{err}"
    );
    let dirs: Vec<PathBuf> = std::fs::read_dir(r.ws.join(".cadre/worktrees"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dot_git = dirs[0].join(".git");
    // A sandbox that keeps the child from its `.git` file leaves the rewrite to the test:
    // what is shown here is that cadre never follows one.
    if !std::fs::read_to_string(&dot_git)
        .unwrap_or_default()
        .contains("evil.git")
    {
        std::fs::write(
            &dot_git,
            format!("gitdir: {}\n", dirs[0].join("evil.git").display()),
        )
        .unwrap();
    }
    assert!(!canary(&r.ws).exists(), "run 1 ran the child's code");
    let session = err
        .split("--resume ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap()
        .to_string();
    let (_, out2, err2) = run_model(&r, &model, &["--resume", &session]);
    assert!(
        !canary(&r.ws).exists(),
        "cadre followed the rewritten .git:\n{out}\n{out2}\n{err2}"
    );
    let refusal = "no longer links to the git directory cadre made for it";
    assert!(out2.contains(refusal), "{out2}\n{err2}");
    // Nothing was committed into the planted directory.
    let planted = dirs[0].join("evil.git/refs/heads");
    assert_eq!(std::fs::read_dir(&planted).unwrap().count(), 0, "{out2}");
}

#[test]
fn worktrees_prune_refuses_a_rewritten_dot_git_and_runs_no_planted_filter() {
    let r = repo(None, true);
    let evil = touch(&r.ws);
    git(&r.ws, &["config", "filter.evil.clean", &evil]);
    // Two leftovers of a crash: one with attributes naming the user's filter, one whose
    // `.git` was pointed at a planted git directory with a filter of its own.
    let mut paths = Vec::new();
    for name in ["task_aaaaaaaa", "task_bbbbbbbb"] {
        let path = r.ws.join(".cadre/worktrees").join(name);
        let p = path.to_string_lossy().into_owned();
        let branch = format!("cadre/editor/{}", &name[5..]);
        git(
            &r.ws,
            &["worktree", "add", "--quiet", "-b", &branch, &p, "HEAD"],
        );
        std::fs::write(path.join(".gitattributes"), "* filter=evil\n").unwrap();
        std::fs::write(path.join("unsaved.txt"), "work\n").unwrap();
        paths.push(path);
    }
    let planted = paths[1].join("evil.git");
    git(&paths[1], &["init", "--quiet", "--bare", "evil.git"]);
    git(&planted, &["config", "filter.evil.clean", &evil]);
    git(&planted, &["config", "core.fsmonitor", &evil]);
    std::fs::write(
        paths[1].join(".git"),
        format!("gitdir: {}\n", planted.display()),
    )
    .unwrap();
    let (ok, out) = cadre_cmd(&r.ws, &["worktrees", "prune"]);
    assert!(!canary(&r.ws).exists(), "{out}");
    assert!(!ok, "a refused worktree fails the prune: {out}");
    assert!(
        out.contains("kept .cadre/worktrees/task_bbbbbbbb")
            && out.contains("no longer links to the git directory cadre made for it"),
        "{out}"
    );
    assert!(paths[1].exists() && !paths[0].exists(), "{out}");
    // The first is committed unfiltered.
    git(&r.ws, &["config", "--unset", "filter.evil.clean"]);
    assert_eq!(
        git(&r.ws, &["show", "cadre/editor/aaaaaaaa:unsaved.txt"]),
        "work\n"
    );
}
