//! What a tool is, declared once per tool type: its kind, whether it only reads, which of
//! its arguments are paths it reads, whether a permission rule can match its calls, the
//! names other harnesses give it, and how a front end reads it. Every list of tools by
//! property (the delegation tools a leaf never inherits, the reading tools a deny rule
//! hides paths from, the names definition files may use) is derived from these
//! descriptors, so a new tool is described in one place.

/// Where a tool comes from, which decides who may be given it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// One of cadre's own tools (files, shell, web, plan).
    Builtin,
    /// A tool that starts, talks to or manages sub-agents: a child that may not delegate
    /// is never given one.
    Delegation,
    /// A tool of an MCP server.
    Mcp,
    /// A tool that acts through a remote agent or server.
    Remote,
}

/// The arguments of a call that writes a file, read by front ends to show the change as
/// a diff: the text replaced (none for a whole-file write) and the text written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EditArgs {
    /// The key of the replaced text, `None` when the call writes the whole file.
    pub old: Option<&'static str>,
    /// The key of the new text.
    pub new: &'static str,
}

/// How a front end reads a call that hands work to a sub-agent: the argument keys that
/// name the agent and the work, each list in the order the keys are looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptArgs {
    /// Keys that name the agent's definition (`subagent_type`): the child's events belong
    /// to a call that names its definition.
    pub definition: &'static [&'static str],
    /// Keys that address one live agent (its label or key).
    pub address: &'static [&'static str],
    /// Keys that say what the agent is asked.
    pub what: &'static [&'static str],
}

/// What a tool is, known without an instance of it (definition files are parsed before
/// any tool is built).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolInfo {
    /// The tool's unique name.
    pub name: &'static str,
    /// Where it comes from.
    pub kind: ToolKind,
    /// True for tools that only read (they run without approval in the default mode).
    pub read_only: bool,
    /// The argument keys that are paths the tool reads: a deny rule hiding a path from one
    /// reading tool hides it from all of them.
    pub reads_paths: &'static [&'static str],
    /// True when calls act on a command or a path that a `tool(glob)` permission rule can
    /// match, so another harness's restricted form like `Bash(git *)` or `Read(src/**)` can
    /// be kept as a rule. (A URL or query subject, as `web_fetch` has, does not count: other
    /// harnesses spell those restrictions differently.)
    pub has_subject: bool,
    /// The names other harnesses (Claude Code, OpenCode, Gemini CLI, ...) use for the same
    /// tool; a definition file written for one of them may use them.
    pub foreign_names: &'static [&'static str],
    /// The argument keys whose values name what a call acts on (a path, a command, a URL),
    /// in the order a one-line title shows them: `write_file(notes.md)`, not its content.
    pub title: &'static [&'static str],
    /// For tools that write a file: where the change is in the arguments.
    pub edits: Option<EditArgs>,
    /// For tools that give a sub-agent work: where the agent and the work are named.
    pub prompts: Option<PromptArgs>,
}

impl ToolInfo {
    /// A tool of `kind` named `name` that writes, has no subject, no foreign names.
    pub const fn new(name: &'static str, kind: ToolKind) -> Self {
        Self {
            name,
            kind,
            read_only: false,
            reads_paths: &[],
            has_subject: false,
            foreign_names: &[],
            title: &[],
            edits: None,
            prompts: None,
        }
    }

    /// A built-in tool named `name`.
    pub const fn builtin(name: &'static str) -> Self {
        Self::new(name, ToolKind::Builtin)
    }

    /// A delegation tool named `name`.
    pub const fn delegation(name: &'static str) -> Self {
        Self::new(name, ToolKind::Delegation)
    }

    /// The same tool, only reading.
    pub const fn read_only(self) -> Self {
        Self {
            read_only: true,
            ..self
        }
    }

    /// The same tool, reading the paths under `keys` (which gives it a subject).
    pub const fn reads_paths(self, keys: &'static [&'static str]) -> Self {
        Self {
            reads_paths: keys,
            has_subject: true,
            ..self
        }
    }

    /// The same tool, with a subject a permission rule can match.
    pub const fn with_subject(self) -> Self {
        Self {
            has_subject: true,
            ..self
        }
    }

    /// The same tool, known to other harnesses as `names`.
    pub const fn foreign_names(self, names: &'static [&'static str]) -> Self {
        Self {
            foreign_names: names,
            ..self
        }
    }

    /// The same tool, titled by the values of `keys` (see [`ToolInfo::title`]).
    pub const fn titled(self, keys: &'static [&'static str]) -> Self {
        Self {
            title: keys,
            ..self
        }
    }

    /// The same tool, writing a file as `edits` says.
    pub const fn edits(self, edits: EditArgs) -> Self {
        Self {
            edits: Some(edits),
            ..self
        }
    }

    /// The same tool, giving a sub-agent work as `prompts` says.
    pub const fn prompts(self, prompts: PromptArgs) -> Self {
        Self {
            prompts: Some(prompts),
            ..self
        }
    }
}

/// The names of `infos`, in order (for the `&[&str]` lists that are derived from them).
pub const fn names_of<const N: usize>(infos: &[ToolInfo; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = infos[i].name;
        i += 1;
    }
    out
}

/// The descriptor in `infos` named `name`.
pub fn find<'a>(infos: &'a [ToolInfo], name: &str) -> Option<&'a ToolInfo> {
    infos.iter().find(|i| i.name == name)
}
