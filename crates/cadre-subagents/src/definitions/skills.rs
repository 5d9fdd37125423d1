//! Skills: `SKILL.md` files (front matter with `name` and `description`, then instructions)
//! found under `skills/`, `.claude/skills/` and `.cadre/skills/` of the workspace. The main
//! prompt gets a short index; a sub-agent definition can preload whole skills.

use crate::definitions::definition_file::is_valid_name;
use crate::definitions::frontmatter::{self, scalar_text};
use crate::definitions::loader::{LoadError, read_text};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Skill directories relative to the workspace, from low to high precedence.
pub const SKILL_DIRS: [&str; 3] = ["skills", ".claude/skills", ".cadre/skills"];

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name (front matter `name`, or the directory name).
    pub name: String,
    /// When to use it.
    pub description: String,
    /// The instructions (the Markdown body).
    pub body: String,
    /// The `SKILL.md` file.
    pub path: PathBuf,
}

/// The skills of a workspace, by name. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    skills: BTreeMap<String, Skill>,
    errors: Vec<LoadError>,
    workspace: Option<PathBuf>,
}

fn parse_skill(path: &Path, dir_name: &str) -> Result<Skill, String> {
    let text = read_text(path).map_err(|e| e.to_string())?;
    let doc = frontmatter::parse(&text).map_err(|e| e.to_string())?;
    let field = |key: &str| {
        doc.front
            .get(key)
            .and_then(scalar_text)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let name = field("name").unwrap_or_else(|| dir_name.to_string());
    if !is_valid_name(&name) {
        return Err(format!(
            "`{name}` is not a valid skill name (lowercase letters, digits, `-` and `_`)"
        ));
    }
    let description = field("description").ok_or_else(|| "missing `description`".to_string())?;
    Ok(Skill {
        name,
        description,
        body: doc.body,
        path: path.to_path_buf(),
    })
}

impl SkillSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Load every `<dir>/SKILL.md` under the skill directories of `workspace`; a skill in a
    /// later directory replaces one of the same name in an earlier one. Broken files are
    /// collected in [`errors`](Self::errors).
    pub fn discover(workspace: &Path) -> Self {
        let mut set = SkillSet {
            workspace: Some(workspace.to_path_buf()),
            ..Self::default()
        };
        for rel in SKILL_DIRS {
            let Ok(entries) = std::fs::read_dir(workspace.join(rel)) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            for dir in dirs {
                let file = dir.join("SKILL.md");
                if !file.is_file() {
                    continue;
                }
                let dir_name = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                match parse_skill(&file, &dir_name) {
                    Ok(skill) => set.insert(skill),
                    Err(reason) => set.errors.push(LoadError { path: file, reason }),
                }
            }
        }
        set
    }

    /// Add (or replace) a skill.
    pub fn insert(&mut self, skill: Skill) {
        if let Some(old) = self.skills.get(&skill.name) {
            tracing::info!(skill = %skill.name, new = %skill.path.display(), old = %old.path.display(), "skill overridden");
        }
        self.skills.insert(skill.name.clone(), skill);
    }

    /// A skill by name.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// True when a skill has this name.
    pub fn contains(&self, name: &str) -> bool {
        self.skills.contains_key(name)
    }

    /// All skills, ordered by name.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    /// Number of skills.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// `SKILL.md` files that could not be loaded.
    pub fn errors(&self) -> &[LoadError] {
        &self.errors
    }

    fn shown_path(&self, path: &Path) -> String {
        crate::definitions::paths::display_path(path, self.workspace.as_deref())
    }

    /// A short `# Skills` section for the main prompt: one line per skill with its
    /// description and file. `None` when there are no skills.
    pub fn index_section(&self) -> Option<String> {
        if self.skills.is_empty() {
            return None;
        }
        let mut out = String::from(
            "# Skills\n\nThese skills hold instructions for particular jobs. When a job matches one, read its file first and follow it.\n\n",
        );
        for s in self.skills.values() {
            let desc = s
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            out.push_str(&format!(
                "- {}: {} ({})\n",
                s.name,
                desc,
                self.shown_path(&s.path)
            ));
        }
        Some(out)
    }

    /// The bodies of the named skills, as one prompt section, and the names that do not
    /// exist. The section is empty when no named skill exists.
    pub fn preload(&self, names: &[String]) -> (String, Vec<String>) {
        let mut out = String::new();
        let mut missing: Vec<String> = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for name in names {
            if seen.contains(&name.as_str()) {
                continue;
            }
            seen.push(name);
            match self.skills.get(name) {
                Some(s) => {
                    if out.is_empty() {
                        out.push_str("# Preloaded skills\n");
                    }
                    out.push_str(&format!("\n## Skill: {}\n\n{}\n", s.name, s.body.trim()));
                }
                None => missing.push(name.clone()),
            }
        }
        (out, missing)
    }
}
