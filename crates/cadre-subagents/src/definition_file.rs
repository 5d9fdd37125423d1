//! One definition file → one [`AgentDefinition`]: the keys of every supported format, their
//! value shapes, and the validation rules that make a file broken.

use crate::frontmatter::{self, boolean, positive_int, scalar_text, show, string_list};
use crate::loader::DirKind;
use crate::paths::{check_relative_path, resolve_workspace_path};
use crate::tool_names::{map_allowlist, map_denylist};
use crate::{AgentDefinition, DefinitionSource, RemoteProtocol, RemoteSpec, WorkspaceMode};
use serde_yaml_ng::{Mapping, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// What the parser needs besides the text.
#[derive(Debug, Clone, Copy)]
pub struct ParseContext<'a> {
    /// The directory kind the file was found in (decides the id rule and default mode).
    pub kind: DirKind,
    /// The main workspace, for checking `workspace.path`.
    pub workspace: Option<&'a Path>,
    /// Model aliases (`sonnet` → `anthropic:…`).
    pub aliases: &'a HashMap<String, String>,
    /// Tool names the caller registers beyond the built-in ones.
    pub extra_tools: &'a [String],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Name,
    Description,
    Tools,
    DisallowedTools,
    Model,
    MaxTurns,
    Skills,
    Workspace,
    Url,
    Headers,
    Protocol,
    CanDelegate,
    MaxTokens,
    WallClock,
    ProtectedPaths,
    Sandbox,
}

/// Every accepted key spelling.
const KEYS: &[(&str, Key)] = &[
    ("name", Key::Name),
    ("description", Key::Description),
    ("tools", Key::Tools),
    ("disallowed_tools", Key::DisallowedTools),
    ("disallowedTools", Key::DisallowedTools),
    ("model", Key::Model),
    ("max_turns", Key::MaxTurns),
    ("maxTurns", Key::MaxTurns),
    ("maxIters", Key::MaxTurns),
    ("skills", Key::Skills),
    ("workspace", Key::Workspace),
    ("url", Key::Url),
    ("headers", Key::Headers),
    ("protocol", Key::Protocol),
    ("can_delegate", Key::CanDelegate),
    ("canDelegate", Key::CanDelegate),
    ("max_tokens", Key::MaxTokens),
    ("maxTokens", Key::MaxTokens),
    ("timeout_seconds", Key::WallClock),
    ("wall_clock_secs", Key::WallClock),
    ("protected_paths", Key::ProtectedPaths),
    ("sandbox", Key::Sandbox),
];

/// Keys other tools write that change nothing in cadre: accepted without a word.
const SILENT_KEYS: &[&str] = &["color"];

/// Claude Code keys with a behaviour cadre does not reproduce: accepted, with a warning
/// saying what applies instead.
const UNSUPPORTED_KEYS: &[(&str, &str)] = &[
    ("permissionMode", "the parent's approval mode applies"),
    (
        "mcpServers",
        "the child gets the parent's MCP tools, narrowed by `tools`",
    ),
    ("hooks", "the parent's hooks apply"),
    ("memory", "cadre keeps no per-agent memory"),
    ("background", "the caller chooses foreground or background"),
    ("isolation", "use `workspace: {mode: isolated}`"),
    ("effort", "the model's default applies"),
];

/// True when `name` matches `^[a-z0-9][a-z0-9_-]*$`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn name_error(what: &str, name: &str) -> String {
    format!(
        "{what} `{name}` is not a valid agent name (lowercase letters, digits, `-` and `_`, starting with a letter or digit)"
    )
}

/// Collect the recognised keys, refusing two spellings of one key.
fn collect<'m>(
    front: &'m Mapping,
    warnings: &mut Vec<String>,
) -> Result<HashMap<Key, (&'m str, &'m Value)>, String> {
    let mut found: HashMap<Key, (&str, &Value)> = HashMap::new();
    for (k, v) in front {
        let Some(k) = k.as_str() else {
            warnings.push(format!("key {} is not text; ignored", show(k)));
            continue;
        };
        if let Some((_, key)) = KEYS.iter().find(|(spelling, _)| *spelling == k) {
            if let Some((other, _)) = found.insert(*key, (k, v)) {
                return Err(format!("both `{other}` and `{k}` are given; keep one"));
            }
        } else if SILENT_KEYS.contains(&k) {
        } else if let Some((_, instead)) = UNSUPPORTED_KEYS.iter().find(|(u, _)| *u == k) {
            warnings.push(format!(
                "`{k}` is not supported by cadre and is ignored: {instead}"
            ));
        } else {
            warnings.push(format!("unknown key `{k}` ignored"));
        }
    }
    Ok(found)
}

