//! What a server offered when it last started (its tools, resources and prompts), kept in
//! `<workspace>/.cadre/mcp-cache/` so a lazily started server's tools can be in the model's
//! first request before the server runs. The file is named by a hash of the server's
//! configuration as written (before `${VAR}` expansion, so no secret is hashed or stored), so
//! a changed entry starts afresh. `.cadre/` is protected from the file tools, so the model
//! cannot plant tool descriptions there.

use crate::config::ServerConfig;
use crate::naming::{fnv1a, server_part};
use crate::server::Offer;
use std::path::{Path, PathBuf};

/// Where the cache files live, below the workspace root.
pub const CACHE_DIR: &str = ".cadre/mcp-cache";
/// Largest cache file read back.
const MAX_CACHE_BYTES: u64 = 8 << 20;

/// The cache file of `cfg` in `workspace`.
pub(crate) fn path(workspace: &Path, cfg: &ServerConfig) -> PathBuf {
    let fingerprint = format!("{:?}|{:?}", cfg.transport, cfg.name);
    workspace.join(CACHE_DIR).join(format!(
        "{}-{:08x}.json",
        server_part(&cfg.name),
        fnv1a(&[&fingerprint])
    ))
}

/// The offer kept at `path`, if there is a readable one.
pub(crate) fn load(path: &Path) -> Option<Offer> {
    let text = cadre_tools::read_to_string_capped(path, MAX_CACHE_BYTES).ok()?;
    match serde_json::from_str(&text) {
        Ok(offer) => Some(offer),
        Err(e) => {
            tracing::warn!(path = %path.display(), %e, "ignoring an unreadable MCP tool cache");
            None
        }
    }
}

/// Keep `offer` at `path` (through a temporary file and a rename, so a reader never sees
/// half a file). Failing to keep it only costs an eager start next time.
pub(crate) fn save(path: &Path, offer: &Offer) {
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        std::fs::write(
            &tmp,
            serde_json::to_vec(offer).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        tracing::warn!(path = %path.display(), %e, "cannot keep the MCP tool cache");
    }
}
