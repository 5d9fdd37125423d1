//! Protected paths that do not exist when a sandboxed command starts: what the command
//! creates under them is moved into `.cadre/quarantine/` once it has ended, cadre's own
//! `.cadre/` is made first (and so is read-only), and what appears between two commands is
//! moved when the next one starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cadre_sandbox::{Backend, Launcher, QUARANTINE_DIR, Sandbox, SandboxMode, SandboxPolicy};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn policy(root: &Path) -> SandboxPolicy {
    SandboxPolicy {
        mode: SandboxMode::WorkspaceWrite,
        network: false,
        writable: vec![root.to_path_buf()],
    }
}

fn sandbox(launcher: Launcher, root: &Path) -> Sandbox {
    let protected: Vec<PathBuf> = [".cadre", ".claude", "AGENTS.md", ".mcp.json"]
        .iter()
        .map(|n| root.join(n))
        .collect();
    Sandbox::new(Arc::new(launcher), policy(root))
        .protect(protected)
        .own_protected([root.join(".cadre")])
}

#[test]
fn what_a_bwrap_command_creates_under_a_protected_name_is_moved_away() {
    if !cadre_testkit::optional::on_path("bwrap") {
        cadre_testkit::optional::skip_because("bwrap not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let s = sandbox(
        Launcher::new(None).backend(Backend::Bwrap).required(true),
        &root,
    );
    let watch = s.watch_protected();
    assert!(
        root.join(".cadre").is_dir(),
        "cadre's own directory is made first"
    );
    let script = "mkdir .claude && echo '{}' > .claude/settings.json; \
                  echo rules > 'AGENTS.md'; echo x > ordinary.txt; \
                  echo pwned > .cadre/config.toml || echo CADRE-READ-ONLY";
    let out = s
        .command("sh")
        .unwrap()
        .arg("-c")
        .arg(script)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("CADRE-READ-ONLY"));
    let moved = s.settle(watch);
    let names: Vec<&Path> = moved.iter().map(|q| q.path.as_path()).collect();
    assert_eq!(names, vec![root.join(".claude"), root.join("AGENTS.md")]);
    for q in &moved {
        let to = q.moved_to.as_ref().unwrap();
        assert!(
            to.starts_with(root.join(QUARANTINE_DIR)) && !q.earlier,
            "{q:?}"
        );
        assert!(!q.path.exists() && to.exists());
    }
    assert!(root.join("ordinary.txt").exists());
    assert!(!root.join(".cadre/config.toml").exists());
}

#[test]
fn what_appears_between_two_commands_is_moved_when_the_next_starts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    // No mechanism: commands run unconfined, and processes may outlive them.
    let s = sandbox(Launcher::new(None), &root);
    let first = s.watch_protected();
    assert!(s.settle(first).is_empty());
    // A process left behind by the first command plants a file after its check.
    std::fs::write(root.join(".mcp.json"), "{\"mcpServers\":{}}").unwrap();
    let next = s.watch_protected();
    assert!(
        !root.join(".mcp.json").exists(),
        "moved when the next command starts"
    );
    let moved = s.settle(next);
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(moved[0].earlier && moved[0].path == root.join(".mcp.json"));
    let to = moved[0].moved_to.as_ref().unwrap();
    assert_eq!(std::fs::read_to_string(to).unwrap(), "{\"mcpServers\":{}}");
    assert!(
        moved[0]
            .describe(&root)
            .starts_with("[found after an earlier command .mcp.json,")
    );
}
