//! Reading hooks from where Claude Code and cadre keep them: the `hooks` and
//! `disableAllHooks` keys of `settings.json` files, the `[[hooks.<Event>]]` tables of
//! `config.toml` files (the same fields, TOML spelling; `[hooks] disable_all = true`), and
//! an agent file's `hooks:` front matter. Every source adds handlers; a file that cannot be
//! read, or a group in it that makes no sense, is a warning naming the file.

use super::event::HookEvent;
use super::matcher::Matcher;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest settings file read (they are a few KiB).
const MAX_SETTINGS_BYTES: u64 = 1 << 20;

/// How a handler is run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HandlerKind {
    /// A command: through `sh -c` when `args` is empty, else `command` run directly with
    /// `args` (the exec form: no shell parses anything).
    Command {
        /// The shell command, or the program of the exec form.
        command: String,
        /// The exec form's arguments.
        args: Vec<String>,
    },
    /// An HTTP endpoint the event's JSON is POSTed to.
    Http {
        /// The URL, as the user wrote it.
        url: String,
        /// Extra request headers.
        headers: Vec<(String, String)>,
    },
}

/// One handler: how it runs and for how long at most.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Handler {
    /// Command or HTTP.
    pub kind: HandlerKind,
    /// Its `timeout`; the event's default when not set.
    pub timeout: Option<Duration>,
}

impl Handler {
    /// What `cadre hooks list` shows for it.
    pub fn describe(&self) -> String {
        match &self.kind {
            HandlerKind::Command { command, args } if args.is_empty() => command.clone(),
            HandlerKind::Command { command, args } => format!("{command} {}", args.join(" ")),
            HandlerKind::Http { url, .. } => format!("POST {url}"),
        }
    }
}

/// A handler registered for an event, with where it came from.
#[derive(Debug, Clone)]
pub struct HookEntry {
    /// The file (or agent) it comes from.
    pub source: String,
    /// Its event.
    pub event: HookEvent,
    /// Its matcher as written (empty: none).
    pub matcher_text: String,
    /// Its matcher.
    pub matcher: Matcher,
    /// The handler.
    pub handler: Handler,
}

/// Every configured handler, in the order of their sources.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    entries: Vec<HookEntry>,
    disabled: bool,
}

/// A source of hooks.
#[derive(Debug, Clone)]
pub enum HookSource {
    /// A Claude Code `settings.json`.
    Json(PathBuf),
    /// A cadre `config.toml`.
    Toml(PathBuf),
}

impl HookSet {
    /// The handlers of `sources`, in order, and a warning for each file or group that was
    /// skipped. A missing file is no warning.
    pub fn load(sources: &[HookSource]) -> (Self, Vec<String>) {
        let mut set = Self::default();
        let mut warnings = Vec::new();
        for source in sources {
            let (path, toml) = match source {
                HookSource::Json(p) => (p, false),
                HookSource::Toml(p) => (p, true),
            };
            match read_source(path, toml) {
                Ok(Some(v)) => set.add_value(&path.display().to_string(), &v, &mut warnings),
                Ok(None) => {}
                Err(e) => warnings.push(format!("{}: hooks not read: {e}", path.display())),
            }
        }
        (set, warnings)
    }

    /// Add the hooks of one settings document (`{"hooks": {...}, "disableAllHooks": ..}`,
    /// or a `config.toml` converted to JSON, whose `hooks` table may say `disable_all`).
    pub fn add_value(&mut self, source: &str, doc: &Value, warnings: &mut Vec<String>) {
        if doc.get("disableAllHooks").and_then(Value::as_bool) == Some(true) {
            self.disabled = true;
        }
        match doc.get("hooks") {
            None | Some(Value::Null) => {}
            Some(hooks) => self.add_hooks(source, hooks, warnings),
        }
    }

    /// Add a `hooks` object (`{"<Event>": [groups]}`), as a settings file or an agent
    /// file's front matter has it.
    pub fn add_hooks(&mut self, source: &str, hooks: &Value, warnings: &mut Vec<String>) {
        let Some(events) = hooks.as_object() else {
            warnings.push(format!(
                "{source}: `hooks` is not a table of events; ignored"
            ));
            return;
        };
        for (name, groups) in events {
            if name == "disable_all" {
                if groups.as_bool() == Some(true) {
                    self.disabled = true;
                }
                continue;
            }
            let Some(event) = HookEvent::parse(name) else {
                warnings.push(format!("{source}: unknown hook event `{name}`; ignored"));
                continue;
            };
            let Some(groups) = groups.as_array() else {
                warnings.push(format!("{source}: hooks.{name} is not a list; ignored"));
                continue;
            };
            for group in groups {
                if let Err(e) = self.add_group(source, event, group) {
                    warnings.push(format!("{source}: hooks.{name}: {e}; ignored"));
                }
            }
        }
    }

