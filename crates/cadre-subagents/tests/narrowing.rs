//! Tool narrowing: child tools = (allowlist ∩ parent, or all parent tools) − deny − delegation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use cadre_subagents::{DELEGATION_TOOLS, narrow};
use cadre_tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use cadre_types::ToolDefinition;
use std::sync::Arc;

struct Named(&'static str);

#[async_trait]
impl Tool for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.0.to_string(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object", "properties": {}, "required": []}),
        }
    }
    async fn call(&self, _: serde_json::Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok(""))
    }
}

const PARENT: &[&str] = &[
    "read_file",
    "write_file",
    "grep",
    "bash",
    "task",
    "agent_spawn",
    "task_output",
    "mcp__github__create_issue",
    "mcp__github__list_prs",
    "mcp__gitlab__create_issue",
];

fn parent() -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    for name in PARENT {
        reg.register(Arc::new(Named(name)));
    }
    reg
}

fn list(names: &[&str]) -> Vec<String> {
    names.iter().map(std::string::ToString::to_string).collect()
}

/// (label, allowlist, deny list, expected child tools).
type Case<'a> = (&'a str, Option<&'a [&'a str]>, &'a [&'a str], &'a [&'a str]);

#[test]
fn narrowing_table() {
    let cases: &[Case<'_>] = &[
        (
            "no allowlist inherits everything but delegation",
            None,
            &[],
            &[
                "read_file",
                "write_file",
                "grep",
                "bash",
                "mcp__github__create_issue",
                "mcp__github__list_prs",
                "mcp__gitlab__create_issue",
            ],
        ),
        (
            "allowlist ∩ parent − deny",
            Some(&["read_file", "grep", "bash"]),
            &["bash"],
            &["read_file", "grep"],
        ),
        ("an empty allowlist means no tools", Some(&[]), &[], &[]),
        (
            "an allowlisted delegation tool is still removed",
            Some(&["read_file", "task", "agent_spawn", "task_output"]),
            &[],
            &["read_file"],
        ),
        (
            "names the parent lacks are not added",
            Some(&["read_file", "web_fetch", "list_dir"]),
            &[],
            &["read_file"],
        ),
        (
            "parent order is kept",
            Some(&["grep", "read_file"]),
            &[],
            &["read_file", "grep"],
        ),
        (
            "an MCP server name allows all its tools",
            Some(&["mcp__github"]),
            &[],
            &["mcp__github__create_issue", "mcp__github__list_prs"],
        ),
        (
            "an MCP wildcard allows all its tools",
            Some(&["mcp__gitlab__*", "read_file"]),
            &[],
            &["read_file", "mcp__gitlab__create_issue"],
        ),
        (
            "one MCP tool",
            Some(&["mcp__github__list_prs"]),
            &[],
            &["mcp__github__list_prs"],
        ),
        (
            "deny an MCP server",
            None,
            &["mcp__github", "write_file", "bash"],
            &["read_file", "grep", "mcp__gitlab__create_issue"],
        ),
        (
            "deny one MCP tool by wildcard of another server leaves the rest",
            Some(&["mcp__github__*"]),
            &["mcp__github__create_issue"],
            &["mcp__github__list_prs"],
        ),
        (
            "a server-name prefix is not a different server",
            Some(&["mcp__git"]),
            &[],
            &[],
        ),
    ];
    let parent = parent();
    for (label, allow, deny, expected) in cases {
        let allow = allow.map(list);
        let child = narrow(&parent, allow.as_deref(), &list(deny), DELEGATION_TOOLS);
        assert_eq!(child.names(), *expected, "{label}");
    }
}

#[test]
fn narrowing_never_adds_and_respects_a_custom_delegation_set() {
    let parent = parent();
    let child = narrow(&parent, None, &[], &["bash"]);
    assert!(child.get("bash").is_none());
    assert!(
        child.get("task").is_some(),
        "only the given delegation names are removed"
    );
    for name in child.names() {
        assert!(parent.get(name).is_some());
    }
}
