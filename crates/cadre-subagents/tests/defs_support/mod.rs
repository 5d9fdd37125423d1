//! Helpers shared by the definition tests: temp workspaces with definition files.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use cadre_subagents::AgentRegistry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A temp workspace.
pub struct Ws {
    pub dir: tempfile::TempDir,
}

impl Ws {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self { dir }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    /// Write `text` at `rel` (directories created).
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        self.write_bytes(rel, text.as_bytes())
    }

    pub fn write_bytes(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A registry of this workspace without a user dir or aliases.
    pub fn registry(&self) -> AgentRegistry {
        AgentRegistry::builder()
            .workspace(self.root())
            .user_dir(None)
            .load()
    }

    pub fn registry_with(&self, user: Option<&Path>, aliases: &[(&str, &str)]) -> AgentRegistry {
        let aliases: HashMap<String, String> = aliases
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        AgentRegistry::builder()
            .workspace(self.root())
            .user_dir(user.map(Path::to_path_buf))
            .aliases(aliases)
            .load()
    }
}

/// The error reasons of a registry, as `file name: reason`.
pub fn error_lines(reg: &AgentRegistry) -> Vec<String> {
    reg.errors()
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.path.file_name().unwrap().to_string_lossy(),
                e.reason
            )
        })
        .collect()
}

/// The warnings of one agent.
pub fn warnings_of(reg: &AgentRegistry, agent: &str) -> Vec<String> {
    reg.get(agent).unwrap().warnings.clone()
}
