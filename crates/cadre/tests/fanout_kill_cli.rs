//! A fan-out killed with SIGKILL and resumed, end to end: `cadre run` (SQLite store) whose
//! parent starts a dozen background workers (`on_orphan = "resume"`) is killed at a point
//! counted at the mock model (early, in the middle of the first turns, during the final
//! answers), then `cadre run --resume`. The resumed run ends within a deadline (nothing
//! waits for the orphan timeout: the dead owner is a process of this machine), every worker
//! is delivered once, no model turn that was served is asked again (each completed turn was
//! durable before the next model call), and each worker's side effect happened once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod serve_support;

use cadre_testkit::{MockServer, OpenAiStream, RecordedRequest, eventually};
use serde_json::{Value, json};
use serve_support::{answer, cadre, call, messages, workspace};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Workers the parent starts.
const N: usize = 12;
/// How long any awaited condition, and the resumed run, may take.
const DEADLINE: Duration = Duration::from_secs(30);
/// What a held request waits before its answer: longer than any test runs.
const HELD: Duration = Duration::from_secs(600);

/// Who asked: the parent (`main`) or worker `job-NN`.
type Who = String;

/// What the mock saw and may do: requests asked and replies served per (who, turn); with
/// `held`, how many worker first and final turns it serves before the kill (the rest are
/// held, never answered), without it everything is served; after the kill everything is.
#[derive(Default)]
struct Book {
    asked: HashMap<(Who, usize), usize>,
    served: HashMap<(Who, usize), usize>,
    held: Option<(usize, usize)>,
    open: bool,
    /// The turns asked before the kill.
    before_kill: HashSet<(Who, usize)>,
}

impl Book {
    /// Workers whose turn `turn` was served.
    fn workers_served(&self, turn: usize) -> usize {
        self.served
            .keys()
            .filter(|(who, t)| who != "main" && *t == turn)
            .count()
    }

    /// Workers whose turn `turn` was asked.
    fn workers_asked(&self, turn: usize) -> usize {
        self.asked
            .keys()
            .filter(|(who, t)| who != "main" && *t == turn)
            .count()
    }

    /// True when the request for `who`'s `turn` is answered now.
    fn serves(&self, who: &str, turn: usize) -> bool {
        let Some((first, finals)) = self.held.filter(|_| !self.open) else {
            return true;
        };
        match (who, turn) {
            // The parent's spawn and its reply while waiting; its deliveries wait.
            ("main", t) => t < 2,
            (_, 0) => self.workers_served(0) < first,
            (_, _) => self.workers_served(1) < finals,
        }
    }

    /// The kill happened: everything is served from now on.
    fn open(&mut self) {
        self.open = true;
        self.before_kill = self.asked.keys().cloned().collect();
    }
}

type Shared = Arc<Mutex<Book>>;

fn lock(book: &Shared) -> MutexGuard<'_, Book> {
    book.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Who sent `r`: a worker's system prompt is its definition's body, its task says its job.
fn who(r: &RecordedRequest) -> Who {
    let msgs = messages(r);
    let system = msgs
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    if !system.contains("You work.") {
        return "main".to_string();
    }
    let prompt = msgs
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    prompt
        .find("job-")
        .and_then(|at| prompt.get(at..at + 6))
        .unwrap_or("job-??")
        .to_string()
}

