//! Approval requests of served agents. Nobody sits at the server, so `[serve] approvals`
//! decides who answers: a fixed policy (deny, approve), or (`ask`) the remote caller: the
//! task goes to `input-required` with a message naming the agent, the tool and its
//! arguments, and the caller's next message on the same task answers it.
//!
//! An answer is a data part `{"approve": true|false, "feedback": "…"}`, or a text `yes`
//! (also `y`, `approve`, `allow`, `ok`), `always` (allow the tool for the rest of the task's
//! session), or `no` / `no: reason` (also `deny`). Any other message is kept in the task's
//! history and the question stays open. No answer within the timeout denies the call, and so
//! does shutdown.
//!
//! With a task store, the question the caller is asked is also written on the task's last
//! turn, so other nodes of the store show the task `input-required`, and an answer another
//! node stores there (compare and set on the question) is taken while the question waits.

use super::book::{Journal, Said};
use crate::a2a::parse::IncomingMessage;
use async_trait::async_trait;
use cadre_store::TaskStore;
use cadre_tools::ApprovalHandler;
use cadre_types::{ApprovalDecision, ApprovalRequest, RiskLevel};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;

/// How often a waiting question looks in the store for an answer another node stored.
const STORE_POLL: Duration = Duration::from_millis(250);

/// How the server answers the approval requests of the agents it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalPolicy {
    /// Refuse, with a reason the agent sees.
    Deny,
    /// Approve everything the agents' permission rules leave to a human.
    Approve,
    /// Ask the A2A caller: the task turns `input-required` until it answers. Task-protocol
    /// callers cannot be asked; their tasks' requests are denied.
    Ask,
}

/// Arguments longer than this are cut in the question's text (the data part has them all).
const MAX_ARGS_IN_TEXT: usize = 600;

/// One open question.
struct Pending {
    question: Question,
    reply: oneshot::Sender<ApprovalDecision>,
}

/// A question a task's agent asks its caller.
#[derive(Debug, Clone)]
pub(crate) struct Question {
    /// The request.
    pub request: ApprovalRequest,
    /// Its message id in the task's history.
    pub message_id: String,
}

impl Question {
    /// The question as the task's status message: a sentence and a data part.
    pub(crate) fn said(&self) -> Said {
        Said::Agent {
            text: question_text(&self.request),
            message_id: self.message_id.clone(),
            data: Some(question_data(&self.request)),
        }
    }

    /// The question as the store keeps it (JSON: `messageId`, `text`, `data`).
    fn stored(&self) -> String {
        json!({
            "messageId": self.message_id,
            "text": question_text(&self.request),
            "data": question_data(&self.request),
        })
        .to_string()
    }
}

/// A question as the store keeps it, back as the task's status message; `None` for
/// anything else.
pub(crate) fn stored_question(stored: &str) -> Option<Said> {
    let v: Value = serde_json::from_str(stored).ok()?;
    Some(Said::Agent {
        text: v.get("text")?.as_str()?.to_string(),
        message_id: v.get("messageId")?.as_str()?.to_string(),
        data: v.get("data").cloned(),
    })
}

/// An answer as another node stores it: the decision and the caller's message.
pub(crate) fn stored_answer(decision: &ApprovalDecision, message: &IncomingMessage) -> String {
    json!({"decision": decision, "text": message.text, "messageId": message.message_id}).to_string()
}

/// A stored answer read back: the decision (only the caller's: allow or deny) and the
/// caller's message (text, message id).
fn read_answer(stored: &str) -> Option<(ApprovalDecision, String, String)> {
    let v: Value = serde_json::from_str(stored).ok()?;
    let decision: ApprovalDecision = serde_json::from_value(v.get("decision")?.clone()).ok()?;
    if matches!(decision, ApprovalDecision::Refused { .. }) {
        return None;
    }
    let text = v.get("text")?.as_str()?.to_string();
    let message_id = v.get("messageId")?.as_str()?.to_string();
    Some((decision, text, message_id))
}

/// The store a gate publishes its question to, and what it last wrote there.
struct StoreLink {
    store: Arc<dyn TaskStore>,
    /// The turn and the question (stored form) written last; `None` when none is.
    written: tokio::sync::Mutex<Option<(String, String)>>,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Pending>,
    asked: u64,
    closed: bool,
}

/// The questions of one task, oldest first; the first is the one the caller sees.
pub(crate) struct ApprovalGate {
    journal: Arc<Journal>,
    queue: Mutex<Queue>,
    /// Where the open question is published for other nodes, when there is a store.
    link: Option<StoreLink>,
}

