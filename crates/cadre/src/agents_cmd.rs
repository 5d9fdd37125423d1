//! `cadre agents list | show | check`: the sub-agent registry as the user sees it. These
//! commands are synchronous (no async runtime) so they start fast.

use crate::cli::{AgentsCommand, Cli};
use crate::config::{self, Config};
use crate::setup::{model_spec, workspace_root};
use anyhow::Result;
use cadre_subagents::{
    AgentDefinition, AgentRegistry, DELEGATION_TOOLS, DefinitionSource, RemoteProtocol,
    RequestedMode, SkillSet, WorkspaceMode, display_path, display_source, narrow_names,
    prompt_file, runtime_root,
};
use cadre_tools::builtin::builtin_tools;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit code of `show` for an unknown name.
const EXIT_UNKNOWN: u8 = 2;
/// Exit code of `check` when a file is broken.
const EXIT_BROKEN: u8 = 1;

/// Everything the three commands look at.
struct View {
    ws: PathBuf,
    config: Config,
    main_model: String,
    registry: AgentRegistry,
    skills: SkillSet,
    builtin: Vec<String>,
}

/// The registry of `ws` as configured (aliases checked against the providers, user dir,
/// general-purpose switch, skills), for the main model `main_model`.
pub fn build_registry(
    ws: &Path,
    config: &Config,
    skills: &SkillSet,
    main_model: &str,
) -> AgentRegistry {
    let providers =
        cadre_llm::ProviderRegistry::for_model(config.providers.clone(), &[], main_model);
    let mut b = AgentRegistry::builder()
        .workspace(ws)
        .user_dir(config::user_dir().map(|d| d.join("agents")))
        .aliases(config.models.aliases.clone())
        .providers(std::sync::Arc::new(providers))
        .skills(skills.clone())
        .known_tools(config.tools.configured_tools());
    if config.subagents.disable_general_purpose {
        b = b.disable_general_purpose();
    }
    b.load()
}

impl View {
    fn load(cli: &Cli) -> Result<Self> {
        let ws = workspace_root(cli)?;
        let config = config::load(&ws, cli.config.as_deref())?;
        let main_model = model_spec(cli, &config);
        Ok(Self::of(ws, config, main_model))
    }

    fn of(ws: PathBuf, config: Config, main_model: String) -> Self {
        let skills = SkillSet::discover(&ws);
        let registry = build_registry(&ws, &config, &skills, &main_model);
        let builtin = builtin_tools()
            .names()
            .into_iter()
            .map(str::to_string)
            .chain(config.tools.configured_tools())
            .collect();
        Self {
            ws,
            config,
            main_model,
            registry,
            skills,
            builtin,
        }
    }

    /// The tools a child of the main agent would get from the built-in set.
    fn tools(&self, def: &AgentDefinition) -> Vec<String> {
        if def.remote.is_some() {
            return Vec::new();
        }
        let parent: Vec<&str> = self.builtin.iter().map(String::as_str).collect();
        narrow_names(
            &parent,
            def.tools.as_deref(),
            &def.disallowed_tools,
            DELEGATION_TOOLS,
        )
        .into_iter()
        .map(str::to_string)
        .collect()
    }

    /// The model a child of the main agent would use: its own spec, or the main model when
    /// it inherits. `list`, `list --json` and `show` all print this.
    fn model(&self, def: &AgentDefinition) -> Option<String> {
        match (&def.model, &def.remote) {
            (Some(m), _) => Some(m.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(self.main_model.clone()),
        }
    }

    fn source(&self, source: &DefinitionSource) -> String {
        display_source(source, Some(&self.ws))
    }

    fn default_max_turns(&self) -> u32 {
        self.config.subagents.max_turns.unwrap_or(10)
    }

    /// Problems worth a warning that only show against the real workspace.
    fn extra_warnings(&self, def: &AgentDefinition) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(file) = prompt_file(def, &self.ws)
            && !file.is_file()
        {
            out.push(format!(
                "{} does not exist; the agent starts with no base prompt",
                display_path(&file, Some(&self.ws))
            ));
        }
        out
    }

