//! The configured hooks as an engine hook: `PreToolUse` before each call,
//! `PostToolUse`/`PostToolUseFailure` after it, `SessionStart` and `UserPromptSubmit` when
//! a prompt arrives, `Stop` when the model has finished, and (through `lifecycle`) the
//! approval, notification and compaction events. The event's JSON carries what Claude
//! Code's does; a child's carries its task id and definition name too.

use super::event::HookEvent;
use super::matcher::{claude_name, tool_spellings};
use super::outcome::{Outcome, Permission};
use super::runner::RunnerEnv;
use super::settings::HookSet;
use async_trait::async_trait;
use cadre_engine::{HookDecision, PromptVerdict, ToolCallInfo, ToolHook};
use cadre_tools::{RunContext, ToolOutput};
use cadre_types::{ApprovalDecision, ApprovalRequest, Event, EventEnvelope, RiskLevel};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The configured hooks, run for one agent (and, passed down, for its children).
pub struct ClaudeHooks {
    set: Arc<HookSet>,
    env: RunnerEnv,
    permission_mode: String,
    sessions_dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Sessions whose `SessionStart` fired.
    started: HashSet<String>,
    /// Runs a hook asked to stop (`continue: false`), by session.
    halted: HashMap<String, String>,
    /// `additionalContext` of `PreToolUse`, by call id, added to the call's result.
    call_context: HashMap<String, Vec<String>>,
}

impl ClaudeHooks {
    /// Hooks of `set`, run in `env`; `permission_mode` is what their JSON reports, and
    /// transcripts are `<sessions_dir>/<session id>.jsonl`.
    pub fn new(
        set: Arc<HookSet>,
        env: RunnerEnv,
        permission_mode: impl Into<String>,
        sessions_dir: PathBuf,
    ) -> Self {
        Self {
            set,
            env,
            permission_mode: permission_mode.into(),
            sessions_dir,
            state: Mutex::default(),
        }
    }

    /// Hooks of `set` run where and as these are (an agent file's own hooks, run beside
    /// the configured ones).
    pub fn scoped(&self, set: Arc<HookSet>) -> Self {
        Self::new(
            set,
            self.env.clone(),
            self.permission_mode.clone(),
            self.sessions_dir.clone(),
        )
    }

    /// The hooks these run.
    pub fn set(&self) -> &HookSet {
        &self.set
    }

    /// The fields every event's JSON has (and, in a child, its task and definition).
    pub fn base(&self, event: HookEvent, run: &RunContext) -> Map<String, Value> {
        let mut m = self.session_base(event, &run.session_id);
        if run.depth > 0 {
            m.insert("agent_id".into(), json!(run.task_id));
            m.insert("agent_type".into(), json!(run.agent));
        }
        m
    }

    /// The fields every event's JSON has, for session `session_id` outside any run.
    pub fn session_base(&self, event: HookEvent, session_id: &str) -> Map<String, Value> {
        let transcript = self.sessions_dir.join(format!("{session_id}.jsonl"));
        let mut m = Map::new();
        m.insert("session_id".into(), json!(session_id));
        m.insert(
            "transcript_path".into(),
            json!(transcript.display().to_string()),
        );
        m.insert(
            "cwd".into(),
            json!(self.env.workspace.display().to_string()),
        );
        m.insert("permission_mode".into(), json!(self.permission_mode));
        m.insert("hook_event_name".into(), json!(event.as_str()));
        m
    }

    /// Run the handlers of `event` matching `names` (none: every handler of the event) on
    /// `input`, in parallel; warnings are told to whoever watches `run`, and a
    /// `continue: false` stops `run` before its next model call.
    pub async fn fire(
        &self,
        event: HookEvent,
        names: &[&str],
        input: Map<String, Value>,
        run: &RunContext,
    ) -> Outcome {
        let mut outcome = self.fire_quietly(event, names, input).await;
        for w in outcome.warnings.drain(..) {
            tracing::debug!(agent = %run.agent, "{w}");
            notice(run, format!("warning: {w}"));
        }
        if let Some(why) = &outcome.stop
            && let Ok(mut s) = self.state.lock()
        {
            s.halted.insert(run.session_id.clone(), why.clone());
        }
        outcome
    }

    /// Run the handlers of `event` matching `names` on `input`, in parallel, outside any
    /// run: the warnings stay in the outcome, and nothing is stopped.
    pub async fn fire_quietly(
        &self,
        event: HookEvent,
        names: &[&str],
        input: Map<String, Value>,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        let handlers = self.set.matching(event, names);
        if handlers.is_empty() {
            return outcome;
        }
        let bytes = serde_json::to_vec(&Value::Object(input)).unwrap_or_default();
        let runs = futures::future::join_all(
            handlers
                .iter()
                .map(|h| self.env.run(h, &bytes, event.default_timeout())),
        )
        .await;
        for (h, r) in handlers.iter().zip(runs) {
            outcome.add(event, &h.describe(), r);
        }
        outcome
    }

