//! `cadre tasks list | show | tree | cancel | sweep`: the persisted task records, readable
//! and controllable from any process or node that shares the store.

use crate::cli::{Cli, TasksCommand};
use crate::config;
use crate::setup::{open_store, workspace_root};
use crate::stdout::out;
use anyhow::{Result, bail};
use cadre_store::{TaskFilter, TaskOwner, TaskRecord, TaskStatus};
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// Now, Unix ms: how long a running task has run.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A record as JSON: the fields scripts read from `cadre tasks list --json`, so renaming one breaks
/// them; credentials appear as references only, never as values.
pub fn record_json(r: &TaskRecord) -> Value {
    // Derived from the stored end state: `null` while the task runs.
    let completeness = r
        .end_state()
        .map(|e| e.incomplete_reason().map_or(Ok(()), Err));
    let mut usage = json!(r.usage);
    if !r.status.is_terminal() && r.usage == cadre_types::Usage::default() {
        // No call of it is counted yet: its cost is not known, not zero.
        usage["cost_usd"] = Value::Null;
    }
    json!({
        "task_id": r.id,
        "agent_id": r.agent_id,
        "parent_agent_id": r.parent_agent_id,
        "parent_session_id": r.parent_session_id,
        "child_session_id": r.child_session_id,
        "parent_call_id": r.parent_call_id,
        "user_id": r.user_id,
        "status": r.status.as_str(),
        "end_state": r.end_state,
        "complete": completeness.map(|c| c.is_ok()),
        "reason": completeness.and_then(std::result::Result::err).map(cadre_types::IncompleteReason::as_str),
        "description": r.description,
        "prompt": r.prompt,
        "result": r.result,
        "error": r.error,
        "cancel_requested": r.cancel_requested,
        "background": r.background,
        "delivered": r.delivered,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "heartbeat_at": r.heartbeat_at,
        "owner_node": r.owner_node,
        "owner_epoch": r.owner_epoch,
        "on_orphan": r.on_orphan.as_str(),
        "resumes": r.resumes,
        "transport": r.transport.to_stored(),
        "remote_task_id": r.remote_task_id,
        "remote_headers": r.remote_headers,
        "usage": usage,
        "turns": r.turns,
    })
}

/// The title of a task: its description, else the first line of its prompt.
fn title(r: &TaskRecord) -> &str {
    if r.description.is_empty() {
        r.prompt.lines().next().unwrap_or("")
    } else {
        r.description.as_str()
    }
}

/// One row of `tasks list`, in the columns of [`LIST_HEADER`].
fn line(r: &TaskRecord) -> String {
    format!(
        "{:<41}  {:<9}  {:<16}  {:<20}  {}",
        r.id,
        r.status.as_str(),
        r.agent_id,
        time(r.created_at),
        title(r)
    )
}

/// The header row of `tasks list`.
fn list_header() -> String {
    format!(
        "{:<41}  {:<9}  {:<16}  {:<20}  {}",
        "TASK", "STATUS", "AGENT", "CREATED", "DESCRIPTION"
    )
}

/// A task's owners over time as JSON, oldest first.
fn owners_json(owners: &[TaskOwner]) -> Value {
    owners
        .iter()
        .map(
            |o| json!({"epoch": o.epoch, "node": o.node, "instance": o.instance, "since": o.since}),
        )
        .collect()
}

/// The owner history of `tasks show`: one line per owner epoch, with its node, its process
/// and since when it owned the task.
fn owners_text(owners: &[TaskOwner]) -> String {
    let mut out = String::from("\nowners:\n");
    for o in owners {
        out.push_str(&format!(
            "  epoch {:<3} {:<24} {:<24} since {}\n",
            o.epoch,
            o.node,
            o.instance.as_deref().unwrap_or("-"),
            time(o.since)
        ));
    }
    out
}

