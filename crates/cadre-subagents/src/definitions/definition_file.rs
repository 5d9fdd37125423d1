//! One definition file → one [`AgentDefinition`]: the keys of every supported format
//! (cadre, Claude Code, harness9, the Java harness, OpenCode, Gemini CLI, and Codex roles once
//! read from TOML), their value shapes, and the validation rules that make a file broken.

use crate::definitions::definition::{AgentMcpServer, MAX_OFFERED_DESCRIPTION, RequestedMode};
use crate::definitions::error::DefinitionError;
use crate::definitions::frontmatter::{
    self, boolean, positive_int, scalar_text, show, string_list,
};
use crate::definitions::loader::{DirKind, FileFormat};
use crate::definitions::model_spec::{ModelDialect, resolve_model};
use crate::definitions::opencode;
use crate::definitions::paths::{check_relative_path, resolve_workspace_path};
use crate::definitions::tool_names::{map_allowlist, map_denylist};
use crate::{AgentDefinition, DefinitionSource, RemoteProtocol, RemoteSpec, WorkspaceMode};
use cadre_llm::ProviderRegistry;
use serde_yaml_ng::{Mapping, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// What the parser needs besides the text.
#[derive(Debug, Clone, Copy)]
pub struct ParseContext<'a> {
    /// The directory kind the file was found in (decides the format, the id rule and the
    /// default workspace mode).
    pub kind: DirKind,
    /// The main workspace, for checking `workspace.path`.
    pub workspace: Option<&'a Path>,
    /// Model aliases from `[models.aliases]` (they replace the built-in `sonnet`, `opus`,
    /// `haiku`).
    pub aliases: &'a HashMap<String, String>,
    /// Tool names the caller registers beyond the built-in ones.
    pub extra_tools: &'a [String],
    /// The providers, to tell whether a model alias can reach its provider here (else the
    /// agent inherits its parent's model); `None` takes aliases as they are.
    pub providers: Option<&'a ProviderRegistry>,
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
    TimeoutMins,
    PermissionMode,
    SandboxMode,
    Mode,
    Permission,
    Kind,
    Prompt,
    ProtectedPaths,
    Sandbox,
    Isolation,
    OnOrphan,
    McpServers,
    Team,
    CanMessage,
    Hooks,
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
    ("maxSteps", Key::MaxTurns),
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
    ("timeout_mins", Key::TimeoutMins),
    ("permissionMode", Key::PermissionMode),
    ("sandbox_mode", Key::SandboxMode),
    ("mode", Key::Mode),
    ("permission", Key::Permission),
    ("kind", Key::Kind),
    ("prompt", Key::Prompt),
    ("protected_paths", Key::ProtectedPaths),
    ("sandbox", Key::Sandbox),
    ("isolation", Key::Isolation),
    ("on_orphan", Key::OnOrphan),
    ("onOrphan", Key::OnOrphan),
    ("mcpServers", Key::McpServers),
    ("mcp_servers", Key::McpServers),
    ("team", Key::Team),
    ("can_message", Key::CanMessage),
    ("canMessage", Key::CanMessage),
    ("hooks", Key::Hooks),
];

/// Keys other tools write that change nothing in cadre: accepted without a word.
const SILENT_KEYS: &[&str] = &["color", "nickname_candidates", "hidden"];

/// Keys with a behaviour cadre does not reproduce: accepted, with a warning saying what
/// applies instead.
const UNSUPPORTED_KEYS: &[(&str, &str)] = &[
    ("memory", "cadre keeps no per-agent memory"),
    ("background", "the caller chooses foreground or background"),
    ("effort", "the model's default applies"),
    ("model_reasoning_effort", "the model's default applies"),
    ("temperature", "the model's default applies"),
    ("top_p", "the model's default applies"),
];

/// Longest agent name, in characters.
const MAX_NAME_CHARS: usize = 128;

/// True when `name` can be an agent id: what Claude Code accepts — not empty, at most 128
/// characters, without `:` (it separates the parts of an agent key), `/` or `\` (names
/// become directory names), whitespace or control characters, and not `.` or `..`. Dots and
/// capitals are fine (`powershell-5.1-expert`); ids are compared in lower case.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| matches!(c, ':' | '/' | '\\') || c.is_whitespace() || c.is_control())
}

