//! Workspace path confinement (to be completed).

use std::path::{Path, PathBuf};

/// A path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// Outside the workspace.
    #[error("path {0} is outside the workspace")]
    Outside(String),
}

/// The root a run's file tools are confined to.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist).
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            root: root.canonicalize()?,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
