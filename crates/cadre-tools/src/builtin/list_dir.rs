//! `list_dir`: list one directory's entries with kinds and sizes.

use super::common::{definition, string_arg};
use crate::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use async_trait::async_trait;
use cadre_types::ToolDefinition;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

/// Entries listed at most.
const MAX_ENTRIES: usize = 1000;

const DESCRIPTION: &str = "List the entries of one directory (not recursive), sorted by name. \
Directories end with `/`, files show their size, symlinks show `-> target`. Hidden and \
ignored entries are listed too. Use glob to find files recursively by name.";

/// Lists a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDirTool;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    path: Option<String>,
}

#[async_trait]
impl Tool for ListDirTool {
    fn name(&self) -> &str {
        "list_dir"
    }

    fn definition(&self) -> ToolDefinition {
        definition(
            self.name(),
            DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Directory to list, relative to the workspace root. Defaults to the root (`.`)."
                    }
                },
                "required": [],
                "additionalProperties": false
            }),
        )
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn permission_subject(&self, args: &serde_json::Value) -> Option<String> {
        string_arg(args, "path", Some("."))
    }

    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let abs = ctx.workspace.resolve(args.path.as_deref().unwrap_or("."))?;
        let shown = ctx.workspace.display(&abs);
        let listing = tokio::task::spawn_blocking(move || list(&abs, &shown))
            .await
            .map_err(|e| ToolError::Failed(format!("listing failed: {e}")))??;
        Ok(ToolOutput::ok(listing))
    }
}

/// Render the listing of `dir` (shown to the model as `shown`).
fn list(dir: &Path, shown: &str) -> Result<String, ToolError> {
    let read = std::fs::read_dir(dir).map_err(|e| {
        if dir.is_file() {
            ToolError::Failed(format!("{shown} is a file, not a directory; use read_file"))
        } else {
            ToolError::io(format!("cannot list {shown}"), e)
        }
    })?;
    let mut entries: Vec<(String, String)> = Vec::new();
    for entry in read.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let line = match entry.metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(entry.path())
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into());
                let kind = if entry.path().is_dir() { "/" } else { "" };
                format!("{name}{kind} -> {target} (symlink)")
            }
            Ok(meta) if meta.is_dir() => format!("{name}/"),
            Ok(meta) => format!("{name}  ({})", human_size(meta.len())),
            Err(_) => format!("{name}  (unreadable)"),
        };
        entries.push((name, line));
    }
    if entries.is_empty() {
        return Ok(format!("{shown}/ is empty"));
    }
    entries.sort();
    let total = entries.len();
    let noun = if total == 1 { "entry" } else { "entries" };
    let mut out = format!("{shown}/ ({total} {noun})\n");
    for (_, line) in entries.iter().take(MAX_ENTRIES) {
        out.push_str(line);
        out.push('\n');
    }
    if total > MAX_ENTRIES {
        out.push_str(&format!(
            "[{} more entries not shown; use glob to narrow down]\n",
            total - MAX_ENTRIES
        ));
    }
    Ok(out)
}

/// `123 B`, `4.0 KiB`, `1.5 MiB`, ...
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut size = bytes as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, tree};

    #[tokio::test]
    async fn lists_sorted_entries_with_kinds_and_sizes() {
        let big = vec![b'x'; 2048];
        let dir = tree(&[
            ("b.txt", b"hello"),
            ("a/inner.txt", b""),
            (".hidden", b""),
            ("big.bin", &big),
        ]);
        std::os::unix::fs::symlink("b.txt", dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("dlink")).unwrap();
        let c = ctx(dir.path());
        let out = ListDirTool.call(json!({}), &c).await.unwrap();
        assert_eq!(
            out.content,
            "./ (6 entries)\n.hidden  (0 B)\na/\nb.txt  (5 B)\nbig.bin  (2.0 KiB)\n\
             dlink/ -> a (symlink)\nlink -> b.txt (symlink)\n"
        );
        let out = ListDirTool.call(json!({"path": "a"}), &c).await.unwrap();
        assert_eq!(out.content, "a/ (1 entry)\ninner.txt  (0 B)\n");
    }

    #[tokio::test]
    async fn caps_entries_and_refuses_files_and_outside() {
        let names: Vec<String> = (0..1005).map(|i| format!("f{i:04}")).collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let dir = tree(&files);
        let c = ctx(dir.path());
        let out = ListDirTool.call(json!({"path": "."}), &c).await.unwrap();
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines.len(), 1002);
        assert_eq!(lines[1000], "f0999  (0 B)");
        assert!(lines[1001].starts_with("[5 more entries not shown"));
        let err = ListDirTool
            .call(json!({"path": "f0001"}), &c)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("is a file"), "{err}");
        let err = ListDirTool
            .call(json!({"path": ".."}), &c)
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Path(_)), "{err}");
    }

    #[test]
    fn sizes_are_human_readable() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 * 1024 * 1024), "3.0 MiB");
    }
}