    pub(crate) fn tool_input(
        &self,
        event: HookEvent,
        call: &ToolCallInfo,
        run: &RunContext,
    ) -> Map<String, Value> {
        let mut m = self.base(event, run);
        m.insert("tool_name".into(), json!(claude_name(&call.tool)));
        m.insert("cadre_tool_name".into(), json!(call.tool));
        m.insert("tool_input".into(), call.args.clone());
        m.insert("tool_use_id".into(), json!(call.call_id));
        m
    }
}

/// Tell whoever watches `run` something about its hooks.
pub(crate) fn notice(run: &RunContext, message: String) {
    run.events.emit(EventEnvelope {
        session_id: run.session_id.clone(),
        agent: run.agent.clone(),
        task_id: run.task_id.clone(),
        event: Event::Notice { message },
    });
}

#[async_trait]
impl ToolHook for ClaudeHooks {
    async fn before(&self, call: &ToolCallInfo, run: &RunContext) -> HookDecision {
        let names = tool_spellings(&call.tool);
        let input = self.tool_input(HookEvent::PreToolUse, call, run);
        let o = self.fire(HookEvent::PreToolUse, &names, input, run).await;
        if !o.context.is_empty()
            && let Ok(mut s) = self.state.lock()
        {
            s.call_context
                .insert(call.call_id.clone(), o.context.clone());
        }
        if let Some(reason) = o.block {
            return HookDecision::Deny(reason);
        }
        if let Some(why) = o.stop {
            return HookDecision::Deny(format!("a hook stopped the run: {why}"));
        }
        match o.permission {
            Some((Permission::Deny, reason)) => HookDecision::Deny(or(reason, "denied by a hook")),
            Some((Permission::Ask, reason)) => HookDecision::Ask {
                reason: or(reason, "a hook asks for approval"),
                risk: RiskLevel::Medium,
            },
            Some((Permission::Allow, _)) => HookDecision::Approve(o.updated_input),
            None => match o.updated_input {
                Some(v) => HookDecision::ModifyArgs(v),
                None => HookDecision::Allow,
            },
        }
    }

    async fn after(
        &self,
        call: &ToolCallInfo,
        output: &ToolOutput,
        run: &RunContext,
    ) -> Option<ToolOutput> {
        let event = if output.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        let mut input = self.tool_input(event, call, run);
        input.insert("tool_response".into(), json!(output.content));
        if output.is_error {
            input.insert("error".into(), json!(output.content));
        }
        let names = tool_spellings(&call.tool);
        let o = self.fire(event, &names, input, run).await;
        let mut extra: Vec<String> = self
            .state
            .lock()
            .ok()
            .and_then(|mut s| s.call_context.remove(&call.call_id))
            .unwrap_or_default();
        extra.extend(o.context);
        if let Some(reason) = o.block {
            extra.push(format!("{} hook: {reason}", event.as_str()));
        }
        if extra.is_empty() {
            return None;
        }
        let mut out = output.clone();
        for e in extra {
            out.content.push_str("\n\n");
            out.content.push_str(&e);
        }
        Some(out)
    }

    async fn prompt_submitted(&self, prompt: &str, run: &RunContext) -> PromptVerdict {
        let first = self
            .state
            .lock()
            .map(|mut s| s.started.insert(run.session_id.clone()))
            .unwrap_or(false);
        let mut context = Vec::new();
        if first && run.depth == 0 {
            let mut input = self.base(HookEvent::SessionStart, run);
            input.insert("source".into(), json!("startup"));
            let o = self.fire(HookEvent::SessionStart, &[], input, run).await;
            context.extend(o.context);
        }
        let mut input = self.base(HookEvent::UserPromptSubmit, run);
        input.insert("prompt".into(), json!(prompt));
        let o = self
            .fire(HookEvent::UserPromptSubmit, &[], input, run)
            .await;
        if let Some(reason) = o.block {
            return PromptVerdict::Block(reason);
        }
        context.extend(o.context);
        PromptVerdict::Proceed(context)
    }

    async fn stopping(&self, last_reply: &str, active: bool, run: &RunContext) -> Option<String> {
        // A child's end is its `SubagentStop`, fired by the runtime.
        if run.depth > 0 {
            return None;
        }
        let mut input = self.base(HookEvent::Stop, run);
        input.insert("stop_hook_active".into(), json!(active));
        input.insert("last_assistant_message".into(), json!(last_reply));
        self.fire(HookEvent::Stop, &[], input, run).await.block
    }

    fn halt(&self, run: &RunContext) -> Option<String> {
        self.state.lock().ok()?.halted.remove(&run.session_id)
    }

    async fn permission_request(
        &self,
        request: &ApprovalRequest,
        run: &RunContext,
    ) -> Option<ApprovalDecision> {
        super::lifecycle::permission_request(self, request, run).await
    }

    async fn notification(&self, kind: &str, message: &str, run: &RunContext) {
        super::lifecycle::notification(self, kind, message, run).await;
    }

    async fn pre_compact(
        &self,
        manual: bool,
        instructions: Option<&str>,
        run: &RunContext,
    ) -> Option<String> {
        super::lifecycle::pre_compact(self, manual, instructions, run).await
    }
}

fn or(reason: String, default: &str) -> String {
    if reason.trim().is_empty() {
        default.to_string()
    } else {
        reason
    }
}