/// The id a valid name is looked up by: its lower-case form.
pub fn normalise_name(name: &str) -> String {
    name.to_lowercase()
}

fn name_error(what: &str, name: &str) -> String {
    format!(
        "{what} `{name}` is not a valid agent name (it must not be empty or contain `:`, `/`, `\\` or spaces)"
    )
}

/// Most warnings one file keeps; the rest are counted in a last one. A file of thousands
/// of unknown keys or tools would otherwise carry a warning each into every registry.
const MAX_WARNINGS: usize = 20;

/// Most names one warning lists; the rest are counted.
const MAX_LISTED: usize = 8;

/// `` `a`, `b` and `c` ``, or the first [`MAX_LISTED`] and how many more.
fn listed(names: &[&str]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(MAX_LISTED)
        .map(|n| format!("`{n}`"))
        .collect();
    match (names.len().saturating_sub(MAX_LISTED), shown.split_last()) {
        (0, Some((last, rest))) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        (0, _) => shown.join(""),
        (more, _) => format!("{} and {more} more", shown.join(", ")),
    }
}

/// Keep at most [`MAX_WARNINGS`] warnings, the last one saying how many were left out.
fn bound_warnings(warnings: &mut Vec<String>) {
    if warnings.len() > MAX_WARNINGS {
        let dropped = warnings.len() - (MAX_WARNINGS - 1);
        warnings.truncate(MAX_WARNINGS - 1);
        warnings.push(format!("{dropped} more warnings not shown"));
    }
}

/// Collect the recognised keys, refusing two spellings of one key.
fn collect<'m>(
    front: &'m Mapping,
    warnings: &mut Vec<String>,
) -> Result<HashMap<Key, (&'m str, &'m Value)>, DefinitionError> {
    let mut found: HashMap<Key, (&str, &Value)> = HashMap::new();
    let mut unknown: Vec<&str> = Vec::new();
    let mut first_unknown = 0;
    for (k, v) in front {
        let Some(k) = k.as_str() else {
            warnings.push(format!("key {} is not text; ignored", show(k)));
            continue;
        };
        if let Some((_, key)) = KEYS.iter().find(|(spelling, _)| *spelling == k) {
            if let Some((other, _)) = found.insert(*key, (k, v)) {
                return Err(DefinitionError::Conflict(other.to_string(), k.to_string()));
            }
        } else if SILENT_KEYS.contains(&k) {
        } else if let Some((_, instead)) = UNSUPPORTED_KEYS.iter().find(|(u, _)| *u == k) {
            warnings.push(format!(
                "`{k}` is not supported by cadre and is ignored: {instead}"
            ));
        } else {
            if unknown.is_empty() {
                first_unknown = warnings.len();
            }
            unknown.push(k);
        }
    }
    // One warning for them all, where the first one was found.
    match unknown.as_slice() {
        [] => {}
        [one] => warnings.insert(first_unknown, format!("unknown key `{one}` ignored")),
        many => warnings.insert(
            first_unknown,
            format!("unknown keys {} ignored", listed(many)),
        ),
    }
    Ok(found)
}

fn as_text(key: &str, value: &Value) -> Result<String, String> {
    scalar_text(value).ok_or_else(|| format!("`{key}` must be text, found {}", show(value)))
}

/// Claude Code's `permissionMode` values.
fn requested_mode(key: &str, value: &Value, warnings: &mut Vec<String>) -> Option<RequestedMode> {
    let text = scalar_text(value)?;
    match text.trim() {
        "default" => Some(RequestedMode::Default),
        "acceptEdits" => Some(RequestedMode::AcceptEdits),
        "plan" => Some(RequestedMode::Plan),
        "bypassPermissions" => {
            warnings.push(
                "`permissionMode: bypassPermissions` cannot widen the parent's approval mode; the parent's mode applies"
                    .into(),
            );
            Some(RequestedMode::BypassPermissions)
        }
        other => {
            warnings.push(format!(
                "`{key}: {other}` is not a mode cadre knows (default, acceptEdits, plan, bypassPermissions); the parent's mode applies"
            ));
            None
        }
    }
}

