//! `cadre-bench fanout` as a user runs it: the mock server in its own process, every
//! result delivered, the request counts checked, and the JSON written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn fanout_with_a_separate_server_process_writes_checked_results() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cadre-bench"))
        .args([
            "fanout",
            "--variant",
            "task-bg",
            "--n",
            "4",
            "--repeat",
            "1",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("mock server: own process"), "{stdout}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["delivered_min"], 4);
    assert_eq!(r["server_in_process"], false);
    assert!(r["server_peak_rss_kib"].as_u64().unwrap() > 0);
    let turns = r["parent_turns"][0].as_u64().unwrap();
    assert_eq!(r["scenario_requests"][0].as_u64().unwrap(), turns + 8);
    // 1 parent request, 4 chains of 2 child requests, the parent's second and last turns.
    assert_eq!(r["floor_requests"], 11);
}

#[test]
fn fanout_through_the_sqlite_store_and_a_sweep_write_their_results() {
    let dir = tempfile::tempdir().unwrap();
    let bench = env!("CARGO_BIN_EXE_cadre-bench");
    let json = dir.path().join("store.json");
    let out = Command::new(bench)
        .args([
            "fanout",
            "--variant",
            "spawn-bg",
            "--n",
            "3",
            "--repeat",
            "1",
        ])
        .args(["--store", "sqlite", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["store"], "sqlite");
    assert_eq!(r["delivered_min"], 3);

    // A two-cell sweep (one variant, N = 2, without and with a store), run in a scratch dir.
    let md = dir.path().join("sweep.md");
    let out = Command::new(bench)
        .current_dir(dir.path())
        .args([
            "fanout",
            "--sweep",
            "--sweep-n",
            "2",
            "--sweep-variants",
            "task-fg",
        ])
        .args(["--sweep-stores", "none,sqlite", "--repeat", "1", "--md"])
        .arg(&md)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(table.contains("| task-fg | none | 2 |"), "{table}");
    assert!(table.contains("| task-fg | sqlite | 2 |"), "{table}");
    assert!(
        dir.path()
            .join("target/bench/fanout-task-fg-2-sqlite.json")
            .exists()
    );
}
