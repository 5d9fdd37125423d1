//! The real binary in a real terminal: a tmux server of the test's own (its own socket,
//! killed when the test ends), keys typed into it, and waits (with a deadline) until the
//! screen shows what it must.
#![allow(dead_code)]

pub mod mock_ui;

use cadre_testkit::poll_for;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// True when tmux can run here. Without it the caller skips locally; under CI it fails.
pub fn tmux_available() -> bool {
    if Command::new("tmux").arg("-V").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "tmux is missing (see .ci/run)"
    );
    eprintln!("SKIPPED: tmux is not installed");
    false
}

/// A tmux server of one test, with one window `ui` running cadre; killed when dropped.
pub struct Tmux {
    socket: String,
    /// Where the server's socket file is, to remove it with the server.
    socket_path: Option<PathBuf>,
    /// Where the shell writes cadre's exit status (tmux's own `pane_dead_status` is not
    /// always filled in).
    status_file: PathBuf,
}

impl Tmux {
    /// Start a server on a socket of its own (`name` and the process id) running cadre with
    /// `args` in a 120×45 terminal with `env` set. The pane stays when cadre exits (set before
    /// it starts), so its last output can be read.
    pub fn start(name: &str, env: &[(&str, String)], args: &[&str]) -> Tmux {
        let socket = format!("cadre-{name}-{}", std::process::id());
        let status_file = std::env::temp_dir().join(format!("{socket}.status"));
        let _ = std::fs::remove_file(&status_file);
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        let command = format!(
            "'{}' {}; echo $? > '{}'",
            env!("CARGO_BIN_EXE_cadre"),
            quoted.join(" "),
            status_file.display()
        );
        let mut tmux = Tmux {
            socket,
            socket_path: None,
            status_file,
        };
        let mut tmux_args: Vec<String> = [
            "-f",
            "/dev/null",
            "start-server",
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "new-session",
            "-d",
            "-s",
            "ui",
            "-x",
            "120",
            "-y",
            "45",
            "-e",
            "TERM=xterm-256color",
        ]
        .map(str::to_string)
        .to_vec();
        for (k, v) in env {
            tmux_args.push("-e".into());
            tmux_args.push(format!("{k}={v}"));
        }
        tmux_args.push(command);
        let tmux_args: Vec<&str> = tmux_args.iter().map(String::as_str).collect();
        tmux.run(&tmux_args);
        tmux.socket_path = Some(PathBuf::from(tmux.format("#{socket_path}")));
        tmux
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    /// Run a tmux command against this server; its output.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen as text.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-t", "ui"])
    }

    /// The screen with the lines scrolled off it.
    pub fn with_history(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-S", "-200", "-t", "ui"])
    }

    /// Press keys (tmux key names: `Enter`, `C-t`, `Escape`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "ui"];
        args.extend(keys);
        self.run(&args);
    }

    /// Type `text` literally.
    pub fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "ui", "-l", text]);
    }

    /// A tmux format of the window, e.g. `#{alternate_on}`.
    pub fn format(&self, f: &str) -> String {
        self.run(&["display-message", "-p", "-t", "ui", f])
            .trim()
            .to_string()
    }

    /// Wait until `pred` holds for the screen; the screen it held for.
    pub fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let held = poll_for(Duration::from_secs(30), || {
            let s = self.screen();
            pred(&s).then_some(s)
        });
        held.unwrap_or_else(|| {
            panic!(
                "timed out waiting for {what}; the screen:\n{}",
                self.screen()
            )
        })
    }

    /// Wait (with a deadline) until cadre has exited; its exit status.
    pub fn exit_code(&self) -> i32 {
        // Written whole by the shell once cadre has exited.
        let code = poll_for(Duration::from_secs(30), || {
            std::fs::read_to_string(&self.status_file)
                .ok()?
                .trim()
                .parse()
                .ok()
        });
        code.unwrap_or_else(|| {
            panic!(
                "timed out waiting for cadre to exit; the screen:\n{}",
                self.screen()
            )
        })
    }

    /// Wait until the screen contains `needle`.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait(needle, |s| s.contains(needle))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
        // tmux leaves the socket file behind.
        if let Some(path) = &self.socket_path {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_file(&self.status_file);
    }
}

/// Copy the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