/// Codex's `sandbox_mode`: only `read-only` narrows anything.
fn sandbox_mode(value: &Value, warnings: &mut Vec<String>) -> Option<RequestedMode> {
    match scalar_text(value).as_deref().map(str::trim) {
        Some("read-only") => Some(RequestedMode::Plan),
        Some("workspace-write") => None,
        Some("danger-full-access") => {
            warnings.push(
                "`sandbox_mode = \"danger-full-access\"` cannot widen the parent's approval mode; the parent's mode applies"
                    .into(),
            );
            None
        }
        other => {
            warnings.push(format!(
                "`sandbox_mode` {} is not a Codex sandbox mode; ignored",
                other.unwrap_or("(not text)")
            ));
            None
        }
    }
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
    let n = positive_int(key, value).map_err(|e| e.to_string())?;
    u32::try_from(n).map_err(|_| format!("`{key}` is too large: {n}"))
}

/// Parse the text of the Markdown definition file at `path`. The name is kept as spelled
/// (the registry looks ids up in lower case). On failure, the reason (without the path) is
/// returned.
pub fn parse_definition(
    path: &Path,
    text: &str,
    cx: &ParseContext<'_>,
) -> Result<AgentDefinition, DefinitionError> {
    let doc = frontmatter::parse(text).map_err(|e| DefinitionError::Syntax(e.to_string()))?;
    let mut warnings: Vec<String> = Vec::new();
    match doc.requoted.as_slice() {
        [] => {}
        [k] => warnings.push(format!("the value of `{k}` contains `: `, which YAML does not allow unquoted; read as text (quote it to silence this)")),
        keys => {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            warnings.push(format!("the values of {} contain `: `, which YAML does not allow unquoted; read as text (quote them to silence this)", listed(&keys)));
        }
    }
    for key in &doc.duplicates {
        if SILENT_KEYS.contains(&key.as_str()) {
            warnings.push(format!(
                "`{key}` is given more than once; the last value is used"
            ));
        } else {
            return Err(DefinitionError::Repeated(key.clone()));
        }
    }
    definition_from(path, &doc.front, doc.body, warnings, cx)
}

/// The name of a definition: the file stem where the format says so, else `name` (the file
/// stem, with a warning, when there is none); checked, and kept as spelled so the registry,
/// which lower-cases every id, can warn when two spellings differ only in case.
fn agent_name(
    path: &Path,
    declared: Option<String>,
    cx: &ParseContext<'_>,
    warnings: &mut Vec<String>,
) -> Result<String, String> {
    let stem = || -> Result<String, String> {
        path.file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string)
            .ok_or_else(|| "the file name is not valid UTF-8".to_string())
    };
    let declared = declared
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty());
    let name = match (cx.kind.format(), declared) {
        (FileFormat::Java | FileFormat::OpenCode, declared) => {
            let stem = stem()?;
            if !is_valid_name(&stem) {
                return Err(name_error("file name", &stem));
            }
            if let Some(declared) = declared.filter(|d| *d != stem) {
                warnings.push(format!(
                    "`name: {declared}` ignored: in {} the id is the file name (`{stem}`)",
                    cx.kind.label()
                ));
            }
            stem
        }
        (_, Some(name)) => {
            if !is_valid_name(&name) {
                return Err(name_error("name", &name));
            }
            name
        }
        (_, None) => {
            let stem = stem()?;
            if !is_valid_name(&stem) {
                return Err(format!(
                    "missing `name`, and the file name `{stem}` is not a valid agent name"
                ));
            }
            warnings.push(format!("no `name`: the file name `{stem}` is used"));
            stem
        }
    };
    Ok(name)
}

