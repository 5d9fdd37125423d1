//! Request bodies for the floor client: Chat Completions JSON shaped and sized like the
//! ones cadre sends in the scenario (same system prompts and tool definitions, taken from a
//! real wiring; the same conversation growth), so the mock server does the same work.

use crate::cli::Variant;
use crate::responder::{CHILD_TOOL, child_calls, delegation_calls, job_prompt, output_calls};
use crate::scenario::parent_prompt;
use crate::wiring::{Noop, WireOptions, wire, worker};
use anyhow::Result;
use bytes::Bytes;
use cadre_llm::ProviderRegistry;
use cadre_subagents::{child_prompt, plan_workspace, section};
use cadre_tools::Tool;
use cadre_types::ToolDefinition;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// The bodies of one floor run: the parent's requests in order, and templates for the
/// children's two requests (only the job text differs between children).
pub struct FloorBodies {
    /// The parent's requests (2 for `task-fg`, 3 for the background variants).
    pub parent: Vec<Bytes>,
    first: (String, String),
    second: (String, String),
}

const JOB_SLOT: &str = "\"__JOB__\"";

impl FloorBodies {
    /// Child `i`'s first (`second == false`) or second request body.
    pub fn child(&self, i: usize, second: bool) -> Bytes {
        let (pre, post) = if second { &self.second } else { &self.first };
        let job = Value::String(job_prompt(i)).to_string();
        let mut s = String::with_capacity(pre.len() + job.len() + post.len());
        s.push_str(pre);
        s.push_str(&job);
        s.push_str(post);
        Bytes::from(s)
    }
}

fn fake_id(prefix: &str, i: usize) -> String {
    format!("{prefix}{i:08x}-0000-4000-8000-{i:012x}")
}

fn tool_json(d: &ToolDefinition) -> Value {
    json!({"type": "function", "function": {
        "name": d.name, "description": d.description, "parameters": d.parameters}})
}

fn text(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

fn assistant(calls: &[(String, &'static str, String)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

fn tool_result(id: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

fn body(messages: &[Value], tools: &[Value], stream: bool) -> Bytes {
    let mut b =
        json!({"model": "bench-model", "messages": messages, "tools": tools, "stream": stream});
    if stream {
        b["stream_options"] = json!({"include_usage": true});
    }
    Bytes::from(b.to_string())
}

fn split_template(b: &Bytes) -> (String, String) {
    let s = String::from_utf8_lossy(b);
    match s.split_once(JOB_SLOT) {
        Some((a, b)) => (a.to_string(), b.to_string()),
        None => (s.to_string(), String::new()),
    }
}

/// What the delegation tools answer, per variant, for task `i`.
fn spawn_result(variant: Variant, i: usize) -> String {
    let task = fake_id("task_", i);
    match variant {
        Variant::TaskFg => {
            "<task state=\"completed\" complete=\"true\"><task_result>done</task_result></task>"
                .into()
        }
        Variant::TaskBg => format!("<task id=\"{task}\" state=\"running\"/>"),
        Variant::SpawnBg => format!(
            "agent_key: agent:worker:{}\nagent_id: worker\nsession_id: {}\nstatus: accepted\ntask_id: {task}\nhint: running in the background; the result is delivered to you when it finishes. Use task_output(task_id) only if you need it sooner.",
            fake_id("", i),
            fake_id("sub-", i)
        ),
    }
}

/// Build the floor's bodies for `variant` and `n`, using a throw-away wiring in `ws`.
pub fn build(
    variant: Variant,
    n: usize,
    stream: bool,
    ws: &Path,
    providers: Arc<ProviderRegistry>,
) -> Result<FloorBodies> {
    let wiring = wire(
        ws,
        &WireOptions {
            providers,
            sessions_dir: None,
            store: None,
            n,
            max_concurrent: n,
            checkpoints: false,
        },
    )?;
    let parent_cfg = wiring.parent.config();
    let system = format!(
        "{}\n\n{}",
        parent_cfg.system_prompt,
        section(wiring.runtime.registry(), wiring.runtime.config().surface)
    );
    let parent_tools: Vec<Value> = parent_cfg
        .tools
        .definitions()
        .iter()
        .map(tool_json)
        .collect();

    let mut msgs = vec![text("system", &system), text("user", &parent_prompt(n))];
    let mut parent = vec![body(&msgs, &parent_tools, stream)];
    let calls = delegation_calls(variant, n);
    msgs.push(assistant(&calls));
    for (i, (id, _, _)) in calls.iter().enumerate() {
        msgs.push(tool_result(id, &spawn_result(variant, i)));
    }
    parent.push(body(&msgs, &parent_tools, stream));
    match variant {
        Variant::TaskFg => {}
        Variant::TaskBg => {
            msgs.push(text("assistant", "All sub-agents reported done."));
            let mut s = String::from("<background-task-results>\n");
            for i in 0..n {
                s.push_str(&format!(
                    "<task id=\"{}\" agent=\"worker\" state=\"completed\" complete=\"true\"><task_result>done</task_result></task>\n",
                    fake_id("task_", i)
                ));
            }
            s.push_str("</background-task-results>");
            msgs.push(text("user", &s));
            parent.push(body(&msgs, &parent_tools, stream));
        }
        Variant::SpawnBg => {
            let ids: Vec<String> = (0..n).map(|i| fake_id("task_", i)).collect();
            let outputs = output_calls(&ids);
            msgs.push(assistant(&outputs));
            for (i, (id, _, _)) in outputs.iter().enumerate() {
                let content = format!(
                    "task_id: {}\nagent_id: worker\nstatus: completed\ncreated_at: 2026-01-01T00:00:00Z\nupdated_at: 2026-01-01T00:00:00Z\ndescription: {}\ntokens: 225\nresult: done",
                    ids[i],
                    job_prompt(i)
                );
                msgs.push(tool_result(id, &content));
            }
            parent.push(body(&msgs, &parent_tools, stream));
        }
    }

    let def = worker();
    let plan = plan_workspace(&def, ws)?;
    let child_system = child_prompt(&def, &plan, true, "");
    let child_tools = vec![tool_json(&Noop.definition())];
    let mut cm = vec![
        text("system", &child_system),
        json!({"role": "user", "content": "__JOB__"}),
    ];
    let first = split_template(&body(&cm, &child_tools, stream));
    cm.push(assistant(&child_calls()));
    cm.push(tool_result("call_c0", &format!("{CHILD_TOOL}:ping")));
    let second = split_template(&body(&cm, &child_tools, stream));
    wiring.runtime.shutdown();
    Ok(FloorBodies {
        parent,
        first,
        second,
    })
}
