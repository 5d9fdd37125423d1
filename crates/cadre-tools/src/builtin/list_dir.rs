//! `list_dir`: list one directory's entries with kinds and sizes.

use super::common::{link_to_hidden, refuse_hidden};
use crate::{
    FileKind, HiddenPaths, Opened, OpenedDir, Opener, PermissionSubject, ToolContext, ToolError,
    ToolInfo, ToolOutput, TypedTool, Workspace,
};
use rustix::fs::AtFlags;
use schemars::JsonSchema;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BinaryHeap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use tokio_util::sync::CancellationToken;

/// Entries listed at most.
const MAX_ENTRIES: usize = 1000;

const DESCRIPTION: &str = "List the entries of one directory (not recursive), sorted by name. \
Directories end with `/`, files show their size, symlinks show `-> target`. Hidden and \
ignored entries are listed too. Use glob to find files recursively by name.";

/// Lists a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDirTool;

/// The arguments of `list_dir`.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct Args {
    /// Directory to list, relative to the workspace root. Defaults to the root (`.`).
    #[serde(default)]
    path: Option<String>,
}

impl TypedTool for ListDirTool {
    const INFO: ToolInfo = ToolInfo::builtin("list_dir")
        .read_only()
        .titled(&["path"])
        .reads_paths(&["path"])
        .foreign_names(&["LS", "list", "list_directory"]);
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
        let path = args.path.unwrap_or_else(|| ".".to_string());
        let workspace = ctx.workspace.clone();
        let session = ctx.run.session_id.clone();
        let cancel = ctx.cancel.clone();
        let hidden = ctx.hidden.clone();
        let listing =
            tokio::task::spawn_blocking(move || match workspace.open(&path, &session)? {
                Opened::Dir(dir) => {
                    refuse_hidden(&workspace, &hidden, &dir.path, true)?;
                    list(&workspace, &session, &hidden, &dir, &cancel)
                }
                Opened::File(file) => Err(ToolError::Failed(format!(
                    "{} is a file, not a directory; use read_file",
                    file.shown
                ))),
            })
            .await
            .map_err(|e| ToolError::Failed(format!("listing failed: {e}")))??;
        Ok(ToolOutput::ok(listing))
    }
}

/// Render the listing of the opened directory `dir`: the first [`MAX_ENTRIES`] names in
/// order (kept in a bounded heap however large the directory is), each described by looking
/// at it through the directory's descriptor. Entries `hidden` hides, and symlinks to them,
/// are left out.
fn list(
    workspace: &Workspace,
    session: &str,
    hidden: &HiddenPaths,
    dir: &OpenedDir,
    cancel: &CancellationToken,
) -> Result<String, ToolError> {
    let shown = &dir.shown;
    let io = |e: std::io::Error| ToolError::io(format!("cannot list {shown}"), e);
    let entries = rustix::fs::Dir::read_from(&dir.fd).map_err(|e| io(e.into()))?;
    let mut first: BinaryHeap<Vec<u8>> = BinaryHeap::new();
    let mut total = 0usize;
    for entry in entries {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let entry = entry.map_err(|e| io(e.into()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if is_hidden(workspace, hidden, dir, OsStr::from_bytes(name)) {
            continue;
        }
        total += 1;
        if first.len() < MAX_ENTRIES {
            first.push(name.to_vec());
        } else if first.peek().is_some_and(|max| name < max.as_slice()) {
            first.pop();
            first.push(name.to_vec());
        }
    }
    if total == 0 {
        return Ok(format!("{shown}/ is empty"));
    }
    let noun = if total == 1 { "entry" } else { "entries" };
    let mut out = format!("{shown}/ ({total} {noun})\n");
    let mut opener = workspace.opener(shown, session)?;
    for name in first.into_sorted_vec() {
        out.push_str(&describe(
            workspace,
            &mut opener,
            dir,
            OsStr::from_bytes(&name),
        ));
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

/// One entry's line: `name/` for a directory, `name  (size)` for a file, `name -> target
/// (symlink)` (with `/` when the target is a directory inside the workspace), or the kind of a
/// special file.
fn describe(
    workspace: &Workspace,
    opener: &mut Opener<'_>,
    dir: &OpenedDir,
    name: &OsStr,
) -> String {
    let shown = name.to_string_lossy();
    let Ok(stat) = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return format!("{shown}  (unreadable)");
    };
    match FileKind::of_stat(&stat) {
        FileKind::Dir => format!("{shown}/"),
        FileKind::File => format!(
            "{shown}  ({})",
            human_size(u64::try_from(stat.st_size).unwrap_or(0))
        ),
        FileKind::Symlink => {
            let target = rustix::fs::readlinkat(&dir.fd, name, Vec::new())
                .map(|t| String::from_utf8_lossy(t.to_bytes()).into_owned())
                .unwrap_or_else(|_| "?".into());
            // Where it leads, as resolution inside the workspace sees it; outside: no kind.
            let into_dir = dir
                .path
                .join(name)
                .to_str()
                .and_then(|p| workspace.resolve(p).ok())
                .is_some_and(|real| opener.kind_of(&real) == Some(FileKind::Dir));
            let kind = if into_dir { "/" } else { "" };
            format!("{shown}{kind} -> {target} (symlink)")
        }
        special => format!("{shown}  ({})", special.describe()),
    }
}

/// True when the entry `name` of `dir` is hidden by deny rules, or is a symlink to a hidden
/// path.
fn is_hidden(workspace: &Workspace, hidden: &HiddenPaths, dir: &OpenedDir, name: &OsStr) -> bool {
    if hidden.is_empty() {
        return false;
    }
    let path = dir.path.join(name);
    let is_dir = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileKind::of_stat(&st) == FileKind::Dir);
    hidden.hides_entry(&workspace.relative(&path), is_dir)
        || link_to_hidden(workspace, hidden, &path)
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
    use crate::Tool;
    use crate::testutil::{ctx, tree};
    use serde_json::json;

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
