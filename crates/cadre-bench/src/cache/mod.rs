//! `cadre-bench cache`: how well a job's requests suit a provider's prompt cache. A parent
//! starts five background sub-agents and keeps working for twelve turns while their results
//! arrive, through the real harness (built-in tools, sub-agent runtime, providers) against
//! the testkit's recording mock server, on the OpenAI and Anthropic wire formats, streamed
//! and not. Reports prefix efficiency, bytes sent, `cache_control` breakpoints and the
//! tokens a prefix-caching provider would bill (see [`metrics`]), with their input cost at a
//! common model's list price, cached and not.

pub mod metrics;
mod responder;

use crate::cli::CacheArgs;
use anyhow::{Context, Result, bail};
use cadre_engine::{ApprovalMode, NonInteractiveApprovals, PermissionPolicy};
use cadre_llm::{ProviderConfig, ProviderKind};
use cadre_subagents::{AgentDefinition, Harness, RunOptions, TaskStatus, WorkspaceMode};
use cadre_testkit::MockServer;
use metrics::{CacheMetrics, CacheRule, SentRequest, measure};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// One cell of the result: a wire format, streamed or not.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheResult {
    /// `openai` or `anthropic`.
    pub wire: String,
    /// Streamed replies.
    pub stream: bool,
    /// Parent model turns.
    pub parent_turns: u32,
    /// The measurements.
    pub metrics: CacheMetrics,
    /// The model whose list price `input_cost_usd` uses.
    pub priced_as: String,
    /// Estimated input cost of the job at that price: with the cache as billed in
    /// `metrics.billing`, and with every token uncached.
    pub input_cost_usd: InputCost,
}

/// Estimated dollars of a job's input tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InputCost {
    /// With the prompt cache.
    pub cached: f64,
    /// Without it.
    pub uncached: f64,
}

/// The model each wire format is priced as (a common model of that provider).
fn priced_as(kind: ProviderKind) -> (&'static str, &'static str) {
    match kind {
        ProviderKind::Anthropic => ("anthropic", "claude-sonnet-4-5"),
        _ => ("openai", "gpt-4.1"),
    }
}

/// The input cost of `billing` at `price`, with the cache and without.
fn input_cost(billing: &metrics::Billing, price: &cadre_llm::ModelPrice) -> InputCost {
    let input = billing.cached + billing.written + billing.uncached;
    let with = cadre_types::Usage {
        input_tokens: input,
        cached_input_tokens: billing.cached,
        cache_write_tokens: billing.written,
        ..cadre_types::Usage::default()
    };
    let without = cadre_types::Usage {
        input_tokens: input,
        ..cadre_types::Usage::default()
    };
    InputCost {
        cached: price.cost_usd(&with),
        uncached: price.cost_usd(&without),
    }
}

/// The parent's prompt.
pub const PARENT_PROMPT: &str = "Start five background workers, one per job 0-4, and while \
they run read the notes parts one by one; when everything is in, summarise.";

fn worker() -> AgentDefinition {
    let mut d = AgentDefinition::new(
        responder::WORKER,
        "Looks around the workspace and reports in one line.",
    );
    d.prompt = "You are a worker. Do the job you are given with your tools, then report the \
                outcome in one line."
        .into();
    d.workspace.mode = WorkspaceMode::Shared;
    d.tools = Some(vec![
        "read_file".into(),
        "list_dir".into(),
        "glob".into(),
        "grep".into(),
    ]);
    d
}

/// A workspace with the notes the parent reads (about 1 KB each).
fn write_notes(ws: &Path) -> Result<()> {
    std::fs::create_dir_all(ws.join("notes"))?;
    for turn in 2..=responder::PARENT_TURNS {
        let mut text = format!("# Notes, part {turn}\n\n");
        for line in 0..12 {
            text.push_str(&format!(
                "- Finding {turn}.{line}: the module keeps its state in one place and derives \
                 the rest.\n"
            ));
        }
        std::fs::write(ws.join(responder::note_path(turn)), text)?;
    }
    Ok(())
}

