//! The main agent's base system prompt: who it is, how to work, its environment, and the
//! project's `AGENTS.md` (included once).

use std::path::Path;

const IDENTITY: &str = "You are cadre, an agent that does software engineering and research \
work in the user's workspace. Work step by step: look before you change anything, use the tools \
to read, search, edit and run, and verify your changes. Tool calls that do not depend on each \
other can be made in one reply; they run in parallel. Keep answers short and concrete; when you \
are done, say what you did and what you found.";

/// Read `<dir>/AGENTS.md`, if present and not empty.
pub fn read_agents_md(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("AGENTS.md"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The environment section: working directory and platform.
pub fn environment_section(workspace: &Path) -> String {
    format!(
        "# Environment\nWorking directory: {}\nPlatform: {} ({})\nAll file paths are relative to the working directory; you cannot read or write outside it.",
        workspace.display(),
        std::env::consts::OS,
        std::env::consts::ARCH,
    )
}

/// The main agent's base prompt for `workspace`.
pub fn main_system_prompt(workspace: &Path) -> String {
    let mut prompt = format!("{IDENTITY}\n\n{}", environment_section(workspace));
    if let Some(agents) = read_agents_md(workspace) {
        prompt.push_str("\n\n# Project instructions (AGENTS.md)\n");
        prompt.push_str(&agents);
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_md_is_included_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Use tabs.\n").unwrap();
        let p = main_system_prompt(dir.path());
        assert_eq!(p.matches("Use tabs.").count(), 1);
        assert!(p.contains(&dir.path().display().to_string()));
        let empty = tempfile::tempdir().unwrap();
        assert!(!main_system_prompt(empty.path()).contains("AGENTS.md"));
    }
}