    /// Broken files and warnings, as `check` prints them.
    fn report_lines(&self) -> (Vec<String>, Vec<String>) {
        let errors = self
            .registry
            .errors()
            .iter()
            .map(|e| format!("{}: {}", display_path(&e.path, Some(&self.ws)), e.reason))
            .collect();
        let mut warnings: Vec<String> = self
            .registry
            .warnings()
            .iter()
            .map(|w| format!("warning: {}: {}", self.source(&w.source), w.message))
            .collect();
        // Every replaced entry, so a file that silently shadows another (or the built-in
        // general-purpose) is visible.
        for line in self.registry.overrides() {
            warnings.push(format!("warning: {line}"));
        }
        for def in self.registry.list() {
            for w in self.extra_warnings(def) {
                warnings.push(format!("warning: {}: {w}", self.source(&def.source)));
            }
        }
        for e in self.skills.errors() {
            warnings.push(format!(
                "warning: {}: {} (skill not loaded)",
                display_path(&e.path, Some(&self.ws)),
                e.reason
            ));
        }
        (errors, warnings)
    }
}

/// What `cadre agents list` prints, stdout and stderr in turn, for the workspace `ws` with
/// the configuration file `config_file` and the main model `main_model`: the interactive
/// `/agents` shows this.
pub fn listing(ws: &Path, config_file: Option<&Path>, main_model: &str) -> Result<String> {
    let config = config::load(ws, config_file)?;
    let view = View::of(ws.to_path_buf(), config, main_model.to_string());
    let mut out = Vec::new();
    list_table(&view, &mut out)?;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    for line in list_problems(&view) {
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text.trim_end().to_string())
}

/// The broken files and warnings `list` prints after its table.
fn list_problems(view: &View) -> Vec<String> {
    let (errors, warnings) = view.report_lines();
    errors
        .into_iter()
        .map(|e| format!("error: {e} (not loaded)"))
        .chain(warnings)
        .collect()
}

/// Run `cadre agents ...`. A closed stdout (`cadre agents list | head`) is not an error.
pub fn run(cli: &Cli, command: &AgentsCommand) -> Result<ExitCode> {
    match run_inner(cli, command) {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        other => other,
    }
}

fn run_inner(cli: &Cli, command: &AgentsCommand) -> Result<ExitCode> {
    let view = View::load(cli)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let code = match command {
        AgentsCommand::List { json } => {
            if *json {
                list_json(&view, &mut out)?;
            } else {
                list_table(&view, &mut out)?;
            }
            for line in list_problems(&view) {
                eprintln!("{line}");
            }
            ExitCode::SUCCESS
        }
        AgentsCommand::Show { name } => match view.registry.lookup(name) {
            Some(def) => {
                show(&view, def, &mut out)?;
                ExitCode::SUCCESS
            }
            None => {
                eprintln!(
                    "cadre: unknown agent `{name}`; known agents: {}",
                    view.registry.names().join(", ")
                );
                ExitCode::from(EXIT_UNKNOWN)
            }
        },
        AgentsCommand::Check => {
            let (errors, warnings) = view.report_lines();
            for e in &errors {
                writeln!(out, "{e}")?;
            }
            for w in &warnings {
                writeln!(out, "{w}")?;
            }
            let n = view.registry.len();
            let agents = if n == 1 { "agent" } else { "agents" };
            if errors.is_empty() {
                writeln!(out, "{n} {agents} OK")?;
                ExitCode::SUCCESS
            } else {
                let files = if errors.len() == 1 { "file" } else { "files" };
                writeln!(out, "{n} {agents} OK, {} broken {files}", errors.len())?;
                ExitCode::from(EXIT_BROKEN)
            }
        }
    };
    out.flush()?;
    Ok(code)
}

