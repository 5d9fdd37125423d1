//! Custom slash commands: Markdown files under `~/.claude/commands/`,
//! `<ws>/.claude/commands/` and `<ws>/.cadre/commands/` (Claude Code's format: optional YAML
//! front matter, a prompt body with `$ARGUMENTS`, `$1`…`$9`, `!` shell lines and `@path`
//! includes). `/name args` runs the expanded body as the prompt; a file in a subfolder is
//! `/folder:name`.

mod expand;
mod resolve;
mod turn;

pub use expand::{Piece, expand, render};
pub use resolve::{HarnessResolver, Resolve};
pub use turn::narrowed;

use cadre_subagents::definitions::frontmatter;
use std::path::{Path, PathBuf};

/// Folders below a commands directory that are walked (deeper ones are ignored with a
/// warning): a cloned repository must not make start-up walk a huge tree.
const MAX_DEPTH: usize = 6;
/// Most command files read from one directory.
const MAX_FILES: usize = 1000;

/// One command file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// The name without its slash: `review`, `frontend:component`.
    pub name: String,
    /// `description`, shown in `/help`.
    pub description: Option<String>,
    /// `argument-hint`, shown after the name in `/help`.
    pub argument_hint: Option<String>,
    /// `allowed-tools`: the tools of the turn the command runs, when given.
    pub allowed_tools: Option<Vec<String>>,
    /// `model`: the model of that turn.
    pub model: Option<String>,
    /// The prompt template.
    pub body: String,
    /// The file it came from.
    pub source: PathBuf,
}

/// The commands of a workspace, and what was wrong with the files that are not among them.
#[derive(Debug, Clone, Default)]
pub struct CommandSet {
    commands: Vec<CustomCommand>,
    /// One line per broken or skipped file, naming it.
    pub warnings: Vec<String>,
}

/// The command directories, lowest precedence first: a later one's `/name` replaces an
/// earlier one's.
pub fn command_dirs(workspace: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let user = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".claude")));
    if let Some(u) = user {
        dirs.push(u.join("commands"));
    }
    dirs.push(workspace.join(".claude").join("commands"));
    dirs.push(workspace.join(".cadre").join("commands"));
    dirs
}

impl CommandSet {
    /// Read every command directory of `workspace` (and `$HOME`'s).
    pub fn load(workspace: &Path) -> Self {
        let home = std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Self::load_from(&command_dirs(workspace, home.as_deref()))
    }

    /// Read `dirs`, later ones taking precedence.
    pub fn load_from(dirs: &[PathBuf]) -> Self {
        let mut set = Self::default();
        for dir in dirs {
            let mut files = Vec::new();
            walk(dir, dir, 0, &mut files, &mut set.warnings);
            files.sort();
            for file in files {
                match read_command(dir, &file) {
                    Ok(cmd) => {
                        set.commands.retain(|c| c.name != cmd.name);
                        set.commands.push(cmd);
                    }
                    Err(why) => set
                        .warnings
                        .push(format!("skipped command file {}: {why}", file.display())),
                }
            }
        }
        set.commands.sort_by(|a, b| a.name.cmp(&b.name));
        set
    }

    /// The command named `name` (without its slash).
    pub fn get(&self, name: &str) -> Option<&CustomCommand> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// Every command, by name.
    pub fn iter(&self) -> impl Iterator<Item = &CustomCommand> {
        self.commands.iter()
    }

    /// A set of these commands only (for tests and callers that build their own).
    pub fn of(commands: Vec<CustomCommand>) -> Self {
        Self {
            commands,
            warnings: Vec::new(),
        }
    }
}

/// The command `line` invokes and its arguments, when `line` is `/name …` and `set` has
/// `name`.
pub fn invoked<'a>(set: &'a CommandSet, line: &str) -> Option<(&'a CustomCommand, String)> {
    let (name, args) = split_invocation(line)?;
    set.get(name).map(|c| (c, args.to_string()))
}

