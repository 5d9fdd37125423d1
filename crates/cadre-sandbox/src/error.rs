//! Why a sandboxed command could not be prepared.

use std::path::PathBuf;

/// Why a sandboxed command could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// `[sandbox] required = true` and a mechanism the policy needs is missing.
    #[error(
        "the sandbox is required (`[sandbox] required = true`) but {0}; set `required = false` \
         to run with a weaker sandbox, or `sandbox = \"off\"` to run without one"
    )]
    Missing(String),
    /// The private temp dir could not be created.
    #[error("cannot create the sandbox's private temp dir: {0}")]
    TempDir(#[source] std::io::Error),
    /// A path of the policy cannot be passed to the launcher.
    #[error("sandbox path {} is not valid UTF-8", .0.display())]
    NonUtf8(PathBuf),
}