/// One entry of `agents list --json`.
#[derive(serde::Serialize)]
struct JsonEntry<'a> {
    name: &'a str,
    description: &'a str,
    source: String,
    tools: Vec<String>,
    model: Option<String>,
    workspace: &'static str,
    /// Only for OpenCode primary agents, which are listed but not delegable.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    primary: bool,
}

fn list_json(view: &View, out: &mut impl Write) -> Result<()> {
    let entries: Vec<JsonEntry<'_>> = view
        .registry
        .list()
        .chain(view.registry.primaries())
        .map(|def| JsonEntry {
            name: &def.name,
            description: &def.description,
            source: view.source(&def.source),
            tools: view.tools(def),
            model: view.model(def),
            workspace: mode_name(def.workspace.mode, def),
            primary: def.primary,
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &entries).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

fn mode_name(mode: WorkspaceMode, def: &AgentDefinition) -> &'static str {
    if def.remote.is_some() {
        return "remote";
    }
    match mode {
        WorkspaceMode::Isolated => "isolated",
        WorkspaceMode::Shared => "shared",
    }
}

fn tools_summary(view: &View, def: &AgentDefinition) -> String {
    if def.remote.is_some() {
        return "(remote)".into();
    }
    let tools = view.tools(def);
    if tools.is_empty() {
        "none".into()
    } else if def.tools.is_none() && def.disallowed_tools.is_empty() {
        format!("all ({})", tools.len())
    } else {
        tools.join(", ")
    }
}

fn list_table(view: &View, out: &mut impl Write) -> Result<()> {
    let mut rows = vec![[
        "NAME".to_string(),
        "SOURCE".to_string(),
        "MODEL".to_string(),
        "TOOLS".to_string(),
    ]];
    for def in view.registry.list() {
        rows.push([
            def.name.clone(),
            view.source(&def.source),
            view.model(def).unwrap_or_else(|| "(remote)".into()),
            tools_summary(view, def),
        ]);
    }
    for def in view.registry.primaries() {
        rows.push([
            format!("{} (primary, not delegable)", def.name),
            view.source(&def.source),
            view.model(def).unwrap_or_else(|| "(remote)".into()),
            tools_summary(view, def),
        ]);
    }
    let mut widths = [0usize; 3];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &rows {
        writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        )?;
    }
    Ok(())
}

