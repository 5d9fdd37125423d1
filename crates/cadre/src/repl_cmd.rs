//! `cadre` with no subcommand: a line REPL. Each line goes to the main agent in one ongoing
//! session; `@name job` runs that sub-agent directly (bypassing the main model) with live
//! progress; approval questions are asked on stderr and answered on stdin.

use crate::cli::Cli;
use crate::output::TextSink;
use crate::setup::{Overrides, Setup};
use anyhow::Result;
use async_trait::async_trait;
use cadre_subagents::RunOptions;
use cadre_tools::{ApprovalHandler, RunContext};
use cadre_types::{ApprovalDecision, ApprovalRequest, EventSink, new_session_id};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

type Input = Arc<Mutex<Lines<BufReader<Stdin>>>>;

/// Asks the person at the terminal; answers come from the same stdin as the prompts.
struct LineApprovals {
    input: Input,
}

/// Parse an answer: `y`/`yes`, `s`/`session`, `n`/`no`/empty, or free text = deny with feedback.
pub fn parse_answer(line: &str) -> ApprovalDecision {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => ApprovalDecision::AllowOnce,
        "s" | "session" | "a" | "always" => ApprovalDecision::AllowSession,
        "" | "n" | "no" => ApprovalDecision::Deny { feedback: None },
        _ => ApprovalDecision::Deny {
            feedback: Some(line.trim().to_string()),
        },
    }
}

#[async_trait]
impl ApprovalHandler for LineApprovals {
    async fn decide(&self, req: ApprovalRequest) -> ApprovalDecision {
        // One question at a time: hold the input while asking.
        let mut input = self.input.lock().await;
        let who = if req.agent == "main" {
            String::new()
        } else {
            format!("[{}] ", req.agent)
        };
        eprint!(
            "\n{who}wants to run {}({}) — {} [risk: {:?}]\nallow? [y]es / [s]ession / [n]o / or type why not: ",
            req.tool,
            req.subject.as_deref().unwrap_or(""),
            req.reason,
            req.risk
        );
        let _ = std::io::stderr().flush();
        match input.next_line().await {
            Ok(Some(line)) => parse_answer(&line),
            _ => ApprovalDecision::Deny {
                feedback: Some("no answer (input closed)".into()),
            },
        }
    }
}

fn help() {
    eprintln!(
        "Type a request for the main agent, or `@agent job` to run a sub-agent directly.\n\
         /agents  list sub-agents   /tasks  this session's tasks   /exit  quit"
    );
}

/// Run the REPL.
pub async fn run(cli: &Cli) -> Result<ExitCode> {
    let setup = Setup::new(cli, &Overrides::default()).await?;
    let h = &setup.harness;
    let mut session = h.new_session()?;
    let input: Input = Arc::new(Mutex::new(BufReader::new(tokio::io::stdin()).lines()));
    let events: Arc<dyn EventSink> = Arc::new(TextSink::default());
    let approvals: Arc<dyn ApprovalHandler> = Arc::new(LineApprovals {
        input: input.clone(),
    });
    let tty = std::io::stdin().is_terminal();
    if tty {
        eprintln!(
            "cadre {} — {} · session {}",
            env!("CARGO_PKG_VERSION"),
            h.agent().config().model.spec,
            session.id()
        );
        help();
    }
    loop {
        if tty {
            eprint!("\n› ");
            let _ = std::io::stderr().flush();
        }
        let line = match input.lock().await.next_line().await {
            Ok(Some(l)) => l,
            _ => break,
        };
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" => break,
            "/help" => help(),
            "/agents" => {
                for d in h.runtime().registry().list() {
                    println!("{}: {}", d.name, d.description.trim());
                }
            }
            "/tasks" => {
                let tasks = h.runtime().tracker().of_session(session.id());
                if tasks.is_empty() {
                    println!("no tasks in this session");
                }
                for t in tasks {
                    println!("{} [{}] {}: {}", t.id, t.status, t.agent, t.description);
                }
            }
            _ => {
                let cancel = CancellationToken::new();
                let watcher = {
                    let cancel = cancel.clone();
                    tokio::spawn(async move {
                        if tokio::signal::ctrl_c().await.is_ok() {
                            eprintln!("\ncadre: cancelling…");
                            cancel.cancel();
                        }
                    })
                };
                if let Some(rest) = line.strip_prefix('@') {
                    let (name, job) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    let parent = h.main_parent(
                        Arc::new(RunContext {
                            session_id: session.id().to_string(),
                            agent: "main".into(),
                            model: h.agent().config().model.spec.clone(),
                            task_id: None,
                            user_id: std::env::var("USER").ok(),
                            parent_session_id: None,
                            depth: 0,
                            tool_grant: cadre_tools::ToolGrant::unrestricted(),
                            budget: cadre_tools::Budget::unlimited(),
                            trace_id: new_session_id().replacen("s-", "", 1),
                            events: events.clone(),
                            approvals: approvals.clone(),
                        }),
                        cancel.clone(),
                    );
                    match h
                        .runtime()
                        .run_direct(name, job.trim().to_string(), &parent)
                        .await
                    {
                        Ok(snap) => {
                            println!("{}", snap.result.unwrap_or_default());
                            eprintln!("— [{name}] {}", snap.status);
                        }
                        Err(e) => eprintln!("cadre: {e}"),
                    }
                } else {
                    let opts = RunOptions {
                        events: events.clone(),
                        approvals: approvals.clone(),
                        cancel: cancel.clone(),
                        user_id: std::env::var("USER").ok(),
                    };
                    let out = h.run_in(&mut session, line, opts).await;
                    if !matches!(out.state, cadre_types::EndState::Completed) {
                        eprintln!("cadre: {}", out.state);
                    }
                }
                watcher.abort();
            }
        }
    }
    h.runtime().shutdown();
    eprintln!(
        "session: {} (resume with cadre run --resume {})",
        session.id(),
        session.id()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_map_to_decisions() {
        assert_eq!(parse_answer("y"), ApprovalDecision::AllowOnce);
        assert_eq!(parse_answer(" Session "), ApprovalDecision::AllowSession);
        assert_eq!(parse_answer(""), ApprovalDecision::Deny { feedback: None });
        assert_eq!(
            parse_answer("use git mv instead"),
            ApprovalDecision::Deny {
                feedback: Some("use git mv instead".into())
            }
        );
    }
}
