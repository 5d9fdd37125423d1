//! `edit_file`: replace an exact string in a file and show the change as a unified diff.

use crate::{PermissionSubject, ToolContext, ToolError, ToolOutput, TypedTool, Workspace};
use schemars::JsonSchema;
use serde::Deserialize;
use similar::TextDiff;
use std::borrow::Cow;

const DESCRIPTION: &str = "Edit a file by replacing an exact string. `old_string` must match \
the file's text exactly, including whitespace and indentation (copy it from read_file output \
without the line-number prefix), and must occur exactly once unless `replace_all` is set; \
include surrounding lines to make it unique. Returns a unified diff of the change. Read the \
file first. To create a file use write_file.";

/// Files larger than this are not edited (the whole file is held in memory, twice).
const MAX_EDIT_BYTES: u64 = 16 << 20;

/// Replaces an exact string in a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFileTool;

/// The arguments of `edit_file`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Args {
    /// File to edit, relative to the workspace root (or absolute inside it).
    path: String,
    /// Exact text to replace. Must be non-empty and, unless replace_all is true, occur exactly
    /// once.
    old_string: String,
    /// Text to put in its place (may be empty to delete). Must differ from old_string.
    new_string: String,
    /// Replace every occurrence instead of requiring a unique match.
    #[serde(default)]
    replace_all: bool,
}

impl TypedTool for EditFileTool {
    const NAME: &'static str = "edit_file";
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
        if args.old_string.is_empty() {
            return Err(ToolError::InvalidArgs(
                "old_string is empty; to create a file use write_file".into(),
            ));
        }
        if args.old_string == args.new_string {
            return Err(ToolError::InvalidArgs(
                "old_string and new_string are identical; nothing to change".into(),
            ));
        }
        let workspace = ctx.workspace.clone();
        tokio::task::spawn_blocking(move || edit(&workspace, &args))
            .await
            .map_err(|e| ToolError::Failed(format!("edit_file failed: {e}")))?
    }
}

/// Read the file, replace the text and save it back in place.
fn edit(workspace: &Workspace, args: &Args) -> Result<ToolOutput, ToolError> {
    let file = workspace.open_for_edit(&args.path, MAX_EDIT_BYTES)?;
    let shown = file.shown.as_str();
    let before = std::str::from_utf8(&file.content).map_err(|_| {
        ToolError::Failed(format!("{shown} is not valid UTF-8 text; cannot edit it"))
    })?;
    let count = before.matches(args.old_string.as_str()).count();
    let after = match count {
        0 => {
            return Err(ToolError::Failed(format!(
                "old_string not found in {shown}; it must match exactly, including \
                 whitespace (read the file again to check)"
            )));
        }
        1 => before.replacen(&args.old_string, &args.new_string, 1),
        n if !args.replace_all => {
            return Err(ToolError::Failed(format!(
                "old_string matches {n} times in {shown}; give more context or set replace_all"
            )));
        }
        _ => before.replace(&args.old_string, &args.new_string),
    };
    file.save(after.as_bytes())?;
    let diff = TextDiff::from_lines(before, &after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    let noun = if count == 1 {
        "replacement"
    } else {
        "replacements"
    };
    Ok(ToolOutput::ok(format!(
        "edited {shown} ({count} {noun})\n{diff}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::testutil::{ctx, tree};
    use serde_json::json;

    const TEXT: &str = "a\nb\nc\nd\ne\nf\ng\nh\ni\nfoo\n";

    async fn edit(
        dir: &tempfile::TempDir,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        EditFileTool.call(args, &ctx(dir.path())).await
    }

    fn contents(dir: &tempfile::TempDir) -> String {
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap()
    }

    #[tokio::test]
    async fn replaces_a_unique_match_and_returns_a_diff() {
        let dir = tree(&[("f.txt", TEXT.as_bytes())]);
        let args = json!({"path": "f.txt", "old_string": "e\n", "new_string": "E\n"});
        let out = edit(&dir, args).await.unwrap();
        assert_eq!(contents(&dir), TEXT.replace("e\n", "E\n"));
        let want = "edited f.txt (1 replacement)\n\
                    --- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n";
        assert_eq!(out.content, want);
    }

    #[tokio::test]
    async fn zero_matches_is_an_error_and_leaves_the_file() {
        let dir = tree(&[("f.txt", TEXT.as_bytes())]);
        let args = json!({"path": "f.txt", "old_string": "zzz", "new_string": "y"});
        let err = edit(&dir, args).await.unwrap_err();
        assert!(
            err.to_string().starts_with("old_string not found in f.txt"),
            "{err}"
        );
        assert_eq!(contents(&dir), TEXT);
    }

    #[tokio::test]
    async fn several_matches_need_replace_all() {
        let dir = tree(&[("f.txt", b"x = 1\nx = 1\nx = 1\n")]);
        let args = json!({"path": "f.txt", "old_string": "x = 1", "new_string": "x = 2"});
        let err = edit(&dir, args).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "old_string matches 3 times in f.txt; give more context or set replace_all"
        );
        assert_eq!(contents(&dir), "x = 1\nx = 1\nx = 1\n");
        let args = json!({"path": "f.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true});
        let out = edit(&dir, args).await.unwrap();
        assert!(out.content.starts_with("edited f.txt (3 replacements)\n"));
        assert!(
            out.content
                .contains("-x = 1\n-x = 1\n-x = 1\n+x = 2\n+x = 2\n+x = 2\n")
        );
        assert_eq!(contents(&dir), "x = 2\nx = 2\nx = 2\n");
    }

    #[tokio::test]
    async fn rejects_empty_or_identical_strings() {
        let dir = tree(&[("f.txt", TEXT.as_bytes())]);
        let args = json!({"path": "f.txt", "old_string": "", "new_string": "y"});
        assert!(matches!(
            edit(&dir, args).await,
            Err(ToolError::InvalidArgs(_))
        ));
        let args = json!({"path": "f.txt", "old_string": "foo", "new_string": "foo"});
        assert!(matches!(
            edit(&dir, args).await,
            Err(ToolError::InvalidArgs(_))
        ));
        assert_eq!(contents(&dir), TEXT);
    }
}
