//! `read_file`: read a text file with line numbers, a window at a time.

use super::common::refuse_hidden;
use super::line_window::{Total, Window, WindowSpec, read_window};
use crate::{
    Opened, OpenedFile, PermissionSubject, ToolContext, ToolError, ToolInfo, ToolOutput, TypedTool,
    Workspace,
};
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::io::{BufReader, Read};
use tokio_util::sync::CancellationToken;

/// Lines shown when the call gives no `limit`.
const DEFAULT_LIMIT: usize = 2000;
/// Longer lines are cut.
const MAX_LINE_CHARS: usize = 2000;
/// How much of the file is checked for NUL bytes to decide it is binary.
const BINARY_PROBE: usize = 8192;
/// Shown text per call at most (the window ends early past it).
const MAX_OUTPUT_BYTES: usize = 4 << 20;
/// Read after the window at most, only to count the lines that follow.
const LOOKAHEAD_BYTES: u64 = 256 << 10;
/// The read buffer.
const READ_BUFFER: usize = 64 << 10;

const DESCRIPTION: &str = "Read a text file from the workspace. Lines come back numbered like \
`cat -n` (number, tab, text); use those numbers to refer to lines, but never copy the number \
prefix into edits. At most 2000 lines are returned per call (lines over 2000 characters are \
cut); for longer files a footer says which lines were shown, and `offset`/`limit` read the \
rest. Binary files are refused. Prefer this over `cat` in bash.";

/// Reads a text file with line numbers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFileTool;

/// The arguments of `read_file`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Args {
    /// File to read, relative to the workspace root (or absolute inside it).
    path: String,
    /// 1-based line number to start at. Omit to start at the first line.
    #[serde(default)]
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// Maximum number of lines to return.
    #[serde(default)]
    #[schemars(range(min = 1), extend("default" = DEFAULT_LIMIT))]
    limit: Option<usize>,
}

impl TypedTool for ReadFileTool {
    const INFO: ToolInfo = ToolInfo::builtin("read_file")
        .read_only()
        .titled(&["path"])
        .reads_paths(&["path"])
        .foreign_names(&["Read", "read", "read_many_files"]);
    type Args = Args;

    fn description(&self) -> Cow<'_, str> {
        DESCRIPTION.into()
    }

    fn permission_subject(
        &self,
        args: &Args,
        workspace: &Workspace,
    ) -> Result<PermissionSubject, ToolError> {
        Ok(PermissionSubject::path(workspace, &args.path)?)
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 {
            return Err(ToolError::InvalidArgs("limit must be at least 1".into()));
        }
        let offset = args.offset.unwrap_or(1).max(1);
        let workspace = ctx.workspace.clone();
        let session = ctx.run.session_id.clone();
        let hidden = ctx.hidden.clone();
        let cancel = ctx.cancel.clone();
        // Opening is non-blocking and only regular files are read, so this thread ends with
        // the file or with the call's cancellation, never later.
        tokio::task::spawn_blocking(move || {
            let file = match workspace.open(&args.path, &session)? {
                Opened::File(file) => file,
                Opened::Dir(dir) => {
                    return Err(ToolError::Failed(format!(
                        "{} is a directory; use list_dir to see its entries",
                        dir.shown
                    )));
                }
            };
            refuse_hidden(&workspace, &hidden, &file.path, false)?;
            read(file, offset, limit, &cancel)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("read_file failed: {e}")))?
    }
}

/// Read lines `offset..offset+limit` of `file` and number them, with a footer when lines are
/// hidden.
fn read(
    file: OpenedFile,
    offset: usize,
    limit: usize,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let shown = file.shown;
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::Interrupted if cancel.is_cancelled() => ToolError::Cancelled,
        _ => ToolError::io(format!("cannot read {shown}"), e),
    };
    let mut probe = Vec::with_capacity(BINARY_PROBE);
    (&file.file)
        .take(BINARY_PROBE as u64)
        .read_to_end(&mut probe)
        .map_err(io)?;
    if probe.contains(&0) {
        return Err(ToolError::Failed(format!(
            "{shown} looks like a binary file ({} bytes); read_file only shows text",
            file.len
        )));
    }
    let reader =
        BufReader::with_capacity(READ_BUFFER, std::io::Cursor::new(probe).chain(file.file));
    let spec = WindowSpec {
        offset,
        limit,
        max_line_chars: MAX_LINE_CHARS,
        max_bytes: MAX_OUTPUT_BYTES,
        lookahead: LOOKAHEAD_BYTES,
    };
    let window = read_window(reader, spec, cancel).map_err(io)?;
    render(&window, &shown, offset, file.len)
}

/// Number the window's lines and add a footer when lines are hidden.
fn render(window: &Window, shown: &str, offset: usize, len: u64) -> Result<ToolOutput, ToolError> {
    if window.lines.is_empty() {
        return match window.total {
            Total::Exact(0) => Ok(ToolOutput::ok(format!("({shown} is empty)"))),
            Total::Exact(total) | Total::AtLeast(total) => Err(ToolError::Failed(format!(
                "offset {offset} is past the end of {shown}, which has {total} lines"
            ))),
        };
    }
    let mut out = String::new();
    for (i, line) in window.lines.iter().enumerate() {
        out.push_str(&format!("{:>6}\t{line}\n", offset + i));
    }
    let last = offset + window.lines.len() - 1;
    match window.total {
        Total::Exact(total) if offset > 1 || last < total => out.push_str(&format!(
            "[showing lines {offset}-{last} of {total}; use offset to read more]\n"
        )),
        Total::Exact(_) => {}
        Total::AtLeast(total) => out.push_str(&format!(
            "[showing lines {offset}-{last} of at least {total} ({len} bytes); use offset to read more]\n"
        )),
    }
    Ok(ToolOutput::ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::testutil::{ctx, tree};
    use serde_json::json;

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
