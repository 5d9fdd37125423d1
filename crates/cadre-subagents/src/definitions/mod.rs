//! Where definitions come from and what they say: the definition model, the file formats
//! (Claude Code, OpenCode, Codex, skills), the front-matter parser, the directory loader and
//! the registry that merges them.

pub mod agent_hooks;
pub(crate) mod codex_file;
pub(crate) mod definition;
pub(crate) mod definition_file;
pub mod error;
pub mod frontmatter;
pub mod loader;
pub mod model_spec;
pub(crate) mod opencode;
pub(crate) mod paths;
pub(crate) mod registry;
pub(crate) mod skills;
pub(crate) mod team_keys;
pub mod tool_names;
pub(crate) mod writable;
