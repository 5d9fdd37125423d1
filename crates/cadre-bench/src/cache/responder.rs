//! The scripted model of the prompt-caching scenario, on either wire format. Replies are
//! decided from the request body alone:
//!
//! * the parent (it is offered `task`) starts [`CHILDREN`] background `task` calls on its
//!   first turn, reads one workspace file per turn up to turn [`PARENT_TURNS`], then answers;
//! * a child (`Job i: …`) lists the workspace on its first turn and reports on its second.
//!
//! Every reply is delayed: the parent's by [`PARENT_DELAY`], child `i`'s by `(i + 1)` times
//! [`CHILD_DELAY`], so the children finish one after another while the parent is working and
//! their results reach it on different turns.

use cadre_testkit::{
    AnthropicJson, AnthropicStream, Api, MockReply, OpenAiJson, OpenAiStream, RecordedRequest,
    Responder,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Background children the parent starts.
pub const CHILDREN: usize = 5;
/// The parent's working turns (the first starts the children).
pub const PARENT_TURNS: usize = 12;
/// Delay of every parent reply.
pub const PARENT_DELAY: Duration = Duration::from_millis(20);
/// Delay unit of child replies.
pub const CHILD_DELAY: Duration = Duration::from_millis(20);
/// The sub-agent the parent delegates to.
pub const WORKER: &str = "worker";

/// The brief of child `i`.
pub fn job_prompt(i: usize) -> String {
    format!(
        "Job {i}: list the workspace with list_dir and report which notes files exist, in one line."
    )
}

/// The workspace file the parent reads on turn `turn`.
pub fn note_path(turn: usize) -> String {
    format!("notes/part-{turn:02}.md")
}

/// What one request is, read from its body.
struct Seen {
    parent: bool,
    /// Assistant turns already in the conversation.
    turns: usize,
    /// The child's job index (children only).
    job: usize,
}

fn tool_names(api: Api, body: &Value) -> impl Iterator<Item = &str> {
    let pointer = match api {
        Api::OpenAi => "/function/name",
        Api::Anthropic => "/name",
    };
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |t| t.pointer(pointer).and_then(Value::as_str))
}

/// The first user text of a conversation, on either wire format.
pub fn first_user_text(body: &Value) -> &str {
    let Some(first) = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
    else {
        return "";
    };
    match &first["content"] {
        Value::String(s) => s,
        Value::Array(blocks) => blocks
            .iter()
            .find_map(|b| b.get("text").and_then(Value::as_str))
            .unwrap_or(""),
        _ => "",
    }
}

fn read(req: &RecordedRequest) -> Seen {
    let body = &req.body;
    let parent = tool_names(req.api, body).any(|n| n == "task");
    let turns = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    let job = first_user_text(body)
        .strip_prefix("Job ")
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Seen { parent, turns, job }
}

/// One scripted reply: tool calls (id, name, arguments) or a final text.
enum Step {
    Calls(Vec<(String, &'static str, Value)>),
    Text(String),
}

fn step(seen: &Seen) -> Step {
    if seen.parent {
        let turn = seen.turns + 1;
        if turn == 1 {
            let calls = (0..CHILDREN)
                .map(|i| {
                    let args = json!({
                        "subagent_type": WORKER,
                        "description": format!("job {i}"),
                        "prompt": job_prompt(i),
                        "background": true,
                    });
                    (format!("call_t1_{i}"), "task", args)
                })
                .collect();
            return Step::Calls(calls);
        }
        if turn <= PARENT_TURNS {
            let args = json!({"path": note_path(turn)});
            return Step::Calls(vec![(format!("call_t{turn}"), "read_file", args)]);
        }
        return Step::Text(
            "I read every part of the notes and the five jobs reported back; the notes are \
             consistent with what the workers found."
                .into(),
        );
    }
    if seen.turns == 0 {
        return Step::Calls(vec![("call_c1".into(), "list_dir", json!({"path": "."}))]);
    }
    Step::Text(format!(
        "Job {} done: the workspace has a notes folder with {PARENT_TURNS} parts.",
        seen.job
    ))
}

fn render(api: Api, stream: bool, step: &Step) -> MockReply {
    match (api, stream, step) {
        (Api::OpenAi, true, Step::Calls(calls)) => {
            let mut s = OpenAiStream::new().role();
            for (i, (id, name, args)) in calls.iter().enumerate() {
                s = s.tool_call(i, id, name, &args.to_string());
            }
            s.finish("tool_calls").usage(0, 20, 0).done().into_reply()
        }
        (Api::OpenAi, true, Step::Text(text)) => OpenAiStream::new()
            .role()
            .text(text)
            .finish("stop")
            .usage(0, 20, 0)
            .done()
            .into_reply(),
        (Api::OpenAi, false, Step::Calls(calls)) => {
            let mut j = OpenAiJson::new();
            for (id, name, args) in calls {
                j = j.tool_call(id, name, &args.to_string());
            }
            j.usage(0, 20, 0).into_reply()
        }
        (Api::OpenAi, false, Step::Text(text)) => {
            OpenAiJson::new().text(text).usage(0, 20, 0).into_reply()
        }
        (Api::Anthropic, true, Step::Calls(calls)) => {
            let mut s = AnthropicStream::new().start(0, 0);
            for (id, name, args) in calls {
                s = s.tool_use(id, name, &[&args.to_string()]);
            }
            s.stop("tool_use", 20).into_reply()
        }
        (Api::Anthropic, true, Step::Text(text)) => AnthropicStream::new()
            .start(0, 0)
            .text(&[text])
            .stop("end_turn", 20)
            .into_reply(),
        (Api::Anthropic, false, Step::Calls(calls)) => {
            let mut j = AnthropicJson::new();
            for (id, name, args) in calls {
                j = j.tool_use(id, name, args.clone());
            }
            j.usage(0, 20, 0).into_reply()
        }
        (Api::Anthropic, false, Step::Text(text)) => {
            AnthropicJson::new().text(text).usage(0, 20, 0).into_reply()
        }
    }
}

/// The scenario's responder (either wire format; the path says which).
pub fn responder() -> Responder {
    Arc::new(|req: &RecordedRequest| {
        let seen = read(req);
        let delay = if seen.parent {
            PARENT_DELAY
        } else {
            CHILD_DELAY.saturating_mul(seen.job as u32 + 1)
        };
        render(req.api, req.wants_stream(), &step(&seen)).delayed(delay)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_user_text_reads_both_wire_formats() {
        let openai = json!({"messages": [{"role": "system", "content": "s"},
                                         {"role": "user", "content": "Job 3: x"}]});
        let anthropic = json!({"messages": [{"role": "user",
                                             "content": [{"type": "text", "text": "Job 4: y"}]}]});
        assert_eq!(first_user_text(&openai), "Job 3: x");
        assert_eq!(first_user_text(&anthropic), "Job 4: y");
        assert_eq!(first_user_text(&json!({})), "");
    }
}