/// Build a definition from parsed front matter (or a Codex role turned into the same
/// shape) and its prompt body.
#[expect(
    clippy::too_many_lines,
    reason = "not split yet (issue 46): one agent file's keys read into its definition, key by key"
)]
pub(crate) fn definition_from(
    path: &Path,
    front: &Mapping,
    body: String,
    mut warnings: Vec<String>,
    cx: &ParseContext<'_>,
) -> Result<AgentDefinition, DefinitionError> {
    let format = cx.kind.format();
    let keys = collect(front, &mut warnings)?;
    let get = |k: Key| keys.get(&k).copied();

    let declared_name = get(Key::Name).map(|(k, v)| as_text(k, v)).transpose()?;
    let name = agent_name(path, declared_name, cx, &mut warnings)?;

    let description = match get(Key::Description) {
        Some((k, v)) => as_text(k, v)?.trim().to_string(),
        None => return Err(DefinitionError::Missing("description")),
    };
    if description.is_empty() {
        return Err(DefinitionError::Empty("description"));
    }
    let chars = description.chars().count();
    if chars > MAX_OFFERED_DESCRIPTION {
        warnings.push(format!(
            "the description has {chars} characters; the parent model is offered the first {MAX_OFFERED_DESCRIPTION}"
        ));
    }

    let mut def = AgentDefinition::new(name, description);
    def.source = DefinitionSource::File(path.to_path_buf());

    if let Some((k, v)) = get(Key::Tools) {
        match v {
            Value::Mapping(m) => {
                let mapped = opencode::tools_map(m, cx.extra_tools, &mut warnings)?;
                def.tools = mapped.allow;
                def.disallowed_tools.extend(mapped.deny);
            }
            _ => {
                def.tools = match string_list(k, v)? {
                    None => None,
                    Some(list) if list.iter().any(|t| t == "*") => None,
                    Some(list) => {
                        let mapped = map_allowlist(&list, cx.extra_tools, &mut warnings);
                        def.permissions.only = mapped.only;
                        Some(mapped.tools)
                    }
                };
            }
        }
    }
    if let Some((k, v)) = get(Key::DisallowedTools) {
        let list = string_list(k, v)?.unwrap_or_default();
        let mapped = map_denylist(&list, cx.extra_tools, &mut warnings);
        for t in mapped.tools {
            if !def.disallowed_tools.contains(&t) {
                def.disallowed_tools.push(t);
            }
        }
        def.permissions.deny.extend(mapped.rules);
    }
    if let Some((_, v)) = get(Key::Permission) {
        let mapped = opencode::permission_map(v, cx.extra_tools, &mut warnings)?;
        def.permissions.only.extend(mapped.only);
        def.permissions.deny.extend(mapped.deny);
        def.permissions.ask.extend(mapped.ask);
    }
    if let Some((k, v)) = get(Key::PermissionMode) {
        def.permissions.mode = requested_mode(k, v, &mut warnings);
    }
    if let Some((_, v)) = get(Key::SandboxMode) {
        def.permissions.mode = def.permissions.mode.or(sandbox_mode(v, &mut warnings));
    }
    if let Some((k, v)) = get(Key::Model)
        && !v.is_null()
    {
        let dialect = match format {
            FileFormat::OpenCode => ModelDialect::OpenCode,
            FileFormat::Codex => ModelDialect::Codex,
            _ => ModelDialect::Cadre,
        };
        let choice = resolve_model(&as_text(k, v)?, cx.aliases, dialect, cx.providers);
        def.model = choice.spec;
        warnings.extend(choice.warning);
    }
    if let Some((k, v)) = get(Key::MaxTurns) {
        def.max_turns = Some(u32_turns(k, v)?);
    }
    if let Some((k, v)) = get(Key::MaxTokens) {
        def.max_tokens = Some(positive_int(k, v).map_err(|e| e.to_string())?);
    }
    match (get(Key::WallClock), get(Key::TimeoutMins)) {
        (Some((a, _)), Some((b, _))) => {
            return Err(DefinitionError::Conflict(a.to_string(), b.to_string()));
        }
        (Some((k, v)), None) => {
            def.wall_clock_secs = Some(positive_int(k, v).map_err(|e| e.to_string())?)
        }
        (None, Some((k, v))) => {
            def.wall_clock_secs = Some(
                positive_int(k, v)
                    .map_err(|e| e.to_string())?
                    .saturating_mul(60),
            );
        }
        (None, None) => {}
    }
    if let Some((k, v)) = get(Key::Skills) {
        def.skills = string_list(k, v)?.unwrap_or_default();
    }
    if let Some((k, v)) = get(Key::CanDelegate) {
        def.can_delegate = boolean(k, v).map_err(|e| e.to_string())?;
    }
    if let Some((k, v)) = get(Key::ProtectedPaths) {
        def.protected_paths = string_list(k, v)?.unwrap_or_default();
    }
    if let Some((k, v)) = get(Key::Isolation)
        && !v.is_null()
    {
        let text = as_text(k, v)?;
        def.isolation = match text.trim() {
            "none" | "" => None,
            other => Some(other.parse().map_err(|e| format!("`{k}`: {e}"))?),
        };
    }
    if let Some((k, v)) = get(Key::OnOrphan)
        && !v.is_null()
    {
        let text = as_text(k, v)?;
        def.on_orphan = Some(
            cadre_store::OrphanPolicy::parse(text.trim()).ok_or_else(|| {
                format!(
                    "`{k}`: expected `fail` or `resume`, found `{}`",
                    text.trim()
                )
            })?,
        );
    }
    if let Some((k, v)) = get(Key::Sandbox)
        && !v.is_null()
    {
        def.sandbox =
            Some(serde_yaml_ng::from_value(v.clone()).map_err(|e| format!("`{k}`: {e}"))?);
    }
    if let Some((k, v)) = get(Key::McpServers) {
        def.mcp_servers = mcp_servers(k, v)?;
    }
    if let Some((_, v)) = get(Key::Hooks) {
        def.hooks = crate::definitions::agent_hooks::parse(&def.name, path, v, &mut warnings);
    }
    crate::definitions::team_keys::apply(get(Key::Team), get(Key::CanMessage), &mut def)?;
    if let Some((k, v)) = get(Key::Mode) {
        match as_text(k, v)?.trim() {
            "subagent" | "all" => {}
            "primary" => def.primary = true,
            other => warnings.push(format!(
                "`mode: {other}` is not an OpenCode agent mode (subagent, primary, all); read as `subagent`"
            )),
        }
    }
    if let Some((k, v)) = get(Key::Kind) {
        match as_text(k, v)?.trim() {
            "local" => {}
            "remote" => {
                return Err(
                    "Gemini CLI remote agents (`kind: remote`) are not supported; describe the remote agent with `url`"
                        .into(),
                );
            }
            other => warnings.push(format!("`kind: {other}` ignored (expected `local`)")),
        }
    }

    let (mode, ws_path) = match get(Key::Workspace) {
        Some((_, v)) => parse_workspace(v, cx.kind.default_mode(), &mut warnings)?,
        None => (cx.kind.default_mode(), None),
    };
    def.workspace.mode = mode;
    let mut body = body;
    if let Some((k, v)) = get(Key::Prompt) {
        let text = as_text(k, v)?;
        if body.trim().is_empty() {
            body = text.trim().to_string();
        } else {
            warnings.push(format!("`{k}` ignored: the file has a prompt body"));
        }
    }
    let has_body = !body.trim().is_empty();

    match get(Key::Url) {
        Some((k, v)) if !v.is_null() => {
            let url = as_text(k, v)?.trim().to_string();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(
                    format!("`url` must start with http:// or https://, found `{url}`").into(),
                );
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
                let resolved = resolve_workspace_path(ws, &p).map_err(|e| e.to_string())?;
                resolved
                    .strip_prefix(ws)
                    .map(Path::to_path_buf)
                    .unwrap_or(resolved)
            }
            None => {
                check_relative_path(&p).map_err(|e| e.to_string())?;
                p
            }
        });
    } else {
        def.prompt = body;
    }
    check_rules(&def)?;
    bound_warnings(&mut warnings);
    def.warnings = warnings;
    Ok(def)
}

