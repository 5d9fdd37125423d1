//! `grep`: search file contents with a regular expression, ripgrep style.

use super::common::{PathGlob, refuse_hidden, truncate_line, walker};
use crate::{
    HiddenPaths, Opened, PermissionSubject, ToolContext, ToolError, ToolInfo, ToolOutput,
    TypedTool, Workspace,
};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Output lines shown at most.
const MAX_LINES: usize = 500;
/// Matched lines longer than this are cut.
const MAX_LINE_CHARS: usize = 1000;
/// Context lines allowed at most on each side.
const MAX_CONTEXT: usize = 20;
/// The searcher's buffer at most (it holds the longest line); files with longer lines are
/// skipped.
const MAX_LINE_BUFFER: usize = 8 << 20;

const DESCRIPTION: &str = "Search file contents with a regular expression (Rust regex syntax, \
like ripgrep: `fn\\s+main`, `TODO|FIXME`, `\\bfoo\\b`; escape literal braces and dots). Matches \
are per line. Files ignored by .gitignore/.ignore, hidden files and binary files are skipped. \
output_mode `content` (default) prints `path:line:text` (context lines as `path-line-text`), \
`files_with_matches` lists matching files, `count` prints `path:count`. Narrow with `path` \
(a directory or file) and `glob` (e.g. `*.rs`). At most 500 lines are returned. Prefer this \
over grep/rg in bash.";

/// Searches file contents with a regex.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

/// What `grep` prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Matching lines.
    #[default]
    Content,
    /// File paths only.
    FilesWithMatches,
    /// Matches per file.
    Count,
}