/// The turn a request asks for: the replies the agent has had.
fn turn(r: &RecordedRequest) -> usize {
    messages(r)
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// The parent's first reply: every worker started in the background.
fn spawn_all() -> cadre_testkit::MockReply {
    let mut s = OpenAiStream::new().role();
    for i in 0..N {
        let job = format!("job-{i:02}");
        let args = json!({"subagent_type": "worker", "description": job,
            "prompt": format!("do {job}"), "background": true});
        s = s.tool_call(i, &format!("call_{i}"), "task", &args.to_string());
    }
    s.finish("tool_calls").usage(30, 10, 0).done().into_reply()
}

fn reply(who: &str, turn: usize) -> cadre_testkit::MockReply {
    match (who, turn) {
        ("main", 0) => spawn_all(),
        ("main", _) => answer("noted"),
        (job, 0) => call(
            "bash",
            json!({"command": format!("echo once >> {job}.side")}),
        ),
        (job, _) => answer(&format!("{job} is done")),
    }
}

async fn model(held: Option<(usize, usize)>) -> (MockServer, Shared) {
    let book: Shared = Arc::new(Mutex::new(Book {
        held,
        ..Book::default()
    }));
    let seen = book.clone();
    let mock = MockServer::start_with(Arc::new(move |r: &RecordedRequest| {
        let (who, turn) = (who(r), turn(r));
        let mut b = lock(&seen);
        *b.asked.entry((who.clone(), turn)).or_default() += 1;
        if !b.serves(&who, turn) {
            return answer("held").delayed(HELD);
        }
        *b.served.entry((who.clone(), turn)).or_default() += 1;
        reply(&who, turn)
    }))
    .await
    .unwrap();
    (mock, book)
}

fn worker_workspace(max_concurrent: usize) -> tempfile::TempDir {
    workspace(&[
        (
            ".cadre/agents/worker.md",
            "---\nname: worker\ndescription: Works.\nworkspace: {mode: shared}\n---\nYou work.\n",
        ),
        (
            ".cadre/config.toml",
            // The orphan timeout is long: a resume that waited for it would not end in time.
            &format!(
                "[store]\norphan_timeout_secs = 600\n\n\
                 [subagents]\non_orphan = \"resume\"\nbackground_approvals = \"escalate\"\nmax_concurrent = {max_concurrent}\n"
            ),
        ),
    ])
}

/// `cadre run` on the mock with JSONL output, then `args`; its stderr goes to `log`.
fn cadre_run(ws: &Path, mock: &MockServer, log: &str, args: &[&str]) -> std::process::Command {
    let stderr = std::fs::File::create(ws.join(log)).unwrap();
    let mut cmd = cadre(ws);
    cmd.env("OPENAI_BASE_URL", mock.openai_base_url())
        .env("OPENAI_API_KEY", "test-key")
        .args(["--model", "openai:mock-model", "run", "--approval", "auto"])
        .args(["--output", "jsonl"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr);
    cmd
}

/// A run's JSONL events, collected as they come.
fn collect_events(child: &mut Child) -> Arc<Mutex<Vec<Value>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                sink.lock().unwrap().push(v);
            }
        }
    });
    events
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    eventually(what, DEADLINE, || {
        let held = cond();
        async move { held }
    })
    .await;
}

fn tasks(ws: &Path) -> Vec<Value> {
    let out = cadre(ws)
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Where the kill falls.
#[derive(Clone, Copy)]
enum KillPoint {
    /// Once `first` workers' first turns were served and each asked for its final turn,
    /// and `finals` final answers were served and are completed in the store; nothing
    /// else was answered. Every turn served is then recorded.
    Held {
        first: usize,
        finals: usize,
        max_concurrent: usize,
    },
    /// Wherever the run is once the mock has had this many requests, all answered at once:
    /// a reply served just before the kill may not be recorded yet.
    AtRequest(usize),
}

/// Start the fan-out, kill it at `at`, resume it, and check the aftermath.
async fn killed_and_resumed(at: KillPoint) {
    killed_then(at, Reap::First, |_| {}).await;
}

/// When the killed run is reaped (waited for by its parent, here the test).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reap {
    /// Before the resume starts.
    First,
    /// Only after the resume ended: meanwhile it is a zombie, dead but still listed.
    Last,
}

