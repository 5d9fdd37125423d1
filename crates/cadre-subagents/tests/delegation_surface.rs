//! The delegation surface is tied to what tools say they are: every tool the runtime offers
//! for delegation is of the delegation kind and among the declared delegation tools, a
//! child at the depth cap inherits none of them (a call to one is refused with the cap, not
//! answered as an unknown tool), and every tool has a row in the docs' tool table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_subagents::{DELEGATION_TOOL_INFO, DELEGATION_TOOLS, ToolSurface};
use cadre_tools::ToolKind;
use cadre_types::EndState;
use common::*;

/// A runtime whose top-level agent has `surface`, children of `defs`, and the cap `depth`.
fn with_surface(script: &str, surface: ToolSurface, depth: u32) -> Fixture {
    let mut leaf = worker("leaf");
    // May delegate by its definition: only the depth cap makes it a leaf.
    leaf.can_delegate = true;
    fixture(
        script,
        Options {
            defs: vec![leaf],
            tweak: Box::new(move |c| {
                c.surface = surface;
                c.max_depth = depth;
            }),
            ..Default::default()
        },
    )
}

#[test]
fn every_tool_of_the_surface_is_a_declared_delegation_tool() {
    for surface in [ToolSurface::Task, ToolSurface::Lifecycle, ToolSurface::Both] {
        let f = with_surface("", surface, 2);
        let offered = f.runtime.delegation_tools();
        assert!(!offered.is_empty(), "{surface:?}");
        for t in offered.iter() {
            assert_eq!(t.kind(), ToolKind::Delegation, "{}", t.name());
            assert!(
                DELEGATION_TOOLS.contains(&t.name()),
                "{} is offered for delegation but missing from the delegation tools",
                t.name()
            );
        }
        if surface == ToolSurface::Both {
            assert_eq!(offered.names(), DELEGATION_TOOLS);
        }
    }
    assert!(
        DELEGATION_TOOL_INFO
            .iter()
            .all(|i| i.kind == ToolKind::Delegation)
    );
}

#[tokio::test]
async fn a_leaf_at_the_depth_cap_inherits_no_tool_of_the_delegation_surface() {
    // The real surface, built the way a top-level agent gets it.
    let surface: Vec<String> = with_surface("", ToolSurface::Both, 1)
        .runtime
        .delegation_tools()
        .names()
        .into_iter()
        .map(str::to_string)
        .collect();
    let calls: Vec<String> = surface
        .iter()
        .map(|n| format!("{{ name = \"{n}\", args = {{}} }}"))
        .collect();
    let script = format!(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{{ name = "task", args = {{ subagent_type = "leaf", prompt = "go" }} }}]
        [[scripts.turns]]
        text = "main got: {{{{tool_results}}}}"
        [[scripts]]
        agent = "leaf"
        [[scripts.turns]]
        tool_calls = [{}]
        [[scripts.turns]]
        text = "leaf got: {{{{tool_results}}}}"
        "#,
        calls.join(", ")
    );
    let f = with_surface(&script, ToolSurface::Both, 1);
    let (out, _s) = f.run("start").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    let leaf = f.rec.of("leaf");
    let first = leaf.first().expect("the leaf made a model call");
    let offered: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    for name in &surface {
        assert!(
            !offered.contains(&name.as_str()),
            "the leaf inherited {name}: {offered:?}"
        );
    }
    // Each call is answered with the cap: the tool was withheld from the leaf, not merely
    // absent (which would say `unknown tool` and let a leaked tool go unnoticed).
    let refusals = out.output.matches("maximum spawn depth exceeded").count();
    assert_eq!(refusals, surface.len(), "{}", out.output);
    assert!(!out.output.contains("unknown tool"), "{}", out.output);
}

/// The tool names in the first column of the tool tables (those headed `| tool |`) in
/// `docs/tools.md`.
fn documented_tools() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/tools.md");
    let text = std::fs::read_to_string(path).unwrap();
    let mut in_table = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("| tool |") {
            in_table = true;
        } else if !line.starts_with('|') {
            in_table = false;
        } else if in_table
            && let Some((name, _)) = line.strip_prefix("| `").and_then(|l| l.split_once('`'))
        {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn every_tool_has_a_row_in_the_docs_tool_table() {
    let documented = documented_tools();
    let every = cadre_tools::builtin::BUILTIN_TOOLS
        .iter()
        .chain(cadre_tools::builtin::CONFIGURED_TOOLS.iter())
        .chain(DELEGATION_TOOL_INFO.iter())
        .chain(cadre_subagents::TEAM_TOOL_INFO.iter());
    for info in every {
        assert!(
            documented.iter().any(|d| d == info.name),
            "{} has no row in docs/tools.md (rows: {documented:?})",
            info.name
        );
    }
}

#[test]
fn every_foreign_name_is_in_the_docs_table_of_names() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/agents.md");
    let text = std::fs::read_to_string(path).unwrap();
    let mut in_table = false;
    let mut documented: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("| written | harness | becomes |") {
            in_table = true;
        } else if !line.starts_with('|') {
            in_table = false;
        } else if in_table {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (Some(written), Some(becomes)) = (cells.get(1), cells.get(3)) else {
                continue;
            };
            let target = becomes.split('`').nth(1).unwrap_or("").to_string();
            for name in written.split('`').skip(1).step_by(2) {
                documented.push((name.to_string(), target.clone()));
            }
        }
    }
    let every = cadre_tools::builtin::BUILTIN_TOOLS
        .iter()
        .chain(cadre_tools::builtin::CONFIGURED_TOOLS.iter())
        .chain(DELEGATION_TOOL_INFO.iter());
    for info in every {
        for foreign in info.foreign_names {
            assert!(
                documented
                    .iter()
                    .any(|(n, t)| n == foreign && t == info.name),
                "`{foreign}` (for {}) is not in the tool names table of docs/agents.md",
                info.name
            );
        }
    }
}
