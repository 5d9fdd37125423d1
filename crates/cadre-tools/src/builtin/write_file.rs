//! `write_file`: create or overwrite a file, creating missing parent directories.

use crate::{PermissionSubject, ToolContext, ToolError, ToolOutput, TypedTool, Workspace};
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;

const DESCRIPTION: &str = "Write a file in the workspace, replacing it entirely if it exists \
and creating missing parent directories. Use it for new files or complete rewrites; for \
changes to part of an existing file prefer edit_file, which is safer and shows a diff. \
Read an existing file before overwriting it.";

/// Creates or overwrites a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFileTool;

/// The arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Args {
    /// File to write, relative to the workspace root (or absolute inside it). Parent
    /// directories are created.
    path: String,
    /// The complete new content of the file.
    content: String,
}

impl TypedTool for WriteFileTool {
    const NAME: &'static str = "write_file";
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        DESCRIPTION.into()
    }

    fn permission_subject(
        &self,
        args: &Args,
        workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(PermissionSubject::written_path(workspace, &args.path)?)
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let workspace = ctx.workspace.clone();
        let bytes = args.content.len();
        let written = tokio::task::spawn_blocking(move || {
            workspace.write_file(&args.path, args.content.as_bytes())
        })
        .await
        .map_err(|e| ToolError::Failed(format!("write_file failed: {e}")))??;
        let what = if written.existed {
            "overwrote existing file"
        } else {
            "created new file"
        };
        Ok(ToolOutput::ok(format!(
            "wrote {bytes} bytes to {} ({what})",
            written.shown
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::testutil::{ctx, tree};
    use serde_json::json;

    #[tokio::test]
    async fn creates_nested_directories_then_overwrites() {
        let dir = tree(&[]);
        let c = ctx(dir.path());
        let args = json!({"path": "new/dir/file.txt", "content": "hello"});
        let out = WriteFileTool.call(args, &c).await.unwrap();
        assert_eq!(
            out.content,
            "wrote 5 bytes to new/dir/file.txt (created new file)"
        );
        let written = std::fs::read_to_string(dir.path().join("new/dir/file.txt")).unwrap();
        assert_eq!(written, "hello");

        let args = json!({"path": "new/dir/file.txt", "content": "hi"});
        let out = WriteFileTool.call(args, &c).await.unwrap();
        assert_eq!(
            out.content,
            "wrote 2 bytes to new/dir/file.txt (overwrote existing file)"
        );
        let written = std::fs::read_to_string(dir.path().join("new/dir/file.txt")).unwrap();
        assert_eq!(written, "hi");
    }

    #[tokio::test]
    async fn refuses_paths_outside_and_through_symlinks() {
        let dir = tree(&[]);
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let c = ctx(dir.path());
        for path in ["../escape.txt", "link/new.txt", ".aws/credentials"] {
            let args = json!({"path": path, "content": "x"});
            let err = WriteFileTool.call(args, &c).await.unwrap_err();
            assert!(matches!(err, ToolError::Path(_)), "{path}: {err}");
        }
        assert!(!outside.path().join("new.txt").exists());
        assert!(!dir.path().join(".aws").exists());
    }
}
