//! Codex role files (`.codex/agents/*.toml`): any bytes must give a definition or an error,
//! never a panic, and quickly (`scripts/fuzz.sh` counts a slow input as a crash).
#![no_main]

use cadre_subagents::definitions::loader::parse_text;
use cadre_subagents::{DirKind, ParseContext};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let aliases = HashMap::new();
    let cx = ParseContext {
        kind: DirKind::Codex,
        workspace: None,
        aliases: &aliases,
        extra_tools: &[],
        providers: None,
    };
    let _ = parse_text(Path::new("fuzz.toml"), text, &cx);
});
