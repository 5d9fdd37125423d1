//! Permissions only narrow, at every depth: a child's tools come from what its parent may
//! call (allowlist, deny list, delegation), never from the main agent's; and a call to a
//! tool the calling agent was never granted is refused even when its registry offers it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_engine::Agent;
use cadre_subagents::{AgentDefinition, DELEGATION_TOOLS, ToolSurface};
use cadre_tools::builtin::builtin_tools;
use cadre_types::{EndState, Message};
use common::*;
use std::sync::Arc;

const GP: &str = "general-purpose";

/// A declared agent with an allowlist, a deny list and `can_delegate`.
fn def(name: &str, tools: Option<&[&str]>, deny: &[&str], can_delegate: bool) -> AgentDefinition {
    let mut d = worker(name);
    d.tools = tools.map(|t| t.iter().map(std::string::ToString::to_string).collect());
    d.disallowed_tools = deny.iter().map(std::string::ToString::to_string).collect();
    d.can_delegate = can_delegate;
    d
}

/// A script in which each agent of `chain` delegates to the next with `task` and reports
/// what it got back; the last one calls `task` too when `last_tries` (to see the refusal).
fn chain_script(chain: &[&str], last_tries: bool) -> String {
    let mut s = String::new();
    let mut agents = vec!["main"];
    agents.extend_from_slice(chain);
    for (i, agent) in agents.iter().enumerate() {
        s.push_str(&format!("[[scripts]]\nagent = \"{agent}\"\n"));
        let next = agents
            .get(i + 1)
            .copied()
            .or(last_tries.then_some("worker"));
        if let Some(next) = next {
            s.push_str(&format!(
                "[[scripts.turns]]\ntool_calls = [{{ name = \"task\", args = {{ subagent_type = \"{next}\", prompt = \"from {agent}\" }} }}]\n"
            ));
        }
        s.push_str(&format!(
            "[[scripts.turns]]\ntext = \"{agent} got: {{{{tool_results}}}}\"\n"
        ));
    }
    s
}

/// The tool names offered in the first model request of `agent`.
fn offered(f: &Fixture, agent: &str) -> Vec<String> {
    let reqs = f.rec.of(agent);
    let first = reqs
        .first()
        .unwrap_or_else(|| panic!("{agent} made no model call"));
    first.tools.iter().map(|t| t.name.clone()).collect()
}

fn with_delegation(tools: &[&str], minus: &[&str]) -> Vec<String> {
    tools
        .iter()
        .chain(DELEGATION_TOOLS.iter())
        .filter(|t| !minus.contains(t))
        .map(std::string::ToString::to_string)
        .collect()
}

fn names(tools: &[&str]) -> Vec<String> {
    tools.iter().map(std::string::ToString::to_string).collect()
}

/// One chain: its definitions, the agents from depth 1 down, what each is offered, and a
/// text the last agent's attempt to delegate must get back (if it tries).
struct Case {
    label: &'static str,
    defs: Vec<AgentDefinition>,
    chain: Vec<&'static str>,
    expect: Vec<Vec<String>>,
    refusal: Option<&'static str>,
}

