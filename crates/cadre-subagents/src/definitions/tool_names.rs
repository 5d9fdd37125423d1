//! Tool names in definition files: cadre's own names, the names Claude Code, OpenCode, Gemini
//! CLI and the Java harness use for the same tools, MCP names, and the delegation tools; and
//! Claude Code's restricted forms (`Bash(git *)`), which keep their tool under a per-agent
//! permission rule.

pub use crate::DELEGATION_TOOLS;
use cadre_tools::ToolInfo;

/// cadre's built-in tools.
pub use cadre_tools::builtin::BUILTIN_TOOL_NAMES as BUILTIN_TOOLS;

/// Every tool a definition file may name, as its descriptor: the built-in ones (those
/// that exist only where configured too) and the delegation tools. Foreign names and
/// which tools have a subject come from here.
fn known_tools() -> impl Iterator<Item = &'static ToolInfo> {
    cadre_tools::builtin::BUILTIN_TOOLS
        .iter()
        .chain(cadre_tools::builtin::CONFIGURED_TOOLS.iter())
        .chain(crate::DELEGATION_TOOL_INFO.iter())
}

/// What the cadre tool named `name` is (built-in, configured or delegation), for front ends
/// that know a tool only by the name in a call. MCP tools and tools the caller registers
/// itself have none.
pub fn known_tool(name: &str) -> Option<&'static ToolInfo> {
    known_tools().find(|i| i.name == name)
}

/// The cadre tool another harness calls `foreign` (Claude Code's `Read`, Gemini CLI's
/// `run_shell_command`). A target cadre has only where configured (`web_search`) is known
/// only when the caller registers it.
pub fn foreign_target(foreign: &str) -> Option<&'static str> {
    known_tools()
        .find(|i| i.foreign_names.contains(&foreign))
        .map(|i| i.name)
}

/// True when calls of `name` have a subject (a command or a path) that a permission rule
/// can match, so a restricted form like `Bash(git *)` or `Read(src/**)` can be kept as a
/// rule.
fn has_subject(name: &str) -> bool {
    known_tool(name).is_some_and(|i| i.has_subject)
}

/// What a name in a `tools` / `disallowed_tools` list stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolName {
    /// A cadre tool name (possibly mapped from another harness's name) or MCP pattern.
    Known(String),
    /// A tool with an argument restricting it, as in Claude Code's `Bash(git *)`: the tool,
    /// and the permission-rule patterns the argument stands for.
    Restricted {
        /// The cadre tool.
        name: String,
        /// Glob patterns over the call's subject (`git *`; Claude Code's `git:*` becomes
        /// `git` and `git *`).
        patterns: Vec<String>,
    },
    /// A restricted form of a tool whose calls have nothing a rule can match (`Task(x)`).
    Unrestrictable(String),
    /// Another harness's name for a tool this cadre does not have.
    Missing(String),
    /// A tool cadre does not know at all.
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

fn is_cadre_name(name: &str, extra: &[String]) -> bool {
    BUILTIN_TOOLS.contains(&name)
        || is_delegation_tool(name)
        || is_mcp_name(name)
        || extra.iter().any(|e| e == name)
}

/// A plain name: `Ok(cadre name)`, `Err(Some(target))` for a foreign name whose target is
/// missing here, `Err(None)` for an unknown name.
fn plain_name(entry: &str, extra: &[String]) -> Result<String, Option<String>> {
    if is_cadre_name(entry, extra) {
        return Ok(entry.to_string());
    }
    match foreign_target(entry) {
        Some(ours) if is_cadre_name(ours, extra) => Ok(ours.to_string()),
        Some(ours) => Err(Some(ours.to_string())),
        None => Err(None),
    }
}

/// The rule patterns of a restriction argument: Claude Code's prefix form `git:*` means the
/// command `git` alone or followed by arguments.
fn patterns_of(arg: &str) -> Vec<String> {
    let arg = arg.trim();
    match arg.strip_suffix(":*") {
        Some(prefix) if !prefix.trim().is_empty() => {
            let prefix = prefix.trim();
            vec![prefix.to_string(), format!("{prefix} *")]
        }
        _ => vec![arg.to_string()],
    }
}

