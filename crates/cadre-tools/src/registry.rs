//! The set of tools an agent is offered, in a stable order.

use crate::Tool;
use cadre_types::ToolDefinition;
use std::collections::HashMap;
use std::sync::Arc;

/// An ordered set of tools with unique names, and names that are deliberately not offered
/// with the reason a call to them is refused. Cheap to clone.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    index: HashMap<String, usize>,
    withheld: HashMap<String, String>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a tool; a tool with the same name is replaced in place.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.name().to_string();
        self.withheld.remove(&name);
        match self.index.get(&name) {
            Some(&i) => self.tools[i] = tool,
            None => {
                self.index.insert(name, self.tools.len());
                self.tools.push(tool);
            }
        }
    }

    /// Builder-style [`register`](Self::register).
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Self {
        self.register(tool);
        self
    }

    /// Look a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// Tool names in order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// All tools in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Definitions offered to the model, in order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition()).collect()
    }

    /// Do not offer `name` (a tool of that name is removed), and answer a call to it with
    /// `reason` rather than "unknown tool": for tools an agent knows of but may not use here.
    pub fn withhold(&mut self, name: impl Into<String>, reason: impl Into<String>) {
        let name = name.into();
        if self.index.remove(&name).is_some() {
            self.tools.retain(|t| t.name() != name);
            self.index = (self.tools.iter().enumerate())
                .map(|(i, t)| (t.name().to_string(), i))
                .collect();
        }
        self.withheld.insert(name, reason.into());
    }

    /// Withhold every tool that reaches the network, for an agent whose sandbox denies it
    /// (`policy` names the sandbox in the refusal).
    pub fn withhold_network(&mut self, policy: &str) {
        self.withhold_network_except(policy, &[]);
    }

    /// [`ToolRegistry::withhold_network`], keeping the tools named in `keep` (network tools
    /// governed by their own rules, which the agent's definition names).
    pub fn withhold_network_except(&mut self, policy: &str, keep: &[String]) {
        let names: Vec<String> = (self.tools.iter())
            .filter(|t| t.uses_network() && !keep.iter().any(|k| k == t.name()))
            .map(|t| t.name().to_string())
            .collect();
        for name in names {
            let reason = network_refusal(&name, policy);
            self.withhold(name, reason);
        }
    }

    /// Withhold every tool whose calls act through a process sandboxed more widely than
    /// `policy`, the agent's own (see [`Tool::process_sandbox`]).
    pub fn withhold_wider_processes(&mut self, policy: &cadre_sandbox::SandboxPolicy) {
        let names: Vec<String> = (self.tools.iter())
            .filter(|t| t.process_sandbox().is_some_and(|p| !p.is_within(policy)))
            .map(|t| t.name().to_string())
            .collect();
        for name in names {
            let reason = format!(
                "{name} is not available: its MCP server runs in a wider sandbox than this agent's ({}); \
                 declare the server in this agent's own `mcpServers` to get one within its sandbox",
                policy.mode
            );
            self.withhold(name, reason);
        }
    }

    /// Why a call to `name` is refused, when it was withheld.
    pub fn refusal(&self, name: &str) -> Option<&str> {
        self.withheld.get(name).map(String::as_str)
    }

    /// A new registry with only the tools `keep` accepts, order preserved (and nothing
    /// withheld: whoever builds the new registry decides its refusals).
    pub fn filtered(&self, mut keep: impl FnMut(&dyn Tool) -> bool) -> Self {
        let mut out = Self::new();
        for t in &self.tools {
            if keep(t.as_ref()) {
                out.register(t.clone());
            }
        }
        out
    }
}

/// The refusal of network tool `name` under a sandbox without the network.
pub fn network_refusal(name: &str, policy: &str) -> String {
    format!(
        "{name} is not available: this agent runs in a {policy} sandbox without the network; \
         give it `sandbox: {{mode: {policy}, network: true}}` to allow it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ToolContext, ToolError, ToolOutput};
    use async_trait::async_trait;

    struct Named(&'static str);

    #[async_trait]
    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn definition(&self) -> ToolDefinition {
            ToolDefinition {
                name: self.0.into(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
            }
        }
        async fn call(
            &self,
            _: serde_json::Value,
            _: &ToolContext,
        ) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::ok(""))
        }
    }

    #[test]
    fn a_withheld_tool_is_not_offered_and_has_a_reason_until_registered_again() {
        let mut reg = ToolRegistry::new()
            .with(Arc::new(Named("a")))
            .with(Arc::new(Named("b")))
            .with(Arc::new(Named("c")));
        reg.withhold("b", "not here");
        reg.withhold("z", "never");
        assert_eq!(reg.names(), vec!["a", "c"]);
        assert!(reg.get("b").is_none());
        assert_eq!(reg.get("c").map(|t| t.name()), Some("c"));
        assert_eq!(reg.refusal("b"), Some("not here"));
        assert_eq!(reg.refusal("z"), Some("never"));
        assert_eq!(reg.refusal("a"), None);
        assert_eq!(reg.filtered(|_| true).refusal("b"), None);
        reg.register(Arc::new(Named("b")));
        assert_eq!(reg.refusal("b"), None);
        assert_eq!(reg.names(), vec!["a", "c", "b"]);
    }
}
