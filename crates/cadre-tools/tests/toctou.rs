//! A directory and a symlink to outside the workspace swap places in a tight loop while the
//! file tools run: none of them may read, list or write anything outside.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Tools;
use rustix::fs::{Mode, OFlags, RenameFlags};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ROUNDS: usize = 2000;
const SECRET: &str = "OUTSIDE-SECRET";
const OUTSIDE_NAME: &str = "outside-only-name";

/// Swap `root/d` (a directory) and `root/swap` (a symlink to outside) until `stop`.
fn swapper(
    root: &Path,
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    let dir = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            rustix::fs::renameat_with(&dir, "d", &dir, "swap", RenameFlags::EXCHANGE).unwrap();
            swaps.fetch_add(1, Ordering::Relaxed);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_a_directory_for_a_symlink_never_leads_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("d/secret.txt"), "inside text\n").unwrap();
    std::fs::write(root.join("d/inside-only-name"), "").unwrap();
    std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(outside.join(OUTSIDE_NAME), format!("{SECRET}\n")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("swap")).unwrap();
    let tools = Tools::new(&root);

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let handle = swapper(&root, stop.clone(), swaps.clone());
    // The swapping has started before the first call (an event, not a delay).
    while swaps.load(Ordering::Relaxed) == 0 {
        std::hint::spin_loop();
    }

    let mut leaks = Vec::new();
    let mut inside = [0usize; 5];
    for round in 0..ROUNDS {
        let calls = [
            ("read_file", json!({"path": "d/secret.txt"})),
            (
                "write_file",
                json!({"path": "d/written.txt", "content": format!("round {round}\n")}),
            ),
            ("list_dir", json!({"path": "d"})),
            ("grep", json!({"pattern": "SECRET|inside", "path": "d"})),
            ("glob", json!({"pattern": "*", "path": "d"})),
        ];
        for (i, (tool, args)) in calls.into_iter().enumerate() {
            if let Ok(out) = tools.call(tool, args).await {
                if out.content.contains(SECRET) || out.content.contains(OUTSIDE_NAME) {
                    leaks.push(format!("{tool} round {round}: {}", out.content));
                } else {
                    inside[i] += 1;
                }
            }
        }
        if outside.join("written.txt").exists() {
            leaks.push(format!("write_file round {round} wrote outside"));
            std::fs::remove_file(outside.join("written.txt")).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    handle.join().unwrap();

    assert!(
        leaks.is_empty(),
        "{} calls reached outside: {:#?}",
        leaks.len(),
        &leaks[..leaks.len().min(5)]
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    assert!(!outside.join("written.txt").exists());
    // Both states were seen: the tools did work inside while the swapping went on.
    assert!(swaps.load(Ordering::Relaxed) > ROUNDS as u64);
    for (i, n) in inside.iter().enumerate() {
        assert!(*n > 0, "call {i} never succeeded inside");
    }
}
