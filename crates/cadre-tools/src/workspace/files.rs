//! The file operations of the file tools, each acting on what it checked: a path is resolved
//! (confinement, credentials), then opened beneath the root with [`open_beneath`], and every
//! further step works on the opened descriptors, never on the name again. Only regular files
//! and directories are acted on; FIFOs, sockets and devices are refused before anything could
//! block on them. Files are replaced through a temporary file in the same directory and a
//! rename, so a symlink planted as the final component is replaced, never written through.

use super::beneath::{open_beneath, open_dir_path};
use super::{PathError, Workspace};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What kind of file system object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block or character device.
    Device,
}

impl FileKind {
    /// The kind a `stat` result describes.
    pub(crate) fn of_stat(stat: &rustix::fs::Stat) -> Self {
        Self::of_mode(stat.st_mode)
    }

    fn of_mode(mode: u32) -> Self {
        match FileType::from_raw_mode(mode) {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Dir,
            FileType::Symlink => Self::Symlink,
            FileType::Fifo => Self::Fifo,
            FileType::Socket => Self::Socket,
            _ => Self::Device,
        }
    }

    /// A word for messages: `file`, `directory`, `symlink`, `FIFO`, `socket`, `device`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Dir => "directory",
            Self::Symlink => "symlink",
            Self::Fifo => "FIFO",
            Self::Socket => "socket",
            Self::Device => "device",
        }
    }
}

/// A regular file opened for reading beneath the root.
#[derive(Debug)]
pub struct OpenedFile {
    /// The open file (read-only, non-blocking).
    pub file: std::fs::File,
    /// Its canonical path.
    pub path: PathBuf,
    /// The path as shown to the model (relative to the root).
    pub shown: String,
    /// Its size when it was opened.
    pub len: u64,
}

/// A directory opened for listing beneath the root.
#[derive(Debug)]
pub struct OpenedDir {
    /// The open directory.
    pub fd: OwnedFd,
    /// Its canonical path.
    pub path: PathBuf,
    /// The path as shown to the model (relative to the root; `.` for the root).
    pub shown: String,
}

/// What [`Workspace::open`] found.
#[derive(Debug)]
pub enum Opened {
    /// A regular file.
    File(OpenedFile),
    /// A directory.
    Dir(OpenedDir),
}

/// The result of [`Workspace::write_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The path as shown to the model.
    pub shown: String,
    /// Whether a file was replaced (rather than created).
    pub existed: bool,
}

/// A file read for editing, written back with [`save`](Self::save).
#[derive(Debug)]
pub struct EditableFile {
    /// The file's content when it was read.
    pub content: Vec<u8>,
    /// The path as shown to the model.
    pub shown: String,
    slot: Slot,
}

impl EditableFile {
    /// Replace the file with `content` (atomically, keeping its permission bits).
    pub fn save(&self, content: &[u8]) -> Result<(), PathError> {
        self.slot.replace(content, true)
    }
}

/// Where a file is (or will be): its opened parent directory and its name there.
#[derive(Debug)]
struct Slot {
    parent: OwnedFd,
    name: OsString,
    shown: String,
    /// Permission bits of the file being replaced, if any.
    mode: Option<u32>,
}

/// Distinguishes the temporary files of concurrent writes in one process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

impl Workspace {
    /// Open what `path` (as the model gave it) names for reading by session `reader`: a
    /// regular file or a directory beneath the root. Everything [`resolve`](Self::resolve)
    /// refuses is refused, and so are FIFOs, sockets and devices (without opening them),
    /// what the [`AccessPolicy`](super::AccessPolicy) does not let `reader` read, and
    /// hard-linked files unless the policy allows them.
    pub fn open(&self, path: &str, reader: &str) -> Result<Opened, PathError> {
        let abs = self.resolve(path)?;
        self.open_resolved(&abs, reader)
    }

