//! The mock model server the fan-out talks to: by default its own process
//! (`cadre-bench mock-server`), so the measured process holds only cadre and the floor
//! client, as it would against a real provider; `--server-in-process` keeps it in the
//! measured process (the first measurements were taken that way).
//!
//! The child process prints `listening <base_url>` and then answers one line per command
//! read from stdin: `count` → the requests served so far, `rss` → its peak RSS in KiB. It
//! exits when stdin closes.

use crate::cli::Variant;
use crate::{responder, stats};
use anyhow::{Context, Result, bail};
use cadre_testkit::MockServer;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

/// The server the benchmark uses.
pub enum BenchServer {
    /// In the measured process.
    InProcess(MockServer),
    /// A `cadre-bench mock-server` child process.
    Process(Box<ServerProcess>),
}

/// A `cadre-bench mock-server` child process.
pub struct ServerProcess {
    /// The child (killed on drop).
    _child: Child,
    /// Its OpenAI base URL.
    base_url: String,
    /// Command channel: (stdin, stdout lines).
    io: Mutex<(ChildStdin, Lines<BufReader<ChildStdout>>)>,
}

impl BenchServer {
    /// Start the server for `variant`, in this process or in a child process.
    pub async fn start(variant: Variant, latency: Duration, in_process: bool) -> Result<Self> {
        if in_process {
            return Ok(Self::InProcess(
                start_mock(variant, latency, Duration::ZERO).await?,
            ));
        }
        let exe = std::env::current_exe().context("locating cadre-bench")?;
        let mut child = Command::new(exe)
            .args(["mock-server", "--variant", variant.name()])
            .args(["--latency-ms", &latency.as_millis().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting `cadre-bench mock-server`")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("the mock server process has no stdin/stdout pipe");
        };
        let mut lines = BufReader::new(stdout).lines();
        let first = lines
            .next_line()
            .await?
            .context("the mock server process exited before it listened")?;
        let Some(base_url) = first.strip_prefix("listening ") else {
            bail!("the mock server process said {first:?}, expected `listening <url>`");
        };
        Ok(Self::Process(Box::new(ServerProcess {
            base_url: base_url.to_string(),
            _child: child,
            io: Mutex::new((stdin, lines)),
        })))
    }

    /// The OpenAI base URL (`http://127.0.0.1:PORT/v1`).
    pub fn openai_base_url(&self) -> String {
        match self {
            Self::InProcess(s) => s.openai_base_url(),
            Self::Process(p) => p.base_url.clone(),
        }
    }

    async fn ask(&self, command: &str) -> Result<u64> {
        let Self::Process(p) = self else {
            bail!("not a server process");
        };
        let mut io = p.io.lock().await;
        io.0.write_all(format!("{command}\n").as_bytes()).await?;
        io.0.flush().await?;
        let line =
            io.1.next_line()
                .await?
                .context("the mock server process exited")?;
        line.trim()
            .parse()
            .with_context(|| format!("the mock server process answered {line:?} to {command}"))
    }

    /// Requests served so far.
    pub async fn request_count(&self) -> Result<usize> {
        match self {
            Self::InProcess(s) => Ok(s.request_count()),
            Self::Process(_) => Ok(self.ask("count").await? as usize),
        }
    }

    /// The server process's own peak RSS in KiB (`None` in process: it is part of ours).
    pub async fn peak_rss_kib(&self) -> Result<Option<u64>> {
        match self {
            Self::InProcess(_) => Ok(None),
            Self::Process(_) => Ok(Some(self.ask("rss").await?)),
        }
    }
}

/// The mock server scripted for `variant`, recording off, every reply delayed by `latency`
/// plus up to `jitter`.
async fn start_mock(variant: Variant, latency: Duration, jitter: Duration) -> Result<MockServer> {
    let server = MockServer::start_with(responder::responder(variant, latency, jitter))
        .await
        .context("starting the mock server")?;
    server.set_recording(false);
    Ok(server)
}

/// `cadre-bench mock-server`: serve until stdin closes (see the module docs).
pub fn serve(variant: Variant, latency_ms: u64, jitter_ms: u64) -> Result<()> {
    let rt = stats::bench_runtime()?;
    rt.block_on(async move {
        let server = start_mock(
            variant,
            Duration::from_millis(latency_ms),
            Duration::from_millis(jitter_ms),
        )
        .await?;
        let mut out = tokio::io::stdout();
        out.write_all(format!("listening {}\n", server.openai_base_url()).as_bytes())
            .await?;
        out.flush().await?;
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = lines.next_line().await? {
            let answer = match line.trim() {
                "count" => server.request_count() as u64,
                "rss" => stats::status_kib("VmHWM").unwrap_or(0),
                other => bail!("unknown command {other:?}"),
            };
            out.write_all(format!("{answer}\n").as_bytes()).await?;
            out.flush().await?;
        }
        Ok(())
    })
}