#[tokio::test]
async fn every_childs_tools_are_a_subset_of_its_parents_at_depths_one_to_three() {
    // The main agent has echo, write, hang and the seven delegation tools.
    let cases = vec![
        Case {
            label: "an allowlisted delegator's general-purpose mirrors the delegator",
            defs: vec![def("reader", Some(&["echo"]), &[], true)],
            chain: vec!["reader", GP],
            expect: vec![with_delegation(&["echo"], &[]), names(&["echo"])],
            refusal: None,
        },
        Case {
            label: "a deny list at depth 1 holds at depths 2 and 3",
            defs: vec![
                def("d1", None, &["write"], true),
                def("d2", None, &[], true),
            ],
            chain: vec!["d1", "d2", GP],
            expect: vec![
                with_delegation(&["echo", "hang"], &[]),
                with_delegation(&["echo", "hang"], &[]),
                names(&["echo", "hang"]),
            ],
            refusal: None,
        },
        Case {
            label: "allowlists intersect, and a denied delegation tool is not passed down",
            defs: vec![
                def("d1", Some(&["echo", "write"]), &["agent_spawn"], true),
                def("d2", Some(&["write", "hang"]), &[], true),
                def("d3", None, &[], false),
            ],
            chain: vec!["d1", "d2", "d3"],
            expect: vec![
                with_delegation(&["echo", "write"], &["agent_spawn"]),
                with_delegation(&["write"], &["agent_spawn"]),
                names(&["write"]),
            ],
            refusal: Some("task is not available: d3 is a leaf sub-agent and cannot delegate"),
        },
        Case {
            label: "a delegator at the depth cap gets no delegation tools and is told why",
            defs: vec![
                def("d1", None, &[], true),
                def("d2", None, &[], true),
                def("d3", None, &[], true),
            ],
            chain: vec!["d1", "d2", "d3"],
            expect: vec![
                with_delegation(&["echo", "write", "hang"], &[]),
                with_delegation(&["echo", "write", "hang"], &[]),
                names(&["echo", "write", "hang"]),
            ],
            refusal: Some("maximum spawn depth exceeded (max=3)"),
        },
        Case {
            label: "a leaf with an allowlist at depth 1",
            defs: vec![def("leaf", Some(&["echo", "web_fetch"]), &[], false)],
            chain: vec!["leaf"],
            expect: vec![names(&["echo"])],
            refusal: Some("task is not available: leaf is a leaf sub-agent and cannot delegate"),
        },
    ];
    for case in cases {
        let label = case.label;
        let mut defs = case.defs;
        defs.push(worker("worker"));
        let f = fixture(
            &chain_script(&case.chain, case.refusal.is_some()),
            Options {
                defs,
                ..Default::default()
            },
        );
        let (out, _s) = f.run("go").await;
        assert_eq!(out.state, EndState::Completed, "{label}: {}", out.output);
        let mut parent = offered(&f, "main");
        for (agent, want) in case.chain.iter().zip(&case.expect) {
            let got = offered(&f, agent);
            assert_eq!(&got, want, "{label}: {agent}");
            for t in &got {
                assert!(
                    parent.contains(t),
                    "{label}: {agent} got {t}, which its parent lacks"
                );
            }
            parent = got;
        }
        if let Some(refusal) = case.refusal {
            assert!(out.output.contains(refusal), "{label}: {}", out.output);
            assert!(
                f.rec.of("worker").is_empty(),
                "{label}: no child was started"
            );
        }
    }
}

/// main → reader ([read_file], can delegate) → general-purpose, which tries bash.
fn widening_script(surface: ToolSurface) -> String {
    let (main_call, reader_call) = match surface {
        ToolSurface::Lifecycle => (
            r#"{ name = "agent_spawn", args = { agent_id = "reader", task = "read it", timeout_seconds = 60 } }"#,
            r#"{ name = "agent_spawn", args = { agent_id = "general-purpose", task = "write it", timeout_seconds = 60 } }"#,
        ),
        _ => (
            r#"{ name = "task", args = { subagent_type = "reader", prompt = "read it" } }"#,
            r#"{ name = "task", args = { subagent_type = "general-purpose", prompt = "write it" } }"#,
        ),
    };
    format!(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{main_call}]
        [[scripts.turns]]
        text = "main: {{{{tool_results}}}}"
        [[scripts]]
        agent = "reader"
        [[scripts.turns]]
        tool_calls = [{reader_call}]
        [[scripts.turns]]
        text = "reader: {{{{tool_results}}}}"
        [[scripts]]
        agent = "general-purpose"
        [[scripts.turns]]
        tool_calls = [{{ name = "bash", args = {{ command = "echo x > widened.txt" }} }}]
        [[scripts.turns]]
        text = "gp: {{{{tool_results}}}}"
        "#
    )
}

#[tokio::test]
async fn a_read_only_delegator_cannot_widen_through_general_purpose_on_either_surface() {
    for surface in [ToolSurface::Task, ToolSurface::Lifecycle] {
        let f = fixture(
            &widening_script(surface),
            Options {
                defs: vec![def("reader", Some(&["read_file"]), &[], true)],
                tweak: Box::new(move |c| {
                    c.base_tools = builtin_tools();
                    c.surface = surface;
                }),
                ..Default::default()
            },
        );
        let (out, _s) = f.run("go").await;
        assert_eq!(
            out.state,
            EndState::Completed,
            "{surface:?}: {}",
            out.output
        );
        assert_eq!(f.rec.of("general-purpose").len(), 2, "{surface:?}: gp ran");
        assert!(
            !f.ws.join("widened.txt").exists(),
            "{surface:?}: general-purpose ran bash under a read-only delegator: {}",
            out.output
        );
        assert_eq!(offered(&f, "general-purpose"), names(&["read_file"]));
        assert!(
            out.output.contains("unknown tool `bash`"),
            "{surface:?}: {}",
            out.output
        );
    }
}

