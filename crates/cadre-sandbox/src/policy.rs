//! What an agent's processes may do: the sandbox modes, what a definition or the
//! configuration asks for ([`SandboxSpec`]), and the resolved [`SandboxPolicy`] of one agent,
//! which its children can only narrow.

use serde::{Deserialize, Deserializer, Serialize};
use std::path::{Component, Path, PathBuf};

/// How much an agent's processes may write.
///
/// Ordered from the narrowest to the widest, so the narrower of two modes is their `min`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere except credential folders; write only a private temp dir (and any
    /// `writable_roots`).
    ReadOnly,
    /// As `read-only`, and also write the agent's runtime root.
    WorkspaceWrite,
    /// No sandbox: the user's full rights.
    #[default]
    Off,
}

impl SandboxMode {
    /// The name used in configuration (`read-only`, `workspace-write`, `off`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::Off => "off",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read-only" => Ok(Self::ReadOnly),
            "workspace-write" => Ok(Self::WorkspaceWrite),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "unknown sandbox mode `{other}` (expected `read-only`, `workspace-write` or `off`)"
            )),
        }
    }
}

/// What a definition or the configuration asks for: a mode, whether the network is
/// reachable, and extra writable directories (relative to the agent's root, `~/`, or
/// absolute). Written as a mode name or as a table `{mode, network, writable_roots}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SandboxSpec {
    /// The mode.
    pub mode: SandboxMode,
    /// Whether processes may use the network (ignored with `off`, which allows it).
    pub network: bool,
    /// Directories writable besides the root (`workspace-write`) and the private temp dir.
    pub writable_roots: Vec<String>,
}

impl SandboxSpec {
    /// A spec of `mode` without network or extra roots.
    pub fn mode(mode: SandboxMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }
}

/// The table form: a missing `mode` means `workspace-write`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecTable {
    #[serde(default)]
    mode: Option<SandboxMode>,
    #[serde(default)]
    network: bool,
    #[serde(default)]
    writable_roots: Vec<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SpecForm {
    Mode(String),
    Table(SpecTable),
}

impl<'de> Deserialize<'de> for SandboxSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match SpecForm::deserialize(d)? {
            SpecForm::Mode(m) => Ok(Self::mode(m.parse().map_err(serde::de::Error::custom)?)),
            SpecForm::Table(t) => Ok(Self {
                mode: t.mode.unwrap_or(SandboxMode::WorkspaceWrite),
                network: t.network,
                writable_roots: t.writable_roots,
            }),
        }
    }
}

/// What one agent's processes may do, resolved against its root: the writable directories
/// (canonical, absolute) and whether the network is reachable. A child's policy is its own
/// [`within`](Self::within) its parent's, so it never allows more than the parent's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SandboxPolicy {
    /// The mode it came from (`off` means no sandbox at all).
    pub mode: SandboxMode,
    /// Whether processes may use the network.
    pub network: bool,
    /// The directories processes may write (the private temp dir is added at launch).
    pub writable: Vec<PathBuf>,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self::off()
    }
}

impl SandboxPolicy {
    /// No sandbox.
    pub fn off() -> Self {
        Self {
            mode: SandboxMode::Off,
            network: true,
            writable: Vec::new(),
        }
    }

    /// `spec` for an agent whose runtime root is `root` (canonical).
    pub fn resolve(spec: &SandboxSpec, root: &Path) -> Self {
        if spec.mode == SandboxMode::Off {
            return Self::off();
        }
        let mut writable = Vec::new();
        if spec.mode == SandboxMode::WorkspaceWrite {
            writable.push(root.to_path_buf());
        }
        for r in &spec.writable_roots {
            if let Some(p) = resolve_root(root, r) {
                writable.push(p);
            }
        }
        Self {
            mode: spec.mode,
            network: spec.network,
            writable: minimal(writable),
        }
    }

    /// True when processes run without a sandbox.
    pub fn is_off(&self) -> bool {
        self.mode == SandboxMode::Off
    }

    /// True when the agent is sandboxed without the network: its network tools are
    /// withheld, not only its processes' sockets.
    pub fn denies_network(&self) -> bool {
        !self.is_off() && !self.network
    }

    /// This policy narrowed to what `bound` (the parent's) allows: the narrower mode, the
    /// network only if both allow it, and only the writable directories both allow.
    pub fn within(&self, bound: &SandboxPolicy) -> SandboxPolicy {
        if bound.is_off() {
            return self.clone();
        }
        if self.is_off() {
            return bound.clone();
        }
        SandboxPolicy {
            mode: self.mode.min(bound.mode),
            network: self.network && bound.network,
            writable: intersect(&self.writable, &bound.writable),
        }
    }
}

impl SandboxPolicy {
    /// True when this policy allows nothing `bound` does not: a mode no wider, the network
    /// only if `bound` has it, and every writable directory inside one of `bound`'s. Every
    /// policy is within `off`; `off` is within nothing else.
    pub fn is_within(&self, bound: &SandboxPolicy) -> bool {
        if bound.is_off() {
            return true;
        }
        !self.is_off()
            && self.mode <= bound.mode
            && (!self.network || bound.network)
            && (self.writable.iter()).all(|p| bound.writable.iter().any(|q| p.starts_with(q)))
    }
}

/// The directories inside both sets of trees.
fn intersect(a: &[PathBuf], b: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in a {
        for q in b {
            if p.starts_with(q) {
                out.push(p.clone());
            } else if q.starts_with(p) {
                out.push(q.clone());
            }
        }
    }
    minimal(out)
}