/// `mcpServers`: a list whose items name a configured server (`- github`) or declare servers
/// (`- name: {command: ...}`), or a mapping of declared servers. Only the shape is checked
/// here; an entry's keys are checked when a child starts (a bad entry is a warning then).
fn mcp_servers(key: &str, value: &Value) -> Result<Vec<AgentMcpServer>, String> {
    fn declared(key: &str, map: &Mapping, out: &mut Vec<AgentMcpServer>) -> Result<(), String> {
        for (name, entry) in map {
            let name = scalar_text(name)
                .filter(|n| !n.trim().is_empty())
                .ok_or_else(|| {
                    format!("`{key}`: a server name must be text, found {}", show(name))
                })?;
            if !entry.is_mapping() {
                return Err(format!(
                    "`{key}`: server {name} must be a mapping of its settings (command, args, env or type, url, headers), found {}",
                    show(entry)
                ));
            }
            let entry =
                serde_json::to_value(entry).map_err(|e| format!("`{key}`: server {name}: {e}"))?;
            out.push(AgentMcpServer::Inline { name, entry });
        }
        Ok(())
    }
    let mut out = Vec::new();
    match value {
        Value::Null => {}
        Value::Mapping(map) => declared(key, map, &mut out)?,
        Value::Sequence(items) => {
            for item in items {
                match item {
                    Value::Mapping(map) => declared(key, map, &mut out)?,
                    other => match scalar_text(other).filter(|n| !n.trim().is_empty()) {
                        Some(name) => out.push(AgentMcpServer::Named(name.trim().to_string())),
                        None => {
                            return Err(format!(
                                "`{key}`: an item must name a configured server or declare one, found {}",
                                show(other)
                            ));
                        }
                    },
                }
            }
        }
        other => {
            return Err(format!(
                "`{key}` must be a list of server names or servers, found {}",
                show(other)
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for s in &out {
        if !seen.insert(s.name().to_string()) {
            return Err(format!("`{key}`: server {} is listed twice", s.name()));
        }
    }
    Ok(out)
}

/// Every per-agent rule must be one cadre can apply.
fn check_rules(def: &AgentDefinition) -> Result<(), String> {
    let p = &def.permissions;
    cadre_engine::PermissionRules::parse(&p.only, &p.deny, &p.ask)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(front: &str) -> Result<AgentDefinition, String> {
        let text = format!("---\nname: a\ndescription: d\n{front}\n---\nBody.\n");
        parse_text(&text).map_err(|e| e.to_string())
    }

    /// `text` parsed as a Claude Code agent file `a.md`.
    fn parse_text(text: &str) -> Result<AgentDefinition, DefinitionError> {
        let aliases = HashMap::new();
        let cx = ParseContext {
            kind: DirKind::Claude,
            workspace: None,
            aliases: &aliases,
            extra_tools: &[],
            providers: None,
        };
        parse_definition(Path::new("a.md"), text, &cx)
    }

    #[test]
    fn refusals_say_what_kind_they_are() {
        let refused = |text: &str| parse_text(text).unwrap_err();
        assert_eq!(
            refused("---\nname: a\n---\nBody.\n"),
            DefinitionError::Missing("description")
        );
        assert_eq!(
            refused("---\nname: a\ndescription: \" \"\n---\n"),
            DefinitionError::Empty("description")
        );
        assert_eq!(
            refused("---\nname: a\ndescription: d\nmax_turns: 2\nmaxTurns: 3\n---\n"),
            DefinitionError::Conflict("max_turns".into(), "maxTurns".into())
        );
        assert_eq!(
            refused("---\nname: a\ndescription: d\nmodel: x\nmodel: y\n---\n"),
            DefinitionError::Repeated("model".into())
        );
        assert!(matches!(
            refused("---\nname: [a\ndescription: d\n---\n"),
            DefinitionError::Syntax(_)
        ));
        assert!(matches!(
            refused("---\nname: a\ndescription: d\nmaxTurns: -1\n---\n"),
            DefinitionError::Invalid(_)
        ));
    }

    #[test]
    fn mcp_servers_name_configured_servers_or_declare_their_own() {
        let d = parse(
            "mcpServers:\n  - github\n  - mine:\n      command: npx\n      args: [\"-y\", \"srv\"]\n",
        )
        .unwrap();
        assert_eq!(
            d.mcp_servers,
            [
                AgentMcpServer::Named("github".into()),
                AgentMcpServer::Inline {
                    name: "mine".into(),
                    entry: serde_json::json!({"command": "npx", "args": ["-y", "srv"]}),
                },
            ]
        );
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        let d = parse("mcpServers:\n  web:\n    type: http\n    url: http://h/mcp\n").unwrap();
        assert_eq!(d.mcp_servers[0].name(), "web");
    }

    #[test]
    fn mcp_servers_of_the_wrong_shape_are_errors() {
        for (front, says) in [
            ("mcpServers: github", "must be a list"),
            ("mcpServers:\n  - 5\n  - [x]", "an item must name"),
            ("mcpServers:\n  - mine: npx", "must be a mapping"),
            ("mcpServers:\n  - a\n  - a", "listed twice"),
        ] {
            let e = parse(front).unwrap_err();
            assert!(e.contains(says), "{front}: {e}");
        }
    }
}