/// The prompt `cmd` runs with `args`: its body expanded, shell lines and files filled in
/// by `harness`'s main agent (see [`HarnessResolver`]).
pub async fn prompt_for(
    harness: &cadre_subagents::Harness,
    cmd: &CustomCommand,
    args: &str,
    cancel: tokio_util::sync::CancellationToken,
) -> std::io::Result<String> {
    let resolver = HarnessResolver::new(harness, cancel)?;
    Ok(render(&expand(&cmd.body, args), &resolver).await)
}

/// The custom commands as `/help` lists them (empty without any), one line each.
pub fn help_text(set: &CommandSet) -> String {
    let mut s = String::new();
    for c in set.iter() {
        if s.is_empty() {
            s.push_str("Custom commands:\n");
        }
        let head = match &c.argument_hint {
            Some(h) => format!("/{} {h}", c.name),
            None => format!("/{}", c.name),
        };
        let help = c.description.as_deref().unwrap_or("(custom command)");
        s.push_str(&format!("  {head:<24} {help}\n"));
    }
    s
}

/// `/name rest` split into the name and its arguments, when `line` is a slash command.
pub fn split_invocation(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    (!name.is_empty()).then(|| (name, args.trim()))
}

/// The `.md` files below `dir`, at most [`MAX_DEPTH`] folders down and [`MAX_FILES`] in all.
/// Symlinks are followed only to files: a link to a directory could loop.
fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>, warnings: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if depth + 1 >= MAX_DEPTH {
                warnings.push(format!(
                    "command folder {} is more than {MAX_DEPTH} levels below {}; not read",
                    path.display(),
                    root.display()
                ));
                continue;
            }
            walk(root, &path, depth + 1, out, warnings);
        } else if path.extension().is_some_and(|e| e == "md") {
            if out.len() >= MAX_FILES {
                warnings.push(format!(
                    "more than {MAX_FILES} command files under {}; the rest are not read",
                    root.display()
                ));
                return;
            }
            out.push(path);
        }
    }
}

/// The command name of `file` below `dir`: its folders and stem joined by `:`.
fn name_of(dir: &Path, file: &Path) -> Result<String, String> {
    let rel = file.strip_prefix(dir).map_err(|_| "outside its folder")?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.last_mut() {
        *last = last.trim_end_matches(".md").to_string();
    }
    let ok = |p: &String| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if !parts.iter().all(ok) {
        return Err("a command name may hold only letters, digits, `-`, `_` and `.`".into());
    }
    Ok(parts.join(":"))
}

fn read_command(dir: &Path, file: &Path) -> Result<CustomCommand, String> {
    let name = name_of(dir, file)?;
    let text = cadre_tools::read_to_string_capped(file, frontmatter::MAX_FILE_BYTES)
        .map_err(|e| e.to_string())?;
    let mut cmd = CustomCommand {
        name,
        description: None,
        argument_hint: None,
        allowed_tools: None,
        model: None,
        body: text.trim().to_string(),
        source: file.to_path_buf(),
    };
    let starts_front = text.trim_start_matches('\u{feff}').starts_with("---");
    if !starts_front {
        return Ok(cmd);
    }
    let doc = frontmatter::parse(&text).map_err(|e| e.to_string())?;
    cmd.body = doc.body;
    let text_of = |key: &str| doc.front.get(key).and_then(frontmatter::scalar_text);
    cmd.description = text_of("description");
    // `argument-hint: [path]`, as Claude Code's files write it, is a YAML list.
    cmd.argument_hint = doc.front.get("argument-hint").and_then(|v| match v {
        serde_yaml_ng::Value::Sequence(items) => Some(
            items
                .iter()
                .filter_map(frontmatter::scalar_text)
                .map(|i| format!("[{i}]"))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        other => frontmatter::scalar_text(other),
    });
    cmd.model = text_of("model");
    if let Some(v) = doc.front.get("allowed-tools") {
        cmd.allowed_tools = frontmatter::string_list("allowed-tools", v)?;
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests;
