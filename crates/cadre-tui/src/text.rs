//! Small text formatting shared by the views: shortened arguments, token counts, durations.

/// First line of `s`, cut to `max` characters with an ellipsis.
pub fn short(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// Where the arguments of a call of `tool` name the agent and the work, for the tools that
/// give a sub-agent work (`task`, `agent_spawn`, `agent_send`), as the tool declares it.
pub fn prompt_args(tool: &str) -> Option<cadre_tools::PromptArgs> {
    cadre_subagents::known_tool(tool).and_then(|i| i.prompts)
}

/// The title of a tool call: `auditor: audit open work` for delegation calls (agent and
/// description), the arguments that name what the call acts on for the others.
pub fn call_title(tool: &str, args: &str) -> String {
    cadre_subagents::call_title(tool, args, 80)
}

/// `950`, `12.3k`, `4.1M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// `0.4s`, `12s`, `3m05s`, `2h01m`.
pub fn elapsed(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=9 => format!("{:.1}s", ms as f64 / 1000.0),
        10..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The id shown in tight places: `task_1a2b3c4d` (the full id is in the panel's detail).
pub fn short_id(id: &str) -> String {
    let Some((prefix, rest)) = id.split_once(['_', '-']) else {
        return id.chars().take(12).collect();
    };
    let sep = &id[prefix.len()..prefix.len() + 1];
    format!("{prefix}{sep}{}", rest.chars().take(8).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(elapsed(400), "0.4s");
        assert_eq!(elapsed(185_000), "3m05s");
        assert_eq!(short_id("task_1234567890ab"), "task_12345678");
        assert_eq!(short_id("s-abcdefghij"), "s-abcdefgh");
        assert_eq!(short("abcdef", 4), "abc…");
        assert_eq!(
            call_title(
                "task",
                r#"{"subagent_type":"auditor","description":"audit","background":true,"prompt":"long"}"#
            ),
            "auditor: audit, background"
        );
    }

    #[test]
    fn delegation_titles_read_the_keys_each_tool_declares() {
        assert_eq!(
            call_title(
                "agent_spawn",
                r#"{"agent_id":"reviewer","label":"r1","task":"check the diff"}"#
            ),
            "reviewer: check the diff"
        );
        assert_eq!(
            call_title("agent_send", r#"{"label":"r1","message":"and the tests"}"#),
            "r1: and the tests"
        );
        assert_eq!(
            call_title("agent_send", r#"{"agent_key":"agent:r:1","message":"go"}"#),
            "agent:r:1: go"
        );
        // A tool that gives no agent work is titled by the key it declares, whatever else.
        assert_eq!(
            call_title("read_file", r#"{"subagent_type":"x","path":"a.rs"}"#),
            "a.rs"
        );
        assert!(prompt_args("task_list").is_none());
        assert!(prompt_args("mcp__srv__task").is_none());
    }
}
