//! Tool narrowing, so a child can never do more than its parent: a child gets (allowlist ∩ parent's tools, or all of them
//! when there is no allowlist) − denied − delegation tools. Nothing can be added: the
//! input is always what the parent itself may call, at every depth.

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

/// The one narrowing rule: does a child keep the parent's tool `name`? A delegation tool only
/// when the child `may_delegate` and does not deny it (delegation is opted into with
/// `can_delegate`, not listed in `tools`); any other tool when `allow` covers it (everything
/// when `allow` is `None`, nothing when it is empty) and `deny` does not.
fn keeps(
    name: &str,
    allow: Option<&[String]>,
    deny: &[String],
    delegation: &[&str],
    may_delegate: bool,
) -> bool {
    if delegation.contains(&name) {
        may_delegate && !any_matches(deny, name)
    } else {
        allow.is_none_or(|a| any_matches(a, name)) && !any_matches(deny, name)
    }
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
    parent.filtered(|t| keeps(t.name(), allow, deny, delegation, false))
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
        .filter(|name| keeps(name, allow, deny, delegation, false))
        .collect()
}

/// The names of the tools a child may call (its grant), from the names its parent may call:
/// [`narrow_names`], except that a child that `may_delegate` keeps the parent's delegation
/// tools it does not deny. A subset of `parent` by construction.
pub fn child_grant(
    parent: &[&str],
    allow: Option<&[String]>,
    deny: &[String],
    delegation: &[&str],
    may_delegate: bool,
) -> Vec<String> {
    parent
        .iter()
        .filter(|name| keeps(name, allow, deny, delegation, may_delegate))
        .map(std::string::ToString::to_string)
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

    #[test]
    fn a_child_grant_keeps_the_parents_delegation_tools_only_when_it_may_delegate() {
        let parent = ["read_file", "bash", "task", "agent_spawn"];
        let allow = vec!["read_file".to_string(), "write_file".to_string()];
        let deny = vec!["agent_spawn".to_string()];
        let d = &["task", "agent_spawn", "agent_send"];
        assert_eq!(
            child_grant(&parent, Some(&allow), &deny, d, true),
            vec!["read_file", "task"]
        );
        assert_eq!(
            child_grant(&parent, Some(&allow), &deny, d, false),
            vec!["read_file"]
        );
        assert_eq!(
            child_grant(&["read_file"], None, &[], d, true),
            vec!["read_file"],
            "a parent without delegation tools passes none on"
        );
    }
}
