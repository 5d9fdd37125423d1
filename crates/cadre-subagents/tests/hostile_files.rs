//! Definition files written to hurt: huge, deeply nested, not regular files, or odd in ways
//! real files are. Each is refused (or loaded) with a reason that names the real cause, and
//! never stops the good files next to it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod defs_support;

use cadre_llm::ProviderRegistry;
use cadre_subagents::{
    AgentRegistry, MAX_OFFERED_DESCRIPTION, RuntimeConfig, SkillSet, SubagentRuntime, TaskTool,
    ToolSurface, section,
};
use cadre_tools::Tool;
use defs_support::{Ws, error_lines, warnings_of};
use std::collections::HashMap;
use std::sync::Arc;

const GOOD: &str = "---\nname: good\ndescription: fine\n---\nok\n";

fn reason_of(reg: &AgentRegistry, file: &str) -> String {
    error_lines(reg)
        .into_iter()
        .find(|l| l.starts_with(&format!("{file}: ")))
        .unwrap_or_else(|| panic!("no error for {file}: {:?}", error_lines(reg)))
}

#[test]
fn nested_brackets_are_refused_and_the_good_file_loads() {
    let ws = Ws::new();
    ws.write(".claude/agents/good.md", GOOD);
    // 200 KB of `[`: over the front-matter cap.
    let big = format!(
        "---\nname: big\ndescription: {}\n---\n",
        "[".repeat(200_000)
    );
    ws.write(".claude/agents/big.md", &big);
    // Under the cap but nested far deeper than any real file.
    let deep = format!(
        "---\nname: deep\ndescription: d\ntools: {}\n---\n",
        "{a: [".repeat(10_000)
    );
    ws.write(".claude/agents/deep.md", &deep);
    let reg = ws.registry();
    assert!(reg.get("good").is_some());
    assert_eq!(reg.names(), ["general-purpose", "good"]);
    assert!(
        reason_of(&reg, "big.md").contains("front matter is larger than 64 KiB"),
        "{:?}",
        error_lines(&reg)
    );
    assert!(
        reason_of(&reg, "deep.md").contains("nests lists and mappings more than 32 levels"),
        "{:?}",
        error_lines(&reg)
    );
}

