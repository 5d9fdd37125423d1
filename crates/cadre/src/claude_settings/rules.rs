//! Claude Code's permission rule syntax (`Bash(npm run test:*)`, `Read(./secrets/**)`,
//! `Edit(src/**)`, `WebFetch(domain:example.com)`, `mcp__github__*`) turned into cadre's own
//! `tool(glob)` rules, which are then judged on resolved subjects like any other rule.

use cadre_subagents::definitions::tool_names::{foreign_target, is_mcp_name};
use cadre_tools::builtin::BUILTIN_TOOL_NAMES;
use std::path::{Component, Path, PathBuf};

/// The tools Claude Code's `Read` rules apply to: every tool that reads files.
const READ_TOOLS: &[&str] = &["read_file", "grep", "glob", "list_dir"];
/// The tools Claude Code's `Edit` rules apply to: every tool that writes files.
const EDIT_TOOLS: &[&str] = &["write_file", "edit_file"];

/// Where a settings file's relative paths start, and what `~/` is.
pub(super) struct PathBase<'a> {
    /// The workspace (the project the settings are read for), canonical.
    pub(super) workspace: &'a Path,
    /// The user's home directory.
    pub(super) home: Option<&'a Path>,
}

/// The cadre rules one Claude Code rule stands for, or why it has none.
pub(super) fn map_rule(rule: &str, base: &PathBase<'_>) -> Result<Vec<String>, String> {
    let rule = rule.trim();
    let (tool, spec) = match rule.find('(') {
        Some(open) => {
            let inner = rule[open + 1..]
                .strip_suffix(')')
                .ok_or("missing closing parenthesis")?;
            (rule[..open].trim(), Some(inner.trim()))
        }
        None => (rule, None),
    };
    if tool.is_empty() {
        return Err("empty tool name".into());
    }
    // `Bash()` and `Bash(*)` mean every call, as a bare name does.
    let spec = spec.filter(|s| !s.is_empty() && *s != "*");
    if tool.starts_with("mcp__") {
        if !is_mcp_name(tool) {
            return Err("not an MCP tool name".into());
        }
        if spec.is_some() {
            return Err("MCP tools take no argument in a rule".into());
        }
        return Ok(vec![tool.to_string()]);
    }
    let tools = tools_of(tool)?;
    let Some(spec) = spec else {
        return Ok(tools.iter().map(ToString::to_string).collect());
    };
    let patterns = match tools[0] {
        "bash" => command_patterns(spec),
        "web_fetch" => url_patterns(spec)?,
        t if READ_TOOLS.contains(&t) || EDIT_TOOLS.contains(&t) => path_patterns(spec, base)?,
        other => return Err(format!("cadre cannot restrict `{other}` by argument")),
    };
    Ok(tools
        .iter()
        .flat_map(|t| patterns.iter().map(move |p| format!("{t}({p})")))
        .collect())
}

/// The cadre tools a rule's tool name covers: Claude Code's `Read` every reading tool, its
/// `Edit` every writing tool, other names their one cadre tool.
fn tools_of(name: &str) -> Result<&'static [&'static str], String> {
    match name {
        "Read" => return Ok(READ_TOOLS),
        "Edit" => return Ok(EDIT_TOOLS),
        _ => {}
    }
    let known = || {
        BUILTIN_TOOL_NAMES
            .iter()
            .chain(std::iter::once(&"web_search"))
            .chain(cadre_subagents::DELEGATION_TOOLS)
    };
    let target = known()
        .find(|t| **t == name)
        .copied()
        .or_else(|| foreign_target(name));
    match target.and_then(|t| known().find(|k| **k == t)) {
        Some(t) => Ok(std::slice::from_ref(t)),
        None => Err("not a tool cadre has".into()),
    }
}