/// The arguments of `grep`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Args {
    /// Regular expression to search for.
    pattern: String,
    /// File or directory to search, relative to the workspace root. Defaults to the root.
    #[serde(default)]
    path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` or `src/**/*.ts`.
    #[serde(default)]
    glob: Option<String>,
    /// Ignore case.
    #[serde(default)]
    case_insensitive: bool,
    /// `content`: matching lines; `files_with_matches`: file paths only; `count`: matches per
    /// file.
    #[serde(default)]
    output_mode: Mode,
    /// Lines of context before and after each match (content mode only).
    #[serde(default)]
    #[schemars(range(max = MAX_CONTEXT))]
    context: Option<usize>,
}

impl TypedTool for GrepTool {
    const INFO: ToolInfo = ToolInfo::builtin("grep")
        .read_only()
        .titled(&["pattern", "path"])
        .reads_paths(&["path"])
        .foreign_names(&["Grep", "grep_search", "search_file_content", "grep_files"]);
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
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(args.case_insensitive)
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|e| ToolError::InvalidArgs(format!("invalid regex: {e}")))?;
        let filter = args.glob.as_deref().map(PathGlob::new).transpose()?;
        let path = args.path.unwrap_or_else(|| ".".to_string());
        let search = Search {
            pattern: args.pattern,
            matcher,
            filter,
            mode: args.output_mode,
            context: args.context.unwrap_or(0).min(MAX_CONTEXT),
            workspace: ctx.workspace.clone(),
            session: ctx.run.session_id.clone(),
            hidden: ctx.hidden.clone(),
            cancel: ctx.cancel.clone(),
        };
        let out = tokio::task::spawn_blocking(move || {
            let (root, is_dir) = match search.workspace.open(&path, &search.session)? {
                Opened::Dir(dir) => (dir.path, true),
                Opened::File(file) => (file.path, false),
            };
            refuse_hidden(&search.workspace, &search.hidden, &root, is_dir)?;
            search.run(&root)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("grep search failed: {e}")))??;
        Ok(ToolOutput::ok(out))
    }
}

/// One search, run on a blocking thread.
struct Search {
    pattern: String,
    matcher: RegexMatcher,
    filter: Option<PathGlob>,
    mode: Mode,
    context: usize,
    workspace: Arc<Workspace>,
    /// The session searching (for what it may read).
    session: String,
    hidden: Arc<HiddenPaths>,
    cancel: CancellationToken,
}

impl Search {
    fn run(&self, root: &Path) -> Result<String, ToolError> {
        let context = if self.mode == Mode::Content {
            self.context
        } else {
            0
        };
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .heap_limit(Some(MAX_LINE_BUFFER))
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .build();
        let mut lines: Vec<String> = Vec::new();
        let mut truncated = false;
        let mut opener = self
            .workspace
            .opener(&self.workspace.display(root), &self.session)?;
        for entry in walker(root, &self.workspace, &self.hidden)
            .build()
            .flatten()
        {
            if self.cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            // A file given directly as `path` has an empty relative path: match its name.
            let rel = if rel.as_os_str().is_empty() {
                entry.path()
            } else {
                rel
            };
            if self.filter.as_ref().is_some_and(|f| !f.is_match(rel)) {
                continue;
            }
            // The walk goes by name: read only what is still beneath the root, without a
            // symlink on the way, and is still a regular file.
            let Ok(Opened::File(file)) = opener.open(entry.path()) else {
                continue;
            };
            // What was opened, not only what the walk saw, must not be hidden.
            if self.hidden.hides(&self.workspace.relative(&file.path)) {
                continue;
            }
            let shown = file.shown.clone();
            let mut sink = FileSink::new(&shown, self.mode);
            let reader = Cancellable {
                inner: file.file,
                cancel: &self.cancel,
            };
            if searcher
                .search_reader(&self.matcher, reader, &mut sink)
                .is_err()
                || sink.binary
                || sink.matches == 0
            {
                if self.cancel.is_cancelled() {
                    return Err(ToolError::Cancelled);
                }
                continue;
            }
            match self.mode {
                Mode::Content => {
                    if context > 0 && !lines.is_empty() {
                        lines.push("--".to_string());
                    }
                    lines.append(&mut sink.lines);
                }
                Mode::FilesWithMatches => lines.push(shown),
                Mode::Count => lines.push(format!("{shown}:{}", sink.matches)),
            }
            if lines.len() > MAX_LINES {
                truncated = true;
                lines.truncate(MAX_LINES);
                break;
            }
        }
        if lines.is_empty() {
            return Ok(format!(
                "no matches for {} in {}",
                self.pattern,
                self.workspace.display(root)
            ));
        }
        let mut out = lines.join("\n");
        out.push('\n');
        if truncated {
            out.push_str(&format!(
                "[output capped at {MAX_LINES} lines; narrow the pattern, path or glob]\n"
            ));
        }
        Ok(out)
    }
}

/// A file read that fails once the call is cancelled, so a search of a large file stops.
struct Cancellable<'a> {
    inner: std::fs::File,
    cancel: &'a CancellationToken,
}

impl std::io::Read for Cancellable<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancel.is_cancelled() {
            // Not `Interrupted`: readers retry that.
            return Err(std::io::Error::other("cancelled"));
        }
        self.inner.read(buf)
    }
}

/// Collects one file's results.
struct FileSink<'a> {
    shown: &'a str,
    mode: Mode,
    lines: Vec<String>,
    matches: u64,
    binary: bool,
}

impl<'a> FileSink<'a> {
    fn new(shown: &'a str, mode: Mode) -> Self {
        Self {
            shown,
            mode,
            lines: Vec::new(),
            matches: 0,
            binary: false,
        }
    }

    fn push(&mut self, sep: char, line_number: Option<u64>, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let n = line_number.unwrap_or(0);
        self.lines.push(format!(
            "{}{sep}{n}{sep}{}",
            self.shown,
            truncate_line(text, MAX_LINE_CHARS)
        ));
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches += 1;
        match self.mode {
            Mode::Content => self.push(':', mat.line_number(), mat.bytes()),
            Mode::FilesWithMatches => return Ok(false),
            Mode::Count => {}
        }
        // One file cannot fill more than the whole output.
        Ok(self.lines.len() <= MAX_LINES)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.mode == Mode::Content {
            self.push('-', ctx.line_number(), ctx.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.mode == Mode::Content {
            self.lines.push("--".to_string());
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::testutil::{ctx, tree};
    use serde_json::json;

    fn fixture() -> tempfile::TempDir {
        tree(&[
            (".gitignore", b"ignored.txt\n"),
            ("a.rs", b"fn main() {\n    let needle = 1;\n}\n"),
            (
                "b.txt",
                b"one\ntwo\nNeedle three\nfour\nfive\nsix\nneedle seven\n",
            ),
            ("ignored.txt", b"needle hidden by gitignore\n"),
            ("bin.dat", b"needle\0binary\n"),
            ("sub/c.rs", b"// needle\n// needle again\n"),
        ])
    }

    async fn grep(
        dir: &tempfile::TempDir,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        GrepTool.call(args, &ctx(dir.path())).await
    }

    #[tokio::test]
    async fn content_mode_prints_path_line_text_skipping_binary_and_ignored() {
        let dir = fixture();
        let out = grep(&dir, json!({"pattern": "needle"})).await.unwrap();
        assert_eq!(
            out.content,
            "a.rs:2:    let needle = 1;\nb.txt:7:needle seven\n\
             sub/c.rs:1:// needle\nsub/c.rs:2:// needle again\n"
        );
    }

    #[tokio::test]
    async fn files_and_count_modes_with_case_and_glob() {
        let dir = fixture();
        let args = json!({"pattern": "needle", "output_mode": "files_with_matches", "case_insensitive": true});
        let out = grep(&dir, args).await.unwrap();
        assert_eq!(out.content, "a.rs\nb.txt\nsub/c.rs\n");
        let args = json!({"pattern": "NEEDLE", "output_mode": "count", "case_insensitive": true});
        let out = grep(&dir, args).await.unwrap();
        assert_eq!(out.content, "a.rs:1\nb.txt:2\nsub/c.rs:2\n");
        let args =
            json!({"pattern": "needle", "output_mode": "count", "glob": "*.rs", "path": "sub"});
        let out = grep(&dir, args).await.unwrap();
        assert_eq!(out.content, "sub/c.rs:2\n");
        let args = json!({"pattern": "needle", "path": "b.txt"});
        let out = grep(&dir, args).await.unwrap();
        assert_eq!(out.content, "b.txt:7:needle seven\n");
    }

    #[tokio::test]
    async fn context_lines_and_breaks() {
        let dir = fixture();
        let args = json!({"pattern": "(?i)needle", "path": "b.txt", "context": 1});
        let out = grep(&dir, args).await.unwrap();
        assert_eq!(
            out.content,
            "b.txt-2-two\nb.txt:3:Needle three\nb.txt-4-four\n--\nb.txt-6-six\nb.txt:7:needle seven\n"
        );
    }

    #[tokio::test]
    async fn no_matches_invalid_regex_and_bad_mode() {
        let dir = fixture();
        let out = grep(&dir, json!({"pattern": "zzz"})).await.unwrap();
        assert_eq!(out.content, "no matches for zzz in .");
        let err = grep(&dir, json!({"pattern": "a("})).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArgs(_)), "{err}");
        let err = grep(&dir, json!({"pattern": "a", "output_mode": "lines"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::InvalidArgs(_)), "{err}");
        let err = grep(&dir, json!({"pattern": "a", "path": "/etc"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Path(_)), "{err}");
    }

    #[tokio::test]
    async fn caps_output_lines() {
        let text = "hit\n".repeat(600);
        let dir = tree(&[("many.txt", text.as_bytes())]);
        let out = grep(&dir, json!({"pattern": "hit"})).await.unwrap();
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines.len(), MAX_LINES + 1);
        assert_eq!(lines[499], "many.txt:500:hit");
        assert!(lines[500].starts_with("[output capped at 500 lines"));
    }
}