#[tokio::test]
async fn a_tool_outside_the_grant_is_refused_even_when_a_wrongly_built_registry_offers_it() {
    let f = fixture(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "sneaky", prompt = "go" } }]
        [[scripts.turns]]
        text = "main: {{tool_results}}"
        [[scripts]]
        agent = "sneaky"
        [[scripts.turns]]
        tool_calls = [
          { name = "write", args = { text = "forbidden" } },
          { name = "echo", args = { text = "allowed" } },
        ]
        [[scripts.turns]]
        text = "sneaky: {{tool_results}}"
        "#,
        Options {
            defs: vec![{
                let mut d = def("sneaky", Some(&["echo"]), &[], false);
                // A factory that builds its agent wrongly on purpose: it adds `write`, a
                // tool the parent has but did not grant this child.
                d.factory = Some(Arc::new(|input: &cadre_subagents::FactoryInput| {
                    let tools = input.tools.clone().with(Arc::new(TestTool("write")));
                    Ok(Agent::builder("sneaky", input.model.clone())
                        .system_prompt(input.system_prompt.clone())
                        .tools(tools)
                        .build())
                }));
                d
            }],
            ..Default::default()
        },
    );
    let (out, _s) = f.run("go").await;
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    // The registry holds `write`, but the model is offered only what the run was granted,
    // and the call it makes anyway is refused.
    let offered = offered(&f, "sneaky");
    assert_eq!(offered, names(&["echo"]));
    let second = &f.rec.of("sneaky")[1];
    let results: Vec<(String, bool)> = second
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec![
            (
                "`write` is not available to sneaky: it was not granted to this run".to_string(),
                true
            ),
            ("echo:allowed".to_string(), false),
        ]
    );
}

#[tokio::test]
async fn with_max_depth_zero_no_delegation_tool_is_offered_and_a_call_gets_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recording(
        r#"
        [[scripts]]
        agent = "main"
        [[scripts.turns]]
        tool_calls = [{ name = "task", args = { subagent_type = "general-purpose", prompt = "x" } }]
        [[scripts.turns]]
        text = "main: {{tool_results}}"
        "#,
    );
    let harness = cadre_subagents::Harness::builder()
        .model("rec:test")
        .provider_instance("rec", rec.clone())
        .workspace(dir.path())
        .without_agent_files()
        .in_memory_sessions()
        .runtime_config(|c| c.max_depth = 0)
        .build()
        .unwrap();
    let out = harness.run("go").await.unwrap();
    assert_eq!(out.state, EndState::Completed, "{}", out.output);
    let reqs = rec.of("main");
    for r in &reqs {
        let tools: Vec<&str> = r.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(
            tools.iter().all(|t| !DELEGATION_TOOLS.contains(t)),
            "{tools:?}"
        );
        assert!(tools.contains(&"read_file"), "{tools:?}");
        assert!(!r.system.contains("# Sub-agents"), "{}", r.system);
    }
    assert_eq!(
        out.output, "main: maximum spawn depth exceeded (max=0)",
        "the call gets the cap, not `unknown tool`"
    );
    assert!(rec.of(GP).is_empty());
}

#[tokio::test]
async fn parents_with_different_tools_never_share_a_built_child() {
    let f = fixture(
        "",
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    );
    let s = f.session();
    let parent_with = |tools: cadre_tools::ToolRegistry| {
        let mut p = f
            .runtime
            .top_level_parent(f.run_context(&s), f.cancel.clone());
        p.tools = Arc::new(tools);
        p
    };
    let tools_of = |child: &cadre_subagents::Child| match &child.runner {
        cadre_subagents::ChildRunner::Local { agent, .. } => agent
            .config()
            .tools
            .names()
            .iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>(),
        _ => panic!("a local child"),
    };
    let all = base_tools();
    let echo_only = all.filtered(|t| t.name() == "echo");
    let a = f
        .runtime
        .create_child("worker", &parent_with(all.clone()))
        .unwrap();
    let b = f
        .runtime
        .create_child("worker", &parent_with(echo_only))
        .unwrap();
    let c = f.runtime.create_child("worker", &parent_with(all)).unwrap();
    assert_eq!(tools_of(&a), names(&["echo", "write", "hang"]));
    assert_eq!(
        tools_of(&b),
        names(&["echo"]),
        "not the first parent's cached child"
    );
    assert_eq!(tools_of(&c), tools_of(&a));
}
