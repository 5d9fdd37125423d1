//! Running one reply's tool calls: argument parsing, hooks, the permission policy and
//! approvals, parallel execution under a cap with results in call order, per-tool
//! timeouts, cancellation, after-hooks and output offload. A call's start is recorded in the
//! session's journal before its tool runs (a call that cannot be recorded is not run).

use crate::agent::AgentConfig;
use crate::hooks::{HookDecision, ToolCallInfo};
use crate::observer::{Step, TurnObserver};
use crate::permissions::{ApprovalMode, PolicyDecision};
use crate::run_loop::Emitter;
use crate::session::CallJournal;
use cadre_tools::otel;
use cadre_tools::{
    HiddenPaths, RunContext, Tool, ToolContext, ToolOutput, ToolRegistry, Workspace,
};
use cadre_types::{ApprovalDecision, ApprovalRequest, Event, Message, RiskLevel, ToolCall};
use futures::StreamExt;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How long a cancelled or timed-out tool gets to clean up (kill its processes).
const CLEANUP_GRACE: Duration = Duration::from_secs(3);

/// A tool message for a call that was not run.
pub(crate) fn not_run(call: &ToolCall, why: &str) -> Message {
    Message::Tool {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        content: format!("not run: {why}"),
        is_error: true,
        images: Vec::new(),
    }
}

pub(crate) struct Dispatcher<'a> {
    cfg: &'a AgentConfig,
    run: Arc<RunContext>,
    /// The agent's tools within the run's grant: what the model may call, and what the
    /// tools it calls see as their caller's tools.
    tools: Arc<ToolRegistry>,
    workspace: Arc<Workspace>,
    approved: Arc<Mutex<HashSet<String>>>,
    exclusive: RwLock<()>,
    emitter: Emitter,
    /// What reading tools leave out, from the policy (nothing in bypass mode).
    hidden: Arc<HiddenPaths>,
    /// Where each call's start is recorded before its tool runs.
    journal: CallJournal,
}

/// The result of one call, plus a tool newly approved for the session.
type CallResult = (Message, Option<String>);
/// A call refused on its way to running: its result (boxed: a refusal is rare, and the
/// steps' results stay small).
type Refused = Box<CallResult>;

/// What the hooks before a call said, besides refusing it.
#[derive(Default)]
struct Hooked {
    /// One approved the call (it answers the rules' question).
    approved: bool,
    /// One asks the user.
    ask: Option<(String, RiskLevel)>,
}

/// A call cleared to run: its tool, its arguments as the hooks left them, and the tool
/// approved for the session on the way (reported with the call's result).
struct Judged {
    tool: Arc<dyn Tool>,
    info: ToolCallInfo,
    newly_approved: Option<String>,
}

impl<'a> Dispatcher<'a> {
    pub(crate) fn new(
        cfg: &'a AgentConfig,
        run: Arc<RunContext>,
        workspace: Arc<Workspace>,
        approved: Arc<Mutex<HashSet<String>>>,
        journal: CallJournal,
    ) -> Self {
        let grant = &run.tool_grant;
        let tools = Arc::new(cfg.tools.filtered(|t| grant.allows(t.name())));
        let hidden = match cfg.permissions.mode {
            ApprovalMode::Bypass => Arc::default(),
            _ => cfg.permissions.rules.hidden(),
        };
        Self {
            cfg,
            hidden,
            emitter: Emitter::new(run.clone()),
            tools,
            run,
            workspace,
            approved,
            exclusive: RwLock::new(()),
            journal,
        }
    }

    /// The tool definitions offered to the model: the agent's tools within the run's grant.
    pub(crate) fn definitions(&self) -> Vec<cadre_types::ToolDefinition> {
        self.tools.definitions()
    }

    /// Run all calls, at most `max_parallel_tools` at once; results in call order. Each
    /// call starts only if `gate` lets it: one it holds back is not run, and stops the
    /// others (`stop` is cancelled).
    pub(crate) async fn run_all(
        &self,
        calls: &[ToolCall],
        stop: &CancellationToken,
        turn: &tracing::Span,
        gate: &dyn TurnObserver,
    ) -> Vec<CallResult> {
        // A call's future is made when it may start, not all up front: a 10 000-call turn
        // held room for every call not started yet (and the vector that built them, until
        // the turn ended). A plain loop, not a lazy `map` inside a stream: that closure
        // trips rustc's higher-ranked Send inference when the run is spawned on a task.
        let limit = self.cfg.max_parallel_tools.max(1);
        let mut waiting = calls.iter();
        let mut running = futures::stream::FuturesOrdered::new();
        for c in waiting.by_ref().take(limit) {
            running.push_back(self.call(c, stop, turn, gate));
        }
        let mut results = Vec::with_capacity(calls.len());
        while let Some(done) = running.next().await {
            results.push(done);
            if let Some(c) = waiting.next() {
                running.push_back(self.call(c, stop, turn, gate));
            }
        }
        results
    }

