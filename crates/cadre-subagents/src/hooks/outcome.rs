//! What the handlers of one event said, read the way Claude Code reads it: exit code 0
//! with stdout that starts with `{` is JSON (other stdout is context on the events that
//! take it); exit code 2 blocks, with stderr as the reason, on events that can block; any
//! other ending is a warning and no decision.

use super::event::HookEvent;
use super::runner::{Ending, HandlerRun};
use serde_json::Value;

/// A `PreToolUse` permission decision, in precedence order (a later one wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Run it without asking (the policy's deny rules still apply).
    Allow,
    /// Ask the user.
    Ask,
    /// Refuse it.
    Deny,
}

/// Everything the handlers of one event decided, merged.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Exit code 2 (its stderr) or `decision: "block"` (its reason).
    pub block: Option<String>,
    /// `permissionDecision`, the strongest of all handlers', with its reason.
    pub permission: Option<(Permission, String)>,
    /// `updatedInput` (the first handler's that gives one).
    pub updated_input: Option<Value>,
    /// `additionalContext` and plain stdout of context events, in handler order.
    pub context: Vec<String>,
    /// `continue: false`: why the run stops.
    pub stop: Option<String>,
    /// `PermissionRequest`: `decision.behavior` (true: allow) and its message.
    pub behavior: Option<(bool, String)>,
    /// What went wrong with handlers (timed out, failed, malformed output).
    pub warnings: Vec<String>,
}

impl Outcome {
    /// Merge what `run` (of the handler described as `what`) said about `event`.
    pub fn add(&mut self, event: HookEvent, what: &str, run: HandlerRun) {
        let name = event.as_str();
        match run.ending {
            Ending::TimedOut => self.warnings.push(format!(
                "{name} hook `{what}` timed out; no decision taken from it"
            )),
            Ending::Failed(why) => self
                .warnings
                .push(format!("{name} hook `{what}` failed: {why}")),
            Ending::Exited(2) if event.can_block() || is_post_tool(event) => {
                let reason = run.stderr.trim();
                let reason = if reason.is_empty() {
                    format!("blocked by the {name} hook `{what}`")
                } else {
                    reason.to_string()
                };
                self.add_block(reason);
            }
            Ending::Exited(0) => self.add_stdout(event, what, run.stdout.trim()),
            Ending::Exited(code) => {
                let err = run.stderr.trim();
                let err = err.lines().next().unwrap_or("");
                self.warnings
                    .push(format!("{name} hook `{what}` exited with {code}: {err}"));
            }
        }
    }

    fn add_block(&mut self, reason: String) {
        match &mut self.block {
            Some(b) => {
                b.push('\n');
                b.push_str(&reason);
            }
            None => self.block = Some(reason),
        }
    }

    fn add_stdout(&mut self, event: HookEvent, what: &str, out: &str) {
        if out.is_empty() {
            return;
        }
        if !out.starts_with('{') {
            // Claude Code adds the plain output of these events to the conversation.
            if matches!(
                event,
                HookEvent::SessionStart | HookEvent::UserPromptSubmit | HookEvent::SubagentStart
            ) {
                self.context.push(out.to_string());
            }
            return;
        }
        match serde_json::from_str::<Value>(out) {
            Ok(v) if v.is_object() => self.add_json(&v),
            Ok(_) | Err(_) => self.warnings.push(format!(
                "{} hook `{what}` printed malformed JSON; its output is ignored",
                event.as_str()
            )),
        }
    }

    fn add_json(&mut self, v: &Value) {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        if v.get("continue").and_then(Value::as_bool) == Some(false) {
            let why = text(v.get("stopReason")).unwrap_or_else(|| "continue: false".into());
            self.stop.get_or_insert(why);
        }
        match v.get("decision").and_then(Value::as_str) {
            Some("block") => {
                let reason = text(v.get("reason")).unwrap_or_else(|| "blocked by a hook".into());
                self.add_block(reason);
            }
            // The older spelling of a `PreToolUse` allow.
            Some("approve") => self.add_permission(Permission::Allow, text(v.get("reason"))),
            _ => {}
        }
        let Some(specific) = v.get("hookSpecificOutput") else {
            return;
        };
        let permission = match specific.get("permissionDecision").and_then(Value::as_str) {
            Some("allow") => Some(Permission::Allow),
            Some("ask") => Some(Permission::Ask),
            Some("deny") => Some(Permission::Deny),
            _ => None,
        };
        if let Some(p) = permission {
            self.add_permission(p, text(specific.get("permissionDecisionReason")));
        }
        if let Some(input) = specific.get("updatedInput").filter(|i| i.is_object()) {
            self.updated_input.get_or_insert_with(|| input.clone());
        }
        if let Some(c) = text(specific.get("additionalContext")).filter(|c| !c.is_empty()) {
            self.context.push(c);
        }
        if let Some(d) = specific.get("decision") {
            let message = text(d.get("message")).unwrap_or_default();
            match d.get("behavior").and_then(Value::as_str) {
                // A deny from any handler wins over an allow.
                Some("deny") => self.behavior = Some((false, message)),
                Some("allow") if self.behavior.is_none() => self.behavior = Some((true, message)),
                _ => {}
            }
        }
    }

