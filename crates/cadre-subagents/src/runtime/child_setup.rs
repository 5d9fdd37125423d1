//! Where a child runs and what its system prompt says: the workspace root each kind of
//! definition gets (built-in; with a `workspace.path`, isolated or shared; without one,
//! isolated or shared) and the child prompt (base, sub-agent context, environment, preloaded
//! skills, AGENTS.md exactly once).

use crate::definitions::definition::{AgentDefinition, DefinitionSource, WorkspaceMode};
use cadre_engine::prompt::{
    DEFAULT_MEMORY_FILES, environment_section, memory_section, project_memory, read_agents_md,
};
use std::path::{Component, Path, PathBuf};

/// Why a child's workspace could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `workspace.path` leads outside the main workspace.
    #[error("agent {agent}: workspace path {path} escapes the main workspace")]
    Escapes {
        /// Agent name.
        agent: String,
        /// The path as written.
        path: String,
    },
    /// The directory could not be created or read.
    #[error("agent {agent}: cannot prepare workspace {path}: {source}")]
    Io {
        /// Agent name.
        agent: String,
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The resolved workspace of a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspacePlan {
    /// The runtime root its tools are confined to.
    pub root: PathBuf,
    /// The system prompt base.
    pub base: String,
    /// The file the base was read from, if it was an `AGENTS.md`.
    pub base_file: Option<PathBuf>,
}

fn lexical_join(main: &Path, rel: &Path) -> Option<PathBuf> {
    let mut out = main.to_path_buf();
    let joined = if rel.is_absolute() {
        rel.to_path_buf()
    } else {
        main.join(rel)
    };
    out.clear();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

/// Resolve `def`'s workspace against the (canonical) main workspace, creating the isolated
/// directory on first use.
pub fn plan_workspace(def: &AgentDefinition, main: &Path) -> Result<WorkspacePlan, SetupError> {
    let io = |path: &Path, source| SetupError::Io {
        agent: def.name.clone(),
        path: path.to_path_buf(),
        source,
    };
    if def.source == DefinitionSource::Builtin {
        return Ok(WorkspacePlan {
            root: main.to_path_buf(),
            base: String::new(),
            base_file: None,
        });
    }
    match &def.workspace.path {
        Some(p) => {
            let escapes = || SetupError::Escapes {
                agent: def.name.clone(),
                path: p.display().to_string(),
            };
            let dir = lexical_join(main, p).ok_or_else(escapes)?;
            if !dir.starts_with(main) {
                return Err(escapes());
            }
            std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
            let dir = dir.canonicalize().map_err(|e| io(&dir, e))?;
            if !dir.starts_with(main) {
                return Err(escapes());
            }
            let base = read_agents_md(&dir).unwrap_or_default();
            let root = match def.workspace.mode {
                WorkspaceMode::Isolated => dir.clone(),
                WorkspaceMode::Shared => main.to_path_buf(),
            };
            Ok(WorkspacePlan {
                root,
                base,
                base_file: Some(dir.join("AGENTS.md")),
            })
        }
        None => {
            let root = match def.workspace.mode {
                WorkspaceMode::Isolated => {
                    let dir = main
                        .join(".cadre")
                        .join("agents")
                        .join(&def.name)
                        .join("workspace");
                    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
                    dir
                }
                WorkspaceMode::Shared => main.to_path_buf(),
            };
            Ok(WorkspacePlan {
                root,
                base: def.prompt.trim().to_string(),
                base_file: None,
            })
        }
    }
}

/// The sub-agent context section: role, rules and output format.
pub fn context_section(name: &str, leaf: bool) -> String {
    let mut s = format!(
        "# Sub-agent context\n\
         You are `{name}`, a sub-agent. A parent agent gave you one task; the task message is \
         everything you know about it. You cannot see the parent's conversation and the parent \
         sees only your final answer, not your tool calls.\n\
         - Work on your own until the task is done; you cannot ask the parent questions.\n\
         - Stay within the task. Do not start unrelated work.\n\
         - Finish with a complete, self-contained report: what you found or changed, with the \
         file paths, names and numbers the parent needs. Say plainly what you could not do."
    );
    if leaf {
        s.push_str("\n- You are a leaf: you cannot delegate to other agents.");
    }
    s
}

/// The child's full system prompt, with the default project-memory files.
pub fn child_prompt(
    def: &AgentDefinition,
    plan: &WorkspacePlan,
    leaf: bool,
    skills_section: &str,
) -> String {
    child_prompt_with(def, plan, leaf, skills_section, DEFAULT_MEMORY_FILES)
}

/// The child's full system prompt: its base, its context and environment, preloaded skills,
/// and the project memory of its runtime root (the first of `memory_files` found there).
pub fn child_prompt_with<S: AsRef<str>>(
    def: &AgentDefinition,
    plan: &WorkspacePlan,
    leaf: bool,
    skills_section: &str,
    memory_files: &[S],
) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !plan.base.is_empty() {
        parts.push(plan.base.clone());
    }
    parts.push(context_section(&def.name, leaf));
    parts.push(environment_section(&plan.root));
    if !skills_section.is_empty() {
        parts.push(skills_section.to_string());
    }
    // The runtime root's memory, unless it already is the base: never twice.
    if let Some((name, text)) = project_memory(&plan.root, memory_files)
        && plan.base_file.as_deref() != Some(plan.root.join(&name).as_path())
    {
        parts.push(memory_section(&name, &text));
    }
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::definition::WorkspaceSpec;

    fn main_ws() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().canonicalize().unwrap();
        std::fs::write(p.join("AGENTS.md"), "MAIN RULES").unwrap();
        std::fs::create_dir_all(p.join("defs/reviewer")).unwrap();
        std::fs::write(p.join("defs/reviewer/AGENTS.md"), "REVIEWER BASE").unwrap();
        (d, p)
    }

    fn def(mode: WorkspaceMode, path: Option<&str>, body: &str) -> AgentDefinition {
        let mut d = AgentDefinition::new("rev", "reviews");
        d.prompt = body.into();
        d.workspace = WorkspaceSpec {
            mode,
            path: path.map(PathBuf::from),
        };
        d
    }

    fn count(hay: &str, needle: &str) -> usize {
        hay.matches(needle).count()
    }

    #[test]
    fn row_builtin_general_purpose_shares_main_and_gets_agents_md_once() {
        let (_d, main) = main_ws();
        let mut gp = AgentDefinition::new("general-purpose", "x");
        gp.source = DefinitionSource::Builtin;
        let plan = plan_workspace(&gp, &main).unwrap();
        assert_eq!(plan.root, main);
        assert_eq!(plan.base, "");
        let p = child_prompt(&gp, &plan, true, "");
        assert_eq!(count(&p, "MAIN RULES"), 1);
        assert!(p.starts_with("# Sub-agent context"));
    }

    #[test]
    fn row_path_isolated_uses_the_definition_dir_and_its_agents_md_once() {
        let (_d, main) = main_ws();
        let d = def(WorkspaceMode::Isolated, Some("defs/reviewer"), "");
        let plan = plan_workspace(&d, &main).unwrap();
        assert_eq!(plan.root, main.join("defs/reviewer"));
        let p = child_prompt(&d, &plan, true, "");
        assert_eq!(count(&p, "REVIEWER BASE"), 1);
        assert_eq!(count(&p, "MAIN RULES"), 0);
    }

    #[test]
    fn row_path_shared_uses_the_base_and_works_in_main() {
        let (_d, main) = main_ws();
        let d = def(WorkspaceMode::Shared, Some("defs/reviewer"), "");
        let plan = plan_workspace(&d, &main).unwrap();
        assert_eq!(plan.root, main);
        let p = child_prompt(&d, &plan, true, "");
        assert_eq!(count(&p, "REVIEWER BASE"), 1);
        assert_eq!(count(&p, "MAIN RULES"), 1);
    }

    #[test]
    fn row_no_path_isolated_creates_its_own_dir_on_first_use() {
        let (_d, main) = main_ws();
        let d = def(WorkspaceMode::Isolated, None, "BODY PROMPT");
        let dir = main.join(".cadre/agents/rev/workspace");
        assert!(!dir.exists());
        let plan = plan_workspace(&d, &main).unwrap();
        assert_eq!(plan.root, dir);
        assert!(dir.is_dir());
        let p = child_prompt(&d, &plan, true, "");
        assert!(p.starts_with("BODY PROMPT"));
        assert_eq!(count(&p, "MAIN RULES"), 0);
    }

    #[test]
    fn row_no_path_shared_uses_the_body_in_main() {
        let (_d, main) = main_ws();
        let d = def(WorkspaceMode::Shared, None, "BODY PROMPT");
        let plan = plan_workspace(&d, &main).unwrap();
        assert_eq!(plan.root, main);
        let p = child_prompt(&d, &plan, false, "# Skills\nS");
        assert_eq!(count(&p, "BODY PROMPT"), 1);
        assert_eq!(count(&p, "MAIN RULES"), 1);
        assert!(p.contains("# Skills\nS"));
        assert!(!p.contains("you cannot delegate"));
    }

    #[test]
    fn escaping_paths_are_refused() {
        let (_d, main) = main_ws();
        for bad in ["../outside", "defs/../../x", "/etc"] {
            let d = def(WorkspaceMode::Isolated, Some(bad), "");
            assert!(
                matches!(plan_workspace(&d, &main), Err(SetupError::Escapes { .. })),
                "{bad}"
            );
        }
    }
}
