//! The one-line title of a tool call, the same in every front end (the terminal, the
//! full-screen UI, MCP progress): the arguments that name what the call acts on, as each
//! tool declares them (`write_file(notes.md)`, `task(explorer: map src/)`); a tool that
//! declares none (an MCP server's tool) shows its argument values in order.

use crate::known_tool;
use serde_json::Value;

/// The title of a call of `tool` with JSON arguments `args`, on one line of at most `max`
/// characters (a cut is marked with `…`).
pub fn call_title(tool: &str, args: &str, max: usize) -> String {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(args) else {
        return cut(args, max);
    };
    let info = known_tool(tool);
    if let Some(keys) = info.and_then(|i| i.prompts) {
        let first = |ks: &[&str]| ks.iter().find_map(|k| map.get(*k).and_then(Value::as_str));
        if let Some(agent) = first(keys.definition).or(first(keys.address)) {
            let what = first(keys.what).unwrap_or("");
            let bg = match map.get("background").and_then(Value::as_bool) {
                Some(true) => ", background",
                _ => "",
            };
            return cut(&format!("{agent}: {what}{bg}"), max);
        }
    }
    let named: Vec<String> = (info.map_or(&[][..], |i| i.title).iter())
        .filter_map(|k| map.get(*k))
        .map(value_text)
        .collect();
    if !named.is_empty() {
        return cut(&named.join(", "), max);
    }
    let values: Vec<String> = map.values().map(value_text).collect();
    cut(&values.join(", "), max)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The first line of `s`, trimmed, cut to `max` characters.
fn cut(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() <= max {
        return line.to_string();
    }
    let kept: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_that_names_the_thing_comes_first() {
        // Alphabetical order would put the content first: `write_file(# Notes)`.
        let w = r##"{"content":"# Notes\nmore","path":"notes.md"}"##;
        assert_eq!(call_title("write_file", w, 80), "notes.md");
        assert_eq!(
            call_title("bash", r#"{"command":"ls -la","timeout_ms":5}"#, 80),
            "ls -la"
        );
        assert_eq!(
            call_title(
                "grep",
                r#"{"case_insensitive":true,"path":"src","pattern":"TODO"}"#,
                80
            ),
            "TODO, src"
        );
        assert_eq!(
            call_title("web_fetch", r#"{"max_chars":9,"url":"https://x.org"}"#, 80),
            "https://x.org"
        );
        assert_eq!(
            call_title(
                "task",
                r#"{"background":true,"description":"map src/","prompt":"long","subagent_type":"explorer"}"#,
                80
            ),
            "explorer: map src/, background"
        );
        assert_eq!(
            call_title(
                "agent_send",
                r#"{"label":"r1","message":"and the tests"}"#,
                80
            ),
            "r1: and the tests"
        );
        assert_eq!(
            call_title(
                "agent_send",
                r#"{"agent_key":"agent:r:1","message":"go"}"#,
                80
            ),
            "agent:r:1: go"
        );
        // A tool that declares nothing (an MCP tool) shows its values; bad JSON as it came.
        assert_eq!(
            call_title("mcp__x__y", r#"{"a":"x.rs","b":3}"#, 80),
            "x.rs, 3"
        );
        assert_eq!(call_title("read_file", "not json", 80), "not json");
        assert_eq!(call_title("bash", r#"{"command":"abcdef"}"#, 4), "abc…");
    }
}
