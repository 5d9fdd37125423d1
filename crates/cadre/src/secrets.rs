//! cadre's secrets leave its own environment at start-up: the environment is kept in memory
//! ([`cadre_types::process_env`]), every credential-like variable and every secret the
//! configuration names is removed from the live environment and blanked in the block
//! `/proc/<cadre>/environ` shows, and the process is made non-dumpable, so a command the
//! model runs can read neither `/proc/<cadre>/environ` nor `/proc/<cadre>/mem`.

use crate::cli::Cli;
use crate::config::Config;
use cadre_tools::SecretEnv;
use std::io::{Read, Write};
use std::path::Path;

/// Protect the secrets of this process. Call it from `main` while the process is still
/// single-threaded (before the async runtime or anything else starts a thread).
pub fn protect(cli: &Cli) {
    let names = cadre_types::process_env::capture(&configured_secrets(cli));
    blank_initial_values(&names);
    remove_from_environment(&names);
    // Not dumpable: other processes of the user (the model's `bash`) cannot open this one's
    // `/proc` files that expose memory (`mem`, `environ`), nor attach a debugger. Children
    // are dumpable again after `exec`. Nothing to do about a kernel that refuses.
    let _ = cadre_sandbox::tether::forbid_inspection();
}

/// The variables the configuration names as secrets ([`child_secrets`], even passed ones:
/// a child is given those back explicitly). A configuration that cannot be read names none
/// here; the run reports it later.
fn configured_secrets(cli: &Cli) -> Vec<String> {
    let Ok(ws) = crate::setup::workspace_root(cli) else {
        return Vec::new();
    };
    match crate::config::load(&ws, cli.config.as_deref()) {
        Ok(config) => child_secrets(&ws, &config)
            .secrets()
            .map(str::to_string)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Every variable of cadre's secrets in workspace `ws`, which the processes it starts do
/// not inherit (`[tools] pass_env` aside): those of [`Config::secret_env`], the credential
/// variables of the configured MCP servers and of the servers agent definitions declare
/// ([`cadre_mcp::ServerEntry::secret_vars`]), and those remote agents' `headers` name. A
/// server whose own entry names one sets it explicitly, so it reaches that server only.
pub fn child_secrets(ws: &Path, config: &Config) -> SecretEnv {
    let (entries, _) = crate::mcp_cmd::configured_entries(ws, config);
    let agents = cadre_subagents::AgentRegistry::builder()
        .workspace(ws)
        .user_dir(crate::config::user_dir().map(|d| d.join("agents")))
        .load();
    let declared = agents
        .list()
        .flat_map(|d| d.mcp_servers.iter())
        .filter_map(|s| match s {
            cadre_subagents::AgentMcpServer::Inline { entry, .. } => {
                serde_json::from_value::<cadre_mcp::ServerEntry>(entry.clone()).ok()
            }
            cadre_subagents::AgentMcpServer::Named(_) => None,
        });
    let servers: Vec<String> = (entries.into_iter().map(|(_, e, _)| e))
        .chain(declared)
        .flat_map(|e| e.secret_vars())
        .collect();
    let headers: Vec<String> = agents
        .list()
        .filter_map(|d| d.remote.as_ref())
        .flat_map(|r| r.headers.values())
        .flat_map(|v| cadre_types::env_ref::referenced_names(v))
        .map(str::to_string)
        .collect();
    config
        .secret_env()
        .with_secrets(servers)
        .with_secrets(headers)
}

/// Remove `names` from the live environment.
#[allow(unsafe_code)]
fn remove_from_environment(names: &[String]) {
    for name in names {
        // SAFETY: `protect` is called from `main` before any thread exists (the launcher
        // check only execs or exits), so nothing reads the environment concurrently.
        unsafe { std::env::remove_var(name) };
    }
}

/// Overwrite with NUL bytes the values of `names` in the environment block the kernel
/// placed at start (what `/proc/PID/environ` reads: removing a variable only unlinks it
/// from `environ`). Written through `/proc/self/mem`, which a process may always do to
/// itself; best effort: non-dumpable is what keeps other processes out.
fn blank_initial_values(names: &[String]) {
    if names.is_empty() {
        return;
    }
    let (Some((start, end)), Ok(block)) = (env_block_range(), read_file("/proc/self/environ"))
    else {
        return;
    };
    if block.len() as u64 > end.saturating_sub(start) {
        return;
    }
    let Ok(mut mem) = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")
    else {
        return;
    };
    for (offset, len) in value_ranges(&block, names) {
        let zeros = vec![0u8; len];
        use std::io::Seek;
        if mem
            .seek(std::io::SeekFrom::Start(start + offset as u64))
            .and_then(|_| mem.write_all(&zeros))
            .is_err()
        {
            return;
        }
    }
}

/// Where each value of `names` lies in an environment block (`NAME=value\0...`).
fn value_ranges(block: &[u8], names: &[String]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    for entry in block.split(|b| *b == 0) {
        if let Some(eq) = entry.iter().position(|b| *b == b'=')
            && names.iter().any(|n| n.as_bytes() == &entry[..eq])
            && eq + 1 < entry.len()
        {
            out.push((at + eq + 1, entry.len() - eq - 1));
        }
        at += entry.len() + 1;
    }
    out
}

/// `env_start` and `env_end` of `/proc/self/stat` (fields 50 and 51).
fn env_block_range() -> Option<(u64, u64)> {
    let stat = String::from_utf8(read_file("/proc/self/stat").ok()?).ok()?;
    // The command name (field 2) may hold spaces and parentheses; the fields after its
    // closing parenthesis start with field 3.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace().skip(50 - 3);
    let start = fields.next()?.parse().ok()?;
    let end = fields.next()?.parse().ok()?;
    (start < end).then_some((start, end))
}

fn read_file(path: &str) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    std::fs::File::open(path)?.read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_exact_name_only() {
        let block = b"A_KEY=one\0B=two\0A_KEY_X=three\0EMPTY_KEY=\0A_KEY=four=4\0";
        let names = vec!["A_KEY".to_string(), "EMPTY_KEY".to_string()];
        let ranges = value_ranges(block, &names);
        let values: Vec<&[u8]> = ranges.iter().map(|&(o, l)| &block[o..o + l]).collect();
        assert_eq!(values, [&b"one"[..], &b"four=4"[..]]);
    }

    #[test]
    fn the_environment_block_of_this_process_is_found() {
        let (start, end) = env_block_range().unwrap();
        let block = read_file("/proc/self/environ").unwrap();
        assert!(block.len() as u64 <= end - start);
    }
}