    fn add_permission(&mut self, p: Permission, reason: Option<String>) {
        let reason = reason.unwrap_or_default();
        match &self.permission {
            Some((q, _)) if *q >= p => {}
            _ => self.permission = Some((p, reason)),
        }
    }
}

fn is_post_tool(event: HookEvent) -> bool {
    matches!(
        event,
        HookEvent::PostToolUse | HookEvent::PostToolUseFailure
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ending: Ending, stdout: &str, stderr: &str) -> HandlerRun {
        HandlerRun {
            ending,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    fn json(s: &str) -> HandlerRun {
        run(Ending::Exited(0), s, "")
    }

    #[test]
    fn exit_2_blocks_with_stderr_only_where_the_event_can_block() {
        let mut o = Outcome::default();
        o.add(
            HookEvent::PreToolUse,
            "g",
            run(Ending::Exited(2), "", "no rm\n"),
        );
        assert_eq!(o.block.as_deref(), Some("no rm"));
        let mut o = Outcome::default();
        o.add(
            HookEvent::Notification,
            "g",
            run(Ending::Exited(2), "", "x"),
        );
        assert!(o.block.is_none());
        assert_eq!(o.warnings.len(), 1);
    }

    #[test]
    fn other_endings_are_warnings_and_no_decision() {
        let mut o = Outcome::default();
        o.add(
            HookEvent::PreToolUse,
            "a",
            run(Ending::Exited(1), "{\"decision\":\"block\"}", "oops"),
        );
        o.add(HookEvent::PreToolUse, "b", run(Ending::TimedOut, "", ""));
        o.add(
            HookEvent::PreToolUse,
            "c",
            json("{\"hookSpecificOutput\": {"),
        );
        o.add(HookEvent::PreToolUse, "d", json("{}x"));
        assert!(o.block.is_none() && o.permission.is_none());
        assert_eq!(o.warnings.len(), 4, "{:?}", o.warnings);
        assert!(o.warnings[0].contains("exited with 1: oops"));
        assert!(o.warnings[1].contains("timed out"));
        assert!(o.warnings[2].contains("malformed JSON"));
    }

    #[test]
    fn deny_beats_ask_beats_allow_whatever_the_order() {
        let pd = |d: &str| {
            json(&format!(
                "{{\"hookSpecificOutput\": {{\"hookEventName\": \"PreToolUse\", \
                 \"permissionDecision\": \"{d}\", \"permissionDecisionReason\": \"{d} it\"}}}}"
            ))
        };
        for order in [
            ["allow", "ask", "deny"],
            ["deny", "allow", "ask"],
            ["ask", "deny", "allow"],
        ] {
            let mut o = Outcome::default();
            for d in order {
                o.add(HookEvent::PreToolUse, d, pd(d));
            }
            assert_eq!(o.permission, Some((Permission::Deny, "deny it".into())));
        }
        let mut o = Outcome::default();
        o.add(HookEvent::PreToolUse, "a", pd("allow"));
        o.add(HookEvent::PreToolUse, "b", pd("ask"));
        assert_eq!(o.permission.unwrap().0, Permission::Ask);
    }

    #[test]
    fn json_fields_are_read() {
        let mut o = Outcome::default();
        o.add(
            HookEvent::PreToolUse,
            "a",
            json(
                r#"{"continue": false, "stopReason": "enough",
                     "hookSpecificOutput": {"permissionDecision": "allow",
                       "updatedInput": {"command": "ls"}, "additionalContext": "ctx"}}"#,
            ),
        );
        assert_eq!(o.stop.as_deref(), Some("enough"));
        assert_eq!(o.updated_input, Some(serde_json::json!({"command": "ls"})));
        assert_eq!(o.context, vec!["ctx"]);
        let mut o = Outcome::default();
        o.add(
            HookEvent::Stop,
            "s",
            json(r#"{"decision": "block", "reason": "run the tests"}"#),
        );
        assert_eq!(o.block.as_deref(), Some("run the tests"));
        let mut o = Outcome::default();
        o.add(HookEvent::UserPromptSubmit, "u", json("plain context"));
        assert_eq!(o.context, vec!["plain context"]);
        let mut o = Outcome::default();
        let pr = |b: &str| {
            json(&format!(
                r#"{{"hookSpecificOutput": {{"decision": {{"behavior": "{b}", "message": "m"}}}}}}"#
            ))
        };
        o.add(HookEvent::PermissionRequest, "a", pr("allow"));
        o.add(HookEvent::PermissionRequest, "b", pr("deny"));
        o.add(HookEvent::PermissionRequest, "c", pr("allow"));
        assert_eq!(o.behavior, Some((false, "m".into())));
    }
}
