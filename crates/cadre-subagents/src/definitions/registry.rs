//! The agent registry: the built-in `general-purpose`, programmatic declarations, definition
//! files and custom factories merged into one table ordered by name. A later source replaces
//! an earlier entry of the same name, and every replacement is logged and recorded.

use crate::definitions::codex_file::load_codex_config;
use crate::definitions::definition_file::{is_valid_name, normalise_name};
use crate::definitions::loader::{
    CODEX_CONFIG, DirKind, LoadError, LoadOptions, agent_dirs, default_opencode_user_dirs,
    default_user_agents_dir, load_dir,
};
use crate::definitions::paths::{check_relative_path, display_source, resolve_workspace_path};
use crate::definitions::skills::SkillSet;
use crate::{AgentDefinition, AgentFactory, DefinitionSource, WorkspaceMode};
use cadre_llm::ProviderRegistry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The name of the built-in agent.
pub const GENERAL_PURPOSE: &str = "general-purpose";

/// The built-in `general-purpose` definition: shares the main workspace and inherits the
/// parent's tools (minus delegation) and model.
pub fn general_purpose() -> AgentDefinition {
    let mut def = AgentDefinition::new(
        GENERAL_PURPOSE,
        "A capable all-round agent for open-ended work: investigating questions that need \
         several searches, finding code or files when the first guess may miss, and carrying \
         out multi-step tasks. It has the same tools as you (except delegation) and works in \
         the same workspace.",
    );
    def.source = DefinitionSource::Builtin;
    def.workspace.mode = WorkspaceMode::Shared;
    def
}

/// A non-fatal problem in a loaded definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentWarning {
    /// The agent's name.
    pub agent: String,
    /// Where the definition came from.
    pub source: DefinitionSource,
    /// What is wrong.
    pub message: String,
}

#[derive(Default)]
struct Inner {
    defs: BTreeMap<String, AgentDefinition>,
    primaries: BTreeMap<String, AgentDefinition>,
    errors: Vec<LoadError>,
    warnings: Vec<AgentWarning>,
    overrides: Vec<String>,
    workspace: Option<PathBuf>,
}

/// All sub-agent definitions, ordered by name. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct AgentRegistry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AgentRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRegistry")
            .field("agents", &self.names())
            .field("errors", &self.inner.errors)
            .finish()
    }
}

impl AgentRegistry {
    /// Start building a registry.
    pub fn builder() -> AgentRegistryBuilder {
        AgentRegistryBuilder::default()
    }

    /// A definition by name (compared in lower case). OpenCode primary agents are not
    /// here: they are never offered for delegation (see [`primaries`](Self::primaries)).
    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        match self.inner.defs.get(name) {
            Some(d) => Some(d),
            None if name.chars().any(char::is_uppercase) => {
                self.inner.defs.get(&normalise_name(name))
            }
            None => None,
        }
    }

    /// True when an agent has this name.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// OpenCode `mode: primary` agents: listed by `cadre agents`, not delegable.
    pub fn primaries(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.inner.primaries.values()
    }

    /// A delegable or primary definition by name (for `cadre agents show`).
    pub fn lookup(&self, name: &str) -> Option<&AgentDefinition> {
        self.get(name)
            .or_else(|| self.inner.primaries.get(&normalise_name(name)))
    }

    /// All definitions, ordered by name.
    pub fn list(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.inner.defs.values()
    }

    /// The agents as the model reads them: `- name: description`, one a line, by name.
    pub fn catalogue(&self) -> String {
        self.list()
            .map(|d| format!("- {}: {}\n", d.name, d.offered_description()))
            .collect()
    }

    /// All names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.inner.defs.keys().map(String::as_str).collect()
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.inner.defs.len()
    }

    /// True when there are no agents.
    pub fn is_empty(&self) -> bool {
        self.inner.defs.is_empty()
    }

    /// Files (and declarations) that could not be loaded.
    pub fn errors(&self) -> &[LoadError] {
        &self.inner.errors
    }

    /// Warnings of every definition that loaded, including ones a later source replaced.
    pub fn warnings(&self) -> &[AgentWarning] {
        &self.inner.warnings
    }

    /// One line per replaced entry: `"NAME: NEW overrides OLD"` (with a note when both
    /// files are in one directory, or the names differ only in case).
    pub fn overrides(&self) -> &[String] {
        &self.inner.overrides
    }

    /// The main workspace the registry was loaded for.
    pub fn workspace(&self) -> Option<&Path> {
        self.inner.workspace.as_deref()
    }
}

/// Builds an [`AgentRegistry`]; see [`AgentRegistry::builder`].
pub struct AgentRegistryBuilder {
    workspace: Option<PathBuf>,
    user_dir: Option<PathBuf>,
    opencode_user_dirs: Vec<PathBuf>,
    providers: Option<Arc<ProviderRegistry>>,
    aliases: HashMap<String, String>,
    general_purpose: bool,
    declared: Vec<AgentDefinition>,
    factories: Vec<AgentDefinition>,
    skills: Option<SkillSet>,
    extra_tools: Vec<String>,
    files: bool,
}

