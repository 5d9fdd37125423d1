//! Filling in a command's `!` shell lines and `@path` includes with the main agent's own
//! tools: `bash` and `read_file`, in its workspace and sandbox, under its permission rules.
//! Nobody is asked: what the rules would ask about is not run.

use async_trait::async_trait;
use cadre_engine::{DenyAll, PermissionPolicy, PolicyDecision};
use cadre_subagents::Harness;
use cadre_tools::{Budget, RunContext, Tool, ToolContext, ToolGrant, ToolRegistry, Workspace};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Runs shell commands and reads files for [`super::render`].
#[async_trait]
pub trait Resolve: Send + Sync {
    /// The output of `command`, or why it did not run.
    async fn shell(&self, command: &str) -> String;
    /// The contents of `path`, why it cannot be included, or `None` when there is no such
    /// file (the `@` is then kept as text: it may be a mention, not a path).
    async fn include(&self, path: &str) -> Option<String>;
}

/// A [`Resolve`] through the main agent's `bash` and `read_file`.
pub struct HarnessResolver {
    workspace: Arc<Workspace>,
    policy: PermissionPolicy,
    tools: Arc<ToolRegistry>,
    run: Arc<RunContext>,
    cancel: CancellationToken,
}

impl HarnessResolver {
    /// The resolver of `harness`'s main agent; `cancel` stops a running command.
    pub fn new(harness: &Harness, cancel: CancellationToken) -> std::io::Result<Self> {
        let config = harness.agent().config();
        let run = Arc::new(RunContext {
            session_id: "slash-command".into(),
            agent: "main".into(),
            model: config.model.spec.clone(),
            task_id: None,
            user_id: None,
            parent_session_id: None,
            depth: 0,
            tool_grant: ToolGrant::unrestricted(),
            budget: Budget::unlimited(),
            trace_id: "slash-command".into(),
            events: Arc::new(cadre_types::NullSink),
            approvals: Arc::new(DenyAll::new(
                "slash command expansion",
                "nobody is asked while a command file is expanded",
            )),
        });
        Ok(Self {
            workspace: Arc::new(harness.open_workspace()?),
            policy: config.permissions.clone(),
            tools: Arc::new(config.tools.clone()),
            run,
            cancel,
        })
    }

    /// Call `tool` with `args` if the rules allow it without asking.
    async fn call(&self, name: &str, args: serde_json::Value) -> Result<String, String> {
        let tool: &Arc<dyn Tool> = self
            .tools
            .get(name)
            .ok_or_else(|| format!("the main agent has no `{name}` tool"))?;
        let subject = tool
            .permission_subject(&args, &self.workspace)
            .map_err(|e| e.to_string())?;
        match self
            .policy
            .decide(name, &subject, tool.is_read_only(), false)
        {
            PolicyDecision::Allow => {}
            PolicyDecision::Deny(why) => return Err(why),
            PolicyDecision::Ask(why) => {
                return Err(format!(
                    "it needs approval ({why}); a command file's `!` lines and `@` files are used only when the permission rules allow them"
                ));
            }
        }
        let ctx = ToolContext {
            call_id: "slash-command".into(),
            workspace: self.workspace.clone(),
            cancel: self.cancel.clone(),
            run: self.run.clone(),
            tools: self.tools.clone(),
            hidden: self.policy.rules.hidden(),
        };
        let out = tool.call(args, &ctx).await.map_err(|e| e.to_string())?;
        if out.is_error {
            return Err(out.content);
        }
        Ok(out.content)
    }
}

#[async_trait]
impl Resolve for HarnessResolver {
    async fn shell(&self, command: &str) -> String {
        match self
            .call("bash", serde_json::json!({ "command": command }))
            .await
        {
            Ok(out) => out,
            Err(why) => format!("[`{command}` was not run: {why}]"),
        }
    }

    async fn include(&self, path: &str) -> Option<String> {
        // Only something that exists is a file reference; resolution errors (outside the
        // workspace, a credential location) are shown, so a refusal is never silent.
        if let Ok(abs) = self.workspace.resolve(path)
            && !abs.exists()
        {
            return None;
        }
        Some(
            match self
                .call("read_file", serde_json::json!({ "path": path }))
                .await
            {
                Ok(text) => text,
                Err(why) => format!("[{path} was not included: {why}]"),
            },
        )
    }
}
