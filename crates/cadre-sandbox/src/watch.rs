//! Protected locations that did not exist when a sandboxed command started. A mount needs
//! something to cover and Landlock cannot refuse one new name in a directory whose other new
//! entries stay creatable, so such a location is watched instead: one that exists after the
//! command is moved into a quarantine directory, out of the reach of every loader, and the
//! move is reported. Nothing is deleted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where quarantined entries go, below the directory they were created in.
pub const QUARANTINE_DIR: &str = ".cadre/quarantine";

/// The protected locations found missing when a sandboxed command started, and what an
/// earlier command left behind (found at its start). Hand it back to
/// [`Sandbox::settle`](crate::Sandbox::settle) once the command's processes have ended.
#[derive(Debug, Default)]
#[must_use = "settle it once the command has ended, or what it created stays in place"]
pub struct ProtectedWatch {
    pub(crate) missing: Vec<PathBuf>,
    pub(crate) earlier: Vec<Quarantined>,
}

impl ProtectedWatch {
    /// The protected locations being watched (absolute).
    pub fn missing(&self) -> &[PathBuf] {
        &self.missing
    }
}

/// A protected location that appeared while (or after) a sandboxed command ran, and what
/// cadre did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Where it appeared (absolute).
    pub path: PathBuf,
    /// Where it was moved; `Err` says why it could not be (it is then still in place).
    pub moved_to: Result<PathBuf, String>,
    /// Found at the start of a later command (made by a process that outlived its call, or
    /// by something outside the sandbox), not when its own command ended.
    pub earlier: bool,
}

impl Quarantined {
    /// One line for the tool result, relative to `root` where the paths lie below it.
    pub fn describe(&self, root: &Path) -> String {
        let show = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
        let what = if self.earlier {
            "found after an earlier command"
        } else {
            "the command created"
        };
        match &self.moved_to {
            Ok(to) => format!(
                "[{what} {}, a protected path; cadre moved it to {} so that no agent \
                 loads it]",
                show(&self.path),
                show(to)
            ),
            Err(e) => format!(
                "[{what} {}, a protected path; cadre could not move it away ({e}): \
                 remove it before the next run]",
                show(&self.path)
            ),
        }
    }
}

/// The locations of `paths` that do not exist (not even as a dangling symlink) and would
/// be created inside one of `writable` (canonical).
pub(crate) fn missing_in(paths: &[PathBuf], writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_err())
        .filter_map(|p| canonical_missing(p))
        .filter(|p| writable.iter().any(|w| p.starts_with(w)))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `path` with its deepest existing ancestor canonicalised: where a create would land.
fn canonical_missing(path: &Path) -> Option<PathBuf> {
    let mut tail = Vec::new();
    let mut cur = path;
    loop {
        if let Ok(c) = cur.canonicalize() {
            return Some(tail.iter().rev().fold(c, |acc, n| acc.join(n)));
        }
        tail.push(cur.file_name()?.to_os_string());
        cur = cur.parent()?;
    }
}

/// Move each of `watched` that exists now into quarantine.
pub(crate) fn neutralise(watched: &[PathBuf], earlier: bool) -> Vec<Quarantined> {
    watched
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .map(|p| Quarantined {
            path: p.clone(),
            moved_to: quarantine(p).map_err(|e| e.to_string()),
            earlier,
        })
        .collect()
}

/// Move `path` (which exists) to `<its dir>/.cadre/quarantine/<stamp>/<its name>`. A moved
/// `.cadre` itself first steps aside, so the quarantine can be made where it was.
fn quarantine(path: &Path) -> std::io::Result<PathBuf> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("a root cannot be quarantined"));
    };
    let stamp = stamp();
    let mut source = path.to_path_buf();
    if Some(name) == Path::new(QUARANTINE_DIR).iter().next() {
        let aside = parent.join(format!(".cadre-quarantine-{stamp}"));
        std::fs::rename(path, &aside)?;
        source = aside;
    }
    let dir = parent.join(QUARANTINE_DIR).join(&stamp);
    std::fs::create_dir_all(&dir)?;
    let to = dir.join(name);
    std::fs::rename(&source, &to)?;
    Ok(to)
}

/// A name no other quarantine of this process (nor, by the pid, of another) takes.
fn stamp() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{secs}-{}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn created_protected_paths_are_moved_into_quarantine_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        fs::create_dir_all(w.join(".git")).unwrap();
        let protected: Vec<PathBuf> = [".git", ".claude", "AGENTS.md", ".gemini", "sub/.codex"]
            .iter()
            .map(|n| w.join(n))
            .collect();
        let outside = tempfile::tempdir().unwrap();
        let mut all = protected;
        all.push(outside.path().join(".claude"));
        let missing = missing_in(&all, std::slice::from_ref(&w));
        // Existing ones are mounted instead; outside the writable roots nothing is written.
        assert_eq!(
            missing,
            vec![
                w.join(".claude"),
                w.join(".gemini"),
                w.join("AGENTS.md"),
                w.join("sub/.codex")
            ]
        );
        fs::create_dir_all(w.join(".claude")).unwrap();
        fs::write(w.join(".claude/settings.json"), "{}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", w.join("AGENTS.md")).unwrap();
        fs::write(w.join("ordinary.txt"), "x").unwrap();
        let got = neutralise(&missing, false);
        assert_eq!(got.len(), 2, "{got:?}");
        for q in &got {
            let to = q.moved_to.as_ref().unwrap();
            assert!(to.starts_with(w.join(QUARANTINE_DIR)), "{q:?}");
            assert!(!q.path.exists() && fs::symlink_metadata(to).is_ok());
        }
        let settings = got[0].moved_to.as_ref().unwrap().join("settings.json");
        assert_eq!(fs::read_to_string(settings).unwrap(), "{}");
        assert!(w.join("ordinary.txt").exists() && w.join(".git").exists());
        assert!(got[0].describe(&w).contains("the command created .claude,"));
    }

    #[test]
    fn a_created_cadre_directory_is_quarantined_inside_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        let missing = missing_in(&[w.join(".cadre")], std::slice::from_ref(&w));
        fs::create_dir_all(w.join(".cadre/agents")).unwrap();
        fs::write(w.join(".cadre/config.toml"), "mode = \"bypass\"").unwrap();
        let got = neutralise(&missing, true);
        let to = got[0].moved_to.as_ref().unwrap();
        assert!(to.starts_with(w.join(QUARANTINE_DIR)) && to.ends_with(".cadre"));
        assert!(!w.join(".cadre/config.toml").exists());
        assert!(to.join("config.toml").exists() && got[0].earlier);
    }
}