impl Default for AgentRegistryBuilder {
    fn default() -> Self {
        Self {
            workspace: None,
            user_dir: default_user_agents_dir(),
            opencode_user_dirs: default_opencode_user_dirs(),
            providers: None,
            aliases: HashMap::new(),
            general_purpose: true,
            declared: Vec::new(),
            factories: Vec::new(),
            skills: None,
            extra_tools: Vec::new(),
            files: true,
        }
    }
}

impl AgentRegistryBuilder {
    /// Read no definition files (workspace or user); only code declarations and factories.
    pub fn without_files(mut self) -> Self {
        self.files = false;
        self
    }

    /// The main workspace: its definition directories are read and `workspace.path` values
    /// are checked against it. Without one, only the user dir is read.
    pub fn workspace(mut self, ws: impl Into<PathBuf>) -> Self {
        self.workspace = Some(ws.into());
        self
    }

    /// The user's agent directory (default: `$XDG_CONFIG_HOME/cadre/agents` or
    /// `~/.config/cadre/agents`); `None` reads no user directory, OpenCode's included.
    pub fn user_dir(mut self, dir: Option<PathBuf>) -> Self {
        if dir.is_none() {
            self.opencode_user_dirs.clear();
        }
        self.user_dir = dir;
        self
    }

    /// OpenCode's user agent directories (default: `$XDG_CONFIG_HOME/opencode/agent` and
    /// `…/agents`).
    pub fn opencode_user_dirs(mut self, dirs: Vec<PathBuf>) -> Self {
        self.opencode_user_dirs = dirs;
        self
    }

    /// The providers: a model alias whose provider cannot be used here (no key, no such
    /// provider) makes its agent inherit the parent's model, with a warning. Without them
    /// aliases are taken as they are.
    pub fn providers(mut self, providers: Arc<ProviderRegistry>) -> Self {
        self.providers = Some(providers);
        self
    }

    /// Model aliases (`sonnet` → `anthropic:…`), from `[models.aliases]`.
    pub fn aliases(mut self, aliases: HashMap<String, String>) -> Self {
        self.aliases = aliases;
        self
    }

    /// Leave out the built-in `general-purpose`.
    pub fn disable_general_purpose(mut self) -> Self {
        self.general_purpose = false;
        self
    }

    /// Declare an agent in code (source `Code` unless the definition says otherwise).
    pub fn declare(mut self, def: AgentDefinition) -> Self {
        self.declared.push(def);
        self
    }

    /// Register a custom factory under `name`; a blank description falls back to the name.
    pub fn factory(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        factory: AgentFactory,
    ) -> Self {
        let name = name.into();
        let description = description.into();
        let description = if description.trim().is_empty() {
            name.clone()
        } else {
            description
        };
        let mut def = AgentDefinition::new(name, description);
        def.source = DefinitionSource::Factory;
        def.factory = Some(factory);
        self.factories.push(def);
        self
    }

    /// Check every definition's `skills` against this set (missing ones become warnings).
    pub fn skills(mut self, skills: SkillSet) -> Self {
        self.skills = Some(skills);
        self
    }

    /// Tool names, beyond the built-in, delegation and MCP ones, that files may list.
    pub fn known_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra_tools.extend(names.into_iter().map(Into::into));
        self
    }

    /// Load the files and merge every source.
    pub fn load(self) -> AgentRegistry {
        let mut m = Merger {
            inner: Inner {
                workspace: self.workspace.clone(),
                ..Inner::default()
            },
            skills: self.skills.as_ref(),
            spelled: HashMap::new(),
        };
        if self.general_purpose {
            m.insert(general_purpose());
        }
        for def in self.declared {
            match validate_declaration(&def, self.workspace.as_deref()) {
                Ok(()) => m.insert(def),
                Err(reason) => m.inner.errors.push(LoadError {
                    path: PathBuf::from(format!("<code:{}>", def.name)),
                    reason: reason.to_string(),
                }),
            }
        }
        let opts = LoadOptions {
            workspace: self.workspace.as_deref(),
            aliases: &self.aliases,
            extra_tools: &self.extra_tools,
            providers: self.providers.as_deref(),
        };
        let dirs = if self.files {
            agent_dirs(
                self.workspace.as_deref(),
                self.user_dir.as_deref(),
                &self.opencode_user_dirs,
            )
        } else {
            Vec::new()
        };
        for (kind, dir) in dirs {
            if kind == DirKind::Codex
                && let Some(ws) = self.workspace.as_deref()
            {
                // The roles of `.codex/config.toml` rank just below `.codex/agents/`.
                let (defs, errors) = load_codex_config(&ws.join(CODEX_CONFIG), &opts);
                m.inner.errors.extend(errors);
                for def in defs {
                    m.insert(def);
                }
            }
            let (defs, errors) = load_dir(&dir, kind, &opts);
            m.inner.errors.extend(errors);
            for def in defs {
                m.insert(def);
            }
        }
        for def in self.factories {
            if is_valid_name(&def.name) {
                m.insert(def);
            } else {
                m.inner.errors.push(LoadError {
                    path: PathBuf::from(format!("<factory:{}>", def.name)),
                    reason: format!("`{}` is not a valid agent name", def.name),
                });
            }
        }
        AgentRegistry {
            inner: Arc::new(m.inner),
        }
    }
}