/// Map one entry of a tool list to cadre's name. `extra` lists further names the caller
/// knows (tools it registers itself); they pass through like built-in names.
pub fn map_tool_name(entry: &str, extra: &[String]) -> ToolName {
    let entry = entry.trim();
    let (base, arg) = match entry.split_once('(') {
        Some((base, rest)) if rest.ends_with(')') => (base.trim(), Some(&rest[..rest.len() - 1])),
        _ => (entry, None),
    };
    let name = match plain_name(base, extra) {
        Ok(name) => name,
        Err(Some(target)) => return ToolName::Missing(target),
        Err(None) => return ToolName::Unknown,
    };
    match arg.map(str::trim) {
        None | Some("") | Some("*") => ToolName::Known(name),
        Some(_) if !has_subject(&name) => ToolName::Unrestrictable(name),
        Some(arg) => ToolName::Restricted {
            patterns: patterns_of(arg),
            name,
        },
    }
}

/// The permission rules `tool(pattern)` for each pattern.
fn rules_of(name: &str, patterns: &[String]) -> Vec<String> {
    patterns.iter().map(|p| format!("{name}({p})")).collect()
}

/// A mapped allowlist: the tools, and the confining rules of restricted entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappedAllowlist {
    /// cadre tool names, in order, without repeats.
    pub tools: Vec<String>,
    /// Rules confining restricted tools (`bash(git *)`).
    pub only: Vec<String>,
}

/// Map an allowlist. Unknown and missing names are dropped with a warning; the result never
/// grows because of a drop (an allowlist emptied by dropping stays an empty allowlist,
/// meaning no tools). A restricted entry keeps its tool and adds confining rules; the same
/// tool also listed plainly is not confined.
pub fn map_allowlist(
    entries: &[String],
    extra: &[String],
    warnings: &mut Vec<String>,
) -> MappedAllowlist {
    let mut out = MappedAllowlist::default();
    let mut plain: Vec<String> = Vec::new();
    let mut only: Vec<(String, String)> = Vec::new();
    for entry in entries {
        let name = match map_tool_name(entry, extra) {
            ToolName::Known(name) => {
                plain.push(name.clone());
                name
            }
            ToolName::Restricted { name, patterns } => {
                for rule in rules_of(&name, &patterns) {
                    only.push((name.clone(), rule));
                }
                name
            }
            ToolName::Unrestrictable(name) => {
                warnings.push(format!(
                    "tool `{entry}`: cadre cannot restrict `{name}` by argument; dropped from the allowlist"
                ));
                continue;
            }
            ToolName::Missing(target) => {
                warnings.push(format!(
                    "tool `{entry}` means `{target}`, which is not available here; dropped from the allowlist"
                ));
                continue;
            }
            ToolName::Unknown => {
                warnings.push(format!(
                    "tool `{entry}` is not a cadre tool; dropped from the allowlist"
                ));
                continue;
            }
        };
        if !out.tools.contains(&name) {
            out.tools.push(name);
        }
    }
    for (name, rule) in only {
        if !plain.contains(&name) && !out.only.contains(&rule) {
            out.only.push(rule);
        }
    }
    out
}

/// A mapped deny list: whole tools, and deny rules for restricted entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappedDenylist {
    /// Tools removed entirely.
    pub tools: Vec<String>,
    /// Deny rules (`bash(rm *)`) for restricted entries.
    pub rules: Vec<String>,
}

