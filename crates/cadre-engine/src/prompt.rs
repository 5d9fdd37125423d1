//! The main agent's base system prompt: who it is, how to work, its environment, and the
//! project's memory file (`AGENTS.md`, else `CLAUDE.md`; included once).

use std::path::Path;

const IDENTITY: &str = "You are cadre, an agent that does software engineering and research \
work in the user's workspace. Work step by step: look before you change anything, use the tools \
to read, search, edit and run, and verify your changes. Tool calls that do not depend on each \
other can be made in one reply; they run in parallel. Keep answers short and concrete; when you \
are done, say what you did and what you found.";

/// Project-memory files (`AGENTS.md`, `CLAUDE.md`) larger than this are left out, with a
/// warning: the whole file would go into every model call.
pub const MAX_MEMORY_BYTES: u64 = 256 * 1024;

/// Read a project-memory file: a regular UTF-8 file of at most [`MAX_MEMORY_BYTES`] (never
/// read beyond that), trimmed. `None` when it is missing or empty; a file that cannot be used
/// is logged and left out.
pub fn read_memory_file(path: &Path) -> Option<String> {
    match cadre_tools::read_to_string_capped(path, MAX_MEMORY_BYTES) {
        Ok(text) => Some(text.trim().to_string()).filter(|s| !s.is_empty()),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            tracing::warn!("project memory left out: {e}");
            None
        }
    }
}

/// Read `<dir>/AGENTS.md`, if present and not empty.
pub fn read_agents_md(dir: &Path) -> Option<String> {
    read_memory_file(&dir.join("AGENTS.md"))
}

/// The project-memory files looked for by default, in order: the first one present and not
/// empty is used, so `CLAUDE.md` counts only where there is no `AGENTS.md`.
pub const DEFAULT_MEMORY_FILES: &[&str] = &["AGENTS.md", "CLAUDE.md"];

/// The project memory of `dir`: the first of `files` (names relative to `dir`) that is
/// present and not empty, as (its name, its text).
pub fn project_memory<S: AsRef<str>>(dir: &Path, files: &[S]) -> Option<(String, String)> {
    files.iter().find_map(|name| {
        let name = name.as_ref();
        read_memory_file(&dir.join(name)).map(|text| (name.to_string(), text))
    })
}

/// The prompt section holding a project memory.
pub fn memory_section(name: &str, text: &str) -> String {
    format!("# Project instructions ({name})\n{text}")
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

/// The main agent's base prompt for `workspace`, with the default memory files.
pub fn main_system_prompt(workspace: &Path) -> String {
    main_system_prompt_with(workspace, DEFAULT_MEMORY_FILES)
}

/// The main agent's base prompt for `workspace`, with the first of `memory_files` found.
pub fn main_system_prompt_with<S: AsRef<str>>(workspace: &Path, memory_files: &[S]) -> String {
    let mut prompt = format!("{IDENTITY}\n\n{}", environment_section(workspace));
    if let Some((name, text)) = project_memory(workspace, memory_files) {
        prompt.push_str("\n\n");
        prompt.push_str(&memory_section(&name, &text));
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

    #[test]
    fn claude_md_counts_only_without_agents_md() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("CLAUDE.md"), "Run make test.\n").unwrap();
        let p = main_system_prompt(dir.path());
        assert_eq!(p.matches("Run make test.").count(), 1);
        assert!(p.contains("# Project instructions (CLAUDE.md)"));
        assert!(!main_system_prompt_with(dir.path(), &["AGENTS.md"]).contains("make test"));
        std::fs::write(dir.path().join("AGENTS.md"), "Use tabs.\n").unwrap();
        let p = main_system_prompt(dir.path());
        assert!(p.contains("Use tabs.") && !p.contains("make test"), "{p}");
        // Too large: left out, never read whole.
        let big = dir.path().join("AGENTS.md");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let p = main_system_prompt(dir.path());
        assert!(
            p.contains("Run make test."),
            "falls through to CLAUDE.md: {p}"
        );
    }
}
