//! `glob`: find files by name pattern, honouring ignore files like ripgrep.

use super::common::{PathGlob, link_to_hidden, refuse_hidden, walker};
use crate::{
    FileKind, HiddenPaths, Opened, PermissionSubject, ToolContext, ToolError, ToolInfo, ToolOutput,
    TypedTool, Workspace,
};
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Matches listed at most.
const MAX_MATCHES: usize = 500;

const DESCRIPTION: &str = "Find files whose path matches a glob pattern, fast, in any size of \
tree. A pattern without `/` matches file names at any depth (`*.rs`, `Cargo.toml`); a pattern \
with `/` matches the path relative to the search directory (`src/**/*.rs`, `tests/*.py`). `*` \
stays within one directory, `**` crosses directories, `{a,b}` gives alternatives. Files \
ignored by .gitignore/.ignore and hidden files are skipped. Returns matching file paths \
relative to the workspace root, sorted, at most 500. Use grep to search file contents.";

/// Finds files by glob pattern.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

/// The arguments of `glob`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Args {
    /// Glob to match, e.g. `*.rs`, `src/**/*.ts`, `**/test_*.py`, `*.{json,toml}`.
    pattern: String,
    /// Directory to search, relative to the workspace root. Defaults to the root.
    #[serde(default)]
    path: Option<String>,
}

impl TypedTool for GlobTool {
    const INFO: ToolInfo = ToolInfo::builtin("glob")
        .read_only()
        .titled(&["pattern", "path"])
        .reads_paths(&["path"])
        .foreign_names(&["Glob"]);
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        DESCRIPTION.into()
    }

    fn permission_subject(
        &self,
        args: &Args,
        workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(PermissionSubject::path(
            workspace,
            args.path.as_deref().unwrap_or("."),
        )?)
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let glob = PathGlob::new(&args.pattern)?;
        let workspace = ctx.workspace.clone();
        let hidden = ctx.hidden.clone();
        let cancel = ctx.cancel.clone();
        let session = ctx.run.session_id.clone();
        let path = args.path.unwrap_or_else(|| ".".to_string());
        let (found, shown_root) = tokio::task::spawn_blocking(move || {
            let root = match workspace.open(&path, &session)? {
                Opened::Dir(dir) => dir,
                Opened::File(file) => {
                    return Err(ToolError::Failed(format!(
                        "{} is not a directory",
                        file.shown
                    )));
                }
            };
            refuse_hidden(&workspace, &hidden, &root.path, true)?;
            let found = search(&workspace, &session, &hidden, &root.path, &glob, &cancel)?;
            Ok((found, root.shown))
        })
        .await
        .map_err(|e| ToolError::Failed(format!("glob search failed: {e}")))??;
        Ok(ToolOutput::ok(render(found, &args.pattern, &shown_root)))
    }
}

/// The files below `root` whose path matches `glob`, leaving out what `hidden` hides and
/// symlinks to it. The walk goes by name, so each match is checked to be where the walk saw
/// it, beneath the workspace root without a symlink on the way, before it is listed: a
/// directory swapped for a symlink mid-walk lists nothing outside.
fn search(
    workspace: &Workspace,
    session: &str,
    hidden: &Arc<HiddenPaths>,
    root: &Path,
    glob: &PathGlob,
    cancel: &CancellationToken,
) -> Result<Vec<String>, ToolError> {
    let mut opener = workspace.opener(&workspace.display(root), session)?;
    let mut found = Vec::new();
    for entry in walker(root, workspace, hidden).build().flatten() {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let is_file = entry
            .file_type()
            .is_some_and(|t| t.is_file() || t.is_symlink());
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        if is_file
            && glob.is_match(rel)
            && !link_to_hidden(workspace, hidden, entry.path())
            && matches!(
                opener.kind_of(entry.path()),
                Some(FileKind::File | FileKind::Symlink)
            )
        {
            found.push(workspace.display(entry.path()));
        }
    }
    Ok(found)
}

fn render(mut found: Vec<String>, pattern: &str, root: &str) -> String {
    if found.is_empty() {
        return format!("no files match {pattern} in {root}");
    }
    found.sort();
    let extra = found.len().saturating_sub(MAX_MATCHES);
    found.truncate(MAX_MATCHES);
    let mut out = found.join("\n");
    out.push('\n');
    if extra > 0 {
        out.push_str(&format!(
            "[{extra} more matches not shown; narrow the pattern or path]\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::testutil::{ctx, tree};
    use serde_json::json;

    async fn glob(
        dir: &tempfile::TempDir,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        GlobTool.call(args, &ctx(dir.path())).await
    }

    #[tokio::test]
    async fn matches_names_and_paths_honouring_gitignore() {
        let dir = tree(&[
            (".gitignore", b"target/\n*.log\n"),
            ("src/main.rs", b""),
            ("src/deep/lib.rs", b""),
            ("b.rs", b""),
            ("target/debug/gen.rs", b""),
            ("debug.log", b""),
            (".hidden/x.rs", b""),
            ("notes.txt", b""),
        ]);
        let out = glob(&dir, json!({"pattern": "*.rs"})).await.unwrap();
        assert_eq!(out.content, "b.rs\nsrc/deep/lib.rs\nsrc/main.rs\n");
        let out = glob(&dir, json!({"pattern": "src/*.rs"})).await.unwrap();
        assert_eq!(out.content, "src/main.rs\n");
        let out = glob(&dir, json!({"pattern": "**/*.rs", "path": "src"}))
            .await
            .unwrap();
        assert_eq!(out.content, "src/deep/lib.rs\nsrc/main.rs\n");
        let out = glob(&dir, json!({"pattern": "*.log"})).await.unwrap();
        assert_eq!(out.content, "no files match *.log in .");
        let out = glob(&dir, json!({"pattern": "*.{txt,log}"})).await.unwrap();
        assert_eq!(out.content, "notes.txt\n");
    }

    #[tokio::test]
    async fn caps_the_number_of_matches() {
        let names: Vec<String> = (0..510).map(|i| format!("f{i:04}.txt")).collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let dir = tree(&files);
        let out = glob(&dir, json!({"pattern": "*.txt"})).await.unwrap();
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines.len(), 501);
        assert_eq!(lines[0], "f0000.txt");
        assert_eq!(lines[499], "f0499.txt");
        assert!(lines[500].starts_with("[10 more matches not shown"));
    }

    #[tokio::test]
    async fn refuses_bad_patterns_and_outside_paths() {
        let dir = tree(&[("a.rs", b"")]);
        let err = glob(&dir, json!({"pattern": "a["})).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArgs(_)), "{err}");
        let err = glob(&dir, json!({"pattern": "*", "path": ".."}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Path(_)), "{err}");
    }
}