impl std::fmt::Debug for ApprovalGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalGate").finish_non_exhaustive()
    }
}

impl ApprovalGate {
    /// A gate recording its questions and answers in `journal`.
    pub(crate) fn new(journal: Arc<Journal>) -> Self {
        Self {
            journal,
            queue: Mutex::new(Queue::default()),
            link: None,
        }
    }

    /// The same gate, publishing its open question on the task's last turn in `store` and
    /// taking answers other nodes store there.
    pub(crate) fn with_store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.link = Some(StoreLink {
            store,
            written: tokio::sync::Mutex::new(None),
        });
        self
    }

    /// Bring the store up to date with the open question (write it on the last turn, or
    /// clear it), then take an answer another node stored for it. Store failures are
    /// logged: the question stays open here.
    async fn sync_store(&self) {
        let Some(link) = &self.link else { return };
        let want = match (self.question(), self.journal.last_turn()) {
            (Some(q), Some(turn)) => Some((turn, q.stored())),
            _ => None,
        };
        let mut written = link.written.lock().await;
        if *written != want {
            let mut ok = true;
            if let Some((turn, _)) = written.as_ref()
                && want.as_ref().is_none_or(|(t, _)| t != turn)
                && let Err(e) = link.store.set_question(turn, None).await
            {
                tracing::warn!(task = %turn, error = %e, "store: clearing a question failed");
                ok = false;
            }
            if let Some((turn, q)) = &want
                && let Err(e) = link.store.set_question(turn, Some(q)).await
            {
                tracing::warn!(task = %turn, error = %e, "store: writing a question failed");
                ok = false;
            }
            // What failed is tried again at the next look.
            if ok {
                *written = want.clone();
            }
        }
        drop(written);
        let Some((turn, q)) = want else { return };
        let rec = match link.store.get(&turn).await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(task = %turn, error = %e, "store: reading an answer failed");
                return;
            }
        };
        if rec.question.as_deref() != Some(q.as_str()) {
            return;
        }
        let Some((decision, text, message_id)) = rec.answer.as_deref().and_then(read_answer) else {
            return;
        };
        let Some(asked) = self.question() else { return };
        if asked.stored() != q {
            return;
        }
        tracing::info!(task = %turn, "approval answered on another node");
        let answer = IncomingMessage {
            plain: text.clone(),
            text,
            data: Vec::new(),
            message_id,
            context_id: None,
            task_id: None,
            agent: None,
        };
        self.answer(decision, &answer);
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        match self.queue.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The question the caller is asked now.
    pub(crate) fn question(&self) -> Option<Question> {
        self.queue().pending.front().map(|p| p.question.clone())
    }

    /// Ask the caller; the answer, or a denial after `timeout` (or when the gate closes).
    async fn ask(&self, request: ApprovalRequest, timeout: Duration) -> ApprovalDecision {
        let (tx, rx) = oneshot::channel();
        {
            let mut q = self.queue();
            if q.closed {
                return refused(SHUTDOWN, "the call was not run");
            }
            q.asked += 1;
            let question = Question {
                message_id: format!("approval-{}-{}", q.asked, request.call_id),
                request,
            };
            q.pending.push_back(Pending {
                question,
                reply: tx,
            });
        }
        self.journal.touch();
        // A run that is cancelled drops this future: its question goes with it.
        let _withdraw = Withdraw(self);
        self.sync_store().await;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = rx;
        let decision = loop {
            tokio::select! {
                d = &mut rx => break d.unwrap_or_else(|_| refused(SHUTDOWN, "the call was not run")),
                _ = tokio::time::sleep_until(deadline) => break refused(
                    "serve.approval_timeout_secs",
                    &format!(
                        "the caller did not answer within {} s; the call was not run",
                        timeout.as_secs()
                    ),
                ),
                _ = tokio::time::sleep(STORE_POLL), if self.link.is_some() => {
                    self.sync_store().await;
                }
            }
        };
        // This question is answered or gone: the store shows the next one, or none.
        drop(rx);
        self.withdraw_abandoned();
        self.sync_store().await;
        decision
    }

    /// Answer the open question with `decision`; the caller's `message` goes into the
    /// history after the question. False when no question is open.
    pub(crate) fn answer(&self, decision: ApprovalDecision, message: &IncomingMessage) -> bool {
        let Some(p) = self.queue().pending.pop_front() else {
            return false;
        };
        self.journal.record(p.question.said());
        self.journal.record(Said::User {
            text: message.text.clone(),
            message_id: message.message_id.clone(),
            turn: None,
        });
        let _ = p.reply.send(decision);
        true
    }

    /// Deny every open question and every later one (shutdown).
    pub(crate) fn close(&self) {
        let drained: Vec<Pending> = {
            let mut q = self.queue();
            q.closed = true;
            q.pending.drain(..).collect()
        };
        if drained.is_empty() {
            return;
        }
        for p in drained {
            let _ = p.reply.send(refused(SHUTDOWN, "the call was not run"));
        }
        self.journal.touch();
    }

    /// Drop the questions whose asker has gone (its run was cancelled).
    fn withdraw_abandoned(&self) {
        let before = {
            let mut q = self.queue();
            let n = q.pending.len();
            q.pending.retain(|p| !p.reply.is_closed());
            n != q.pending.len()
        };
        if before {
            self.journal.touch();
        }
    }
}

