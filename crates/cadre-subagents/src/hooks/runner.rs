//! Running one handler: a command through `sh -c` (or its exec form) with the event's JSON
//! on stdin, no TTY, the same secret-free environment as `bash`, in a process group of its
//! own that is killed at the timeout; or an HTTP POST of the same JSON. What a handler
//! prints is read up to [`MAX_OUTPUT_CHARS`] and the rest discarded as it arrives, so a
//! handler printing without end costs no memory.

use super::settings::{Handler, HandlerKind};
use cadre_tools::SecretEnv;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// What a handler's stdout, stderr or HTTP body is cut to.
pub const MAX_OUTPUT_CHARS: usize = 10_000;

/// How a handler ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code (an HTTP handler: 0 for a 2xx answer).
    Exited(i32),
    /// It ran past its timeout and was killed.
    TimedOut,
    /// It could not be started, was killed by a signal, or the request failed.
    Failed(String),
}

/// What one handler produced.
#[derive(Debug, Clone)]
pub struct HandlerRun {
    /// How it ended.
    pub ending: Ending,
    /// Its stdout (an HTTP handler: the response body), capped.
    pub stdout: String,
    /// Its stderr, capped.
    pub stderr: String,
}

/// Where handlers run, and with what environment.
#[derive(Debug, Clone)]
pub struct RunnerEnv {
    /// The workspace: the commands' working directory, `$CLAUDE_PROJECT_DIR` and
    /// `$CADRE_WORKSPACE`.
    pub workspace: PathBuf,
    /// The variables kept from them, as from `bash`.
    pub secrets: SecretEnv,
}

/// Bytes read and kept at most (a character is at most four bytes).
const MAX_KEPT_BYTES: usize = MAX_OUTPUT_CHARS * 4;

impl RunnerEnv {
    /// Run `handler` on `input` for at most `timeout`.
    pub async fn run(&self, handler: &Handler, input: &[u8], timeout: Duration) -> HandlerRun {
        let timeout = handler.timeout.unwrap_or(timeout);
        match &handler.kind {
            HandlerKind::Command { command, args } => {
                self.run_command(command, args, input, timeout).await
            }
            HandlerKind::Http { url, headers } => post(url, headers, input, timeout).await,
        }
    }

    async fn run_command(
        &self,
        command: &str,
        args: &[String],
        input: &[u8],
        timeout: Duration,
    ) -> HandlerRun {
        let mut cmd = if args.is_empty() {
            let mut c = std::process::Command::new("sh");
            c.arg("-c").arg(command);
            c
        } else {
            let mut c = std::process::Command::new(command);
            c.args(args);
            c
        };
        self.secrets.apply(&mut cmd);
        cmd.env("CLAUDE_PROJECT_DIR", &self.workspace)
            .env("CADRE_WORKSPACE", &self.workspace)
            .current_dir(&self.workspace);
        // What the handler reports to a tracing backend joins the trace of the step it
        // runs for, as `bash` does.
        for (name, value) in cadre_tools::otel::current_trace_fields() {
            cmd.env(name.to_ascii_uppercase(), value);
        }
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return failed(format!("cannot start: {e}")),
        };
        let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) else {
            return failed("exited before it could be tracked".into());
        };
        cadre_sandbox::tether::watch_group(pid.unsigned_abs());
        let group = Group(Pid::from_raw(pid));
        let mut stdin = child.stdin.take();
        let input = input.to_vec();
        // The input is written while the output is read: a handler that prints before it
        // reads must not block on a full pipe.
        let feed = async move {
            if let Some(s) = stdin.as_mut() {
                // A handler that exits without reading its input is fine.
                let _ = s.write_all(&input).await;
            }
            drop(stdin);
        };
        let out = capped(child.stdout.take());
        let err = capped(child.stderr.take());
        let work = async {
            let (_, out, err, status) = tokio::join!(feed, out, err, child.wait());
            (out, err, status)
        };
        let result = tokio::time::timeout(timeout, work).await;
        // Whatever it left running in its group goes with it.
        drop(group);
        match result {
            Err(_) => HandlerRun {
                ending: Ending::TimedOut,
                stdout: String::new(),
                stderr: String::new(),
            },
            Ok((stdout, stderr, status)) => {
                let ending = match status {
                    Ok(s) => match s.code() {
                        Some(c) => Ending::Exited(c),
                        None => Ending::Failed(format!("killed ({s})")),
                    },
                    Err(e) => Ending::Failed(format!("cannot wait for it: {e}")),
                };
                HandlerRun {
                    ending,
                    stdout,
                    stderr,
                }
            }
        }
    }
}

/// A handler's process group, killed when dropped.
struct Group(Pid);

impl Drop for Group {
    fn drop(&mut self) {
        // ESRCH (the group is already gone) is fine.
        let _ = killpg(self.0, Signal::SIGKILL);
        cadre_sandbox::tether::release_group(self.0.as_raw().unsigned_abs());
    }
}

fn failed(why: String) -> HandlerRun {
    HandlerRun {
        ending: Ending::Failed(why),
        stdout: String::new(),
        stderr: String::new(),
    }
}

/// Everything `r` gives until it ends, keeping only the first [`MAX_OUTPUT_CHARS`].
async fn capped(r: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut r) = r else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_KEPT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    cut(&kept)
}

/// `bytes` as text, at most [`MAX_OUTPUT_CHARS`] characters.
fn cut(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .take(MAX_OUTPUT_CHARS)
        .collect()
}

/// POST `input` to `url`; the body of a 2xx answer is read like a command's stdout.
async fn post(
    url: &str,
    headers: &[(String, String)],
    input: &[u8],
    timeout: Duration,
) -> HandlerRun {
    let client = match reqwest::Client::builder()
        .timeout(timeout)
        // The URL is the user's; where it redirects is not.
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot build the HTTP client: {e}")),
    };
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .body(input.to_vec());
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    for (name, value) in cadre_tools::otel::current_trace_fields() {
        req = req.header(name, value);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            return HandlerRun {
                ending: Ending::TimedOut,
                stdout: String::new(),
                stderr: String::new(),
            };
        }
        Err(e) => return failed(format!("POST {url}: {e}")),
    };
    let status = resp.status();
    let mut kept = Vec::new();
    let mut resp = resp;
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_KEPT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) => break,
            Err(e) if e.is_timeout() => {
                return HandlerRun {
                    ending: Ending::TimedOut,
                    stdout: String::new(),
                    stderr: String::new(),
                };
            }
            Err(_) => break,
        }
    }
    let body = cut(&kept);
    if status.is_success() {
        HandlerRun {
            ending: Ending::Exited(0),
            stdout: body,
            stderr: String::new(),
        }
    } else {
        HandlerRun {
            ending: Ending::Failed(format!("POST {url}: HTTP {status}")),
            stdout: String::new(),
            stderr: body,
        }
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
