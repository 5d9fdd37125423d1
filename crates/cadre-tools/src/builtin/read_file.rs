//! `read_file`: read a text file with line numbers, a window at a time.

use super::common::{definition, string_arg, truncate_line};
use crate::{Tool, ToolContext, ToolError, ToolOutput, parse_args};
use async_trait::async_trait;
use cadre_types::ToolDefinition;
use serde::Deserialize;
use serde_json::json;

/// Lines shown when the call gives no `limit`.
const DEFAULT_LIMIT: usize = 2000;
/// Longer lines are cut.
const MAX_LINE_CHARS: usize = 2000;
/// How much of the file is checked for NUL bytes to decide it is binary.
const BINARY_PROBE: usize = 8192;

const DESCRIPTION: &str = "Read a text file from the workspace. Lines come back numbered like \
`cat -n` (number, tab, text); use those numbers to refer to lines, but never copy the number \
prefix into edits. At most 2000 lines are returned per call (lines over 2000 characters are \
cut); for longer files a footer says which lines were shown, and `offset`/`limit` read the \
rest. Binary files are refused. Prefer this over `cat` in bash.";

/// Reads a text file with line numbers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFileTool;

#[derive(Deserialize)]
struct Args {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

#[async_trait]
impl Tool for ReadFileTool {
    fn name(&self) -> &str {
        "read_file"
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
                        "description": "File to read, relative to the workspace root (or absolute inside it)."
                    },
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "1-based line number to start at. Omit to start at the first line."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Maximum number of lines to return (default 2000)."
                    }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn permission_subject(&self, args: &serde_json::Value) -> Option<String> {
        string_arg(args, "path", None)
    }

    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 {
            return Err(ToolError::InvalidArgs("limit must be at least 1".into()));
        }
        let offset = args.offset.unwrap_or(1).max(1);
        let abs = ctx.workspace.resolve(&args.path)?;
        let shown = ctx.workspace.display(&abs);
        let meta = tokio::fs::metadata(&abs)
            .await
            .map_err(|e| ToolError::io(format!("cannot read {shown}"), e))?;
        if meta.is_dir() {
            return Err(ToolError::Failed(format!(
                "{shown} is a directory; use list_dir to see its entries"
            )));
        }
        let bytes = tokio::fs::read(&abs)
            .await
            .map_err(|e| ToolError::io(format!("cannot read {shown}"), e))?;
        if bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) {
            return Err(ToolError::Failed(format!(
                "{shown} looks like a binary file ({} bytes); read_file only shows text",
                bytes.len()
            )));
        }
        render(&String::from_utf8_lossy(&bytes), &shown, offset, limit)
    }
}

/// Number the lines `offset..offset+limit` of `text` and add a footer when lines are hidden.
fn render(text: &str, shown: &str, offset: usize, limit: usize) -> Result<ToolOutput, ToolError> {
    let total = text.lines().count();
    if total == 0 {
        return Ok(ToolOutput::ok(format!("({shown} is empty)")));
    }
    if offset > total {
        return Err(ToolError::Failed(format!(
            "offset {offset} is past the end of {shown}, which has {total} lines"
        )));
    }
    let mut out = String::new();
    let mut last = offset;
    for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        last = i + 1;
        out.push_str(&format!(
            "{last:>6}\t{}\n",
            truncate_line(line, MAX_LINE_CHARS)
        ));
    }
    if offset > 1 || last < total {
        out.push_str(&format!(
            "[showing lines {offset}-{last} of {total}; use offset to read more]\n"
        ));
    }
    Ok(ToolOutput::ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ctx, tree};

    async fn read(
        dir: &tempfile::TempDir,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        ReadFileTool.call(args, &ctx(dir.path())).await
    }

    #[tokio::test]
    async fn reads_whole_file_with_line_numbers() {
        let dir = tree(&[("a.txt", b"one\ntwo\r\nthree")]);
        let out = read(&dir, json!({"path": "a.txt"})).await.unwrap();
        assert!(!out.is_error);
        assert_eq!(out.content, "     1\tone\n     2\ttwo\n     3\tthree\n");
    }

    #[tokio::test]
    async fn reads_a_window_and_says_there_is_more() {
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let dir = tree(&[("a.txt", text.as_bytes())]);
        let out = read(&dir, json!({"path": "a.txt", "offset": 3, "limit": 2}))
            .await
            .unwrap();
        assert_eq!(
            out.content,
            "     3\tline 3\n     4\tline 4\n[showing lines 3-4 of 10; use offset to read more]\n"
        );
        let out = read(&dir, json!({"path": "a.txt", "limit": 4}))
            .await
            .unwrap();
        assert!(out.content.contains("[showing lines 1-4 of 10;"));
        let out = read(&dir, json!({"path": "a.txt", "offset": 9}))
            .await
            .unwrap();
        assert!(out.content.starts_with("     9\tline 9\n    10\tline 10\n"));
        let err = read(&dir, json!({"path": "a.txt", "offset": 11}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("past the end of a.txt"), "{err}");
    }

    #[tokio::test]
    async fn truncates_long_lines() {
        let long = "x".repeat(2500);
        let dir = tree(&[("a.txt", long.as_bytes())]);
        let out = read(&dir, json!({"path": "a.txt"})).await.unwrap();
        assert!(
            out.content.contains("[... 500 more characters]"),
            "{}",
            &out.content[..40]
        );
        assert!(out.content.len() < 2100);
    }

    #[tokio::test]
    async fn refuses_binary_files_directories_and_escapes() {
        let dir = tree(&[("bin.dat", b"ab\0cd"), ("sub/x", b"x")]);
        let err = read(&dir, json!({"path": "bin.dat"})).await.unwrap_err();
        assert!(
            err.to_string().contains("bin.dat looks like a binary file"),
            "{err}"
        );
        let err = read(&dir, json!({"path": "sub"})).await.unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let err = read(&dir, json!({"path": "../etc/passwd"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Path(_)), "{err}");
        let err = read(&dir, json!({"path": "missing.txt"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("cannot read missing.txt"), "{err}");
        let err = read(&dir, json!({"file": "x"})).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArgs(_)), "{err}");
    }
}
