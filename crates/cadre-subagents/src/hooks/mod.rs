//! Claude-Code-compatible hooks: handlers configured in settings files, `config.toml` and
//! agent files, run at the points of an agent's life Claude Code names (before and after
//! tool calls, when a prompt is submitted, when the model stops, when children start and
//! stop, when an approval is asked, before compaction, when a session ends, on a team's
//! board), in the main agent and in every child. See `docs/hooks.md`.

mod claude;
mod event;
mod lifecycle;
mod matcher;
mod outcome;
mod runner;
mod settings;

pub use claude::ClaudeHooks;
pub use event::HookEvent;
pub use lifecycle::{BoardTask, PERMISSION_HOOK_POLICY};
pub use matcher::{Matcher, MatcherError, claude_name, tool_spellings};
pub use outcome::{Outcome, Permission};
pub use runner::{Ending, HandlerRun, MAX_OUTPUT_CHARS, RunnerEnv};
pub use settings::{Handler, HandlerKind, HookEntry, HookSet, HookSource, standard_sources};