fn as_text(key: &str, value: &Value) -> Result<String, String> {
    scalar_text(value).ok_or_else(|| format!("`{key}` must be text, found {}", show(value)))
}

/// Resolve a `model` value: `None` for inherit, an alias through `aliases`, a spec as is.
pub fn resolve_model(
    raw: &str,
    aliases: &HashMap<String, String>,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() || raw.eq_ignore_ascii_case("inherit") {
        return None;
    }
    if let Some(target) = aliases.get(raw) {
        return Some(target.clone());
    }
    if !raw.contains(':') && !raw.contains('/') {
        warnings.push(format!(
            "model `{raw}` is not a configured alias (see [models.aliases]); kept as written"
        ));
    }
    Some(raw.to_string())
}

/// The parsed `workspace:` value and whether it was given at all.
fn parse_workspace(
    value: &Value,
    default_mode: WorkspaceMode,
    warnings: &mut Vec<String>,
) -> Result<(WorkspaceMode, Option<PathBuf>), String> {
    let parse_mode = |v: &Value| -> Result<WorkspaceMode, String> {
        match scalar_text(v)
            .map(|s| s.trim().to_ascii_lowercase())
            .as_deref()
        {
            Some("isolated") => Ok(WorkspaceMode::Isolated),
            Some("shared") => Ok(WorkspaceMode::Shared),
            _ => Err(format!(
                "unknown workspace mode {} (expected `isolated` or `shared`)",
                show(v)
            )),
        }
    };
    match value {
        Value::Null => Ok((default_mode, None)),
        Value::Mapping(m) => {
            let mut mode = default_mode;
            let mut path = None;
            for (k, v) in m {
                match k.as_str() {
                    Some("mode") if !v.is_null() => mode = parse_mode(v)?,
                    Some("mode") => {}
                    Some("path") => {
                        let p = as_text("workspace.path", v)?;
                        if !p.trim().is_empty() {
                            path = Some(PathBuf::from(p.trim()));
                        }
                    }
                    _ => warnings.push(format!("unknown key {} in `workspace` ignored", show(k))),
                }
            }
            Ok((mode, path))
        }
        // Shorthand: `workspace: shared`.
        other => Ok((parse_mode(other)?, None)),
    }
}

fn parse_headers(value: &Value) -> Result<BTreeMap<String, String>, String> {
    match value {
        Value::Null => Ok(BTreeMap::new()),
        Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| {
                let k = as_text("headers", k)?;
                let v =
                    scalar_text(v).ok_or_else(|| format!("header `{k}` must have a text value"))?;
                Ok((k, v))
            })
            .collect(),
        other => Err(format!(
            "`headers` must be a mapping, found {}",
            show(other)
        )),
    }
}

fn parse_protocol(value: &Value) -> Result<RemoteProtocol, String> {
    match scalar_text(value)
        .map(|s| s.trim().to_ascii_lowercase())
        .as_deref()
    {
        Some("a2a") => Ok(RemoteProtocol::A2a),
        Some("tasks") => Ok(RemoteProtocol::Tasks),
        Some("auto") => Ok(RemoteProtocol::Auto),
        _ => Err(format!(
            "unknown protocol {} (expected `a2a`, `tasks` or `auto`)",
            show(value)
        )),
    }
}

fn u32_turns(key: &str, value: &Value) -> Result<u32, String> {
    let n = positive_int(key, value)?;
    u32::try_from(n).map_err(|_| format!("`{key}` is too large: {n}"))
}

