//! MCP tools as ordinary cadre tools: one [`McpTool`] per server tool (named by
//! [`crate::naming`], with the server's schema and description, read-only only when the
//! server says `readOnlyHint`), plus `list_resources` / `read_resource` for servers that
//! have resources. Calls forward progress as notices of the calling run and stop (sending
//! `notifications/cancelled`) when the call's token fires.

use crate::naming::ToolNamer;
use crate::result::{MEDIA_DIR, render, render_contents};
use crate::server::{CallError, McpServer, Progress};
use async_trait::async_trait;
use cadre_tools::{Tool, ToolContext, ToolError, ToolKind, ToolOutput};
use cadre_types::{Event, EventEnvelope, ToolDefinition};
use serde_json::{Value, json};
use std::sync::Arc;

/// One tool of an MCP server.
pub struct McpTool {
    server: Arc<McpServer>,
    /// The server's own name for the tool.
    remote_name: String,
    definition: ToolDefinition,
    read_only: bool,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.definition.name)
            .finish_non_exhaustive()
    }
}

/// Tell the calling run how a call is getting on (shown live in the TUI and JSONL, and
/// forwarded to a sub-agent's parent).
fn report(ctx: &ToolContext, tool: &str, p: &Progress) {
    let amount = match p.total {
        Some(t) if t > 0.0 => format!("{}/{}", p.progress, t),
        _ => format!("{}", p.progress),
    };
    let message = match &p.message {
        Some(m) if !m.is_empty() => format!("{tool}: progress {amount}: {m}"),
        _ => format!("{tool}: progress {amount}"),
    };
    ctx.run.events.emit(EventEnvelope {
        session_id: ctx.run.session_id.clone(),
        agent: ctx.run.agent.clone(),
        task_id: ctx.run.task_id.clone(),
        event: Event::Notice { message },
    });
}

/// A server that could not be started (a lazy start on this call, or a retry) is a warning
/// the calling run shows, besides the tool error the model reads.
fn warn_unavailable(ctx: &ToolContext, e: &CallError) {
    if let CallError::Unavailable(m) = e {
        ctx.run.events.emit(EventEnvelope {
            session_id: ctx.run.session_id.clone(),
            agent: ctx.run.agent.clone(),
            task_id: ctx.run.task_id.clone(),
            event: Event::Notice {
                message: format!("warning: {m}"),
            },
        });
    }
}

fn call_failure(tool: &str, e: CallError) -> ToolError {
    match e {
        CallError::Cancelled => ToolError::Cancelled,
        CallError::Server(m) => ToolError::Failed(format!("{tool}: the server answered: {m}")),
        other => ToolError::Failed(format!("{tool}: {other}")),
    }
}

/// A file stem for media of one call (call ids may hold any characters).
fn media_stem(ctx: &ToolContext) -> String {
    let id: String = ctx
        .call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(64)
        .collect();
    format!(
        "{}-{}",
        ctx.run.session_id,
        if id.is_empty() { "call" } else { &id }
    )
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.definition.name
    }

    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn process_sandbox(&self) -> Option<cadre_sandbox::SandboxPolicy> {
        self.server.process_sandbox()
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Mcp
    }

    /// MCP calls have their own timeout (`tool_timeout_secs`), which also cancels the call
    /// on the server.
    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(ToolError::InvalidArgs(format!(
                    "arguments must be a JSON object, not {other}"
                )));
            }
        };
        let name = self.definition.name.clone();
        let on_progress = |p: Progress| report(ctx, &name, &p);
        let result = self
            .server
            .call_tool(&self.remote_name, arguments, &ctx.cancel, &on_progress)
            .await
            .map_err(|e| {
                warn_unavailable(ctx, &e);
                call_failure(&name, e)
            })?;
        let media = ctx.workspace.root().join(MEDIA_DIR);
        Ok(render(&result, &media, &media_stem(ctx)))
    }
}

/// `mcp__<server>__list_resources`.
struct ListResources {
    server: Arc<McpServer>,
    definition: ToolDefinition,
}

#[async_trait]
impl Tool for ListResources {
    fn name(&self) -> &str {
        &self.definition.name
    }

    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn process_sandbox(&self) -> Option<cadre_sandbox::SandboxPolicy> {
        self.server.process_sandbox()
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Mcp
    }