#[test]
fn huge_sparse_files_and_fifos_are_refused_without_reading() {
    let ws = Ws::new();
    ws.write(".cadre/agents/good.md", GOOD);
    let sparse = ws.root().join(".cadre/agents/sparse.md");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(3 << 29) // 1.5 GiB, no blocks
        .unwrap();
    let fifo = ws.root().join(".cadre/agents/pipe.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // Opening a FIFO without a writer would block for ever; this must return.
    let reg = ws.registry();
    assert!(reg.get("good").is_some());
    assert_eq!(
        reason_of(&reg, "sparse.md"),
        "sparse.md: file too large (more than 1024 KiB)"
    );
    assert_eq!(
        reason_of(&reg, "pipe.md"),
        "pipe.md: not a regular file (it is a FIFO)"
    );
}

#[test]
fn the_colon_repair_keeps_comments_as_comments() {
    let ws = Ws::new();
    ws.write(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Use this when: reviewing\nmodel: inherit # same as parent\ntools: Read, Grep, Bash # no writes\n---\nReview.\n",
    );
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    let d = reg.get("reviewer").unwrap();
    assert_eq!(d.model, None, "inherit, not `inherit # same as parent`");
    assert_eq!(
        d.tools.as_deref(),
        Some(&["read_file".to_string(), "grep".into(), "bash".into()][..])
    );
    assert_eq!(d.description, "Use this when: reviewing");
}

#[test]
fn errors_after_the_repair_name_the_real_cause() {
    let ws = Ws::new();
    ws.write(
        ".claude/agents/twice.md",
        "---\nname: twice\ndescription: Use this when: reviewing\nmodel: inherit\nmodel: sonnet\n---\n",
    );
    ws.write(
        ".claude/agents/painted.md",
        "---\nname: painted\ndescription: Use this when: painting\ncolor: red\ncolor: blue\n---\n",
    );
    let reg = ws.registry();
    assert_eq!(
        reason_of(&reg, "twice.md"),
        "twice.md: `model` is given more than once; keep one"
    );
    let w = warnings_of(&reg, "painted");
    assert!(
        w.iter()
            .any(|w| w.contains("`color` is given more than once")),
        "{w:?}"
    );
}

#[test]
fn long_descriptions_are_cut_for_the_parent_only() {
    let ws = Ws::new();
    let long = "word ".repeat(5_000);
    ws.write(
        ".cadre/agents/long.md",
        &format!("---\nname: long\ndescription: {long}\n---\nx\n"),
    );
    let reg = ws.registry();
    let d = reg.get("long").unwrap();
    assert_eq!(d.description, long.trim(), "kept whole");
    let offered = d.offered_description().into_owned();
    assert_eq!(offered.chars().count(), MAX_OFFERED_DESCRIPTION + 1);
    assert!(offered.ends_with('…'));
    assert!(
        warnings_of(&reg, "long")
            .iter()
            .any(|w| w.contains("24999 characters") && w.contains("first 1000")),
        "{:?}",
        warnings_of(&reg, "long")
    );
    // What the parent model is offered stays small: the task tool and the prompt section.
    let runtime = SubagentRuntime::new(
        RuntimeConfig::new(
            ws.root(),
            Arc::new(cadre_store::MemoryStore::new(cadre_store::NodeId::new("n"))),
        ),
        reg.clone(),
        SkillSet::new(),
        Arc::new(ProviderRegistry::new(HashMap::new(), "openai")),
    );
    let tool = TaskTool::new(&runtime).definition().description;
    assert!(tool.len() < 3_000, "{} bytes", tool.len());
    assert!(tool.contains(&offered));
    // The lifecycle surface lists the agents in the prompt section instead.
    let listed = section(runtime.registry(), ToolSurface::Lifecycle);
    assert!(listed.len() < 3_000, "{} bytes", listed.len());
    assert!(listed.contains(&offered));
}

#[test]
fn thousands_of_odd_keys_give_a_few_warnings() {
    let ws = Ws::new();
    let mut text = String::from("---\nname: many\ndescription: d\n");
    for k in 0..90 {
        text.push_str(&format!("k{k}: a: b\n"));
    }
    text.push_str(&format!(
        "tools: {}\n---\nBody.\n",
        (0..500)
            .map(|t| format!("tool{t}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    ws.write(".claude/agents/many.md", &text);
    let reg = ws.registry();
    assert!(reg.errors().is_empty(), "{:?}", reg.errors());
    let w = warnings_of(&reg, "many");
    assert!(w.len() <= 20, "{} warnings", w.len());
    assert!(
        w.iter()
            .any(|w| w.contains("the values of `k0`, `k1`")
                && w.contains("and 82 more contain `: `")),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|w| w.starts_with("unknown keys `k0`, `k1`") && w.contains("and 82 more")),
        "{w:?}"
    );
    assert!(
        w.last()
            .is_some_and(|w| w.ends_with("more warnings not shown")),
        "{w:?}"
    );
}

#[test]
fn thousands_of_top_level_keys_are_refused_and_the_neighbour_loads() {
    let ws = Ws::new();
    let keys: String = (0..2000).map(|k| format!("k{k}: a: b\n")).collect();
    ws.write(
        ".claude/agents/many.md",
        &format!("---\nname: many\ndescription: d\n{keys}---\nBody.\n"),
    );
    ws.write(
        ".claude/agents/good.md",
        "---\nname: good\ndescription: fine\n---\nBody.\n",
    );
    let reg = ws.registry();
    assert!(reg.get("good").is_some());
    assert!(reg.get("many").is_none());
    assert!(
        reg.errors().iter().any(|e| {
            let e = e.to_string();
            e.contains("many.md") && e.contains("more than 100 top-level keys")
        }),
        "{:?}",
        reg.errors()
    );
}

#[test]
fn a_large_directory_loads_in_order_on_several_threads() {
    let ws = Ws::new();
    for i in 0..400 {
        ws.write(
            &format!(".claude/agents/a{i:03}.md"),
            &format!("---\nname: agent-{i}\ndescription: number {i}\n---\nx\n"),
        );
    }
    // Same name in one directory: the later file (by name) wins, whichever thread read it.
    ws.write(
        ".claude/agents/a000-first.md",
        "---\nname: twin\ndescription: first\n---\nx\n",
    );
    ws.write(
        ".claude/agents/z-last.md",
        "---\nname: twin\ndescription: last\n---\nx\n",
    );
    ws.write(".claude/agents/a200-broken.md", "no front matter\n");
    let reg = ws.registry();
    assert_eq!(reg.len(), 402, "400 agents, the twin and general-purpose");
    assert_eq!(reg.get("twin").unwrap().description, "last");
    assert_eq!(error_lines(&reg).len(), 1, "{:?}", error_lines(&reg));
    assert!(reason_of(&reg, "a200-broken.md").contains("no front matter"));
}
