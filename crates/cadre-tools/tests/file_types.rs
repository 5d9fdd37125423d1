//! What file tools refuse by the kind of file: FIFOs, sockets and devices (at once, without
//! blocking), hard-linked files, and how much of a large file `read_file` reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_tools::{AccessPolicy, Workspace};
use common::Tools;
use serde_json::json;
use std::time::Duration;

/// Far longer than any of these calls takes; only reached when a call blocks.
const DEADLINE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_fifo_is_refused_by_every_file_tool_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let tools = Tools::new(dir.path());
    let calls = [
        ("read_file", json!({"path": "pipe"})),
        (
            "edit_file",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
        ("write_file", json!({"path": "pipe", "content": "x"})),
        ("list_dir", json!({"path": "pipe"})),
        ("grep", json!({"pattern": "x", "path": "pipe"})),
        ("glob", json!({"pattern": "*", "path": "pipe"})),
    ];
    for (tool, args) in calls {
        let outcome = tokio::time::timeout(DEADLINE, tools.call(tool, args)).await;
        let Ok(result) = outcome else {
            // Let the blocked open finish so the test fails instead of hanging.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("{tool} blocked on the FIFO");
        };
        let err = result.expect_err(tool).to_string();
        assert!(
            err.contains("pipe is a FIFO, not a regular file"),
            "{tool}: {err}"
        );
    }
    // A socket is refused the same way.
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    for (tool, args) in [
        ("read_file", json!({"path": "sock"})),
        ("grep", json!({"pattern": "x", "path": "sock"})),
    ] {
        let err = tools.call(tool, args).await.unwrap_err().to_string();
        assert!(
            err.contains("sock is a socket, not a regular file"),
            "{tool}: {err}"
        );
    }
    // A directory walk passes over them without opening them.
    let out = tools.call("grep", json!({"pattern": "x"})).await.unwrap();
    assert_eq!(out.content, "no matches for x in .");
}

#[tokio::test]
async fn read_file_reads_only_the_window_of_a_huge_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    let head: String = (1..=20_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&path, &head).unwrap();
    // 8 GiB, sparse: reading it all would take gigabytes of memory.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let tools = Tools::new(dir.path());
    let out = tools
        .call(
            "read_file",
            json!({"path": "big.log", "offset": 3, "limit": 2}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.content,
        "     3\tline 3\n     4\tline 4\n\
         [showing lines 3-4 of at least 20001 (8589934592 bytes); use offset to read more]\n"
    );
}

#[tokio::test]
async fn a_hardlinked_outside_file_is_not_edited_written_or_read_by_default() {
    let outside = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = outside.path().join("passwd");
    std::fs::write(&target, "root:x:0:0\n").unwrap();
    std::fs::hard_link(&target, dir.path().join("linked.txt")).unwrap();
    let tools = Tools::new(dir.path());
    let edit = json!({"path": "linked.txt", "old_string": "root", "new_string": "toor"});
    let err = tools.call("edit_file", edit).await.unwrap_err().to_string();
    assert!(err.contains("linked.txt has 2 hard links"), "{err}");
    let write = json!({"path": "linked.txt", "content": "owned\n"});
    let err = tools
        .call("write_file", write)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("do not write or edit such files"), "{err}");
    let err = tools
        .call("read_file", json!({"path": "linked.txt"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("allow_hardlink_reads = true"), "{err}");
    let out = tools
        .call("grep", json!({"pattern": "root"}))
        .await
        .unwrap();
    assert_eq!(out.content, "no matches for root in .");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "root:x:0:0\n");

    // The switch lets them be read, never written.
    let policy = AccessPolicy::default().allow_hardlink_reads(true);
    let tools = Tools::with(Workspace::new(dir.path()).unwrap().with_policy(policy));
    let out = tools
        .call("read_file", json!({"path": "linked.txt"}))
        .await
        .unwrap();
    assert_eq!(out.content, "     1\troot:x:0:0\n");
    let out = tools
        .call("grep", json!({"pattern": "root"}))
        .await
        .unwrap();
    assert_eq!(out.content, "linked.txt:1:root:x:0:0\n");
    let edit = json!({"path": "linked.txt", "old_string": "root", "new_string": "toor"});
    assert!(tools.call("edit_file", edit).await.is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "root:x:0:0\n");
}

#[tokio::test]
async fn a_cancelled_read_stops_instead_of_reading_on() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=10_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), text).unwrap();
    let tools = Tools::new(dir.path());
    tools.ctx.cancel.cancel();
    let args = json!({"path": "a.txt", "offset": 9000});
    let err = tools.call("read_file", args).await.unwrap_err();
    assert!(matches!(err, cadre_tools::ToolError::Cancelled), "{err}");
}