/// The same, reaped as `reap` says, with `after_kill` done to the workspace between the
/// kill and the resume.
async fn killed_then(at: KillPoint, reap: Reap, after_kill: impl FnOnce(&Path)) {
    let (held, max_concurrent) = match at {
        KillPoint::Held {
            first,
            finals,
            max_concurrent,
        } => (Some((first, finals)), max_concurrent),
        KillPoint::AtRequest(_) => (None, 16),
    };
    let (mock, book) = model(held).await;
    let dir = worker_workspace(max_concurrent);
    let ws = dir.path();
    let mut first = cadre_run(ws, &mock, "killed.log", &["start the jobs"])
        .spawn()
        .unwrap();
    let events = collect_events(&mut first);
    let session = eventually_session(&events).await;
    match at {
        KillPoint::Held { first, finals, .. } => {
            until_held(ws, &session, &book, first, finals).await;
        }
        KillPoint::AtRequest(n) => {
            until("the kill point", || mock.request_count() >= n).await;
        }
    }
    if let Some(status) = first.try_wait().unwrap() {
        let log = std::fs::read_to_string(ws.join("killed.log")).unwrap();
        panic!(
            "the run ended by itself ({status}, {} requests)\n{log}",
            mock.request_count()
        );
    }
    first.kill().unwrap();
    match reap {
        Reap::First => drop(first.wait().unwrap()),
        Reap::Last => {
            let stat = format!("/proc/{}/stat", first.id());
            until("the killed run a zombie", || {
                let text = std::fs::read_to_string(&stat).unwrap_or_default();
                text.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('Z'))
            })
            .await;
        }
    }
    lock(&book).open();
    after_kill(ws);

    let started = Instant::now();
    let mut again = cadre_run(
        ws,
        &mock,
        "resumed.log",
        &["--resume", &session, "any news?"],
    )
    .spawn()
    .unwrap();
    let resumed = collect_events(&mut again);
    let ended = wait_exit(&mut again).await;
    if reap == Reap::Last {
        first.wait().unwrap();
    }
    let stderr = std::fs::read_to_string(ws.join("resumed.log")).unwrap();
    let stdout = resumed.lock().unwrap().clone();
    assert!(
        ended.is_some(),
        "the resumed run hung: still running after {DEADLINE:?}\n{stderr}"
    );
    assert!(ended.unwrap().success(), "{stdout:#?}\n{stderr}");
    eprintln!("resumed run took {:?}", started.elapsed());
    check_aftermath(ws, &mock, &book, held.is_some(), &stdout);
}

/// Wait for a [`KillPoint::Held`]: the parent's reply while waiting is recorded (so it is
/// not asked again), each served first turn is followed by that worker's request for its
/// final turn (it ran its call and asks again, so the turn is complete), and the served
/// final answers are completed in the store.
async fn until_held(ws: &Path, session: &str, book: &Shared, first: usize, finals: usize) {
    let file = ws.join(format!(".cadre/sessions/{session}.jsonl"));
    until("the parent's reply while waiting, recorded", || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("noted"))
    })
    .await;
    until(
        "the served first turns followed by final-turn requests",
        || lock(book).workers_asked(1) >= first,
    )
    .await;
    if finals > 0 {
        until("the served final answers completed in the store", || {
            let done = tasks(ws)
                .iter()
                .filter(|t| t["status"] == "completed")
                .count();
            done >= finals
        })
        .await;
    }
}

/// The session id, from the killed run's first event.
async fn eventually_session(events: &Arc<Mutex<Vec<Value>>>) -> String {
    let mut id = None;
    until("the run's first event", || {
        id = events.lock().unwrap().iter().find_map(|e| {
            (e["agent"] == "main")
                .then(|| e["session_id"].as_str().map(str::to_string))
                .flatten()
        });
        id.is_some()
    })
    .await;
    id.unwrap()
}

