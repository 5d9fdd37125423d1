//! The delegation tools' argument schemas, derived from their argument types: each keeps its
//! arguments, required fields and descriptions, carries the defaults the code applies, and
//! reaches providers as written (provider normalisation leaves it unchanged); arguments that
//! do not decode are an `invalid arguments` error naming what was wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_llm::normalize_tool_schema;
use common::*;
use serde_json::json;

const SCRIPT: &str = "[[turns]]\ntext = \"done\"\n";

fn fixture_with_worker() -> Fixture {
    fixture(
        SCRIPT,
        Options {
            defs: vec![worker("worker")],
            ..Default::default()
        },
    )
}

#[test]
fn team_tool_schemas_are_clean_and_reach_providers_as_written() {
    let f = fixture(
        SCRIPT,
        Options {
            tweak: Box::new(|c| c.teams = true),
            ..Default::default()
        },
    );
    let tools = f.runtime.delegation_tools();
    let expected: &[(&str, &[&str], &[&str])] = &[
        ("team_send", &["to", "message"], &["message", "team", "to"]),
        ("board_add", &["title"], &["detail", "team", "title"]),
        ("board_claim", &["id"], &["id", "team"]),
        ("board_done", &["id", "result"], &["id", "result", "team"]),
        ("board_release", &["id"], &["id", "team"]),
        ("board_list", &[], &["status", "team"]),
        ("team_list", &[], &["team"]),
    ];
    for (name, required, properties) in expected {
        let def = tools.get(name).unwrap().definition();
        let schema = &def.parameters;
        let got_required = schema.get("required").cloned().unwrap_or(json!([]));
        assert_eq!(got_required, json!(required), "{name}");
        let got: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(got, *properties, "{name}");
        let problems = cadre_testkit::schema_problems(schema);
        assert!(problems.is_empty(), "{name}: {problems:?}\n{schema:#}");
        assert_eq!(&normalize_tool_schema(schema), schema, "{name}");
    }
}

#[test]
fn delegation_schemas_keep_their_arguments_and_reach_providers_as_written() {
    let f = fixture_with_worker();
    let tools = f.runtime.delegation_tools();
    // (tool, required, every property)
    let expected: &[(&str, &[&str], &[&str])] = &[
        (
            "task",
            &["subagent_type", "prompt"],
            &[
                "background",
                "description",
                "isolation",
                "prompt",
                "subagent_type",
                "team",
            ],
        ),
        (
            "agent_spawn",
            &["agent_id"],
            &[
                "agent_id",
                "isolation",
                "label",
                "task",
                "team",
                "timeout_seconds",
            ],
        ),
        (
            "agent_send",
            &["message"],
            &["agent_key", "label", "message", "timeout_seconds"],
        ),
        ("agent_list", &[], &[]),
        ("agent_close", &[], &["agent_key", "label"]),
        (
            "task_output",
            &["task_id"],
            &["block", "task_id", "timeout"],
        ),
        ("task_cancel", &["task_id"], &["task_id"]),
        ("task_list", &[], &["status_filter"]),
    ];
    assert_eq!(tools.len(), expected.len(), "{:?}", tools.names());
    for (name, required, properties) in expected {
        let def = tools.get(name).unwrap().definition();
        let schema = &def.parameters;
        assert_eq!(schema["required"], json!(required), "{name}");
        let got: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(got, *properties, "{name}");
        let problems = cadre_testkit::schema_problems(schema);
        assert!(problems.is_empty(), "{name}: {problems:?}\n{schema:#}");
        assert_eq!(&normalize_tool_schema(schema), schema, "{name}");
    }
    let props = |name: &str| tools.get(name).unwrap().definition().parameters["properties"].clone();
    // What only the runtime knows: the agents there are.
    assert!(
        props("task")["subagent_type"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("worker"))
    );
    assert!(
        props("agent_spawn")["agent_id"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("worker"))
    );
    assert_eq!(props("task")["isolation"]["enum"], json!(["worktree"]));
    // The defaults the code applies are the ones the model is told, once each.
    let output = props("task_output");
    assert_eq!(output["block"]["default"], true);
    assert_eq!(output["timeout"]["default"], 30_000);
    assert_eq!(output["timeout"]["maximum"], 600_000);
    for name in ["agent_spawn", "agent_send"] {
        assert_eq!(props(name)["timeout_seconds"]["default"], 30, "{name}");
        assert_eq!(props(name)["timeout_seconds"]["maximum"], 600, "{name}");
    }
    assert_eq!(
        props("task_list")["status_filter"]["enum"],
        json!([
            "pending",
            "running",
            "completed",
            "failed",
            "cancelled",
            "all"
        ])
    );
    assert_eq!(props("task_list")["status_filter"]["default"], "all");
    // The shared address reads the same in both tools.
    assert_eq!(
        props("agent_send")["agent_key"],
        props("agent_close")["agent_key"]
    );
    assert_eq!(props("agent_send")["label"], props("agent_close")["label"]);
}

#[tokio::test]
async fn arguments_that_do_not_decode_are_reported_to_the_model() {
    let f = fixture_with_worker();
    let s = f.session();
    let sid = s.id().to_string();
    let cases = [
        (
            "task",
            json!({"subagent_type": "worker"}),
            "missing field `prompt`",
        ),
        (
            "task",
            json!({"subagent_type": "worker", "prompt": "p", "background": "yes"}),
            "invalid type: string \"yes\", expected a boolean",
        ),
        (
            "task",
            json!({"subagent_type": "worker", "prompt": "p", "isolation": "container"}),
            "unknown isolation `container` (the only one is `worktree`)",
        ),
        (
            "agent_spawn",
            json!({"agent_id": "worker", "timeout_seconds": "soon"}),
            "invalid type: string \"soon\"",
        ),
        (
            "agent_send",
            json!({"label": "a"}),
            "missing field `message`",
        ),
        (
            "task_output",
            json!({"task_id": 7}),
            "invalid type: integer `7`",
        ),
        (
            "task_list",
            json!({"status_filter": "done"}),
            "status_filter must be one of pending, running, completed, failed, cancelled, all (got done)",
        ),
    ];
    for (tool, args, want) in cases {
        let out = call(&f, &sid, tool, args.clone()).await;
        assert!(out.is_error, "{tool} {args}: {}", out.content);
        assert!(
            out.content.starts_with("invalid arguments: ") && out.content.contains(want),
            "{tool} {args}: {}",
            out.content
        );
    }
    // Nothing was started by a refused call.
    assert!(f.runtime.tasks_of(&sid).await.is_empty());
}