/// Sorted, without duplicates and without directories inside another one of the list.
fn minimal(mut dirs: Vec<PathBuf>) -> Vec<PathBuf> {
    dirs.sort();
    dirs.dedup();
    let all = dirs.clone();
    dirs.retain(|d| !all.iter().any(|o| o != d && d.starts_with(o)));
    dirs
}

/// A `writable_roots` entry as a canonical path: relative to `root`, `~/` from `$HOME`,
/// `..` resolved; canonicalised when it exists. `None` for `~/` without a home.
fn resolve_root(root: &Path, entry: &str) -> Option<PathBuf> {
    let entry = entry.trim();
    let joined = match entry.strip_prefix("~/") {
        Some(rest) => PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(rest),
        None => root.join(entry),
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Some(out.canonicalize().unwrap_or(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ww(writable: &[&str], network: bool) -> SandboxPolicy {
        SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            network,
            writable: writable.iter().map(PathBuf::from).collect(),
        }
    }

    #[test]
    fn modes_parse_and_order_from_narrow_to_wide() {
        for m in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::Off,
        ] {
            assert_eq!(m.as_str().parse::<SandboxMode>(), Ok(m));
        }
        assert!(SandboxMode::ReadOnly < SandboxMode::WorkspaceWrite);
        assert!(SandboxMode::WorkspaceWrite < SandboxMode::Off);
        assert!("workspace".parse::<SandboxMode>().is_err());
    }

    #[test]
    fn a_spec_is_a_mode_name_or_a_table() {
        let s: SandboxSpec = serde_json::from_str("\"read-only\"").unwrap();
        assert_eq!(s, SandboxSpec::mode(SandboxMode::ReadOnly));
        let s: SandboxSpec =
            serde_json::from_str(r#"{"network": true, "writable_roots": ["out"]}"#).unwrap();
        assert_eq!(s.mode, SandboxMode::WorkspaceWrite);
        assert!(s.network);
        assert_eq!(s.writable_roots, vec!["out".to_string()]);
        assert!(serde_json::from_str::<SandboxSpec>("\"sideways\"").is_err());
        assert!(serde_json::from_str::<SandboxSpec>(r#"{"mode": "off", "x": 1}"#).is_err());
    }

    #[test]
    fn resolving_makes_the_root_writable_only_in_workspace_write() {
        let root = Path::new("/w/agent");
        let mut spec = SandboxSpec::mode(SandboxMode::WorkspaceWrite);
        spec.writable_roots = vec!["../cache".into(), "build".into()];
        let p = SandboxPolicy::resolve(&spec, root);
        // `build` is inside the root, so only the root and `../cache` remain.
        assert_eq!(
            p.writable,
            vec![PathBuf::from("/w/agent"), PathBuf::from("/w/cache")]
        );
        spec.mode = SandboxMode::ReadOnly;
        let p = SandboxPolicy::resolve(&spec, root);
        assert_eq!(
            p.writable,
            vec![PathBuf::from("/w/agent/build"), PathBuf::from("/w/cache")]
        );
        let p = SandboxPolicy::resolve(&SandboxSpec::mode(SandboxMode::Off), root);
        assert!(p.is_off());
    }

    #[test]
    fn a_child_never_gets_more_than_its_parent() {
        let parent = ww(&["/w"], false);
        // (child, expected)
        let cases = [
            // Asking for `off` under a sandboxed parent keeps the parent's sandbox.
            (SandboxPolicy::off(), ww(&["/w"], false)),
            // The network needs both.
            (ww(&["/w/a"], true), ww(&["/w/a"], false)),
            // A root outside the parent's is dropped; one around it shrinks to it.
            (ww(&["/elsewhere", "/"], false), ww(&["/w"], false)),
            (
                SandboxPolicy {
                    mode: SandboxMode::ReadOnly,
                    network: false,
                    writable: vec![],
                },
                SandboxPolicy {
                    mode: SandboxMode::ReadOnly,
                    network: false,
                    writable: vec![],
                },
            ),
        ];
        for (child, want) in cases {
            assert_eq!(child.within(&parent), want, "{child:?}");
        }
        // Under an unsandboxed parent a child keeps what it asked for.
        let child = ww(&["/x"], true);
        assert_eq!(child.within(&SandboxPolicy::off()), child);
        // A read-only parent makes any child read-only.
        let ro = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            network: true,
            writable: vec![],
        };
        let got = ww(&["/w"], true).within(&ro);
        assert_eq!(got.mode, SandboxMode::ReadOnly);
        assert!(got.writable.is_empty());
    }

    #[test]
    fn within_is_what_narrowing_never_exceeds() {
        let parent = ww(&["/w"], false);
        let ro = |network| SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            network,
            writable: vec![],
        };
        // (policy, is it within `parent`)
        let cases = [
            (ww(&["/w"], false), true),
            (ww(&["/w/a"], false), true),
            (ro(false), true),
            (ww(&["/w"], true), false),
            (ww(&["/"], false), false),
            (ww(&["/w", "/elsewhere"], false), false),
            (ro(true), false),
            (SandboxPolicy::off(), false),
        ];
        for (p, want) in cases {
            assert_eq!(p.is_within(&parent), want, "{p:?}");
            // Whatever `within` makes is within its bound.
            assert!(p.within(&parent).is_within(&parent), "{p:?}");
        }
        assert!(SandboxPolicy::off().is_within(&SandboxPolicy::off()));
        assert!(!ww(&["/w"], false).is_within(&ro(true)));
    }
}