/// Removes the questions of runs that stopped waiting (cancelled, timed out).
struct Withdraw<'a>(&'a ApprovalGate);

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.0.withdraw_abandoned();
    }
}

/// A refusal by the server, naming the setting or event that refused.
fn refused(policy: &str, feedback: &str) -> ApprovalDecision {
    ApprovalDecision::Refused {
        policy: policy.to_string(),
        feedback: Some(feedback.to_string()),
    }
}

/// What the agent is told when shutdown refuses its call.
const SHUTDOWN: &str = "cadre serve shutting down";

/// The caller's answer to an open question, if `message` is one.
pub(crate) fn answer_of(message: &IncomingMessage) -> Option<ApprovalDecision> {
    for d in &message.data {
        if let Some(approve) = d.get("approve").and_then(Value::as_bool) {
            let feedback = d
                .get("feedback")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(str::to_string);
            let policy = d.get("policy").and_then(Value::as_str).map(str::trim);
            return Some(match (approve, policy) {
                (true, _) => ApprovalDecision::AllowOnce,
                // The caller's policy refused, not a person: say so to the agent.
                (false, Some(policy)) if !policy.is_empty() => ApprovalDecision::Refused {
                    policy: policy.to_string(),
                    feedback,
                },
                (false, _) => ApprovalDecision::Deny { feedback },
            });
        }
    }
    let text = message.plain.trim();
    let word_end = text
        .find(|c: char| !c.is_alphabetic())
        .unwrap_or(text.len());
    let (word, rest) = text.split_at(word_end);
    let rest = rest
        .trim_start_matches([':', ',', ';', '-', '.', '!'])
        .trim();
    match word.to_ascii_lowercase().as_str() {
        "yes" | "y" | "approve" | "approved" | "allow" | "ok" | "okay" if rest.is_empty() => {
            Some(ApprovalDecision::AllowOnce)
        }
        "always" if rest.is_empty() => Some(ApprovalDecision::AllowSession),
        "no" | "n" | "deny" | "denied" => Some(ApprovalDecision::Deny {
            feedback: (!rest.is_empty()).then(|| rest.to_string()),
        }),
        _ => None,
    }
}

fn risk_name(r: RiskLevel) -> &'static str {
    match r {
        RiskLevel::Low => "low",
        RiskLevel::Medium => "medium",
        RiskLevel::High => "high",
    }
}

/// The question in words: who asks to run what, and how to answer.
fn question_text(r: &ApprovalRequest) -> String {
    let what = match &r.subject {
        Some(s) => s.clone(),
        None => {
            let args = r.args.to_string();
            if args.len() > MAX_ARGS_IN_TEXT {
                let mut cut = MAX_ARGS_IN_TEXT;
                while !args.is_char_boundary(cut) {
                    cut -= 1;
                }
                format!("{}…", &args[..cut])
            } else {
                args
            }
        }
    };
    format!(
        "Agent `{}` asks to run `{}`: {what} ({}). Reply `yes` to allow it or `no: <why>` to refuse it, or send a data part {{\"approve\": true|false, \"feedback\": \"…\"}}.",
        r.agent, r.tool, r.reason
    )
}

/// The question as data, for programs: `{"approval": {...}}`.
fn question_data(r: &ApprovalRequest) -> Value {
    let mut a = json!({
        "agent": r.agent,
        "tool": r.tool,
        "args": r.args,
        "reason": r.reason,
        "risk": risk_name(r.risk),
        "callId": r.call_id,
    });
    if let (Some(s), Some(o)) = (&r.subject, a.as_object_mut()) {
        o.insert("subject".into(), json!(s));
    }
    json!({ "approval": a })
}

