//! An agent file's `hooks:` front matter: the same shape as a settings file's `hooks`
//! object, read with the settings parser. Its handlers run only while a child of that
//! definition runs, on top of the hooks it inherits; `hooks: {}` turns the inherited ones
//! off for the child. As in Claude Code, its `Stop` handlers fire as `SubagentStop`, since
//! a child's end is its `SubagentStop`.

use crate::hooks::HookSet;
use serde_json::Value as Json;
use std::path::Path;
use std::sync::Arc;

/// What a definition's `hooks:` says.
#[derive(Debug, Clone, Default)]
pub enum AgentHooks {
    /// No `hooks:` (or a broken one): the child runs the hooks it inherits.
    #[default]
    Inherit,
    /// `hooks: {}`: the child runs none of the inherited hooks.
    Off,
    /// Handlers of its own, run for the child's events besides the inherited ones.
    Own(Arc<HookSet>),
}

impl AgentHooks {
    /// Its own handlers, if it has any.
    pub fn own(&self) -> Option<&Arc<HookSet>> {
        match self {
            Self::Own(set) => Some(set),
            _ => None,
        }
    }
}

/// The `source` an agent file's handlers are listed with: `agent:NAME (path)`.
pub fn hook_source(name: &str, path: &Path) -> String {
    format!("agent:{name} ({})", path.display())
}

/// Read the `hooks:` value of the definition `name` in the file at `path`. What cannot be
/// read is a warning naming the file; the definition loads without it.
pub(crate) fn parse(
    name: &str,
    path: &Path,
    value: &serde_yaml_ng::Value,
    warnings: &mut Vec<String>,
) -> AgentHooks {
    let source = hook_source(name, path);
    if value.is_null() {
        return AgentHooks::Inherit;
    }
    let json = match serde_json::to_value(value) {
        Ok(Json::Object(m)) => m,
        Ok(_) => {
            warnings.push(format!(
                "{source}: `hooks` is not a table of events; ignored"
            ));
            return AgentHooks::Inherit;
        }
        Err(e) => {
            warnings.push(format!("{source}: `hooks` not read ({e}); ignored"));
            return AgentHooks::Inherit;
        }
    };
    if json.is_empty() {
        return AgentHooks::Off;
    }
    let mut events = serde_json::Map::new();
    for (event, groups) in json {
        // Claude Code runs an agent's `Stop` hooks when that agent (a sub-agent) stops.
        let event = if event == "Stop" {
            "SubagentStop".to_string()
        } else {
            event
        };
        match (events.get_mut(&event), groups) {
            (Some(Json::Array(have)), Json::Array(more)) => have.extend(more),
            (_, groups) => {
                events.insert(event, groups);
            }
        }
    }
    let mut set = HookSet::default();
    set.add_hooks(&source, &Json::Object(events), warnings);
    AgentHooks::Own(Arc::new(set))
}
