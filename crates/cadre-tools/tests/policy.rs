//! The access policy as the file tools apply it: protected paths are not written (unless the
//! policy is off, as in `bypass` mode), the task store and other sessions' transcripts are not
//! read, and everything else under `.cadre/` stays readable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_tools::{AccessPolicy, Workspace};
use common::Tools;
use serde_json::json;

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (".cadre/cadre.db", "SQLITE STORE"),
        (".cadre/cadre.db-wal", "SQLITE STORE"),
        (".cadre/sessions/s-test.jsonl", "{\"own\": \"MINE\"}\n"),
        (".cadre/sessions/s-other.jsonl", "{\"other\": \"THEIRS\"}\n"),
        (
            ".cadre/tool-outputs/s-test/call_1.txt",
            "offloaded OUTPUT\n",
        ),
        (".cadre/config.toml", "model = \"x\"\n"),
        ("deploy/prod.yml", "replicas: 3\n"),
    ];
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    dir
}

#[tokio::test]
async fn the_store_and_other_sessions_are_not_read_but_the_rest_of_cadre_is() {
    let dir = project();
    let tools = Tools::new(dir.path());
    let read = |path: &'static str| tools.call("read_file", json!({ "path": path }));
    for (path, want) in [
        (
            ".cadre/cadre.db",
            ".cadre/cadre.db is cadre's task store; file tools do not read it",
        ),
        (".cadre/cadre.db-wal", "cadre's task store"),
        (
            ".cadre/sessions/s-other.jsonl",
            "is another session's transcript",
        ),
    ] {
        let err = read(path).await.unwrap_err().to_string();
        assert!(err.contains(want), "{path}: {err}");
    }
    for (path, want) in [
        (".cadre/sessions/s-test.jsonl", "MINE"),
        (".cadre/tool-outputs/s-test/call_1.txt", "offloaded OUTPUT"),
        (".cadre/config.toml", "model"),
    ] {
        let out = read(path).await.unwrap();
        assert!(out.content.contains(want), "{path}: {}", out.content);
    }
    // A search of .cadre/ passes over what may not be read.
    let out = tools
        .call(
            "grep",
            json!({"pattern": "STORE|THEIRS|MINE|OUTPUT", "path": ".cadre"}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.content,
        ".cadre/sessions/s-test.jsonl:1:{\"own\": \"MINE\"}\n\
         .cadre/tool-outputs/s-test/call_1.txt:1:offloaded OUTPUT\n"
    );
    // Names are not contents: listing shows them.
    let out = tools
        .call("list_dir", json!({"path": ".cadre/sessions"}))
        .await
        .unwrap();
    assert!(out.content.contains("s-other.jsonl"), "{}", out.content);
}

#[tokio::test]
async fn configured_paths_are_protected_and_an_unprotected_policy_writes_everything() {
    let dir = project();
    let policy = AccessPolicy::default().protect_paths(dir.path(), &["deploy/"]);
    let tools = Tools::with(Workspace::new(dir.path()).unwrap().with_policy(policy));
    for path in [
        "deploy/prod.yml",
        "deploy/new/x.yml",
        ".cadre/config.toml",
        ".git/config",
    ] {
        let err = tools
            .call("write_file", json!({"path": path, "content": "owned"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("{path} is protected")),
            "{path}: {err}"
        );
    }
    // Nothing was created on the way.
    assert!(!dir.path().join("deploy/new").exists());
    assert!(!dir.path().join(".git").exists());
    let out = tools
        .call(
            "write_file",
            json!({"path": "src/ok.rs", "content": "fn main() {}"}),
        )
        .await
        .unwrap();
    assert!(out.content.contains("created new file"), "{}", out.content);

    let open = AccessPolicy::default().unprotected();
    let tools = Tools::with(Workspace::new(dir.path()).unwrap().with_policy(open));
    let args = json!({"path": ".cadre/config.toml", "old_string": "x", "new_string": "y"});
    tools.call("edit_file", args).await.unwrap();
    let out = tools
        .call(
            "read_file",
            json!({"path": ".cadre/sessions/s-other.jsonl"}),
        )
        .await
        .unwrap();
    assert!(out.content.contains("THEIRS"));
}