/// Map a deny list. A restricted form becomes a deny rule for just those calls (a tool whose
/// calls no rule can match is denied whole: stricter, never wider); unknown names are kept
/// as written, with a warning that they match no cadre tool.
pub fn map_denylist(
    entries: &[String],
    extra: &[String],
    warnings: &mut Vec<String>,
) -> MappedDenylist {
    let mut out = MappedDenylist::default();
    for entry in entries {
        let name = match map_tool_name(entry, extra) {
            ToolName::Known(name) => name,
            ToolName::Restricted { name, patterns } => {
                for rule in rules_of(&name, &patterns) {
                    if !out.rules.contains(&rule) {
                        out.rules.push(rule);
                    }
                }
                continue;
            }
            ToolName::Unrestrictable(name) => {
                warnings.push(format!(
                    "disallowed tool `{entry}`: cadre cannot restrict `{name}` by argument; all of `{name}` is denied"
                ));
                name
            }
            ToolName::Missing(target) => target,
            ToolName::Unknown => {
                warnings.push(format!(
                    "disallowed tool `{entry}` is not a cadre tool; it has no effect"
                ));
                entry.trim().to_string()
            }
        };
        if !out.tools.contains(&name) {
            out.tools.push(name);
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
            ("Bash(*)", "bash"),
            ("Bash()", "bash"),
            ("Grep", "grep"),
            ("Glob", "glob"),
            ("LS", "list_dir"),
            ("TodoWrite", "todo_write"),
            ("WebFetch", "web_fetch"),
            ("read", "read_file"),
            ("list", "list_dir"),
            ("todowrite", "todo_write"),
            ("webfetch", "web_fetch"),
            ("grep_files", "grep"),
            ("read_file", "read_file"),
            ("task", "task"),
            ("agent_spawn", "agent_spawn"),
            ("mcp__github", "mcp__github"),
            ("mcp__github__create_issue", "mcp__github__create_issue"),
            ("mcp__github__*", "mcp__github__*"),
            ("run_shell_command", "bash"),
            ("replace", "edit_file"),
            ("grep_search", "grep"),
            ("list_directory", "list_dir"),
            ("patch", "edit_file"),
            ("list", "list_dir"),
        ] {
            assert_eq!(known(from).as_deref(), Some(to), "{from}");
        }
        for unknown in ["NotebookEdit", "mcp__", "Foo(x)", "Foo"] {
            assert_eq!(map_tool_name(unknown, &[]), ToolName::Unknown, "{unknown}");
        }
        // Built in: web_fetch, todo_write. Only where configured: web_search.
        assert_eq!(
            map_tool_name("WebFetch", &[]),
            ToolName::Known("web_fetch".into())
        );
        assert_eq!(
            map_tool_name("TodoWrite", &[]),
            ToolName::Known("todo_write".into())
        );
        assert_eq!(
            map_tool_name("WebSearch", &[]),
            ToolName::Missing("web_search".into())
        );
        assert_eq!(
            map_tool_name("WebSearch", &["web_search".to_string()]),
            ToolName::Known("web_search".into())
        );
        assert_eq!(
            map_tool_name("Bash(git *)", &[]),
            ToolName::Restricted {
                name: "bash".into(),
                patterns: vec!["git *".into()]
            }
        );
        assert_eq!(
            map_tool_name("Bash(npm run test:*)", &[]),
            ToolName::Restricted {
                name: "bash".into(),
                patterns: vec!["npm run test".into(), "npm run test *".into()]
            }
        );
        assert_eq!(
            map_tool_name("Task(reviewer)", &[]),
            ToolName::Unrestrictable("task".into())
        );
    }

    #[test]
    fn foreign_names_name_one_tool_and_never_a_cadre_name() {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for info in known_tools() {
            for foreign in info.foreign_names {
                assert!(
                    known_tools().all(|i| i.name != *foreign),
                    "`{foreign}` of {} is a cadre name",
                    info.name
                );
                if let Some((_, other)) = seen.iter().find(|(f, _)| f == foreign) {
                    panic!("`{foreign}` names both {other} and {}", info.name);
                }
                seen.push((foreign, info.name));
            }
        }
        assert!(seen.len() >= 30, "{seen:?}");
    }

    #[test]
    fn dropping_never_widens_and_restrictions_become_rules() {
        let mut w = Vec::new();
        let out = map_allowlist(&["NotebookEdit".into(), "WebSearch".into()], &[], &mut w);
        assert!(out.tools.is_empty());
        assert_eq!(w.len(), 2);
        assert!(
            w[1].contains("means `web_search`, which is not available here"),
            "{w:?}"
        );
        let out = map_allowlist(
            &["Read".into(), "read_file".into(), "Grep".into()],
            &[],
            &mut w,
        );
        assert_eq!(out.tools, ["read_file", "grep"]);
        let out = map_allowlist(&["Read".into(), "Bash(git *)".into()], &[], &mut w);
        assert_eq!(out.tools, ["read_file", "bash"]);
        assert_eq!(out.only, ["bash(git *)"]);
        // Listed plainly too: the whole tool, no confinement.
        let out = map_allowlist(&["Bash(git *)".into(), "Bash".into()], &[], &mut w);
        assert_eq!((out.tools, out.only), (vec!["bash".to_string()], vec![]));
        let out = map_allowlist(&["Task(reviewer)".into()], &[], &mut w);
        assert!(out.tools.is_empty(), "never the whole tool");
        let deny = map_denylist(
            &["Bash(rm *)".into(), "NotebookEdit".into(), "Task(x)".into()],
            &[],
            &mut w,
        );
        assert_eq!(deny.tools, ["NotebookEdit", "task"]);
        assert_eq!(deny.rules, ["bash(rm *)"]);
    }
}