/// A command pattern as cadre globs: Claude Code's `*` is the only wildcard (other glob
/// characters are literal), `prefix:*` is `prefix` alone or followed by arguments, and a
/// single trailing ` *` also matches the command without arguments (`git diff *` matches
/// `git diff`), as Claude Code documents.
fn command_patterns(spec: &str) -> Vec<String> {
    let escaped = escape_glob(spec);
    if let Some(prefix) = escaped.strip_suffix(":*") {
        let prefix = prefix.trim_end();
        return vec![prefix.to_string(), format!("{prefix} *")];
    }
    match escaped.strip_suffix(" *") {
        Some(prefix) if !prefix.contains('*') && !prefix.trim().is_empty() => {
            vec![prefix.trim_end().to_string(), escaped.clone()]
        }
        _ => vec![escaped],
    }
}

/// `text` with every glob character but `*` escaped.
fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `domain:host` as the URLs of that host, over `http` and `https`. The host is followed
/// by `/`, so `example.com.evil.net` and `example.com@evil.net` do not match; a host with a
/// wildcard cannot be confined to one host by a glob and is refused.
fn url_patterns(spec: &str) -> Result<Vec<String>, String> {
    let host = spec
        .strip_prefix("domain:")
        .ok_or("only `domain:<host>` restricts WebFetch")?
        .trim()
        .to_ascii_lowercase();
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    if host.is_empty() || !host.chars().all(plain) {
        return Err(format!(
            "`{host}` is not a plain host name (wildcards are not mapped)"
        ));
    }
    Ok(vec![
        format!("http://{host}/*"),
        format!("https://{host}/*"),
    ])
}

/// A gitignore-style path pattern as workspace-relative globs. `//p` is absolute, `~/p` is
/// under the home directory, `/p`, `./p` and `p` are relative to the project. As in
/// gitignore, a pattern also covers everything under what it matches, and one without a
/// `/` (other than a trailing one) matches at any depth.
fn path_patterns(spec: &str, base: &PathBase<'_>) -> Result<Vec<String>, String> {
    let (relative, anchored) = if let Some(abs) = spec.strip_prefix("//") {
        (
            inside_workspace(&PathBuf::from(format!("/{abs}")), base)?,
            true,
        )
    } else if let Some(rest) = spec.strip_prefix("~/") {
        let home = base.home.ok_or("`~/` but no home directory is known")?;
        (inside_workspace(&home.join(rest), base)?, true)
    } else if let Some(rest) = spec.strip_prefix('/') {
        (normalize(Path::new(rest))?, true)
    } else {
        let rest = spec.strip_prefix("./").unwrap_or(spec);
        (normalize(Path::new(rest))?, spec.starts_with("./"))
    };
    let trimmed = relative.trim_end_matches('/');
    let mut out = Vec::new();
    let mut add = |p: String| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    if trimmed.is_empty() {
        add("**".to_string());
        return Ok(out);
    }
    let forms: Vec<String> = if anchored || trimmed.contains('/') {
        vec![trimmed.to_string()]
    } else {
        vec![trimmed.to_string(), format!("**/{trimmed}")]
    };
    for f in forms {
        if !f.ends_with("/**") && f != "**" {
            add(f.clone());
            add(format!("{f}/**"));
        } else {
            add(f);
        }
    }
    Ok(out)
}

/// An absolute path (a pattern) as relative to the workspace, or why it is outside.
fn inside_workspace(abs: &Path, base: &PathBase<'_>) -> Result<String, String> {
    let abs = normalize(abs)?;
    let ws = base.workspace.to_string_lossy();
    let ws = ws.trim_end_matches('/');
    if abs == ws {
        return Ok(String::new());
    }
    match abs.strip_prefix(ws).and_then(|r| r.strip_prefix('/')) {
        Some(rest) => Ok(rest.to_string()),
        None => Err(format!(
            "{abs} is outside the workspace; cadre's file tools refuse such paths in every mode"
        )),
    }
}

/// `path` without `.` components and with `..` applied; a `..` that would leave where the
/// path starts is refused (the pattern would name something outside the project).
fn normalize(path: &Path) -> Result<String, String> {
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop().ok_or("the path leaves the project with `..`")?;
            }
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::RootDir | Component::Prefix(_) => parts.push(String::new()),
        }
    }
    let mut joined = parts.join("/");
    if path.is_absolute() && !joined.starts_with('/') {
        joined.insert(0, '/');
    }
    Ok(joined)
}