/// How a requested approval mode is applied (docs/agents.md, "Approval mode").
fn mode_text(mode: RequestedMode) -> &'static str {
    match mode {
        RequestedMode::Default => "default: mutating calls ask (never looser than the parent)",
        RequestedMode::AcceptEdits => {
            "acceptEdits: file edits run without asking where the parent auto-approves; other mutating calls ask"
        }
        RequestedMode::Plan => "plan: read-only",
        RequestedMode::BypassPermissions => "bypassPermissions: the parent's mode (never widened)",
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "one field of `cadre agents show` after the other, in the order they print"
)]
fn show(view: &View, def: &AgentDefinition, out: &mut impl Write) -> Result<()> {
    let field = |out: &mut dyn Write, key: &str, value: &str| -> std::io::Result<()> {
        let mut lines = value.lines();
        writeln!(out, "{key:<14}{}", lines.next().unwrap_or(""))?;
        for line in lines {
            writeln!(out, "{:<14}{line}", "")?;
        }
        Ok(())
    };
    field(out, "name:", &def.name)?;
    field(out, "source:", &view.source(&def.source))?;
    field(out, "description:", &def.description)?;
    let tools = view.tools(def);
    let tools = match (&def.remote, tools.is_empty()) {
        (Some(_), _) => "(the remote agent's own)".to_string(),
        (None, true) => "none".to_string(),
        (None, false) => tools.join(", "),
    };
    field(out, "tools:", &tools)?;
    if !def.disallowed_tools.is_empty() {
        field(out, "disallowed:", &def.disallowed_tools.join(", "))?;
    }
    let model = match (&def.model, &def.remote) {
        (Some(m), _) => m.clone(),
        (None, Some(_)) => "(the remote agent's own)".into(),
        (None, None) => format!("inherit ({})", view.main_model),
    };
    field(out, "model:", &model)?;
    if def.primary {
        field(out, "mode:", "primary (listed, not offered for delegation)")?;
    }
    let p = &def.permissions;
    if !p.only.is_empty() {
        field(out, "only:", &p.only.join(", "))?;
    }
    if !p.deny.is_empty() {
        field(out, "deny rules:", &p.deny.join(", "))?;
    }
    if !p.ask.is_empty() {
        field(out, "ask rules:", &p.ask.join(", "))?;
    }
    if let Some(mode) = p.mode {
        field(out, "approvals:", mode_text(mode))?;
    }
    if def.remote.is_none() {
        let root = runtime_root(def, &view.ws);
        field(
            out,
            "workspace:",
            &format!(
                "{} -> {}",
                mode_name(def.workspace.mode, def),
                root.display()
            ),
        )?;
    }
    if def.remote.is_none() {
        let sandbox = match &def.sandbox {
            Some(spec) => {
                let mut text = format!(
                    "{}, network {}",
                    spec.mode,
                    if spec.network { "on" } else { "off" }
                );
                if !spec.writable_roots.is_empty() {
                    text.push_str(&format!(", also writes {}", spec.writable_roots.join(", ")));
                }
                text
            }
            None => "the default of [sandbox.subagents]".to_string(),
        };
        field(
            out,
            "sandbox:",
            &format!("{sandbox} (narrowed to the parent's)"),
        )?;
        if def.isolation.is_some() {
            field(
                out,
                "isolation:",
                "worktree (a git worktree and branch per task)",
            )?;
        }
    }
    let turns = match def.max_turns {
        Some(n) => n.to_string(),
        None if def.source == DefinitionSource::Builtin => "inherit (the parent's limits)".into(),
        None => format!("{} (default)", view.default_max_turns()),
    };
    field(out, "max turns:", &turns)?;
    if let Some(t) = def.max_tokens {
        field(out, "max tokens:", &t.to_string())?;
    }
    if let Some(s) = def.wall_clock_secs {
        field(out, "time limit:", &format!("{s} s"))?;
    }
    if !def.skills.is_empty() {
        let skills: Vec<String> = def
            .skills
            .iter()
            .map(|s| {
                if view.skills.contains(s) {
                    s.clone()
                } else {
                    format!("{s} (missing)")
                }
            })
            .collect();
        field(out, "skills:", &skills.join(", "))?;
    }
    field(
        out,
        "can delegate:",
        if def.can_delegate { "yes" } else { "no" },
    )?;
    if let Some(r) = &def.remote {
        let protocol = match r.protocol {
            RemoteProtocol::Auto => "auto",
            RemoteProtocol::A2a => "a2a",
            RemoteProtocol::Tasks => "tasks",
        };
        field(out, "remote:", &format!("{} (protocol {protocol})", r.url))?;
        if !r.headers.is_empty() {
            // Values may hold secrets: names only.
            let names: Vec<&str> = r.headers.keys().map(String::as_str).collect();
            field(out, "headers:", &names.join(", "))?;
        }
    }
    let mut warnings = def.warnings.clone();
    warnings.extend(view.extra_warnings(def));
    for w in &warnings {
        field(out, "warning:", w)?;
    }
    writeln!(out)?;
    match prompt_file(def, &view.ws) {
        Some(file) => {
            writeln!(
                out,
                "--- prompt ({}) ---",
                display_path(&file, Some(&view.ws))
            )?;
            if let Ok(text) = std::fs::read_to_string(&file) {
                writeln!(out, "{}", text.trim_end())?;
            }
        }
        None if def.remote.is_some() => {}
        None if def.prompt.is_empty() => writeln!(out, "--- prompt: (none) ---")?,
        None => {
            writeln!(out, "--- prompt ---")?;
            writeln!(out, "{}", def.prompt)?;
        }
    }
    Ok(())
}