    fn add_group(&mut self, source: &str, event: HookEvent, group: &Value) -> Result<(), String> {
        let matcher_text = match group.get("matcher") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err("`matcher` is not a string".into()),
        };
        let matcher = Matcher::parse(Some(&matcher_text)).map_err(|e| e.to_string())?;
        let handlers = group
            .get("hooks")
            .and_then(Value::as_array)
            .ok_or("a group without a `hooks` list")?;
        for h in handlers {
            let handler = parse_handler(h)?;
            let entry = HookEntry {
                source: source.to_string(),
                event,
                matcher_text: matcher_text.clone(),
                matcher: matcher.clone(),
                handler,
            };
            // The same handler for the same event and matcher, from two files, is one.
            let duplicate = self.entries.iter().any(|e| {
                e.event == entry.event
                    && e.matcher_text == entry.matcher_text
                    && e.handler == entry.handler
            });
            if !duplicate {
                self.entries.push(entry);
            }
        }
        Ok(())
    }

    /// Add every handler of `other` (an agent's own hooks on top of the inherited ones).
    pub fn extend(&mut self, other: &HookSet) {
        for e in &other.entries {
            let duplicate = self.entries.iter().any(|x| {
                x.event == e.event && x.matcher_text == e.matcher_text && x.handler == e.handler
            });
            if !duplicate {
                self.entries.push(e.clone());
            }
        }
        self.disabled |= other.disabled;
    }

    /// True when `disableAllHooks` turned every hook off.
    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    /// True when no handler would ever run.
    pub fn is_empty(&self) -> bool {
        self.disabled || self.entries.is_empty()
    }

    /// Every handler, as loaded (also when disabled: `cadre hooks list` shows them).
    pub fn entries(&self) -> &[HookEntry] {
        &self.entries
    }

    /// The handlers to run for `event` on a subject spelt `names` (a tool's spellings, an
    /// agent's name; nothing for events without a subject), each distinct handler once.
    pub fn matching<'a>(&'a self, event: HookEvent, names: &[&str]) -> Vec<&'a Handler> {
        if self.disabled {
            return Vec::new();
        }
        let mut out: Vec<&Handler> = Vec::new();
        for e in self.entries.iter().filter(|e| e.event == event) {
            let hit = names.is_empty() || e.matcher.matches_any(names.iter().copied());
            if hit && !out.contains(&&e.handler) {
                out.push(&e.handler);
            }
        }
        out
    }
}

fn parse_handler(h: &Value) -> Result<Handler, String> {
    let timeout = match h.get("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let secs = v
                .as_f64()
                .filter(|s| s.is_finite() && *s > 0.0)
                .ok_or("`timeout` must be a positive number of seconds")?;
            Some(Duration::from_secs_f64(secs.min(86_400.0)))
        }
    };
    let kind = match h.get("type").and_then(Value::as_str).unwrap_or("command") {
        "command" => {
            let command = h
                .get("command")
                .and_then(Value::as_str)
                .filter(|c| !c.trim().is_empty())
                .ok_or("a command handler without a `command`")?
                .to_string();
            let args = match h.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("`args` must be a list of strings")?,
                Some(_) => return Err("`args` must be a list of strings".into()),
            };
            HandlerKind::Command { command, args }
        }
        "http" => {
            let url = h
                .get("url")
                .and_then(Value::as_str)
                .ok_or("an http handler without a `url`")?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("`{url}` is not an http(s) URL"));
            }
            let headers = h
                .get("headers")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            HandlerKind::Http {
                url: url.to_string(),
                headers,
            }
        }
        other => return Err(format!("handler type `{other}` is not supported by cadre")),
    };
    Ok(Handler { kind, timeout })
}

/// The document of one source as JSON; `None` when the file does not exist.
fn read_source(path: &Path, toml: bool) -> Result<Option<Value>, String> {
    let text = match cadre_tools::read_to_string_capped(path, MAX_SETTINGS_BYTES) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if toml {
        let table: toml::Table = toml::from_str(&text).map_err(|e| e.to_string())?;
        // Only the `hooks` table is ours; the rest of the file is the configuration's.
        let hooks = match table.get("hooks") {
            Some(h) => serde_json::to_value(h).map_err(|e| e.to_string())?,
            None => Value::Null,
        };
        let mut doc = serde_json::Map::new();
        doc.insert("hooks".into(), hooks);
        return Ok(Some(Value::Object(doc)));
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("not valid JSON: {e}"))
}

/// The sources of a workspace, in order: `~/.claude/settings.json`, the project's
/// `.claude/settings.json` and `.claude/settings.local.json`, then the user's and the
/// project's `config.toml` (passed in: where they live is the caller's business).
pub fn standard_sources(
    home: Option<&Path>,
    workspace: &Path,
    config_files: &[PathBuf],
) -> Vec<HookSource> {
    let mut out = Vec::new();
    if let Some(h) = home {
        out.push(HookSource::Json(h.join(".claude").join("settings.json")));
    }
    let claude = workspace.join(".claude");
    out.push(HookSource::Json(claude.join("settings.json")));
    out.push(HookSource::Json(claude.join("settings.local.json")));
    out.extend(config_files.iter().cloned().map(HookSource::Toml));
    out
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
