//! The built-in tools: file reading and editing, searching, listing and running shell
//! commands, all confined to the run's [`Workspace`](crate::Workspace).

mod bash;
mod common;
mod edit_file;
mod glob;
mod grep;
mod line_window;
mod list_dir;
mod read_file;
mod write_file;

pub use bash::BashTool;
pub use edit_file::EditFileTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use list_dir::ListDirTool;
pub use read_file::ReadFileTool;
pub use write_file::WriteFileTool;

use crate::ToolRegistry;
use std::sync::Arc;

/// A registry with all built-in tools, in this order: `read_file`, `write_file`,
/// `edit_file`, `glob`, `grep`, `list_dir`, `bash`.
pub fn builtin_tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(Arc::new(ReadFileTool))
        .with(Arc::new(WriteFileTool))
        .with(Arc::new(EditFileTool))
        .with(Arc::new(GlobTool))
        .with(Arc::new(GrepTool))
        .with(Arc::new(ListDirTool))
        .with(Arc::new(BashTool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_has_all_tools_in_order_with_object_schemas() {
        let reg = builtin_tools();
        assert_eq!(
            reg.names(),
            [
                "read_file",
                "write_file",
                "edit_file",
                "glob",
                "grep",
                "list_dir",
                "bash"
            ]
        );
        for def in reg.definitions() {
            assert_eq!(def.parameters["type"], "object", "{}", def.name);
            assert!(def.parameters["properties"].is_object(), "{}", def.name);
            assert!(def.parameters["required"].is_array(), "{}", def.name);
            assert!(def.description.len() > 40, "{}", def.name);
        }
        let read_only: Vec<&str> = reg
            .iter()
            .filter(|t| t.is_read_only())
            .map(|t| t.name())
            .collect();
        assert_eq!(read_only, ["read_file", "glob", "grep", "list_dir"]);
    }

    #[test]
    fn permission_subjects_are_the_command_or_path() {
        let reg = builtin_tools();
        let subject = |tool: &str, args: serde_json::Value| {
            reg.get(tool).and_then(|t| t.permission_subject(&args))
        };
        let cmd = serde_json::json!({"command": "ls -la"});
        assert_eq!(subject("bash", cmd).as_deref(), Some("ls -la"));
        let path = serde_json::json!({"path": "src/a.rs", "content": ""});
        assert_eq!(subject("write_file", path).as_deref(), Some("src/a.rs"));
        let none = serde_json::json!({"pattern": "*.rs"});
        assert_eq!(subject("glob", none).as_deref(), Some("."));
    }
}