struct Merger<'a> {
    inner: Inner,
    skills: Option<&'a SkillSet>,
    /// The spelling each entry was given, to notice names that differ only in case.
    spelled: HashMap<String, String>,
}

impl Merger<'_> {
    fn insert(&mut self, mut def: AgentDefinition) {
        if let Some(skills) = self.skills {
            for s in &def.skills {
                if !skills.contains(s) {
                    def.warnings.push(format!("skill `{s}` not found"));
                }
            }
        }
        let spelling = std::mem::take(&mut def.name);
        def.name = normalise_name(&spelling);
        for w in &def.warnings {
            self.inner.warnings.push(AgentWarning {
                agent: def.name.clone(),
                source: def.source.clone(),
                message: w.clone(),
            });
        }
        let ws = self.inner.workspace.as_deref();
        let table = if def.primary {
            &mut self.inner.primaries
        } else {
            &mut self.inner.defs
        };
        if let Some(old) = table.get(&def.name)
            && let Some(why) = crate::definitions::writable::refuses_replacing(&def, old)
        {
            let line = format!(
                "{}: {} {why}; {} is kept",
                def.name,
                display_source(&def.source, ws),
                display_source(&old.source, ws),
            );
            tracing::warn!("{line}");
            self.inner.overrides.push(line);
            return;
        }
        if let Some(old) = table.get(&def.name) {
            let same_dir = match (&def.source, &old.source) {
                (DefinitionSource::File(a), DefinitionSource::File(b)) => a.parent() == b.parent(),
                _ => false,
            };
            let old_spelling = self.spelled.get(&def.name).cloned().unwrap_or_default();
            let note = if old_spelling != spelling {
                format!(" (`{spelling}` and `{old_spelling}` differ only in case)")
            } else if same_dir {
                " (same name in one directory: the later file wins)".to_string()
            } else {
                String::new()
            };
            let line = format!(
                "{}: {} overrides {}{note}",
                def.name,
                display_source(&def.source, ws),
                display_source(&old.source, ws),
            );
            // Loud: a file replacing another (or the built-in) changes what every
            // delegation to this name runs.
            tracing::warn!("{line}");
            self.inner.overrides.push(line);
        }
        self.spelled.insert(def.name.clone(), spelling);
        table.insert(def.name.clone(), def);
    }
}

/// Why a definition declared in code is refused.
#[derive(Debug, thiserror::Error)]
pub enum DeclarationError {
    /// The name is not a valid agent name.
    #[error("`{0}` is not a valid agent name")]
    BadName(String),
    /// The description is empty.
    #[error("the description is empty")]
    NoDescription,
    /// A permission rule does not parse.
    #[error(transparent)]
    Rules(#[from] cadre_engine::RuleError),
    /// Two settings that exclude each other are both given.
    #[error("{0} cannot be combined with {1}")]
    Conflict(&'static str, &'static str),
    /// `workspace.path` is refused.
    #[error(transparent)]
    WorkspacePath(#[from] crate::WorkspacePathError),
}

/// Check a programmatic declaration: a valid name, a description, and the keys that exclude
/// each other because a definition can only be one kind of agent (`url`, a remote one,
/// excludes `workspace.path` and an inline body; `workspace.path` excludes an inline body);
/// `workspace.path` must stay inside `workspace`.
pub fn validate_declaration(
    def: &AgentDefinition,
    workspace: Option<&Path>,
) -> Result<(), DeclarationError> {
    use DeclarationError as E;
    if !is_valid_name(&def.name) {
        return Err(E::BadName(def.name.clone()));
    }
    if def.description.trim().is_empty() {
        return Err(E::NoDescription);
    }
    let p = &def.permissions;
    cadre_engine::PermissionRules::parse(&p.only, &p.deny, &p.ask)?;
    let has_body = !def.prompt.trim().is_empty();
    if def.remote.is_some() && def.workspace.path.is_some() {
        return Err(E::Conflict("`url`", "`workspace.path`"));
    }
    if def.remote.is_some() && has_body {
        return Err(E::Conflict("`url`", "an inline body"));
    }
    if let Some(p) = &def.workspace.path {
        if has_body {
            return Err(E::Conflict("`workspace.path`", "an inline body"));
        }
        match workspace {
            Some(ws) => {
                resolve_workspace_path(ws, p)?;
            }
            None => check_relative_path(p)?,
        }
    }
    Ok(())
}
