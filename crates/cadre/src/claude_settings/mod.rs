//! Claude Code's settings files (`~/.claude/settings.json`, `<ws>/.claude/settings.json`,
//! `<ws>/.claude/settings.local.json`): the `permissions` they hold, as cadre rules and an
//! approval mode. Other keys of these files are left to their own readers.

mod rules;

use crate::config::PermissionsConfig;
use anyhow::{Context, Result};
use cadre_engine::{ApprovalMode, PermissionRules};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The largest settings file read (they are a few KiB).
const MAX_SETTINGS_BYTES: u64 = 1 << 20;

/// What Claude Code's `defaultMode` means here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudeMode {
    /// One of cadre's modes.
    Mode(ApprovalMode),
    /// `acceptEdits`: `ask`, with the file-writing tools allowed.
    AcceptEdits,
}

/// The permissions of every Claude Code settings file of a workspace, mapped.
#[derive(Debug, Clone, Default)]
pub struct ClaudePermissions {
    /// cadre allow rules.
    pub allow: Vec<String>,
    /// cadre deny rules.
    pub deny: Vec<String>,
    /// cadre ask rules.
    pub ask: Vec<String>,
    /// The last file's `defaultMode`.
    pub mode: Option<ClaudeMode>,
    /// What could not be mapped, each naming its file.
    pub warnings: Vec<String>,
}

/// The settings files, in the order they are merged: the user's (`$CLAUDE_CONFIG_DIR` or
/// `~/.claude`), the project's, the project's local one.
pub fn settings_files(workspace: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(dir) = user_claude_dir() {
        files.push(dir.join("settings.json"));
    }
    files.push(workspace.join(".claude").join("settings.json"));
    files.push(workspace.join(".claude").join("settings.local.json"));
    files
}

fn user_claude_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(d));
    }
    home().map(|h| h.join(".claude"))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Read the permissions of every settings file of `workspace` (canonical). A file that is
/// not JSON is an error naming it: its deny rules would otherwise be lost.
pub fn load(workspace: &Path) -> Result<ClaudePermissions> {
    let mut out = ClaudePermissions::default();
    let home = home();
    let base = rules::PathBase {
        workspace,
        home: home.as_deref(),
    };
    for file in settings_files(workspace) {
        if let Some(value) = read_json(&file)? {
            out.add_file(&file, &value, &base);
        }
    }
    Ok(out)
}

fn read_json(path: &Path) -> Result<Option<Value>> {
    let text = match cadre_tools::read_to_string_capped(path, MAX_SETTINGS_BYTES) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(anyhow::Error::new(e).context("cannot read Claude Code settings")),
    };
    serde_json::from_str(&text)
        .map(Some)
        .with_context(|| format!("invalid JSON in {}", path.display()))
}

impl ClaudePermissions {
    fn add_file(&mut self, file: &Path, value: &Value, base: &rules::PathBase<'_>) {
        let name = file.display().to_string();
        let Some(perms) = value.get("permissions") else {
            return;
        };
        let Some(perms) = perms.as_object() else {
            self.warnings
                .push(format!("{name}: `permissions` is not an object; ignored"));
            return;
        };
        for (key, v) in perms {
            match key.as_str() {
                "allow" | "deny" | "ask" => self.add_list(&name, key, v, base),
                "defaultMode" => self.set_mode(&name, v),
                other => self.warnings.push(format!(
                    "{name}: `permissions.{other}` is not supported by cadre; ignored"
                )),
            }
        }
    }

    fn add_list(&mut self, name: &str, key: &str, v: &Value, base: &rules::PathBase<'_>) {
        let Some(list) = v.as_array() else {
            self.warnings.push(format!(
                "{name}: `permissions.{key}` is not a list; ignored"
            ));
            return;
        };
        for entry in list {
            let Some(rule) = entry.as_str() else {
                self.warnings.push(format!(
                    "{name}: permissions.{key} entry {entry} is not a string; ignored"
                ));
                continue;
            };
            let mapped = rules::map_rule(rule, base).and_then(|m| {
                // A mapped rule cadre would refuse to parse is a warning, not a failed start.
                PermissionRules::parse(&m, &[], &[])
                    .map(|_| m)
                    .map_err(|e| e.to_string())
            });
            match mapped {
                Ok(m) => {
                    let target = match key {
                        "allow" => &mut self.allow,
                        "deny" => &mut self.deny,
                        _ => &mut self.ask,
                    };
                    for r in m {
                        if !target.contains(&r) {
                            target.push(r);
                        }
                    }
                }
                Err(why) => self.warnings.push(format!(
                    "{name}: permission rule `{rule}` in {key} cannot be used by cadre: {why}; ignored"
                )),
            }
        }
    }

    fn set_mode(&mut self, name: &str, v: &Value) {
        let mode = match v.as_str() {
            Some("default") => ClaudeMode::Mode(ApprovalMode::Ask),
            Some("acceptEdits") => ClaudeMode::AcceptEdits,
            Some("plan") => ClaudeMode::Mode(ApprovalMode::ReadOnly),
            // cadre's `bypass` ignores deny rules too; a settings file in a cloned
            // repository must not switch every check off, so this keeps deny and ask rules.
            Some("bypassPermissions") => ClaudeMode::Mode(ApprovalMode::AutoApprove),
            _ => {
                self.warnings.push(format!(
                    "{name}: permissions.defaultMode {v} has no cadre equivalent; ignored"
                ));
                return;
            }
        };
        self.mode = Some(mode);
    }

    /// Add these rules to cadre's own, and the mode when cadre's configuration names none.
    /// Every list only grows, so a deny rule from any source still wins.
    pub fn apply_to(&self, perms: &mut PermissionsConfig) {
        perms.allow.extend(self.allow.iter().cloned());
        perms.deny.extend(self.deny.iter().cloned());
        perms.ask.extend(self.ask.iter().cloned());
        if perms.mode.is_none() {
            match self.mode {
                Some(ClaudeMode::Mode(m)) => perms.mode = Some(m),
                Some(ClaudeMode::AcceptEdits) => {
                    perms.mode = Some(ApprovalMode::Ask);
                    perms
                        .allow
                        .extend(["write_file".to_string(), "edit_file".to_string()]);
                }
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
