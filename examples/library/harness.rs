//! Embedding cadre as a library: build a harness with a code-declared sub-agent and a custom
//! factory, run it on a scripted (offline) model, and print the events and the result.
//!
//! Run from the repository root:
//!     cargo run -p cadre-subagents --example harness

use cadre_engine::{Agent, ApprovalMode, PermissionPolicy};
use cadre_llm::scripted::{ScriptFile, ScriptedProvider};
use cadre_subagents::{AgentDefinition, FactoryInput, Harness, RunOptions, WorkspaceMode};
use cadre_types::{Event, EventEnvelope, EventSink};
use std::sync::Arc;

/// Prints sub-agent progress and the main agent's text.
struct Printer;

impl EventSink for Printer {
    fn emit(&self, e: EventEnvelope) {
        match e.event {
            Event::SubagentUpdate { update } => {
                let tool = update.tool.as_deref().unwrap_or("");
                println!("  [{}] {:?} {tool}", update.agent, update.kind);
            }
            Event::ToolStart { tool, .. } => println!("{} ▸ {tool}", e.agent),
            Event::Done { state, usage, .. } => {
                println!("done: {state} ({} tokens incl. sub-agents)", usage.total())
            }
            _ => {}
        }
    }
}

const SCRIPT: &str = r#"
[[scripts]]
agent = "main"
[[scripts.turns]]
tool_calls = [
  { name = "task", args = { subagent_type = "lister", prompt = "List the files in this directory." } },
  { name = "task", args = { subagent_type = "shouter", prompt = "say hello" } },
]
[[scripts.turns]]
text = "Both sub-agents answered:\n{{tool_results}}"

[[scripts]]
agent = "lister"
[[scripts.turns]]
tool_calls = [{ name = "list_dir", args = { path = "." } }]
[[scripts.turns]]
text = "Here is what I found:\n{{tool_results}}"

[[scripts]]
agent = "shouter"
[[scripts.turns]]
text = "HELLO FROM A FACTORY-BUILT AGENT"
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script: ScriptFile = toml::from_str(SCRIPT)?;
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("notes.md"), "# notes\n")?;

    // A sub-agent declared in code: a read-only lister working in the main workspace.
    let mut lister = AgentDefinition::new("lister", "Lists and describes files.");
    lister.prompt = "You list files and describe them briefly.".into();
    lister.tools = Some(vec!["list_dir".into(), "read_file".into()]);
    lister.workspace.mode = WorkspaceMode::Shared;

    let harness = Harness::builder()
        .name("main")
        .provider_instance("demo", Arc::new(ScriptedProvider::new(script)))
        .model("demo:any")
        .workspace(workspace.path())
        .permissions(PermissionPolicy {
            mode: ApprovalMode::ReadOnly,
            rules: Default::default(),
        })
        .subagent(lister)
        // A factory builds the child agent itself, from what the runtime prepared.
        .subagent_factory(
            "shouter",
            "Answers in capital letters.",
            Arc::new(|input: &FactoryInput| {
                Ok(Agent::builder("shouter", input.model.clone())
                    .system_prompt(format!("{}\n\nAlways shout.", input.system_prompt))
                    .build())
            }),
        )
        .in_memory_sessions()
        .without_agent_files()
        .build()?;

    let mut session = harness.new_session()?;
    let outcome = harness
        .run_in(
            &mut session,
            "Use your sub-agents.",
            RunOptions {
                events: Arc::new(Printer),
                ..Default::default()
            },
        )
        .await;
    println!("\n{}", outcome.output);
    Ok(())
}