/// Parse the text of the definition file at `path`. On failure, the reason (without the
/// path) is returned.
pub fn parse_definition(
    path: &Path,
    text: &str,
    cx: &ParseContext<'_>,
) -> Result<AgentDefinition, String> {
    let doc = frontmatter::parse(text).map_err(|e| e.to_string())?;
    let mut warnings: Vec<String> = doc
        .requoted
        .iter()
        .map(|k| format!("the value of `{k}` is not valid YAML as written (it contains `: ` or ` #`); read as quoted text"))
        .collect();
    let keys = collect(&doc.front, &mut warnings)?;
    let get = |k: Key| keys.get(&k).copied();

    let declared_name = get(Key::Name).map(|(k, v)| as_text(k, v)).transpose()?;
    let name = if cx.kind == DirKind::Subagents {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| "the file name is not valid UTF-8".to_string())?
            .to_string();
        if !is_valid_name(&stem) {
            return Err(name_error("file name", &stem));
        }
        if let Some(declared) = declared_name.filter(|d| d.trim() != stem) {
            warnings.push(format!(
                "`name: {declared}` ignored: in subagents/ the id is the file name (`{stem}`)"
            ));
        }
        stem
    } else {
        let name = declared_name.ok_or_else(|| "missing `name`".to_string())?;
        let name = name.trim().to_string();
        if !is_valid_name(&name) {
            return Err(name_error("name", &name));
        }
        name
    };

    let description = match get(Key::Description) {
        Some((k, v)) => as_text(k, v)?.trim().to_string(),
        None => return Err("missing `description`".into()),
    };
    if description.is_empty() {
        return Err("`description` is empty".into());
    }

    let mut def = AgentDefinition::new(name, description);
    def.source = DefinitionSource::File(path.to_path_buf());

    if let Some((k, v)) = get(Key::Tools) {
        def.tools = match string_list(k, v)? {
            None => None,
            Some(list) if list.iter().any(|t| t == "*") => None,
            Some(list) => Some(map_allowlist(&list, cx.extra_tools, &mut warnings)),
        };
    }
    if let Some((k, v)) = get(Key::DisallowedTools) {
        let list = string_list(k, v)?.unwrap_or_default();
        def.disallowed_tools = map_denylist(&list, cx.extra_tools, &mut warnings);
    }
    if let Some((k, v)) = get(Key::Model)
        && !v.is_null()
    {
        def.model = resolve_model(&as_text(k, v)?, cx.aliases, &mut warnings);
    }
    if let Some((k, v)) = get(Key::MaxTurns) {
        def.max_turns = Some(u32_turns(k, v)?);
    }
    if let Some((k, v)) = get(Key::MaxTokens) {
        def.max_tokens = Some(positive_int(k, v)?);
    }
    if let Some((k, v)) = get(Key::WallClock) {
        def.wall_clock_secs = Some(positive_int(k, v)?);
    }
    if let Some((k, v)) = get(Key::Skills) {
        def.skills = string_list(k, v)?.unwrap_or_default();
    }
    if let Some((k, v)) = get(Key::CanDelegate) {
        def.can_delegate = boolean(k, v)?;
    }
    if let Some((k, v)) = get(Key::ProtectedPaths) {
        def.protected_paths = string_list(k, v)?.unwrap_or_default();
    }
    if let Some((k, v)) = get(Key::Sandbox)
        && !v.is_null()
    {
        def.sandbox =
            Some(serde_yaml_ng::from_value(v.clone()).map_err(|e| format!("`{k}`: {e}"))?);
    }

    let (mode, ws_path) = match get(Key::Workspace) {
        Some((_, v)) => parse_workspace(v, cx.kind.default_mode(), &mut warnings)?,
        None => (cx.kind.default_mode(), None),
    };
    def.workspace.mode = mode;
    let has_body = !doc.body.trim().is_empty();

    match get(Key::Url) {
        Some((k, v)) if !v.is_null() => {
            let url = as_text(k, v)?.trim().to_string();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "`url` must start with http:// or https://, found `{url}`"
                ));
            }
            if get(Key::Workspace).is_some() {
                return Err("`url` cannot be combined with `workspace`".into());
            }
            if has_body {
                return Err(
                    "`url` cannot be combined with a prompt body (a remote agent has its own)"
                        .into(),
                );
            }
            let headers = match get(Key::Headers) {
                Some((_, v)) => parse_headers(v)?,
                None => BTreeMap::new(),
            };
            let protocol = match get(Key::Protocol) {
                Some((_, v)) if !v.is_null() => parse_protocol(v)?,
                _ => RemoteProtocol::Auto,
            };
            def.remote = Some(RemoteSpec {
                url,
                headers,
                protocol,
            });
        }
        _ => {
            for (key, what) in [(Key::Headers, "headers"), (Key::Protocol, "protocol")] {
                if get(key).is_some() {
                    warnings.push(format!("`{what}` ignored: it only applies with `url`"));
                }
            }
        }
    }

    if let Some(p) = ws_path {
        if has_body {
            return Err(
                "`workspace.path` cannot be combined with a prompt body (the prompt comes from <path>/AGENTS.md)"
                    .into(),
            );
        }
        def.workspace.path = Some(match cx.workspace {
            Some(ws) => {
                let resolved = resolve_workspace_path(ws, &p)?;
                resolved
                    .strip_prefix(ws)
                    .map(Path::to_path_buf)
                    .unwrap_or(resolved)
            }
            None => {
                check_relative_path(&p)?;
                p
            }
        });
    } else {
        def.prompt = doc.body;
    }
    def.warnings = warnings;
    Ok(def)
}
