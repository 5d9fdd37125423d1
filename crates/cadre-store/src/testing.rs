//! Throwaway PostgreSQL clusters for tests and the store benchmark (feature `testing`).
//!
//! A cluster is created with `initdb` in a temporary directory, started with `pg_ctl` on a
//! free loopback port and a private socket directory, and stopped when the [`PgCluster`] is
//! dropped. PostgreSQL refuses to run as root, so as root the binaries run as the `postgres`
//! user (or a `cadre-pg` system user created on the spot). Each cluster also starts a small
//! reaper shell that waits for this process to exit (its stdin closes) and then stops the
//! cluster and deletes its files, so a cluster kept in a `static` — or one of a process that
//! panicked or was killed — does not outlive the process.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// Directory holding `initdb` and `pg_ctl`: `CADRE_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<ver>/bin`, else the directory of `initdb` on `PATH`.
pub fn find_pg_bin() -> Option<PathBuf> {
    let has_both = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(d) = std::env::var_os("CADRE_PG_BIN").map(PathBuf::from) {
        return has_both(&d).then_some(d);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.split('.').next()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has_both(d))
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Some(d);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has_both(d))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next().map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The unprivileged user PostgreSQL runs as when we are root (created if missing).
fn pg_user() -> Result<String, String> {
    for user in ["postgres", "cadre-pg"] {
        if run(Command::new("id").arg("-u").arg(user)).is_ok() {
            return Ok(user.to_string());
        }
    }
    run(Command::new("useradd").args(["--system", "--no-create-home", "cadre-pg"]))?;
    Ok("cadre-pg".to_string())
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// A running throwaway PostgreSQL cluster (superuser `postgres`, trust authentication).
pub struct PgCluster {
    bin: PathBuf,
    base: PathBuf,
    user: Option<String>,
    port: u16,
    reaper: Mutex<Option<Child>>,
    /// The server options `pg_ctl start` was given, to start it again after [`PgCluster::pause`].
    opts: String,
}

impl std::fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgCluster")
            .field("base", &self.base)
            .field("port", &self.port)
            .finish()
    }
}

impl PgCluster {
    /// Create and start a cluster. `extra` are `-c name=value` settings (e.g. `fsync=off`).
    pub fn start(extra: &[&str]) -> Result<PgCluster, String> {
        let bin = find_pg_bin().ok_or("PostgreSQL not installed (no initdb/pg_ctl found)")?;
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let user = if is_root() { Some(pg_user()?) } else { None };
        // As root the server runs as another user, who must reach the directory: use /tmp
        // rather than a TMPDIR that may sit inside root's home.
        let tmp = match user {
            Some(_) => PathBuf::from("/tmp"),
            None => std::env::temp_dir(),
        };
        let base = tmp.join(format!(
            "cadre-pg-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(base.join("sock")).map_err(|e| e.to_string())?;
        if let Some(u) = &user {
            run(Command::new("chown").arg("-R").arg(u).arg(&base))?;
        }
        let port = free_port()?;
        let mut opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300",
            base.join("sock").display()
        );
        for e in extra {
            opts.push_str(&format!(" -c {e}"));
        }
        let cluster = PgCluster {
            bin,
            base,
            user,
            port,
            reaper: Mutex::new(None),
            opts,
        };
        cluster.spawn_reaper()?;
        let data = cluster.data_dir();
        run(cluster.pg_cmd("initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "-N",
        ]))?;
        cluster.resume()?;
        Ok(cluster)
    }

    /// Start the server (again, after [`PgCluster::pause`]) and wait until it accepts
    /// connections.
    pub fn resume(&self) -> Result<(), String> {
        let log = self.base.join("server.log");
        run(self
            .pg_cmd("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(&log)
            .args(["-o", &self.opts, "-w", "-t", "60", "start"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()))
        .map_err(|e| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            format!("{e}\nserver log:\n{log}")
        })
    }

    /// Stop the server (fast shutdown: connections are closed, new ones refused) and keep
    /// its files, to [`resume`](PgCluster::resume) it later: a database outage.
    pub fn pause(&self) -> Result<(), String> {
        run(self
            .pg_cmd("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "-t", "60", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()))
    }

    fn pg_cmd(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(exe);
                c
            }
            None => Command::new(exe),
        }
    }

    fn stop_command(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(u) = &self.user {
            parts.extend(["runuser".into(), "-u".into(), u.clone(), "--".into()]);
        }
        parts.push(self.bin.join("pg_ctl").display().to_string());
        parts.extend(["-D".into(), self.data_dir().display().to_string()]);
        parts.extend(["-m".into(), "immediate".into(), "stop".into()]);
        parts
            .iter()
            .map(|p| format!("'{}'", p.replace('\'', "'\\''")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Start the shell that stops the cluster once this process's end closes its stdin.
    fn spawn_reaper(&self) -> Result<(), String> {
        let script = format!(
            "cat >/dev/null; {} >/dev/null 2>&1; rm -rf '{}'",
            self.stop_command(),
            self.base.display()
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("reaper: {e}"))?;
        *self.reaper.lock().map_err(|e| e.to_string())? = Some(child);
        Ok(())
    }

    /// The data directory (readable by the test process).
    pub fn data_dir(&self) -> PathBuf {
        self.base.join("data")
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// URL of database `db` as the superuser.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Create a fresh database (`t_<n>`) and return its URL.
    pub async fn create_database(&self) -> Result<String, String> {
        use sqlx::{Connection, Executor};
        static DB_SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!("t_{}", DB_SEQ.fetch_add(1, Ordering::Relaxed));
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .map_err(|e| e.to_string())?;
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .map_err(|e| e.to_string())?;
        let _ = conn.close().await;
        Ok(self.url(&name))
    }

    /// Stop the cluster now and delete its files (also done on drop and at process exit).
    pub fn stop(&self) {
        if let Ok(mut g) = self.reaper.lock()
            && let Some(mut child) = g.take()
        {
            // Closing stdin lets the reaper run the stop command; wait for it.
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One cluster per process, started on first use and stopped when the process exits.
/// `Err` says why it is unavailable (e.g. PostgreSQL not installed).
pub fn shared_cluster() -> Result<&'static PgCluster, String> {
    static SHARED: OnceLock<Result<PgCluster, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| PgCluster::start(&["fsync=off", "synchronous_commit=off"]))
        .as_ref()
        .map_err(Clone::clone)
}