async fn run_cell(kind: ProviderKind, stream: bool, dump: Option<&Path>) -> Result<CacheResult> {
    let server = MockServer::start_with(responder::responder()).await?;
    let dir = tempfile::tempdir()?;
    let ws = dir.path().canonicalize()?;
    write_notes(&ws)?;
    let (wire, base_url) = match kind {
        ProviderKind::Anthropic => ("anthropic", server.base_url()),
        _ => ("openai", server.openai_base_url()),
    };
    let provider = ProviderConfig {
        kind: Some(kind),
        base_url: Some(base_url),
        stream: Some(stream),
        max_attempts: Some(1),
        // As against OpenAI's own API (the mock is not it): send `prompt_cache_key`.
        cache: Some(cadre_llm::CacheMode::On),
        ..ProviderConfig::default()
    };
    let harness = Harness::builder()
        .model("mock:bench-model")
        .workspace(&ws)
        .provider("mock", provider)
        .subagent(worker())
        .without_agent_files()
        .in_memory_sessions()
        .permissions(PermissionPolicy {
            mode: ApprovalMode::AutoApprove,
            ..PermissionPolicy::default()
        })
        .build()?;
    let mut session = harness.new_session()?;
    let outcome = harness
        .run_in(
            &mut session,
            PARENT_PROMPT,
            RunOptions {
                approvals: Arc::new(NonInteractiveApprovals::new(true)),
                ..RunOptions::default()
            },
        )
        .await;
    if outcome.state != cadre_types::EndState::Completed {
        bail!(
            "{wire} stream={stream}: the parent ended {:?}",
            outcome.state
        );
    }
    let tasks = harness.runtime().tasks_of(session.id()).await;
    let done = tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    if done != responder::CHILDREN {
        bail!(
            "{wire} stream={stream}: {done} of {} tasks completed",
            tasks.len()
        );
    }
    harness.runtime().shutdown();
    if let Some(dir) = dump {
        let dir = dir.join(format!("{wire}-{stream}"));
        std::fs::create_dir_all(&dir)?;
        for (i, r) in server.requests().iter().enumerate() {
            std::fs::write(dir.join(format!("{i:03}.json")), &r.raw)?;
        }
    }
    let sent: Vec<SentRequest> = server
        .requests()
        .iter()
        .map(|r| {
            let parent = r
                .body
                .get("tools")
                .and_then(|t| t.as_array())
                .is_some_and(|t| {
                    t.iter().any(|t| {
                        t.pointer("/function/name").or_else(|| t.pointer("/name"))
                            == Some(&serde_json::json!("task"))
                    })
                });
            SentRequest::new(responder::first_user_text(&r.body), parent, &r.raw)
        })
        .collect();
    let rule = match kind {
        ProviderKind::Anthropic => CacheRule::Breakpoints,
        _ => CacheRule::Automatic,
    };
    let metrics = measure(&sent, rule);
    let (provider, model) = priced_as(kind);
    let price = cadre_llm::PriceTable::built_in()
        .lookup(provider, model)
        .with_context(|| format!("no built-in price for {provider}:{model}"))?;
    Ok(CacheResult {
        wire: wire.into(),
        stream,
        parent_turns: outcome.turns,
        input_cost_usd: input_cost(&metrics.billing, &price),
        priced_as: format!("{provider}:{model}"),
        metrics,
    })
}

/// The markdown table of `results`.
pub fn table(results: &[CacheResult]) -> String {
    let mut s = String::from(
        "| wire | stream | requests (parent) | bytes sent | prefix efficiency, parent min / mean | rendered, min / mean | all, by bytes | fan-out first requests | with cache_control | max breakpoints | est. tokens cached / written / uncached | est. input cost, cached / uncached |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        let m = &r.metrics;
        s.push_str(&format!(
            "| {} | {} | {} ({}) | {:.3} MB | {:.4} / {:.4} | {:.4} / {:.4} | {:.4} | {:.3} | {} of {} | {} | {} / {} / {} | {} / {} ({}) |\n",
            r.wire,
            r.stream,
            m.requests,
            m.parent_requests,
            m.bytes_sent as f64 / 1e6,
            m.parent_prefix_min,
            m.parent_prefix_mean,
            m.parent_rendered_min,
            m.parent_rendered_mean,
            m.prefix_weighted,
            m.fanout_prefix_mean,
            m.requests_with_breakpoints,
            m.requests,
            m.max_breakpoints,
            m.billing.cached,
            m.billing.written,
            m.billing.uncached,
            cadre_types::format_usd(r.input_cost_usd.cached),
            cadre_types::format_usd(r.input_cost_usd.uncached),
            r.priced_as,
        ));
    }
    s
}

/// Run `cadre-bench cache`.
pub fn run(args: &CacheArgs) -> Result<()> {
    let rt = crate::stats::bench_runtime()?;
    let mut results = Vec::new();
    for wire in &args.wire {
        for &stream in &args.stream {
            let kind = match wire.as_str() {
                "openai" => ProviderKind::Openai,
                "anthropic" => ProviderKind::Anthropic,
                other => bail!("unknown wire format {other} (openai or anthropic)"),
            };
            results.push(rt.block_on(run_cell(kind, stream, args.dump.as_deref()))?);
        }
    }
    let md = table(&results);
    print!("{md}");
    let path = args
        .json
        .clone()
        .unwrap_or_else(|| "target/bench/cache.json".into());
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&results)?)
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
