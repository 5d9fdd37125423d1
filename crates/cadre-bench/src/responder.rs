//! The mock model's brain: decides each reply from the request body alone (no shared
//! counters), so any interleaving of parent and child requests gets the same answers.
//!
//! * A parent is a request that offers delegation tools (`task` or `agent_spawn`); a child
//!   offers none. The parent's first user message carries `fanout=N`.
//! * Parent, no tool results yet → N delegation calls (`task`, or `agent_spawn` with
//!   `timeout_seconds: 0`).
//! * `spawn-bg` parent after the spawns (no `task_output` asked yet) → one `task_output`
//!   per task id found in the spawn results.
//! * Any other parent request → final text.
//! * Child, no tool results → one `noop` call; child with a tool result → final text.

use crate::cli::Variant;
use cadre_testkit::{MockReply, OpenAiJson, OpenAiStream, RecordedRequest, Responder};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The marker in the parent's prompt that says how many sub-agents to start.
pub const FANOUT_MARKER: &str = "fanout=";
/// The cheap tool children call.
pub const CHILD_TOOL: &str = "noop";
/// The sub-agent the parent delegates to.
pub const WORKER: &str = "worker";

/// One tool call of a scripted reply: (id, name, arguments JSON).
type Call = (String, &'static str, String);

/// Replies that do not depend on the request, built once.
struct Canned {
    child_call: (MockReply, MockReply),
    child_final: (MockReply, MockReply),
    parent_final: (MockReply, MockReply),
}

fn calls_reply(calls: &[Call], stream: bool) -> MockReply {
    if stream {
        let mut s = OpenAiStream::new().role();
        for (i, (id, name, args)) in calls.iter().enumerate() {
            s = s.tool_call(i, id, name, args);
        }
        s.finish("tool_calls").usage(100, 20, 0).done().into_reply()
    } else {
        let mut j = OpenAiJson::new();
        for (id, name, args) in calls {
            j = j.tool_call(id, name, args);
        }
        j.usage(100, 20, 0).into_reply()
    }
}

fn text_reply(text: &str, stream: bool) -> MockReply {
    if stream {
        OpenAiStream::new()
            .role()
            .text(text)
            .finish("stop")
            .usage(100, 5, 0)
            .done()
            .into_reply()
    } else {
        OpenAiJson::new().text(text).usage(100, 5, 0).into_reply()
    }
}

fn pair(f: impl Fn(bool) -> MockReply) -> (MockReply, MockReply) {
    (f(true), f(false))
}

/// The sub-agent job `i` as the parent writes it.
pub fn job_prompt(i: usize) -> String {
    format!("Job {i}: call the {CHILD_TOOL} tool once with text \"ping\", then report \"done\".")
}

/// The N delegation calls of the parent's first reply.
pub fn delegation_calls(variant: Variant, n: usize) -> Vec<Call> {
    (0..n)
        .map(|i| {
            let id = format!("call_p{i}");
            match variant {
                Variant::TaskFg | Variant::TaskBg => {
                    let args = json!({
                        "subagent_type": WORKER,
                        "description": format!("job {i}"),
                        "prompt": job_prompt(i),
                        "background": variant == Variant::TaskBg,
                    });
                    (id, "task", args.to_string())
                }
                Variant::SpawnBg => {
                    let args =
                        json!({"agent_id": WORKER, "task": job_prompt(i), "timeout_seconds": 0});
                    (id, "agent_spawn", args.to_string())
                }
            }
        })
        .collect()
}

/// One `task_output` call per task id.
pub fn output_calls(ids: &[String]) -> Vec<Call> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let args = json!({"task_id": id, "block": true, "timeout": 600_000});
            (format!("call_o{i}"), "task_output", args.to_string())
        })
        .collect()
}

/// The one `noop` call of a child's first reply.
pub fn child_calls() -> Vec<Call> {
    vec![("call_c0".into(), CHILD_TOOL, r#"{"text":"ping"}"#.into())]
}

fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

fn is_parent(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .any(|name| name == "task" || name == "agent_spawn")
}

/// N from the `fanout=N` marker of the first user message.
fn fanout(body: &Value) -> usize {
    messages(body)
        .iter()
        .find(|m| role(m) == "user")
        .and_then(|m| {
            let text = content(m);
            let at = text.find(FANOUT_MARKER)? + FANOUT_MARKER.len();
            let digits: String = text[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .unwrap_or(0)
}

fn asked_for(body: &Value, tool: &str) -> bool {
    messages(body).iter().any(|m| {
        m.get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c.pointer("/function/name").and_then(Value::as_str) == Some(tool))
    })
}

/// Task ids in tool results (`task_id: <id>` lines of the lifecycle tools).
pub fn task_ids(body: &Value) -> Vec<String> {
    messages(body)
        .iter()
        .filter(|m| role(m) == "tool")
        .filter_map(|m| {
            content(m)
                .lines()
                .find_map(|l| l.strip_prefix("task_id: "))
                .map(|id| id.trim().to_string())
        })
        .collect()
}

fn decide(variant: Variant, canned: &Canned, req: &RecordedRequest) -> MockReply {
    let stream = req.wants_stream();
    let pick = |p: &(MockReply, MockReply)| if stream { p.0.clone() } else { p.1.clone() };
    let body = &req.body;
    let has_results = messages(body).iter().any(|m| role(m) == "tool");
    if !is_parent(body) {
        return if has_results {
            pick(&canned.child_final)
        } else {
            pick(&canned.child_call)
        };
    }
    if !has_results {
        return calls_reply(&delegation_calls(variant, fanout(body)), stream);
    }
    if variant == Variant::SpawnBg && !asked_for(body, "task_output") {
        return calls_reply(&output_calls(&task_ids(body)), stream);
    }
    pick(&canned.parent_final)
}

/// The responder for `variant`, every reply delayed by `latency` plus a uniformly random
/// part of `jitter`.
pub fn responder(variant: Variant, latency: Duration, jitter: Duration) -> Responder {
    let canned = Arc::new(Canned {
        child_call: pair(|s| calls_reply(&child_calls(), s)),
        child_final: pair(|s| text_reply("done", s)),
        parent_final: pair(|s| text_reply("All sub-agents reported done.", s)),
    });
    Arc::new(move |req: &RecordedRequest| {
        let reply = decide(variant, &canned, req);
        let jitter_ms = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
        let delay = latency + Duration::from_millis(fastrand::u64(0..=jitter_ms));
        if delay.is_zero() {
            reply
        } else {
            reply.delayed(delay)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanout_marker_and_task_ids_are_read_from_the_body() {
        let body = json!({
            "messages": [
                {"role": "system", "content": "x"},
                {"role": "user", "content": "Start fanout=1234 jobs."},
                {"role": "tool", "content": "agent_key: a\ntask_id: task_1\nstatus: accepted"},
            ],
            "tools": [{"type": "function", "function": {"name": "agent_spawn"}}],
        });
        assert_eq!(fanout(&body), 1234);
        assert!(is_parent(&body));
        assert_eq!(task_ids(&body), vec!["task_1".to_string()]);
        assert!(!asked_for(&body, "task_output"));
    }
}
