//! Node ids (which `cadre` installation owns a task) and process instances (which process of
//! that node runs it).
//!
//! A node id is stable across restarts: `node-<hostname>-<hash of the canonical workspace
//! path>`, so a restarted `cadre` recognises the tasks its previous incarnation left behind.
//! Several processes in the same workspace share the node id; the instance
//! (`<pid>:<process start ticks>`) tells them apart, so one process starting up never fails
//! the running tasks of a live sibling.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Identifies a `cadre` node (host + workspace). Tasks record the node that owns them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(String);

impl NodeId {
    /// A node id given explicitly (the `[store] node_id` override).
    pub fn new(id: impl Into<String>) -> Self {
        NodeId(id.into())
    }

    /// The stable id of this host and workspace: `node-<hostname>-<8 hex digits>`.
    pub fn detect(workspace: &Path) -> Self {
        let canonical = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.into());
        let hash = fnv1a64(canonical.as_os_str().as_encoded_bytes());
        NodeId(format!("node-{}-{:08x}", hostname(), hash >> 32))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// This machine's host name, sanitised to `[a-z0-9.-]`, from the kernel (falls back to
/// `/etc/hostname`, then `localhost`).
pub fn hostname() -> String {
    let raw = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    let clean: String = raw
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    clean
}

/// 64-bit FNV-1a: a tiny hash that is stable across Rust versions and platforms.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// This process's instance string, `<pid>:<start ticks>` (start ticks 0 when unknown).
pub fn current_instance() -> String {
    let pid = std::process::id();
    format!("{pid}:{}", process_start_ticks(pid).unwrap_or(0))
}

/// True when `instance` names a process that is still running on this machine (same pid
/// and same start time, so a reused pid does not count). A process that has exited but
/// that its parent has not waited for yet (a zombie, still listed with its start time)
/// is not running: a `cadre run` killed a moment ago is dead even before it is reaped.
/// False when unknown.
pub fn instance_alive(instance: &str) -> bool {
    let Some((pid, start)) = instance.split_once(':') else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    start != 0
        && process_stat(pid)
            .is_some_and(|(state, ticks)| ticks == start && !matches!(state, 'Z' | 'X' | 'x'))
}

/// Field 22 of `/proc/<pid>/stat`: the process start time in clock ticks since boot.
fn process_start_ticks(pid: u32) -> Option<u64> {
    process_stat(pid).map(|(_, ticks)| ticks)
}

/// Fields 3 (the state: `R`, `S`, `Z` for a zombie, ...) and 22 (the start time in clock
/// ticks since boot) of `/proc/<pid>/stat`.
fn process_stat(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `after` starts with field 3; start time is field 22.
    Some((state, fields.nth(18)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_id_is_stable_and_path_dependent() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let n1 = NodeId::detect(a.path());
        assert_eq!(n1, NodeId::detect(a.path()));
        assert_ne!(n1, NodeId::detect(b.path()));
        assert!(n1.as_str().starts_with(&format!("node-{}-", hostname())));
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn instances_are_alive_only_while_running() {
        let me = current_instance();
        assert!(instance_alive(&me), "{me}");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let inst = format!(
            "{}:{}",
            child.id(),
            process_start_ticks(child.id()).unwrap()
        );
        assert!(instance_alive(&inst));
        child.kill().unwrap();
        // Dead but not yet waited for: a zombie, listed with its start time until reaped.
        let stat = format!("/proc/{}/stat", child.id());
        cadre_testkit::wait_until("a zombie", std::time::Duration::from_secs(10), || {
            std::fs::read_to_string(&stat)
                .unwrap()
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        });
        assert!(!instance_alive(&inst), "a zombie is not alive");
        child.wait().unwrap();
        assert!(!instance_alive(&inst));
        assert!(!instance_alive("garbage"));
        assert!(!instance_alive(&format!("{}:1", std::process::id())));
    }
}