    /// [`open`](Self::open) for a canonical path inside the root that cadre found itself (a
    /// directory walk's entry). It must still be where it was: a symlink on the way now is
    /// refused.
    pub fn open_resolved(&self, abs: &Path, reader: &str) -> Result<Opened, PathError> {
        self.opener(&self.display(abs), reader)?.open(abs)
    }

    /// An [`Opener`] for many opens by session `reader` in one call (a directory walk's
    /// entries). `shown` names what the call is about, for the error when the root itself
    /// cannot be opened.
    pub fn opener<'a>(&'a self, shown: &str, reader: &'a str) -> Result<Opener<'a>, PathError> {
        Ok(Opener {
            ws: self,
            reader,
            root: self.open_root(shown, "read")?,
            last: None,
        })
    }

    /// Create or replace the file `path` names with `content`, creating missing parent
    /// directories. The file is written under a temporary name in its directory and renamed
    /// into place; an existing file keeps its permission bits.
    pub fn write_file(&self, path: &str, content: &[u8]) -> Result<Written, PathError> {
        let abs = self.resolve(path)?;
        let slot = self.slot(&abs, true)?;
        let existed = slot.mode.is_some();
        slot.replace(content, existed)?;
        Ok(Written {
            shown: slot.shown,
            existed,
        })
    }

    /// Read the regular file `path` names (at most `max_bytes`) so that it can be edited and
    /// saved back in place.
    pub fn open_for_edit(&self, path: &str, max_bytes: u64) -> Result<EditableFile, PathError> {
        let abs = self.resolve(path)?;
        let slot = self.slot(&abs, false)?;
        let shown = slot.shown.clone();
        let io = |e: std::io::Error| self.open_error(&shown, "read", e);
        if slot.mode.is_none() {
            return Err(io(Errno::NOENT.into()));
        }
        let fd = rustix::fs::openat(
            &slot.parent,
            &slot.name,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io(e.into()))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
        match FileKind::of_mode(stat.st_mode) {
            FileKind::File => {}
            kind => return Err(not_regular(&shown, kind)),
        }
        if stat.st_nlink > 1 {
            return Err(hardlinked(&shown, stat.st_nlink, NO_HARDLINK_WRITES));
        }
        if u64::try_from(stat.st_size).unwrap_or(0) > max_bytes {
            return Err(PathError::TooLarge {
                path: shown,
                max: max_bytes,
            });
        }
        let mut content = Vec::new();
        std::fs::File::from(fd)
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(io)?;
        if content.len() as u64 > max_bytes {
            return Err(PathError::TooLarge {
                path: shown,
                max: max_bytes,
            });
        }
        Ok(EditableFile {
            content,
            shown,
            slot,
        })
    }

