//! cadre's interactive surfaces: the command table shared with the line REPL, and the
//! full-screen terminal UI.
//!
//! The UI is a plain model ([`model::App`]) changed by engine events and keys
//! ([`keys`]) and drawn by pure functions ([`render`]); the shell ([`run`]) is the thin
//! part that owns the terminal, the session and the channels to the engine.

pub mod commands;
pub mod custom_commands;
pub mod first_run;
pub mod keys;
pub mod logs;
pub mod model;
pub mod paste;
pub mod render;
pub mod shell;
pub mod text;

pub use logs::LogWriter;
pub use shell::{
    AgentsListing, SaveAllowRule, TuiError, TuiExit, TuiOptions, restore_terminal, run,
};
