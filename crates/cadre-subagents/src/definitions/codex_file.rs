//! Codex roles: `[agents.NAME]` tables in `.codex/config.toml` (each may point at a role file
//! with `config_file`) and standalone role files in `.codex/agents/*.toml`. A role is read
//! into the same shape as a Markdown file's front matter — `developer_instructions` becomes
//! the prompt body — and then goes through the same definition rules, so the key table and
//! validation exist once.

use crate::AgentDefinition;
use crate::definitions::definition_file::{ParseContext, definition_from};
use crate::definitions::error::DefinitionError;
use crate::definitions::loader::{DirKind, LoadError, LoadOptions, read_text};
use crate::definitions::paths::resolve_workspace_path;
use serde_yaml_ng::{Mapping, Value};
use std::path::Path;

/// Keys that hold the role's instructions.
const INSTRUCTION_KEYS: [&str; 2] = ["developer_instructions", "instructions"];

fn parse_toml(text: &str) -> Result<toml::Table, DefinitionError> {
    text.parse::<toml::Table>()
        .map_err(|e| DefinitionError::Syntax(format!("invalid TOML: {}", e.message())))
}

/// A TOML table as front matter (a YAML mapping) and its instructions.
fn role_fields(
    table: toml::Table,
    warnings: &mut Vec<String>,
) -> Result<(Mapping, String), String> {
    let mut body = String::new();
    let mut front = Mapping::new();
    for (k, v) in table {
        if INSTRUCTION_KEYS.contains(&k.as_str()) {
            body = v
                .as_str()
                .ok_or_else(|| format!("`{k}` must be text"))?
                .trim()
                .to_string();
            continue;
        }
        if k == "skills" && v.is_table() {
            warnings.push("`skills` settings of Codex are ignored".into());
            continue;
        }
        let value = serde_yaml_ng::to_value(&v).map_err(|e| format!("`{k}`: {e}"))?;
        front.insert(Value::String(k), value);
    }
    Ok((front, body))
}

/// Parse a standalone role file (`.codex/agents/NAME.toml`).
pub(crate) fn parse_role_file(
    path: &Path,
    text: &str,
    cx: &ParseContext<'_>,
) -> Result<AgentDefinition, DefinitionError> {
    let mut warnings = Vec::new();
    let (front, body) = role_fields(parse_toml(text)?, &mut warnings)?;
    definition_from(path, &front, body, warnings, cx)
}

/// One `[agents.NAME]` role of the configuration at `config` (in `.codex/`).
fn config_role(
    config: &Path,
    name: &str,
    table: toml::Table,
    opts: &LoadOptions<'_>,
) -> Result<AgentDefinition, DefinitionError> {
    let mut warnings = Vec::new();
    let mut table = table;
    if let Some(file) = table.remove("config_file") {
        let file = file
            .as_str()
            .ok_or_else(|| "`config_file` must be a path".to_string())?;
        let dir = config.parent().unwrap_or(Path::new("."));
        let path = match opts.workspace {
            Some(ws) => resolve_workspace_path(ws, &dir.join(file))
                .map_err(|_| format!("`config_file` {file} leads outside the workspace"))?,
            None => dir.join(file),
        };
        let text = read_text(&path).map_err(|e| format!("`config_file` {file}: {e}"))?;
        // The table's own keys (its description) win over the file's.
        for (k, v) in parse_toml(&text).map_err(|e| format!("`config_file` {file}: {e}"))? {
            table.entry(k).or_insert(v);
        }
    }
    table.insert("name".into(), toml::Value::String(name.to_string()));
    let (front, body) = role_fields(table, &mut warnings)?;
    let cx = opts.context(DirKind::Codex);
    definition_from(config, &front, body, warnings, &cx)
}

/// The roles of `.codex/config.toml` (`[agents.NAME]` tables; other `[agents]` keys are
/// Codex settings and are skipped). A missing file has none.
pub fn load_codex_config(
    config: &Path,
    opts: &LoadOptions<'_>,
) -> (Vec<AgentDefinition>, Vec<LoadError>) {
    let fail = |reason: String| LoadError {
        path: config.to_path_buf(),
        reason,
    };
    if !config.exists() {
        return (Vec::new(), Vec::new());
    }
    let table = match read_text(config)
        .map_err(|e| e.to_string())
        .and_then(|t| parse_toml(&t).map_err(|e| e.to_string()))
    {
        Ok(t) => t,
        Err(e) => return (Vec::new(), vec![fail(e)]),
    };
    let Some(toml::Value::Table(agents)) = table.get("agents").cloned() else {
        return (Vec::new(), Vec::new());
    };
    let mut defs = Vec::new();
    let mut errors = Vec::new();
    for (name, role) in agents {
        let toml::Value::Table(role) = role else {
            continue;
        };
        match config_role(config, &name, role, opts) {
            Ok(d) => defs.push(d),
            Err(reason) => errors.push(fail(format!("[agents.{name}]: {reason}"))),
        }
    }
    (defs, errors)
}
