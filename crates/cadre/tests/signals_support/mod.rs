//! What the signal tests share: a scripted run whose main agent starts two background
//! children and a foreground command (each child a command of its own; every shell writes
//! its PID and its `sleep`'s to `pids`), and the checks of what a signal must leave: no
//! process of those groups alive, and both tasks `cancelled` in the store with the signal
//! as their reason.
#![allow(dead_code)]

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The main agent's and the children's script.
pub const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "sleeper", description = "one", prompt = "sleep", background = true } },
  { name = "task", args = { subagent_type = "sleeper", description = "two", prompt = "sleep", background = true } },
  { name = "bash", args = { command = "sleep 300 & echo $$ $! >> pids; wait", timeout_ms = 600000 } },
]
[[scripts.turns]]
text = "never"

[[scripts]]
agent = "sleeper"
[[scripts.turns]]
tool_calls = [{ name = "bash", args = { command = "sleep 300 & echo $$ $! >> pids; wait", timeout_ms = 600000 } }]
[[scripts.turns]]
text = "never"
"#;

const SLEEPER: &str =
    "---\nname: sleeper\ndescription: Sleeps.\nworkspace: {mode: shared}\n---\nYou sleep.\n";

/// Longest wait for anything here; the test fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Write the sleeper agent, a configuration that approves every call (background children
/// cannot ask) and the script into `ws`; the model spec naming the script.
pub fn workspace(ws: &Path) -> String {
    std::fs::create_dir_all(ws.join(".cadre/agents")).unwrap();
    std::fs::write(ws.join(".cadre/agents/sleeper.md"), SLEEPER).unwrap();
    std::fs::write(
        ws.join(".cadre/config.toml"),
        "[permissions]\nmode = \"auto-approve\"\n",
    )
    .unwrap();
    let script = ws.join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    format!("scripted:{}", script.display())
}

/// True while process `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// The parent PID and command name of `pid`, from `/proc/PID/stat`.
fn parent_and_name(pid: i32) -> Option<(i32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let ppid = stat
        .get(close + 2..)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((ppid, name))
}

/// The PID of the child of `parent` named `name`, waited for with the deadline.
pub fn child_named(parent: i32, name: &str) -> i32 {
    let mut found = None;
    wait_until(&format!("no process {name} under {parent}"), || {
        found = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .find(|p| parent_and_name(*p).is_some_and(|(pp, n)| pp == parent && n == name));
        found.is_some()
    });
    found.unwrap()
}

/// Poll `done` until it holds, failing after [`DEADLINE`] with `what`.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    cadre_testkit::wait_until(what, DEADLINE, done);
}

/// `cadre` on workspace `ws` with `model`, without the caller's configuration.
pub fn cadre(ws: &Path, model: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
    cmd.arg("--workspace").arg(ws).arg("--model").arg(model);
    cmd.env_remove("CADRE_MODEL").env_remove("CADRE_STORE_URL");
    cmd.env("XDG_CONFIG_HOME", ws.join("nocfg"));
    cmd
}

/// The PIDs the shells wrote (each shell's and its `sleep`'s).
pub fn pids(ws: &Path) -> Vec<i32> {
    std::fs::read_to_string(ws.join("pids"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Wait until the three shells and their sleeps run; the PIDs of every process below `cadre`
/// (its shells and sleeps among them). Taken from the host's `/proc`, not from `pids`: a
/// sandboxed shell runs in a PID namespace of its own, where `$$` is another number.
pub fn wait_for_the_commands(ws: &Path, cadre: i32) -> Vec<i32> {
    wait_until("the three commands never started", || pids(ws).len() == 6);
    let below = descendants(cadre);
    let named = |n: &str| {
        below
            .iter()
            .filter(|p| parent_and_name(**p).is_some_and(|(_, name)| name == n))
            .count()
    };
    // At least: other processes (a stdio MCP server and its helper) may run too.
    assert!(named("bash") >= 3 && named("sleep") >= 3, "{below:?}");
    assert!(below.iter().all(|p| alive(*p)), "{below:?}");
    below
}

/// Every process below `root`, from `/proc`.
pub fn descendants(root: i32) -> Vec<i32> {
    let all: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_and_name(pid)?.0)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.remove(0);
    found
}

/// Every process in `pids` is gone (waited for with the deadline: a killed group may take
/// a moment to be reaped), and both background tasks are `cancelled` in the store with
/// "cadre received SIGNAL" as their reason.
pub fn nothing_survives_and_the_tasks_are_cancelled(
    ws: &Path,
    model: &str,
    pids: &[i32],
    signal: &str,
) {
    for pid in pids {
        wait_until(&format!("process {pid} survived {signal}"), || !alive(*pid));
    }
    let listed = cadre(ws, model)
        .args(["tasks", "list", "--json"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let tasks: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    for t in &tasks {
        assert_eq!(t["status"], "cancelled", "{t}");
        assert_eq!(t["error"], format!("cadre received {signal}"), "{t}");
    }
}