/// `tasks show`: the record for a person, times in ISO 8601 (UTC).
fn readable(r: &TaskRecord) -> String {
    let mut out = String::new();
    let mut field = |name: &str, value: &str| {
        if !value.is_empty() {
            out.push_str(&format!("{name:<15} {value}\n"));
        }
    };
    field("task", &r.id);
    field("agent", &r.agent_id);
    field("status", r.status.as_str());
    field("end state", r.end_state.as_deref().unwrap_or(""));
    field("description", &r.description);
    field(
        "mode",
        if r.background {
            "background"
        } else {
            "foreground"
        },
    );
    field("parent agent", r.parent_agent_id.as_deref().unwrap_or(""));
    field("parent session", &r.parent_session_id);
    field("child session", r.child_session_id.as_deref().unwrap_or(""));
    field("user", r.user_id.as_deref().unwrap_or(""));
    field("created", &time(r.created_at));
    field("updated", &time(r.updated_at));
    field("heartbeat", &r.heartbeat_at.map(time).unwrap_or_default());
    field("owner node", &r.owner_node);
    field("on orphan", r.on_orphan.as_str());
    if r.resumes > 0 {
        // Each adoption moved the task to a new owner and bumped the epoch.
        field(
            "resumed",
            &format!("{} time(s); owner epoch {}", r.resumes, r.owner_epoch),
        );
    }
    field("transport", &r.transport.to_stored());
    field("remote task", r.remote_task_id.as_deref().unwrap_or(""));
    if r.cancel_requested {
        field("cancel", "requested");
    }
    if r.background {
        field("delivered", if r.delivered { "yes" } else { "no" });
    }
    field("turns", &r.turns.map(|t| t.to_string()).unwrap_or_default());
    field("tokens", &r.usage.tokens_text());
    field("cost", &r.usage.task_cost_text(r.status.is_terminal()));
    for (name, text) in [
        ("prompt", r.prompt.as_str()),
        ("result", r.result.as_deref().unwrap_or("")),
        ("error", r.error.as_deref().unwrap_or("")),
    ] {
        if !text.is_empty() {
            out.push_str(&format!("\n{name}:\n"));
            for l in text.lines() {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    out
}

/// Print a view as pretty JSON (`json`) or as its text.
fn show(json: bool, as_json: impl FnOnce() -> Value, text: impl FnOnce() -> String) -> Result<()> {
    if json {
        out!("{}", serde_json::to_string_pretty(&as_json())?)?;
    } else {
        crate::stdout::print(&text())?;
    }
    Ok(())
}

/// Run `cadre tasks ...`.
pub async fn run(cli: &Cli, cmd: &TasksCommand) -> Result<ExitCode> {
    let ws = workspace_root(cli)?;
    let cfg = config::load(&ws, cli.config.as_deref())?;
    let store = open_store(&ws, &cfg.store).await?;
    match cmd {
        TasksCommand::List {
            json,
            status,
            session,
        } => {
            let status = match status {
                Some(s) => Some(TaskStatus::parse(s).ok_or_else(|| {
                    anyhow::anyhow!(
                        "unknown status {s:?} (pending, running, completed, failed, cancelled)"
                    )
                })?),
                None => None,
            };
            let records = store
                .list(&TaskFilter {
                    session: session.clone(),
                    status,
                    ..TaskFilter::default()
                })
                .await?;
            if *json {
                let all: Vec<Value> = records.iter().map(record_json).collect();
                out!("{}", serde_json::to_string_pretty(&all)?)?;
            } else if records.is_empty() {
                eprintln!("no tasks");
            } else {
                out!("{}", list_header())?;
                for r in &records {
                    out!("{}", line(r))?;
                }
            }
        }
        TasksCommand::Show { id, json } => {
            let Some(r) = store.get(id).await? else {
                bail!("no task {id}");
            };
            let owners = store.owners(id).await?;
            if *json {
                let mut v = record_json(&r);
                v["owners"] = owners_json(&owners);
                out!("{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                crate::stdout::print(&readable(&r))?;
                if r.resumes > 0 {
                    // Who ran it, epoch by epoch: the lost owners and the adopters.
                    crate::stdout::print(&owners_text(&owners))?;
                }
            }
        }
        TasksCommand::Cancel { id } => {
            let Some(before) = store.get(id).await? else {
                bail!("no task {id}");
            };
            let status = store.request_cancel(id).await?;
            if status.is_terminal() {
                out!("{id}: already {status}; nothing to cancel")?;
            } else {
                // The owner notices within a second and stops the child; show the outcome.
                match store.wait_terminal(id, Duration::from_secs(5)).await? {
                    Some(r) => out!("{id}: {}", r.status)?,
                    None => out!(
                        "{id}: cancellation requested; {} (owner {}) has not stopped it yet",
                        before.status,
                        before.owner_node
                    )?,
                }
            }
        }
        TasksCommand::Tree { session, json } => {
            let tree = crate::tasks_tree::load(store.as_ref(), session.as_deref()).await?;
            let now = now_ms();
            show(*json, || tree.to_json(now), || tree.text(now))?;
        }
        TasksCommand::Team {
            session,
            name,
            json,
        } => {
            let team = crate::tasks_team::load(store.as_ref(), session, name).await?;
            show(*json, || team.to_json(), || team.text())?;
        }
        TasksCommand::Sweep => {
            let failed = store.sweep(cfg.store.orphan_timeout()).await?;
            if failed.is_empty() {
                out!("no orphaned tasks")?;
            }
            for id in failed {
                out!("{id}: failed (executor lost)")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
