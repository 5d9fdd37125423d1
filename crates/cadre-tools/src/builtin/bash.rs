//! `bash`: run a shell command in the workspace, in its own process group, with a timeout,
//! cancellation and bounded output.

use crate::{
    PermissionSubject, SecretEnv, ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool,
    Workspace,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::time::Instant;

const DEFAULT_TIMEOUT_MS: u64 = 120_000;
const MAX_TIMEOUT_MS: u64 = 600_000;
/// Bytes kept from the start of each stream.
const HEAD_BYTES: usize = 16 * 1024;
/// Bytes kept from the end of each stream.
const TAIL_BYTES: usize = 16 * 1024;
/// How long output is still read after the shell exits or its group is killed.
const GRACE: Duration = Duration::from_millis(200);

/// Runs shell commands, in an environment without cadre's own secrets.
#[derive(Debug, Clone, Default)]
pub struct BashTool {
    secrets: SecretEnv,
}

impl BashTool {
    /// A bash tool whose commands do not see the variables `secrets` removes.
    pub fn new(secrets: SecretEnv) -> Self {
        Self { secrets }
    }
}

/// The arguments of `bash`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Args {
    /// The bash command line to run, e.g. `cargo test 2>&1 | tail -50`.
    command: String,
    /// Kill the command after this many milliseconds.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS), extend("default" = DEFAULT_TIMEOUT_MS))]
    timeout_ms: Option<u64>,
    /// A few words saying what the command does, shown to the user.
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "the user sees it in the call's arguments; bash ignores it"
    )]
    description: Option<String>,
}

/// How the command ended.
enum Ending {
    /// The shell exited on its own.
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

impl TypedTool for BashTool {
    const INFO: ToolInfo = ToolInfo::builtin("bash")
        .with_subject()
        .titled(&["command"])
        .foreign_names(&["Bash", "run_shell_command"]);
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        format!(
            "Run a command with `bash -c` in the workspace root and return its stdout, stderr \
             and exit code. Use it for builds, tests, git and other programs; use the file tools \
             (read_file, edit_file, glob, grep, list_dir) rather than cat/sed/find/grep. Stdin is \
             closed, so interactive programs fail: pass flags like `--yes`/`--no-pager`. Each \
             call starts a fresh shell (cd and variables do not persist). The command is killed \
             with all its child processes after `timeout_ms` (default {DEFAULT_TIMEOUT_MS}, max \
             {MAX_TIMEOUT_MS}). Background processes that keep the output open are killed when \
             the shell exits; redirect their output (`cmd > log 2>&1 &`) to keep them running. \
             Long output keeps its first and last {} KiB per stream.",
            HEAD_BYTES / 1024
        )
        .into()
    }

    fn permission_subject(
        &self,
        args: &Args,
        _workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(PermissionSubject::command(&args.command))
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::InvalidArgs("command is empty".into()));
        }
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let timeout_ms = args
            .timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS);
        // Protected locations missing now are checked again once the command has ended.
        let watch = ctx.workspace.sandbox().map(|s| (s, s.watch_protected()));
        let mut child = self.spawn(&args.command, ctx)?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| ToolError::Failed("bash exited before it could be tracked".into()))?;
        // From here on, dropping this call (an outer timeout) still kills the whole group,
        // and so does cadre's death, however it dies.
        cadre_sandbox::tether::watch_group(pid.unsigned_abs());
        let mut group = GroupGuard(Some(Pid::from_raw(pid)));
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let (mut out, mut err) = (Bounded::default(), Bounded::default());
        let deadline = tokio::time::sleep(Duration::from_millis(timeout_ms));
        let grace = tokio::time::sleep(Duration::MAX);
        tokio::pin!(deadline, grace);
        let (mut out_buf, mut err_buf) = ([0u8; 8192], [0u8; 8192]);
        let mut status = None;
        let ending = loop {
            if let (Some(s), None, None) = (status, &stdout, &stderr) {
                break Ending::Exited(s);
            }
            tokio::select! {
                r = read_some(&mut stdout, &mut out_buf) => match r {
                    Ok(n) if n > 0 => out.push(&out_buf[..n]),
                    _ => stdout = None,
                },
                r = read_some(&mut stderr, &mut err_buf) => match r {
                    Ok(n) if n > 0 => err.push(&err_buf[..n]),
                    _ => stderr = None,
                },
                s = child.wait(), if status.is_none() => {
                    let s = s.map_err(|e| ToolError::io("waiting for bash", e))?;
                    status = Some(s);
                    grace.as_mut().reset(Instant::now() + GRACE);
                }
                _ = &mut grace, if status.is_some() => {
                    if let Some(s) = status {
                        break Ending::Exited(s);
                    }
                }
                _ = &mut deadline => match status {
                    Some(s) => break Ending::Exited(s),
                    None => break Ending::TimedOut,
                },
                _ = ctx.cancel.cancelled() => break Ending::Cancelled,
            }
        };
        // Pipes still open means something in the group outlived the shell (or the shell
        // itself is still running): kill the group, then collect what is left.
        let held_open = stdout.is_some() || stderr.is_some();
        if held_open || status.is_none() {
            group.kill();
            let _ = tokio::time::timeout(GRACE, async {
                tokio::join!(drain(&mut stdout, &mut out), drain(&mut stderr, &mut err))
            })
            .await;
            if status.is_none() {
                let _ = tokio::time::timeout(GRACE, child.wait()).await;
            }
        }
        group.disarm();
        let mut body = render_streams(&out, &err);
        if let Some((sandbox, watch)) = watch {
            for moved in sandbox.settle(watch) {
                body.push_str(&moved.describe(ctx.workspace.root()));
                body.push('\n');
            }
        }
        outcome(ending, body, held_open, timeout_ms)
    }
}

