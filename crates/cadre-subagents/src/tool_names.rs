//! Tool names in definition files: cadre's own names, the names Claude Code and the Java
//! seed use for the same tools, MCP names, and the delegation tools.

pub use crate::DELEGATION_TOOLS;

/// cadre's built-in tools.
pub const BUILTIN_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
    "list_dir",
    "bash",
];

/// Names other harnesses use, with the cadre tool that does the same job.
const FOREIGN_NAMES: &[(&str, &str)] = &[
    // Claude Code.
    ("Read", "read_file"),
    ("Write", "write_file"),
    ("Edit", "edit_file"),
    ("MultiEdit", "edit_file"),
    ("Bash", "bash"),
    ("Grep", "grep"),
    ("Glob", "glob"),
    ("LS", "list_dir"),
    ("Task", "task"),
    ("Agent", "task"),
    // The Java seed.
    ("grep_files", "grep"),
];

/// What a name in a `tools` / `disallowed_tools` list stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolName {
    /// A cadre tool name (possibly mapped from another harness's name) or MCP pattern.
    Known(String),
    /// A tool with an argument restricting it, as in Claude Code's `Bash(git *)` or
    /// `Task(reviewer)`: cadre cannot express the restriction.
    Restricted {
        /// The cadre tool.
        name: String,
        /// The argument, as written.
        arg: String,
    },
    /// A tool cadre does not have.
    Unknown,
}

/// True for `mcp__<server>`, `mcp__<server>__<tool>` and `mcp__<server>__*`.
pub fn is_mcp_name(name: &str) -> bool {
    name.strip_prefix("mcp__")
        .is_some_and(|rest| !rest.is_empty() && !rest.starts_with("__"))
}

/// True for the delegation tools.
pub fn is_delegation_tool(name: &str) -> bool {
    DELEGATION_TOOLS.contains(&name)
}

fn plain_name(entry: &str, extra: &[String]) -> Option<String> {
    if BUILTIN_TOOLS.contains(&entry)
        || is_delegation_tool(entry)
        || is_mcp_name(entry)
        || extra.iter().any(|e| e == entry)
    {
        return Some(entry.to_string());
    }
    FOREIGN_NAMES
        .iter()
        .find(|(foreign, _)| *foreign == entry)
        .map(|(_, ours)| (*ours).to_string())
}

/// Map one entry of a tool list to cadre's name. `extra` lists further names the caller
/// knows (tools it registers itself); they pass through like built-in names.
pub fn map_tool_name(entry: &str, extra: &[String]) -> ToolName {
    let entry = entry.trim();
    if let Some(name) = plain_name(entry, extra) {
        return ToolName::Known(name);
    }
    if let Some((base, rest)) = entry.split_once('(')
        && let Some(arg) = rest.strip_suffix(')')
        && let Some(name) = plain_name(base.trim(), extra)
    {
        return ToolName::Restricted {
            name,
            arg: arg.to_string(),
        };
    }
    ToolName::Unknown
}

/// Map an allowlist. Unknown names and restricted forms are dropped with a warning; the
/// result never grows because of a drop (an allowlist emptied by dropping stays an empty
/// allowlist, meaning no tools).
pub fn map_allowlist(
    entries: &[String],
    extra: &[String],
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(entries.len());
    for entry in entries {
        match map_tool_name(entry, extra) {
            ToolName::Known(name) => {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
            ToolName::Restricted { name, .. } => warnings.push(format!(
                "tool `{entry}`: cadre cannot restrict `{name}` by argument; dropped from the allowlist"
            )),
            ToolName::Unknown => warnings.push(format!(
                "tool `{entry}` is not a cadre tool; dropped from the allowlist"
            )),
        }
    }
    out
}

/// Map a deny list. A restricted form denies the whole tool (stricter, never wider);
/// unknown names are kept as written, with a warning that they match no cadre tool.
pub fn map_denylist(
    entries: &[String],
    extra: &[String],
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(entries.len());
    for entry in entries {
        let name = match map_tool_name(entry, extra) {
            ToolName::Known(name) => name,
            ToolName::Restricted { name, .. } => {
                warnings.push(format!(
                    "disallowed tool `{entry}`: cadre cannot restrict by argument; all of `{name}` is denied"
                ));
                name
            }
            ToolName::Unknown => {
                warnings.push(format!(
                    "disallowed tool `{entry}` is not a cadre tool; it has no effect"
                ));
                entry.trim().to_string()
            }
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(entry: &str) -> Option<String> {
        match map_tool_name(entry, &[]) {
            ToolName::Known(name) => Some(name),
            _ => None,
        }
    }

    #[test]
    fn maps_foreign_names() {
        for (from, to) in [
            ("Read", "read_file"),
            ("Write", "write_file"),
            ("Edit", "edit_file"),
            ("MultiEdit", "edit_file"),
            ("Bash", "bash"),
            ("Grep", "grep"),
            ("Glob", "glob"),
            ("LS", "list_dir"),
            ("grep_files", "grep"),
            ("read_file", "read_file"),
            ("task", "task"),
            ("agent_spawn", "agent_spawn"),
            ("mcp__github", "mcp__github"),
            ("mcp__github__create_issue", "mcp__github__create_issue"),
            ("mcp__github__*", "mcp__github__*"),
        ] {
            assert_eq!(known(from).as_deref(), Some(to), "{from}");
        }
        for unknown in [
            "WebFetch",
            "TodoWrite",
            "NotebookEdit",
            "read",
            "mcp__",
            "Foo(x)",
        ] {
            assert_eq!(known(unknown), None, "{unknown}");
        }
        assert_eq!(
            map_tool_name("web_fetch", &["web_fetch".to_string()]),
            ToolName::Known("web_fetch".into())
        );
        assert_eq!(
            map_tool_name("Bash(git *)", &[]),
            ToolName::Restricted {
                name: "bash".into(),
                arg: "git *".into()
            }
        );
    }

    #[test]
    fn dropping_never_widens() {
        let mut w = Vec::new();
        let out = map_allowlist(&["WebFetch".into(), "TodoWrite".into()], &[], &mut w);
        assert!(out.is_empty());
        assert_eq!(w.len(), 2);
        let out = map_allowlist(
            &["Read".into(), "read_file".into(), "Grep".into()],
            &[],
            &mut w,
        );
        assert_eq!(out, ["read_file", "grep"]);
        let mut w = Vec::new();
        let out = map_allowlist(&["Bash(git *)".into()], &[], &mut w);
        assert!(
            out.is_empty(),
            "a restricted form must not become the whole tool"
        );
        let deny = map_denylist(&["Bash(rm *)".into(), "WebFetch".into()], &[], &mut w);
        assert_eq!(deny, ["bash", "WebFetch"]);
    }
}