/// The exit status of `child`, or `None` (after killing it) past the deadline.
async fn wait_exit(child: &mut Child) -> Option<std::process::ExitStatus> {
    let exited = cadre_testkit::poll_some(DEADLINE, || {
        let status = child.try_wait().unwrap();
        async move { status }
    })
    .await;
    if exited.is_some() {
        return exited;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

/// What must hold after the resumed run: no turn served twice (with a kill anywhere, one
/// whose reply may have been lost with the killed run may be asked again, unless the agent
/// had asked for its next turn before the kill: then it was recorded), every worker's task
/// given once, its side effect done once (or, killed in its call, it was told the call was
/// interrupted), and each result delivered once.
fn check_aftermath(ws: &Path, mock: &MockServer, book: &Shared, held: bool, resumed: &[Value]) {
    let b = lock(book);
    let twice: Vec<_> = b
        .served
        .iter()
        .filter(|((who, t), n)| **n > 1 && (held || b.before_kill.contains(&(who.clone(), t + 1))))
        .collect();
    assert!(twice.is_empty(), "turns served twice: {twice:?}");
    assert_eq!(b.workers_served(0), N, "{:?}", b.served);
    assert_eq!(b.workers_served(1), N, "{:?}", b.served);
    drop(b);
    let requests = mock.requests();
    // A worker adopted before its first reply was recorded is not given its task twice.
    for r in requests.iter().filter(|r| who(r) != "main") {
        let tasks = messages(r).iter().filter(|m| m["role"] == "user").count();
        assert_eq!(tasks, 1, "{}: {:#?}", who(r), messages(r));
    }
    for i in 0..N {
        let job = format!("job-{i:02}");
        let side = std::fs::read_to_string(ws.join(format!("{job}.side"))).unwrap_or_default();
        let told = || {
            requests
                .iter()
                .filter(|r| who(r) == job)
                .any(|r| r.body.to_string().contains("interrupted: outcome unknown"))
        };
        assert!(
            side == "once\n" || (!held && side.is_empty() && told()),
            "{job}'s side effect: {side:?}"
        );
    }
    // The parent's last request holds each worker's result once.
    let last = requests.iter().filter(|r| who(r) == "main").last().unwrap();
    let said: Vec<String> = messages(last)
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    for i in 0..N {
        let result = format!("job-{i:02} is done");
        let n: usize = said.iter().map(|m| m.matches(&result).count()).sum();
        // Killed anywhere, also between handing a result out and recording it.
        assert_eq!(n, 1, "{result} delivered {n} times: {said:#?}");
    }
    let mut delivered: Vec<String> = resumed
        .iter()
        .filter(|e| e["type"] == "results_delivered")
        .flat_map(|e| e["task_ids"].as_array().cloned().unwrap_or_default())
        .filter_map(|id| id.as_str().map(str::to_string))
        .collect();
    let all = delivered.len();
    delivered.sort();
    delivered.dedup();
    assert_eq!(all, delivered.len(), "a task delivered twice: {resumed:#?}");
    let listed = tasks(ws);
    assert_eq!(listed.len(), N, "one task per worker: {listed:#?}");
    for t in &listed {
        assert_eq!(t["status"], "completed", "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_early_in_the_first_turns_resumes_without_redoing_a_turn() {
    killed_and_resumed(KillPoint::Held {
        first: 2,
        finals: 0,
        max_concurrent: 16,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_midway_with_workers_queued_resumes_without_redoing_a_turn() {
    // Fewer may run at once than were started: some wait in the queue when the run dies.
    killed_and_resumed(KillPoint::Held {
        first: N / 2,
        finals: 0,
        max_concurrent: 8,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_the_final_answers_resumes_without_redoing_a_turn() {
    killed_and_resumed(KillPoint::Held {
        first: N,
        finals: N / 3,
        max_concurrent: 16,
    })
    .await;
}

/// Empty the transcript of each worker that had no reply yet: the state a worker's file is
/// in when its process dies after creating it and before writing its first record.
fn empty_unanswered_transcripts(ws: &Path) {
    let mut emptied = 0;
    for entry in std::fs::read_dir(ws.join(".cadre/sessions")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        if name.starts_with("sub-") && !text.contains("tool_calls") {
            std::fs::write(&path, "").unwrap();
            emptied += 1;
        }
    }
    assert_eq!(emptied, N - 2, "the workers without a reply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_before_their_transcripts_were_written_start_afresh() {
    let early = KillPoint::Held {
        first: 2,
        finals: 0,
        max_concurrent: 16,
    };
    killed_then(early, Reap::First, empty_unanswered_transcripts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_not_yet_reaped_is_not_waited_for() {
    // Its process is gone, but until its parent waits for it the kernel still lists it,
    // with its start time: a resume that took it for alive waited out the orphan timeout.
    let midway = KillPoint::Held {
        first: N / 2,
        finals: 0,
        max_concurrent: 16,
    };
    killed_then(midway, Reap::Last, |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_anywhere_resumes_without_redoing_a_recorded_turn() {
    // The parent asks twice and each worker twice before the run can end: killed once the
    // 20th request came (and the kill takes a moment), it is still running.
    for requests in [3, 8, 13, 17, 20] {
        killed_and_resumed(KillPoint::AtRequest(requests)).await;
    }
}