impl BashTool {
    /// `bash -c command` in the workspace's sandbox, in a process group of its own, with
    /// the environment of every command (secrets removed, the call's trace context).
    fn spawn(&self, command: &str, ctx: &ToolContext) -> Result<Child, ToolError> {
        let mut sandboxed = ctx
            .workspace
            .command("bash")
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        // The sandbox launcher (bwrap or cadre's own) passes its environment on to bash.
        self.secrets.apply(&mut sandboxed);
        // What the command reports to a tracing backend joins the call's trace.
        for (name, value) in crate::otel::current_trace_fields() {
            sandboxed.env(name.to_ascii_uppercase(), value);
        }
        Command::from(sandboxed)
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ToolError::io("cannot start bash", e))
    }
}

/// The call's result from how the command ended and what it printed (`body`).
fn outcome(
    ending: Ending,
    body: String,
    held_open: bool,
    timeout_ms: u64,
) -> Result<ToolOutput, ToolError> {
    match ending {
        Ending::Cancelled => Err(ToolError::Cancelled),
        Ending::TimedOut => Ok(ToolOutput::error(format!(
            "command timed out after {}; process group killed\n{body}",
            seconds(timeout_ms)
        ))),
        Ending::Exited(s) => {
            let mut text = body;
            if held_open {
                text.push_str(
                    "[the shell exited but background processes kept its output open; \
                     they were killed]\n",
                );
            }
            text.push_str(&describe_status(s));
            Ok(ToolOutput::ok(text))
        }
    }
}

/// Kills a process group when dropped, unless disarmed. A disarmed group that still has
/// processes (background jobs with their output redirected) stays tied to cadre's life.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // ESRCH (the group is already gone) is fine.
            let _ = killpg(pgid, Signal::SIGKILL);
            cadre_sandbox::tether::release_group(pgid.as_raw().unsigned_abs());
        }
    }

    fn disarm(&mut self) {
        if let Some(pgid) = self.0.take() {
            cadre_sandbox::tether::release_group_if_empty(pgid.as_raw().unsigned_abs());
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Read from a pipe that may already be closed (`None` never completes).
async fn read_some<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match pipe {
        Some(p) => p.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Read a pipe to its end into `into`, then close it.
async fn drain<R: AsyncRead + Unpin>(pipe: &mut Option<R>, into: &mut Bounded) {
    let mut buf = [0u8; 8192];
    while let Some(p) = pipe {
        match p.read(&mut buf).await {
            Ok(n) if n > 0 => into.push(&buf[..n]),
            _ => *pipe = None,
        }
    }
}

/// Output that keeps its first [`HEAD_BYTES`] and last [`TAIL_BYTES`] bytes.
#[derive(Default)]
struct Bounded {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    omitted: u64,
}

impl Bounded {
    fn push(&mut self, data: &[u8]) {
        let n = HEAD_BYTES.saturating_sub(self.head.len()).min(data.len());
        self.head.extend_from_slice(&data[..n]);
        self.tail.extend(&data[n..]);
        if self.tail.len() > TAIL_BYTES {
            let excess = self.tail.len() - TAIL_BYTES;
            self.tail.drain(..excess);
            self.omitted += excess as u64;
        }
    }

    fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.omitted > 0 {
            end_line(&mut text);
            text.push_str(&format!("[... {} bytes omitted ...]\n", self.omitted));
        }
        let (a, b) = self.tail.as_slices();
        text.push_str(&String::from_utf8_lossy(&[a, b].concat()));
        end_line(&mut text);
        text
    }
}

fn end_line(text: &mut String) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
}

/// Stdout, then stderr under a `[stderr]` label.
fn render_streams(out: &Bounded, err: &Bounded) -> String {
    let mut text = out.render();
    if !err.is_empty() {
        text.push_str("[stderr]\n");
        text.push_str(&err.render());
    }
    if text.is_empty() {
        text.push_str("(no output)\n");
    }
    text
}

fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "exit status unknown".to_string(),
    }
}

/// `120s`, `0.5s`.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
