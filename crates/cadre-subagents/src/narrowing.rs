//! Tool narrowing (SPEC §4.3): a child gets (allowlist ∩ parent's tools, or all of them
//! when there is no allowlist) − denied − delegation tools. Nothing can be added.

use cadre_tools::ToolRegistry;

/// True when the allow/deny `entry` covers the tool `tool`: the same name, or an MCP server
/// pattern (`mcp__<server>` or `mcp__<server>__*`) covering every tool of that server.
pub fn entry_matches(entry: &str, tool: &str) -> bool {
    if entry == tool {
        return true;
    }
    let Some(server) = entry.strip_prefix("mcp__") else {
        return false;
    };
    let server = server.strip_suffix("__*").unwrap_or(server);
    if server.is_empty() || server.contains("__") {
        return false;
    }
    tool.strip_prefix("mcp__")
        .and_then(|rest| rest.strip_prefix(server))
        .is_some_and(|rest| rest.starts_with("__") && rest.len() > 2)
}

fn any_matches(entries: &[String], tool: &str) -> bool {
    entries.iter().any(|e| entry_matches(e, tool))
}

/// The child's tools: the parent's tools that `allow` covers (all of them when `allow` is
/// `None`; none when it is empty), minus those `deny` covers, minus the `delegation` tools.
/// The parent's order is kept.
pub fn narrow(
    parent: &ToolRegistry,
    allow: Option<&[String]>,
    deny: &[String],
    delegation: &[&str],
) -> ToolRegistry {
    parent.filtered(|t| {
        let name = t.name();
        allow.is_none_or(|a| any_matches(a, name))
            && !any_matches(deny, name)
            && !delegation.contains(&name)
    })
}

/// [`narrow`] on names only: what a child of a parent with `parent` tools would get.
pub fn narrow_names<'a>(
    parent: &[&'a str],
    allow: Option<&[String]>,
    deny: &[String],
    delegation: &[&str],
) -> Vec<&'a str> {
    parent
        .iter()
        .copied()
        .filter(|name| {
            allow.is_none_or(|a| any_matches(a, name))
                && !any_matches(deny, name)
                && !delegation.contains(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_patterns() {
        assert!(entry_matches("mcp__gh", "mcp__gh__issue"));
        assert!(entry_matches("mcp__gh__*", "mcp__gh__issue"));
        assert!(entry_matches("mcp__gh__issue", "mcp__gh__issue"));
        assert!(!entry_matches("mcp__gh", "mcp__ghx__issue"));
        assert!(!entry_matches("mcp__gh__*", "mcp__gh__"));
        assert!(!entry_matches("mcp__gh__issue", "mcp__gh__pr"));
        assert!(!entry_matches("mcp__", "mcp____x"));
        assert!(!entry_matches("read", "read_file"));
    }
}