    async fn call(&self, _args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let list = self.server.list_resources().await.map_err(|e| {
            warn_unavailable(ctx, &e);
            call_failure(&self.definition.name, e)
        })?;
        if list.is_empty() {
            return Ok(ToolOutput::ok("the server lists no resources"));
        }
        let lines: Vec<String> = list
            .iter()
            .map(|r| {
                let mut line = format!("{} ({})", r.uri, r.name);
                if let Some(m) = &r.mime_type {
                    line.push_str(&format!(" {m}"));
                }
                if let Some(d) = &r.description {
                    line.push_str(&format!(": {d}"));
                }
                line
            })
            .collect();
        Ok(ToolOutput::ok(lines.join("\n")))
    }
}

/// `mcp__<server>__read_resource`.
struct ReadResource {
    server: Arc<McpServer>,
    definition: ToolDefinition,
}

#[derive(serde::Deserialize)]
struct ReadArgs {
    uri: String,
}

#[async_trait]
impl Tool for ReadResource {
    fn name(&self) -> &str {
        &self.definition.name
    }

    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn process_sandbox(&self) -> Option<cadre_sandbox::SandboxPolicy> {
        self.server.process_sandbox()
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Mcp
    }

    fn timeout_exempt(&self) -> bool {
        true
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let a: ReadArgs = cadre_tools::parse_args(args)?;
        let read = self
            .server
            .read_resource(&a.uri, &ctx.cancel)
            .await
            .map_err(|e| {
                warn_unavailable(ctx, &e);
                call_failure(&self.definition.name, e)
            })?;
        let media = ctx.workspace.root().join(MEDIA_DIR);
        let text = render_contents(&read.contents, &media, &media_stem(ctx));
        Ok(ToolOutput::ok(if text.is_empty() {
            "(empty resource)".to_string()
        } else {
            text
        }))
    }
}

/// The cadre tools of a started server, from what it offered: its tools (minus those the
/// configuration leaves out) and, when it has resources, the two resource tools.
pub fn tools_of(server: &Arc<McpServer>) -> Vec<Arc<dyn Tool>> {
    let offer = server.offer();
    let cfg = server.config();
    let mut namer = ToolNamer::new();
    let prefix = crate::naming::prefix(&cfg.name);
    let has_resources = !offer.resources.is_empty();
    let list_name = format!("{prefix}list_resources");
    let read_name = format!("{prefix}read_resource");
    if has_resources {
        namer.reserve(&list_name);
        namer.reserve(&read_name);
    }
    let mut out: Vec<Arc<dyn Tool>> = Vec::new();
    let mut infos = offer.tools;
    // Name collisions resolve the same way whatever order the server lists its tools in.
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    for info in infos {
        let remote = info.name.to_string();
        if cfg
            .enabled_tools
            .as_ref()
            .is_some_and(|only| !only.contains(&remote))
            || cfg.disabled_tools.contains(&remote)
        {
            continue;
        }
        let name = namer.name(&cfg.name, &remote);
        let description = info
            .description
            .as_deref()
            .map(str::to_string)
            .or_else(|| info.title.clone())
            .unwrap_or_default();
        let mut schema = Value::Object((*info.input_schema).clone());
        if schema.get("type").is_none() {
            schema["type"] = json!("object");
        }
        let read_only = info
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        out.push(Arc::new(McpTool {
            server: server.clone(),
            remote_name: remote,
            definition: ToolDefinition {
                name,
                description: format!("{description} (MCP server {})", cfg.name)
                    .trim_start()
                    .to_string(),
                parameters: schema,
            },
            read_only,
        }));
    }
    if has_resources {
        out.push(Arc::new(ListResources {
            server: server.clone(),
            definition: ToolDefinition {
                name: list_name,
                description: format!("List the resources of MCP server {}.", cfg.name),
                parameters: json!({"type": "object", "properties": {}}),
            },
        }));
        out.push(Arc::new(ReadResource {
            server: server.clone(),
            definition: ToolDefinition {
                name: read_name,
                description: format!(
                    "Read a resource of MCP server {} by its URI (see {prefix}list_resources).",
                    cfg.name
                ),
                parameters: json!({
                    "type": "object",
                    "properties": {"uri": {"type": "string", "description": "The resource URI."}},
                    "required": ["uri"]
                }),
            },
        }));
    }
    out
}