    /// `abs` (canonical, from [`resolve`](Self::resolve) or a walk) relative to the root,
    /// refused when it is outside or names a credential.
    fn below_root<'a>(&self, abs: &'a Path) -> Result<&'a Path, PathError> {
        let rel = abs
            .strip_prefix(&self.root)
            .map_err(|_| self.escapes(&abs.display().to_string()))?;
        if self.is_credential(abs) {
            return Err(PathError::Credential(self.display(abs)));
        }
        Ok(rel)
    }

    fn open_root(&self, shown: &str, action: &'static str) -> Result<OwnedFd, PathError> {
        open_dir_path(&self.root).map_err(|source| PathError::Io {
            action,
            path: shown.to_string(),
            source,
        })
    }

    /// An open error as a refusal: a symlink or an escape met on the way means the tree
    /// changed since the path was resolved.
    fn open_error(&self, shown: &str, action: &'static str, e: std::io::Error) -> PathError {
        match e.raw_os_error() {
            Some(code)
                if code == Errno::LOOP.raw_os_error() || code == Errno::XDEV.raw_os_error() =>
            {
                PathError::Changed {
                    path: shown.to_string(),
                }
            }
            _ => PathError::Io {
                action,
                path: shown.to_string(),
                source: e,
            },
        }
    }

    /// The parent directory of `abs` opened beneath the root (created first when `create`),
    /// and what is at `abs` now.
    fn slot(&self, abs: &Path, create: bool) -> Result<Slot, PathError> {
        let rel = self.below_root(abs)?;
        let shown = self.display(abs);
        let (Some(parent_rel), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(PathError::IsDirectory { path: shown });
        };
        if self.policy.is_protected(abs, rel) {
            return Err(PathError::Protected { path: shown });
        }
        let action = if create { "write" } else { "read" };
        let root = self.open_root(&shown, action)?;
        let parent = if create {
            self.create_dirs(root.as_fd(), parent_rel)
        } else {
            open_beneath(
                root.as_fd(),
                &self.root,
                parent_rel,
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )
        }
        .map_err(|e| {
            let action = if create {
                "create directories for"
            } else {
                action
            };
            self.open_error(&shown, action, e)
        })?;
        let mode = match rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileKind::of_mode(st.st_mode) {
                FileKind::File if st.st_nlink > 1 => {
                    return Err(hardlinked(&shown, st.st_nlink, NO_HARDLINK_WRITES));
                }
                FileKind::File => Some(st.st_mode & 0o777),
                FileKind::Dir => return Err(PathError::IsDirectory { path: shown }),
                // `resolve` followed every symlink: one here now was planted since.
                FileKind::Symlink => return Err(PathError::Changed { path: shown }),
                kind => return Err(not_regular(&shown, kind)),
            },
            Err(Errno::NOENT) => None,
            Err(e) => return Err(self.open_error(&shown, action, e.into())),
        };
        Ok(Slot {
            parent,
            name: name.to_os_string(),
            shown,
            mode,
        })
    }

    /// Open the directory `rel` beneath the root, creating each missing component with
    /// `mkdirat` in the directory opened before it.
    fn create_dirs(&self, root: BorrowedFd<'_>, rel: &Path) -> std::io::Result<OwnedFd> {
        let dir_flags = OFlags::PATH | OFlags::DIRECTORY;
        let mut existing = rel;
        let mut missing: Vec<&OsStr> = Vec::new();
        let mut fd = loop {
            match open_beneath(root, &self.root, existing, dir_flags, Mode::empty()) {
                Ok(fd) => break fd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match (existing.parent(), existing.file_name()) {
                        (Some(up), Some(name)) => {
                            missing.push(name);
                            existing = up;
                        }
                        _ => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let mut fd_path = self.root.join(existing);
        for name in missing.into_iter().rev() {
            match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            let next = open_beneath(
                fd.as_fd(),
                &fd_path,
                Path::new(name),
                dir_flags,
                Mode::empty(),
            )?;
            fd = next;
            fd_path.push(name);
        }
        Ok(fd)
    }
}

/// The workspace root opened once, and the directory opened last, for the many opens of one
/// call: each path is opened beneath its parent directory, which was opened beneath the root.
#[derive(Debug)]
pub struct Opener<'a> {
    ws: &'a Workspace,
    reader: &'a str,
    root: OwnedFd,
    last: Option<(PathBuf, OwnedFd)>,
}

impl Opener<'_> {
    /// The parent directory `rel` (below the root), reusing the last one when it is the same.
    fn dir(&mut self, rel: &Path) -> std::io::Result<BorrowedFd<'_>> {
        if self.last.as_ref().is_none_or(|(p, _)| p != rel) {
            let fd = open_beneath(
                self.root.as_fd(),
                &self.ws.root,
                rel,
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )?;
            self.last = Some((rel.to_path_buf(), fd));
        }
        match &self.last {
            Some((_, fd)) => Ok(fd.as_fd()),
            None => Err(Errno::BADF.into()),
        }
    }

    /// What the canonical path `abs` inside the root is, looked at without following a final
    /// symlink and without leaving the root; `None` when it is not there (or not reachable
    /// without a symlink on the way). For listing names a directory walk found.
    pub fn kind_of(&mut self, abs: &Path) -> Option<FileKind> {
        let rel = self.ws.below_root(abs).ok()?;
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Some(FileKind::Dir); // the root itself
        };
        let dir = self.dir(parent).ok()?;
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Some(FileKind::of_mode(st.st_mode))
    }

    /// Open the canonical path `abs` inside the root for reading, like
    /// [`Workspace::open_resolved`].
    pub fn open(&mut self, abs: &Path) -> Result<Opened, PathError> {
        let ws = self.ws;
        let rel = ws.below_root(abs)?;
        let shown = ws.display(abs);
        if let Some(refusal) = ws.policy.refuse_read(rel, self.reader) {
            return Err(PathError::ReadRefused {
                path: shown,
                what: refusal.what(),
            });
        }
        let io = |e: std::io::Error| ws.open_error(&shown, "read", e);
        let (dir_path, name) = match (rel.parent(), rel.file_name()) {
            (Some(parent), Some(name)) => (parent, Path::new(name)),
            _ => (Path::new(""), Path::new("")),
        };
        let real_dir = ws.root.join(dir_path);
        let dir = if name.as_os_str().is_empty() {
            self.root.as_fd()
        } else {
            self.dir(dir_path).map_err(io)?
        };
        let probe = open_beneath(dir, &real_dir, name, OFlags::PATH, Mode::empty()).map_err(io)?;
        let stat = rustix::fs::fstat(&probe).map_err(|e| io(e.into()))?;
        let flags = match FileKind::of_mode(stat.st_mode) {
            FileKind::File if stat.st_nlink > 1 && !ws.policy.hardlink_reads_allowed() => {
                return Err(hardlinked(&shown, stat.st_nlink, NO_HARDLINK_READS));
            }
            FileKind::File => OFlags::RDONLY | OFlags::NONBLOCK,
            FileKind::Dir => OFlags::RDONLY | OFlags::DIRECTORY,
            kind => return Err(not_regular(&shown, kind)),
        };
        let fd = open_beneath(dir, &real_dir, name, flags, Mode::empty()).map_err(io)?;
        let again = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
        if (again.st_dev, again.st_ino) != (stat.st_dev, stat.st_ino) {
            return Err(PathError::Changed { path: shown });
        }
        let path = abs.to_path_buf();
        Ok(match FileKind::of_mode(again.st_mode) {
            FileKind::Dir => Opened::Dir(OpenedDir { fd, path, shown }),
            _ => Opened::File(OpenedFile {
                file: std::fs::File::from(fd),
                path,
                shown,
                len: u64::try_from(again.st_size).unwrap_or(0),
            }),
        })
    }
}

