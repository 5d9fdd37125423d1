//! OpenCode's agent keys that have no Claude Code counterpart: the `tools` mapping
//! (`{write: false, bash: true}`) and the `permission` mapping (`{edit: deny, bash: {"git
//! push": ask, "*": allow}}`), mapped onto cadre's allowlist, deny list and per-agent rules.
//!
//! Per-agent rules only narrow: an OpenCode `allow` never lets a call run without the
//! approval the parent's mode asks for. And cadre's deny rules win over everything, where
//! OpenCode lets the last matching pattern win, so a pattern list can come out stricter
//! than in OpenCode, never looser.

use crate::definitions::error::DefinitionError;
use crate::definitions::frontmatter::{scalar_text, show};
use crate::definitions::tool_names::{ToolName, map_tool_name};
use serde_yaml_ng::{Mapping, Value};

/// The `tools` mapping, as cadre lists.
#[derive(Debug, Default)]
pub(crate) struct MappedTools {
    /// The allowlist (only with `"*": false`, which turns every unnamed tool off).
    pub allow: Option<Vec<String>>,
    /// Tools turned off.
    pub deny: Vec<String>,
}

/// Per-agent permission rules.
#[derive(Debug, Default)]
pub(crate) struct MappedPermissions {
    pub only: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
}

/// The cadre tools an OpenCode name stands for (`edit` covers writing too).
fn cadre_tools(name: &str, extra: &[String], warnings: &mut Vec<String>) -> Vec<String> {
    if name == "edit" {
        return vec!["write_file".into(), "edit_file".into()];
    }
    match map_tool_name(name, extra) {
        ToolName::Known(t) => vec![t],
        ToolName::Missing(t) => {
            warnings.push(format!(
                "OpenCode tool `{name}` means `{t}`, which is not available here; ignored"
            ));
            Vec::new()
        }
        _ => {
            warnings.push(format!(
                "OpenCode tool `{name}` is not a cadre tool; ignored"
            ));
            Vec::new()
        }
    }
}

fn key_text(k: &Value) -> Result<String, String> {
    scalar_text(k).ok_or_else(|| format!("a key of `tools` or `permission` is {}", show(k)))
}

/// Map `tools: {NAME: true|false, ...}`: `false` turns a tool off; `"*": false` turns off
/// everything not set to `true`.
pub(crate) fn tools_map(
    map: &Mapping,
    extra: &[String],
    warnings: &mut Vec<String>,
) -> Result<MappedTools, DefinitionError> {
    let mut on = Vec::new();
    let mut out = MappedTools::default();
    let mut all_off = false;
    for (k, v) in map {
        let name = key_text(k)?;
        let enabled = v
            .as_bool()
            .ok_or_else(|| format!("`tools.{name}` must be true or false, found {}", show(v)))?;
        if name == "*" {
            all_off = !enabled;
            continue;
        }
        for t in cadre_tools(&name, extra, warnings) {
            let list = if enabled { &mut on } else { &mut out.deny };
            if !list.contains(&t) {
                list.push(t);
            }
        }
    }
    if all_off {
        on.retain(|t| !out.deny.contains(t));
        out.allow = Some(on);
    }
    Ok(out)
}

fn action(key: &str, v: &Value) -> Result<String, String> {
    match scalar_text(v).as_deref().map(str::trim) {
        Some(a @ ("allow" | "ask" | "deny")) => Ok(a.to_string()),
        _ => Err(format!(
            "`permission.{key}` must be allow, ask or deny, found {}",
            show(v)
        )),
    }
}

/// Map `permission:`. A plain action applies to the whole tool; `bash` may map command
/// patterns to actions, where `"*": deny` with `allow` patterns confines bash to those
/// patterns (the same rule as Claude Code's `Bash(git *)`).
pub(crate) fn permission_map(
    value: &Value,
    extra: &[String],
    warnings: &mut Vec<String>,
) -> Result<MappedPermissions, DefinitionError> {
    let mut out = MappedPermissions::default();
    let Value::Mapping(map) = value else {
        return Err(format!(
            "`permission` must be a mapping of tools to allow/ask/deny, found {}",
            show(value)
        )
        .into());
    };
    for (k, v) in map {
        let key = key_text(k)?;
        let tools = cadre_tools(&key, extra, warnings);
        match v {
            Value::Mapping(patterns) => {
                let mut rest = None;
                let mut allowed = Vec::new();
                for (p, a) in patterns {
                    let pattern = key_text(p)?;
                    let a = action(&format!("{key}.{pattern}"), a)?;
                    if pattern.trim() == "*" {
                        rest = Some(a);
                        continue;
                    }
                    for t in &tools {
                        let rule = format!("{t}({pattern})");
                        match a.as_str() {
                            "deny" => out.deny.push(rule),
                            "ask" => {
                                out.ask.push(rule.clone());
                                allowed.push(rule);
                            }
                            _ => allowed.push(rule),
                        }
                    }
                }
                match rest.as_deref() {
                    Some("deny") if allowed.is_empty() => {
                        out.deny.extend(tools.iter().cloned());
                    }
                    Some("deny") => out.only.extend(allowed),
                    Some("ask") => out.ask.extend(tools.iter().cloned()),
                    _ => {}
                }
            }
            other => match action(&key, other)?.as_str() {
                "deny" => out.deny.extend(tools),
                "ask" => out.ask.extend(tools),
                _ => {}
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    #[test]
    fn tools_turn_off_or_form_an_allowlist() {
        let mut w = Vec::new();
        let Value::Mapping(m) = yaml("{write: false, bash: true, edit: false}") else {
            panic!()
        };
        let t = tools_map(&m, &[], &mut w).unwrap();
        assert_eq!(t.allow, None);
        assert_eq!(t.deny, ["write_file", "edit_file"]);
        let Value::Mapping(m) = yaml("{'*': false, read: true, grep: true, bash: false}") else {
            panic!()
        };
        let t = tools_map(&m, &[], &mut w).unwrap();
        assert_eq!(
            t.allow.as_deref(),
            Some(&["read_file".to_string(), "grep".into()][..])
        );
        let Value::Mapping(m) = yaml("{write: maybe}") else {
            panic!()
        };
        assert!(tools_map(&m, &[], &mut w).is_err());
    }

    #[test]
    fn permissions_only_narrow() {
        let mut w = Vec::new();
        let p = permission_map(
            &yaml("{edit: deny, websearch: ask, bash: {'*': deny, 'git status': allow, 'git push *': ask, 'rm *': deny}}"),
            &[],
            &mut w,
        )
        .unwrap();
        assert_eq!(p.deny, ["write_file", "edit_file", "bash(rm *)"]);
        assert_eq!(p.only, ["bash(git status)", "bash(git push *)"]);
        assert_eq!(p.ask, ["bash(git push *)"]);
        assert_eq!(w.len(), 1, "websearch is not configured: {w:?}");
        let p = permission_map(&yaml("{bash: allow, edit: allow}"), &[], &mut w).unwrap();
        assert!(p.only.is_empty() && p.deny.is_empty() && p.ask.is_empty());
        let p = permission_map(&yaml("{bash: {'*': ask}}"), &[], &mut w).unwrap();
        assert_eq!(p.ask, ["bash"]);
        let p = permission_map(&yaml("{bash: {'*': deny}}"), &[], &mut w).unwrap();
        assert_eq!(p.deny, ["bash"]);
        assert!(permission_map(&yaml("{bash: sometimes}"), &[], &mut w).is_err());
        assert!(permission_map(&yaml("[bash]"), &[], &mut w).is_err());
    }
}
