//! Front matter and definition files: any bytes must give a document or an error, never a
//! panic, and quickly (`scripts/fuzz.sh` runs this with a per-input timeout, so a slow input
//! counts as a crash).
#![no_main]

use cadre_subagents::definitions::frontmatter;
use cadre_subagents::{DirKind, ParseContext, parse_definition};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = frontmatter::parse(text);
    let aliases = HashMap::new();
    for kind in [DirKind::Claude, DirKind::Subagents, DirKind::OpenCode, DirKind::Gemini] {
        let cx = ParseContext {
            kind,
            workspace: None,
            aliases: &aliases,
            extra_tools: &[],
            providers: None,
        };
        let _ = parse_definition(Path::new("fuzz.md"), text, &cx);
    }
});