    /// The future of one call, in its span: it asks `gate` first, as the call would start.
    fn call<'c>(
        &'c self,
        c: &'c ToolCall,
        stop: &'c CancellationToken,
        turn: &tracing::Span,
        gate: &'c dyn TurnObserver,
    ) -> tracing::instrument::Instrumented<impl Future<Output = CallResult> + 'c> {
        let span = otel::execute_tool(turn, &c.name, &c.id, &c.arguments);
        let in_span = span.clone();
        async move {
            if !gate.may_proceed(&self.run, Step::ToolCall(c)).await {
                stop.cancel();
                return (
                    not_run(c, "the run was stopped before this call could run"),
                    None,
                );
            }
            let done = self.run_one(c, stop).await;
            if let Message::Tool {
                content, is_error, ..
            } = &done.0
            {
                otel::record_tool_result(&in_span, *is_error, content);
            }
            done
        }
        .instrument(span)
    }

    /// The result of a call of an earlier run that an extension settled: shown and kept
    /// like the result of a call run here.
    pub(crate) fn settled(&self, call: &ToolCall, out: ToolOutput) -> Message {
        self.finish(call, &call.name, out, None).0
    }

    fn finish(
        &self,
        call: &ToolCall,
        tool: &str,
        out: ToolOutput,
        approved: Option<String>,
    ) -> CallResult {
        let content = match &self.cfg.offloader {
            Some(off) => off.apply(&self.run.session_id, &call.id, tool, out.content),
            None => out.content,
        };
        self.emitter.emit(Event::ToolResult {
            call_id: call.id.clone(),
            tool: tool.to_string(),
            output: content.clone(),
            is_error: out.is_error,
        });
        let msg = Message::Tool {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error: out.is_error,
            images: out.images,
        };
        (msg, approved)
    }

    /// One call, in its steps: what it is and what the hooks say, what the rules say, the
    /// user's answer when one is needed, then the call and the hooks after it. A step that
    /// refuses the call ends it with its result.
    async fn run_one(&self, call: &ToolCall, stop: &CancellationToken) -> CallResult {
        match self.judged(call, stop).await {
            Ok(Judged {
                tool,
                mut info,
                newly_approved,
            }) => {
                // Hooks after the call read its arguments; without any, they move to the
                // tool instead of being copied (each waiting call of a fan-out held a copy).
                let args = if self.cfg.hooks.is_empty() {
                    std::mem::take(&mut info.args)
                } else {
                    info.args.clone()
                };
                let mut out = self.execute(tool.as_ref(), &info.call_id, args, stop).await;
                for hook in &self.cfg.hooks {
                    if let Some(replaced) = hook.after(&info, &out, &self.run).await {
                        out = replaced;
                    }
                }
                self.finish(call, &call.name, out, newly_approved)
            }
            Err(refused) => *refused,
        }
    }

    /// The call as it will run, once the hooks, the rules and (when asked) the user let it.
    async fn judged(&self, call: &ToolCall, stop: &CancellationToken) -> Result<Judged, Refused> {
        let (tool, mut info, hooked) = self.prepared(call).await?;
        // What the call acts on, resolved; a path outside the workspace is refused here,
        // before any rule is consulted.
        let subject = tool
            .permission_subject(&info.args, &self.workspace)
            .map_err(|e| self.refuse(call, e.to_string()))?;
        let ask = self.ruled(call, tool.as_ref(), &subject, hooked)?;
        let newly_approved = match ask {
            Some((reason, risk)) => {
                self.asked(call, &mut info, subject.display(), (reason, risk), stop)
                    .await?
            }
            None => {
                otel::record_permission(&tracing::Span::current(), "allow", None);
                None
            }
        };
        Ok(Judged {
            tool,
            info,
            newly_approved,
        })
    }

    /// The call announced, its tool found, its arguments decoded and the hooks before it
    /// asked: the tool, the call as the hooks left it, and what they said.
    async fn prepared(
        &self,
        call: &ToolCall,
    ) -> Result<(Arc<dyn Tool>, ToolCallInfo, Hooked), Refused> {
        // Read before the call can run, so a preview diffs an overwrite against what it
        // replaces.
        let replaces = serde_json::from_str(&call.arguments).ok().and_then(|v| {
            cadre_tools::replaced_text(&call.name, &v, &self.workspace, &self.hidden)
        });
        self.emitter.emit(Event::ToolStart {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args: call.arguments.clone(),
            replaces,
        });
        let tool = self
            .available(&call.name)
            .map_err(|msg| self.refuse(call, msg))?
            .clone();
        let args = cadre_tools::decode_arguments(&call.name, &call.arguments)
            .map_err(|e| self.refuse(call, e.to_string()))?;
        let mut info = ToolCallInfo {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args,
        };
        let mut hooked = Hooked::default();
        for hook in &self.cfg.hooks {
            match hook.before(&info, &self.run).await {
                HookDecision::Allow => {}
                HookDecision::Approve(args) => {
                    hooked.approved = true;
                    if let Some(v) = args {
                        info.args = v;
                    }
                }
                HookDecision::Deny(reason) => {
                    return Err(self.refuse(call, format!("blocked: {reason}")));
                }
                HookDecision::Ask { reason, risk } => hooked.ask = Some((reason, risk)),
                HookDecision::ModifyArgs(v) => info.args = v,
            }
        }
        Ok((tool, info, hooked))
    }

    /// What the rules say of the call: refused, or the question to put to the user (`None`:
    /// it runs unasked).
    fn ruled(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        subject: &cadre_tools::PermissionSubject,
        hooked: Hooked,
    ) -> Result<Option<(String, RiskLevel)>, Refused> {
        let session_ok = self
            .approved
            .lock()
            .map(|a| a.contains(&call.name))
            .unwrap_or(false);
        let policy = &self.cfg.permissions;
        let mut ask = hooked.ask;
        match policy.decide(&call.name, subject, tool.is_read_only(), session_ok) {
            PolicyDecision::Allow => {}
            PolicyDecision::Deny(reason) => {
                otel::record_permission(&tracing::Span::current(), "deny", None);
                return Err(self.refuse(call, format!("denied: {reason}")));
            }
            // A hook's approval answers the policy's question, not a hook's.
            PolicyDecision::Ask(_) if hooked.approved && ask.is_none() => {}
            PolicyDecision::Ask(reason) => {
                let risk = if tool.is_read_only() {
                    RiskLevel::Low
                } else {
                    RiskLevel::Medium
                };
                ask = ask.or(Some((reason, risk)));
            }
        }
        Ok(if policy.mode == ApprovalMode::Bypass {
            None
        } else {
            ask
        })
    }

    /// Put the call to whoever answers (a `PermissionRequest` hook, the approval policy, or
    /// the user, while the run is not stopped): the tool approved for the session when the
    /// answer says so, or the refusal as the call's result.
    async fn asked(
        &self,
        call: &ToolCall,
        info: &mut ToolCallInfo,
        subject: Option<String>,
        (reason, risk): (String, RiskLevel),
        stop: &CancellationToken,
    ) -> Result<Option<String>, Refused> {
        let request = ApprovalRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            args: info.args.clone(),
            subject,
            reason,
            risk,
            agent: self.run.agent.clone(),
            task_id: self.run.task_id.clone(),
            // From the arguments the call would run with (a hook may have changed them).
            replaces: cadre_tools::replaced_text(
                &call.name,
                &info.args,
                &self.workspace,
                &self.hidden,
            ),
        };
        let asked = std::time::Instant::now();
        let hooked = crate::hook_points::permission_request(self.cfg, &self.run, &request);
        let answer = match hooked.await {
            // A hook answered for the user: nobody is asked.
            Some(d) => Some(d),
            // A policy answers without asking: nobody is told a request waits.
            None => self.run.approvals.policy_answer(&request),
        };
        let decision = match answer {
            Some(d) => d,
            None => {
                self.emitter.emit(Event::ApprovalRequired {
                    request: request.clone(),
                });
                let told =
                    crate::hook_points::approval_waits(self.cfg, &self.run, request.tool.clone());
                let asking = async { tokio::join!(told, self.run.approvals.decide(request)).1 };
                tokio::select! {
                    d = asking => d,
                    _ = stop.cancelled() => {
                        return Err(self.refuse(call, "cancelled while waiting for approval".into()));
                    }
                }
            }
        };
        otel::record_permission(
            &tracing::Span::current(),
            decision_name(&decision),
            Some(asked.elapsed()),
        );
        match decision {
            ApprovalDecision::AllowOnce => Ok(None),
            ApprovalDecision::AllowSession => {
                if let Ok(mut a) = self.approved.lock() {
                    a.insert(call.name.clone());
                }
                Ok(Some(call.name.clone()))
            }
            refused @ (ApprovalDecision::Deny { .. } | ApprovalDecision::Refused { .. }) => {
                Err(self.refuse(call, refused.refusal_text().unwrap_or_default()))
            }
        }
    }

    /// The result of a call refused before it ran.
    fn refuse(&self, call: &ToolCall, message: String) -> Refused {
        Box::new(self.finish(call, &call.name, ToolOutput::error(message), None))
    }

    /// The tool `name`, or why it cannot be called: withheld (with its reason), offered by
    /// the registry but outside the run's grant, or unknown.
    fn available(&self, name: &str) -> Result<&Arc<dyn Tool>, String> {
        if let Some(reason) = self.cfg.tools.refusal(name) {
            return Err(reason.to_string());
        }
        if let Some(tool) = self.tools.get(name) {
            return Ok(tool);
        }
        if self.cfg.tools.get(name).is_some() {
            tracing::warn!(tool = name, agent = %self.run.agent, "refused a call to a tool outside the run's grant");
            return Err(format!(
                "`{name}` is not available to {}: it was not granted to this run",
                self.run.agent
            ));
        }
        let names = self.tools.names().join(", ");
        Err(format!("unknown tool `{name}`. Available tools: {names}"))
    }

    async fn execute(
        &self,
        tool: &dyn Tool,
        call_id: &str,
        args: serde_json::Value,
        stop: &CancellationToken,
    ) -> ToolOutput {
        // The registry withholds network tools from such agents; this holds even when a
        // registry was built without that. A tool the agent's definition names follows its
        // own rules instead (the sandbox confines processes).
        if tool.uses_network()
            && !self.cfg.network_tools.iter().any(|n| n == tool.name())
            && let Some(sandbox) = self.workspace.sandbox()
            && sandbox.policy().denies_network()
        {
            let mode = sandbox.policy().mode.as_str();
            return ToolOutput::error(cadre_tools::network_refusal(tool.name(), mode));
        }
        let _read_guard;
        let _write_guard;
        if tool.parallel_safe() {
            _read_guard = self.exclusive.read().await;
        } else {
            _write_guard = self.exclusive.write().await;
        }
        if stop.is_cancelled() {
            return ToolOutput::error("not run: the run was cancelled");
        }
        // Write-ahead: from here the tool may act, so a crash must leave a trace that it
        // started (a call with none never ran, and is run again on resume).
        if let Err(e) = self.journal.started(call_id) {
            return ToolOutput::error(format!("not run: its start could not be recorded: {e}"));
        }
        let call_cancel = stop.child_token();
        let ctx = ToolContext {
            call_id: call_id.to_string(),
            workspace: self.workspace.clone(),
            cancel: call_cancel.clone(),
            run: self.run.clone(),
            tools: self.tools.clone(),
            hidden: self.hidden.clone(),
        };
        let fut = tool.call(args, &ctx);
        tokio::pin!(fut);
        let timeout = self.cfg.tool_timeout;
        let deadline = async {
            if tool.timeout_exempt() {
                std::future::pending::<()>().await
            } else {
                tokio::time::sleep(timeout).await
            }
        };
        let to_output = |r: Result<ToolOutput, cadre_tools::ToolError>| match r {
            Ok(o) => o,
            Err(e) => ToolOutput::error(e.to_string()),
        };
        tokio::select! {
            r = &mut fut => to_output(r),
            _ = deadline => {
                call_cancel.cancel();
                let partial = grace(&mut fut).await;
                let mut msg = format!(
                    "{} timed out after {}s and was stopped",
                    tool.name(),
                    timeout.as_secs_f64()
                );
                if let Some(Ok(o)) = partial
                    && !o.content.is_empty()
                {
                    msg.push('\n');
                    msg.push_str(&o.content);
                }
                ToolOutput::error(msg)
            }
            _ = stop.cancelled() => {
                const STOPPED: &str = "cancelled: the run was stopped while this call ran";
                // A call that wraps up within the grace keeps what it got (a sub-agent
                // stopped by the same budget returns its partial output).
                match grace(&mut fut).await {
                    Some(r) => {
                        let out = to_output(r);
                        ToolOutput::error(format!("{STOPPED}; its output:\n{}", out.content))
                    }
                    None => ToolOutput::error(STOPPED),
                }
            }
        }
    }
}

/// Give a cancelled call a moment to clean up; returns its result if it finished.
async fn grace<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
    tokio::time::timeout(CLEANUP_GRACE, fut).await.ok()
}

/// How an approval was answered, as the telemetry records it.
fn decision_name(d: &ApprovalDecision) -> &'static str {
    match d {
        ApprovalDecision::AllowOnce => "allow_once",
        ApprovalDecision::AllowSession => "allow_session",
        ApprovalDecision::Deny { .. } => "deny",
        ApprovalDecision::Refused { .. } => "refused",
    }
}
