//! `cadre tasks list | show | cancel | sweep`: the persisted task records, readable and
//! controllable from any process or node that shares the store.

use crate::cli::{Cli, TasksCommand};
use crate::config;
use crate::setup::{open_store, workspace_root};
use anyhow::{Result, bail};
use cadre_store::{TaskFilter, TaskRecord, TaskStatus};
use serde_json::{Value, json};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// A record as JSON (SPEC §5 fields; credentials are references only).
pub fn record_json(r: &TaskRecord) -> Value {
    json!({
        "task_id": r.id,
        "agent_id": r.agent_id,
        "parent_agent_id": r.parent_agent_id,
        "parent_session_id": r.parent_session_id,
        "child_session_id": r.child_session_id,
        "user_id": r.user_id,
        "status": r.status.as_str(),
        "end_state": r.end_state,
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
        "transport": r.transport.to_stored(),
        "remote_task_id": r.remote_task_id,
        "remote_headers": r.remote_headers,
        "usage": r.usage,
    })
}

fn line(r: &TaskRecord) -> String {
    let title = if r.description.is_empty() {
        r.prompt.lines().next().unwrap_or("")
    } else {
        r.description.as_str()
    };
    format!(
        "{}  {:<9}  {:<16}  {}  {}",
        r.id,
        r.status.as_str(),
        r.agent_id,
        time(r.created_at),
        title
    )
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
                    limit: None,
                })
                .await?;
            if *json {
                let all: Vec<Value> = records.iter().map(record_json).collect();
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else if records.is_empty() {
                eprintln!("no tasks");
            } else {
                for r in &records {
                    println!("{}", line(r));
                }
            }
        }
        TasksCommand::Show { id } => {
            let Some(r) = store.get(id).await? else {
                bail!("no task {id}");
            };
            println!("{}", serde_json::to_string_pretty(&record_json(&r))?);
        }
        TasksCommand::Cancel { id } => {
            let Some(before) = store.get(id).await? else {
                bail!("no task {id}");
            };
            let status = store.request_cancel(id).await?;
            if status.is_terminal() {
                println!("{id}: already {status}; nothing to cancel");
            } else {
                // The owner notices within a second and stops the child; show the outcome.
                match store.wait_terminal(id, Duration::from_secs(5)).await? {
                    Some(r) => println!("{id}: {}", r.status),
                    None => println!(
                        "{id}: cancellation requested; {} (owner {}) has not stopped it yet",
                        before.status, before.owner_node
                    ),
                }
            }
        }
        TasksCommand::Sweep => {
            let failed = store.sweep(cfg.store.orphan_timeout()).await?;
            if failed.is_empty() {
                println!("no orphaned tasks");
            }
            for id in failed {
                println!("{id}: failed (executor lost)");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