/// The approval handler of one served task's runs (and of the sub-agents they start).
pub(crate) struct TaskApprovals {
    /// Who answers.
    pub policy: ApprovalPolicy,
    /// The task's gate, when its caller can be asked.
    pub gate: Option<Arc<ApprovalGate>>,
    /// How long the caller has to answer.
    pub timeout: Duration,
}

#[async_trait]
impl ApprovalHandler for TaskApprovals {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalDecision {
        match (self.policy, &self.gate) {
            (ApprovalPolicy::Ask, Some(gate)) => {
                tracing::info!(agent = %request.agent, tool = %request.tool, "approval request: asking the caller");
                gate.ask(request, self.timeout).await
            }
            (ApprovalPolicy::Approve, _) => {
                tracing::info!(agent = %request.agent, tool = %request.tool, approved = true, "approval request answered by the serve policy");
                ApprovalDecision::AllowOnce
            }
            (policy, _) => {
                tracing::info!(agent = %request.agent, tool = %request.tool, approved = false, "approval request answered by the serve policy");
                let setting = if policy == ApprovalPolicy::Ask {
                    "serve.approvals = \"ask\", and task-protocol callers cannot be asked"
                } else {
                    "serve.approvals = \"deny\""
                };
                refused(
                    setting,
                    &format!(
                        "{} needs approval and nobody at this server can give it; it was not run. Continue without it or explain what you would have done.",
                        request.tool
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str, data: Vec<Value>) -> IncomingMessage {
        IncomingMessage {
            text: text.into(),
            plain: text.into(),
            data,
            message_id: "m".into(),
            context_id: None,
            task_id: None,
            agent: None,
        }
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            call_id: "c1".into(),
            tool: "bash".into(),
            args: json!({"command": "rm -rf build"}),
            subject: Some("rm -rf build".into()),
            reason: "bash changes things".into(),
            risk: RiskLevel::Medium,
            agent: "builder".into(),
            task_id: None,
            replaces: None,
        }
    }

    #[test]
    fn answers_in_text_and_data() {
        use ApprovalDecision::*;
        let deny = |f: Option<&str>| Deny {
            feedback: f.map(str::to_string),
        };
        for (text, want) in [
            ("yes", Some(AllowOnce)),
            (" Yes! ", Some(AllowOnce)),
            ("y", Some(AllowOnce)),
            ("approve", Some(AllowOnce)),
            ("ok.", Some(AllowOnce)),
            ("always", Some(AllowSession)),
            ("no", Some(deny(None))),
            ("No: use make clean", Some(deny(Some("use make clean")))),
            ("deny, too risky", Some(deny(Some("too risky")))),
            ("yes but only in /tmp", None),
            ("yesterday", None),
            ("nothing to say", None),
            ("what does it do?", None),
            ("", None),
        ] {
            assert_eq!(answer_of(&msg(text, vec![])), want, "{text:?}");
        }
        assert_eq!(
            answer_of(&msg("", vec![json!({"approve": true})])),
            Some(AllowOnce)
        );
        assert_eq!(
            answer_of(&msg(
                "whatever",
                vec![json!({"approve": false, "feedback": " no deletes "})]
            )),
            Some(deny(Some("no deletes")))
        );
        assert_eq!(answer_of(&msg("", vec![json!({"approve": "yes"})])), None);
        // A caller's policy refused: the agent is not told a person denied it.
        let refused = answer_of(&msg(
            "no: refused by policy (x)",
            vec![json!({"approve": false, "policy": "subagents.background_approvals = \"deny\""})],
        ))
        .unwrap();
        let text = refused.refusal_text().unwrap();
        assert!(!text.contains("by the user"), "{text}");
        assert!(
            text.starts_with("refused by policy (subagents.background_approvals"),
            "{text}"
        );
    }

    #[test]
    fn the_question_names_the_agent_the_tool_and_the_arguments() {
        let r = request();
        let t = question_text(&r);
        assert!(t.contains("`builder`") && t.contains("`bash`") && t.contains("rm -rf build"));
        let d = question_data(&r);
        assert_eq!(d["approval"]["tool"], "bash");
        assert_eq!(d["approval"]["args"]["command"], "rm -rf build");
        assert_eq!(d["approval"]["callId"], "c1");
        let mut long = r;
        long.subject = None;
        long.args = json!({"x": "é".repeat(2000)});
        assert!(question_text(&long).len() < 2 * MAX_ARGS_IN_TEXT);
    }

    #[tokio::test]
    async fn a_question_is_answered_withdrawn_timed_out_or_closed() {
        let journal = Arc::new(Journal::new("hi".into(), "m0".into()));
        let gate = Arc::new(ApprovalGate::new(journal.clone()));
        let mut changes = journal.changes();

        // Answered: the decision reaches the asker, the exchange the history.
        let g = gate.clone();
        let asking = tokio::spawn(async move { g.ask(request(), Duration::from_secs(60)).await });
        changes.changed().await.unwrap();
        assert_eq!(gate.question().unwrap().request.tool, "bash");
        assert!(gate.answer(ApprovalDecision::AllowOnce, &msg("yes", vec![])));
        assert_eq!(asking.await.unwrap(), ApprovalDecision::AllowOnce);
        assert!(gate.question().is_none());
        assert_eq!(journal.copy().history.len(), 3, "input, question, answer");
        assert!(!gate.answer(ApprovalDecision::AllowOnce, &msg("yes", vec![])));

        // Withdrawn: a cancelled run takes its question with it.
        changes.borrow_and_update();
        let g = gate.clone();
        let asking = tokio::spawn(async move { g.ask(request(), Duration::from_secs(60)).await });
        changes.changed().await.unwrap();
        assert!(gate.question().is_some());
        asking.abort();
        let _ = asking.await;
        assert!(gate.question().is_none());

        // Closed: open and later questions are denied.
        changes.borrow_and_update();
        let g = gate.clone();
        let asking = tokio::spawn(async move { g.ask(request(), Duration::from_secs(60)).await });
        changes.changed().await.unwrap();
        gate.close();
        assert!(matches!(
            asking.await.unwrap(),
            ApprovalDecision::Refused { .. }
        ));
        assert!(matches!(
            gate.ask(request(), Duration::from_secs(60)).await,
            ApprovalDecision::Refused { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn the_question_is_in_the_store_and_an_answer_stored_there_reaches_the_asker() {
        use cadre_store::{MemoryStore, NewTask, NodeId, Transition};
        let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new(NodeId::new("a")));
        let id = store
            .create(&NewTask::new("w", "serve-1", "p"))
            .await
            .unwrap()
            .id;
        store.transition(&id, Transition::running()).await.unwrap();
        let journal = Arc::new(Journal::new("hi".into(), "m0".into()));
        journal.started(id.clone());
        let gate = Arc::new(ApprovalGate::new(journal.clone()).with_store(store.clone()));
        let g = gate.clone();
        let asking = tokio::spawn(async move { g.ask(request(), Duration::from_secs(60)).await });
        let mut stored = None;
        for _ in 0..1000 {
            stored = store.get(&id).await.unwrap().unwrap().question;
            if stored.is_some() {
                break;
            }
            tokio::task::yield_now().await;
        }
        let stored = stored.expect("the question reached the store");
        let shown = stored_question(&stored).unwrap();
        assert_eq!(shown, gate.question().unwrap().said());

        // Another node answers through the store; the asker gets it, the store is cleared.
        let deny = ApprovalDecision::Deny {
            feedback: Some("from b".into()),
        };
        let answer = stored_answer(&deny, &msg("no: from b", vec![]));
        assert!(store.answer_question(&id, &stored, &answer).await.unwrap());
        assert_eq!(asking.await.unwrap(), deny);
        let after = store.get(&id).await.unwrap().unwrap();
        assert_eq!((after.question, after.answer), (None, None));
        let history = journal.copy().history;
        assert_eq!(history.len(), 3, "input, question, answer");
        assert!(matches!(&history[2], Said::User { text, .. } if text == "no: from b"));

        // A question answered here is cleared from the store too.
        let g = gate.clone();
        let asking = tokio::spawn(async move { g.ask(request(), Duration::from_secs(60)).await });
        while gate.question().is_none() {
            tokio::task::yield_now().await;
        }
        assert!(gate.answer(ApprovalDecision::AllowOnce, &msg("yes", vec![])));
        assert_eq!(asking.await.unwrap(), ApprovalDecision::AllowOnce);
        assert_eq!(store.get(&id).await.unwrap().unwrap().question, None);
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_in_time_denies() {
        let gate = ApprovalGate::new(Arc::new(Journal::new("hi".into(), "m0".into())));
        let d = gate.ask(request(), Duration::from_secs(300)).await;
        let ApprovalDecision::Refused {
            feedback: Some(f), ..
        } = d
        else {
            panic!("{d:?}")
        };
        assert!(f.contains("300 s"), "{f}");
        assert!(gate.question().is_none());
    }
}