impl Slot {
    /// Write `content` under a temporary name next to the file and rename it into place.
    /// `replace` says a file is expected there; otherwise a file that appeared meanwhile is
    /// not overwritten.
    fn replace(&self, content: &[u8], replace: bool) -> Result<(), PathError> {
        let io = |e: std::io::Error| PathError::Io {
            action: "write",
            path: self.shown.clone(),
            source: e,
        };
        let (tmp, file) = self.create_temp().map_err(io)?;
        let written = self.fill_and_rename(file, &tmp, content, replace);
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.parent, &tmp, AtFlags::empty());
        }
        written.map_err(|e| match e.raw_os_error() {
            Some(code) if code == Errno::EXIST.raw_os_error() => PathError::Changed {
                path: self.shown.clone(),
            },
            _ => io(e),
        })
    }

    fn create_temp(&self) -> std::io::Result<(OsString, std::fs::File)> {
        let mode = Mode::from_raw_mode(self.mode.unwrap_or(0o666));
        loop {
            let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
            let tmp = OsString::from(format!(".cadre-write-{}-{seq}.tmp", std::process::id()));
            let flags = OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NOCTTY;
            match rustix::fs::openat(&self.parent, &tmp, flags, mode) {
                Ok(fd) => return Ok((tmp, std::fs::File::from(fd))),
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn fill_and_rename(
        &self,
        mut file: std::fs::File,
        tmp: &OsStr,
        content: &[u8],
        replace: bool,
    ) -> std::io::Result<()> {
        file.write_all(content)?;
        if let Some(mode) = self.mode {
            // Creation applied the umask; the replaced file's bits are what the user chose.
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        }
        drop(file);
        if replace {
            return Ok(rustix::fs::renameat(
                &self.parent,
                tmp,
                &self.parent,
                &self.name,
            )?);
        }
        let flags = RenameFlags::NOREPLACE;
        match rustix::fs::renameat_with(&self.parent, tmp, &self.parent, &self.name, flags) {
            // Some file systems lack RENAME_NOREPLACE: check, then rename.
            Err(Errno::INVAL) => {
                match rustix::fs::statat(&self.parent, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
                    Err(Errno::NOENT) => Ok(rustix::fs::renameat(
                        &self.parent,
                        tmp,
                        &self.parent,
                        &self.name,
                    )?),
                    _ => Err(Errno::EXIST.into()),
                }
            }
            other => Ok(other?),
        }
    }
}

/// What a refused hard-linked read can do about it.
const NO_HARDLINK_READS: &str = "set `[tools] allow_hardlink_reads = true` to read such files";
/// Why a hard-linked file is not written.
const NO_HARDLINK_WRITES: &str = "file tools do not write or edit such files";

fn hardlinked(shown: &str, links: impl Into<u64>, hint: &'static str) -> PathError {
    PathError::Hardlinked {
        path: shown.to_string(),
        links: links.into(),
        hint,
    }
}

fn not_regular(shown: &str, kind: FileKind) -> PathError {
    PathError::NotRegular {
        path: shown.to_string(),
        kind: kind.describe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    #[test]
    fn replacing_a_file_keeps_its_permissions_and_leaves_no_temporary_file() {
        let (dir, ws) = workspace();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        let written = ws.write_file("run.sh", b"new").unwrap();
        assert_eq!(
            written,
            Written {
                shown: "run.sh".into(),
                existed: true
            }
        );
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "new");
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o750);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["run.sh"]);
    }

    #[test]
    fn a_symlink_planted_after_resolution_is_neither_written_through_nor_replaced() {
        let (dir, ws) = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("target"), "outside").unwrap();
        let abs = ws.resolve("new.txt").unwrap();
        // Between the check and the write, the final component becomes a symlink.
        std::os::unix::fs::symlink(outside.path().join("target"), dir.path().join("new.txt"))
            .unwrap();
        let err = ws.slot(&abs, true).unwrap_err();
        assert!(matches!(err, PathError::Changed { .. }), "{err}");
        // A directory on the way swapped for a symlink: the parent cannot be opened.
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let abs = ws.resolve("sub/file.txt").unwrap();
        std::fs::remove_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).unwrap();
        let err = ws.slot(&abs, true).unwrap_err();
        assert!(matches!(err, PathError::Changed { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(outside.path().join("target")).unwrap(),
            "outside"
        );
        assert!(!outside.path().join("file.txt").exists());
    }

    #[test]
    fn an_edited_file_is_read_with_a_cap() {
        let (dir, ws) = workspace();
        std::fs::write(dir.path().join("f.txt"), "0123456789").unwrap();
        let err = ws.open_for_edit("f.txt", 5).unwrap_err();
        assert!(matches!(err, PathError::TooLarge { max: 5, .. }), "{err}");
        let file = ws.open_for_edit("f.txt", 10).unwrap();
        assert_eq!(file.content, b"0123456789");
        file.save(b"x").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
            "x"
        );
        let err = ws.open_for_edit("missing.txt", 10).unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read missing.txt: "),
            "{err}"
        );
    }
}
