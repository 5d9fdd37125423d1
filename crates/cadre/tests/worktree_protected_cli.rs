//! A sandboxed worktree child cannot rewrite its worktree's `.git` file (which would point
//! cadre's own git at a repository the child planted), while the rest of its worktree stays
//! writable and its work is committed as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod worktree_support;

use worktree_support::{REPORT, branches_named, git, repo, run};

#[test]
fn a_sandboxed_worktree_child_cannot_rewrite_its_git_file() {
    let r = repo(Some("worktree"), true);
    let (ok, out, err) = run(
        &r,
        &[r#"{ subagent_type = "editor", description = "plant", prompt = "plant" }"#],
        &[(
            "plant",
            r#"{ name = "bash", args = { command = "echo 'gitdir: /tmp/planted' > .git; rm -f .git; mv .git moved.git; echo mine > mine.txt; head -c 8 .git" } }"#,
            REPORT,
        )],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("Read-only file system"), "{out}");
    // The `.git` file still points where cadre put it: the commit of the child's work went
    // to its branch in the workspace's repository.
    assert!(out.contains("gitdir: "), "{out}");
    assert!(!out.contains("/tmp/planted"), "{out}");
    let named = branches_named(&out);
    assert_eq!(
        git(&r.ws, &["show", &format!("{}:mine.txt", named[0])]),
        "mine\n"
    );
}
