//! Opening a path beneath a directory file descriptor so that what is opened is exactly the
//! symlink-free path that was checked, whatever happens to the tree meanwhile.
//!
//! Where the kernel has it (Linux 5.6+), one `openat2` call with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` does it: the kernel refuses to leave the
//! directory and to follow any symlink, so a directory swapped for a symlink between the check
//! and the open makes the open fail instead of leading elsewhere. Elsewhere (`ENOSYS`) the path
//! is walked one component at a time with `O_NOFOLLOW`, each step relative to the directory
//! opened by the previous one, and the opened file's real path (`/proc/self/fd`) is compared
//! with the expected one.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once `openat2` returned `ENOSYS`, so later opens go straight to the walk.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// How often `openat2` is retried when it reports a concurrent rename (`EAGAIN`).
const EAGAIN_RETRIES: usize = 4;

/// Open the directory `path` itself (not following a final symlink) as an `O_PATH` handle.
pub(crate) fn open_dir_path(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Open `rel` beneath `dir` (whose real path is `dir_path`) with `flags` (and `mode` for
/// `O_CREAT`). `rel` must be relative and made of plain names only; an empty `rel` reopens
/// `dir` itself. No symlink is followed on the way, the final component included (an `O_PATH`
/// open of a symlink fails too), and the result lies beneath `dir`; a symlink met on the way
/// gives `ELOOP`, an escape `EXDEV`.
pub(crate) fn open_beneath(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> std::io::Result<OwnedFd> {
    if !is_plain(rel) {
        return Err(Errno::INVAL.into());
    }
    let flags = with_defaults(flags);
    if rel.as_os_str().is_empty() {
        // `openat(dir, ".")` stays on `dir` whatever its name now leads to.
        return Ok(rustix::fs::openat(dir, ".", flags, mode)?);
    }
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(dir, rel, flags, mode, resolve) {
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                Err(Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
                other => return Ok(other?),
            }
        }
    }
    open_by_walk(dir, dir_path, rel, flags, mode)
}

/// The fallback of [`open_beneath`]: one `openat(O_NOFOLLOW)` per component, each relative to
/// the directory the previous one opened, then a check that the file really is at
/// `dir_path/rel`.
pub(crate) fn open_by_walk(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> std::io::Result<OwnedFd> {
    if !is_plain(rel) || rel.as_os_str().is_empty() {
        return Err(Errno::INVAL.into());
    }
    let names: Vec<_> = rel.components().map(Component::as_os_str).collect();
    let last = names.len() - 1;
    let mut held: Option<OwnedFd> = None;
    for (i, name) in names.iter().enumerate() {
        let at = held.as_ref().map_or(dir, |fd| fd.as_fd());
        let step = if i == last {
            with_defaults(flags) | OFlags::NOFOLLOW
        } else {
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
        };
        // `ENOTDIR` for an intermediate symlink means "not a directory we may enter".
        let fd = rustix::fs::openat(at, *name, step, mode).map_err(|e| match e {
            Errno::NOTDIR if i < last && is_symlink_at(at, name) => Errno::LOOP,
            e => e,
        })?;
        held = Some(fd);
    }
    let fd = held.ok_or(Errno::INVAL)?;
    // `O_PATH | O_NOFOLLOW` opens a final symlink as the link itself instead of failing.
    if flags.contains(OFlags::PATH)
        && rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode)
            == rustix::fs::FileType::Symlink
    {
        return Err(Errno::LOOP.into());
    }
    // A directory on the way may have been moved elsewhere while it was held.
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if real != dir_path.join(rel) {
        return Err(Errno::XDEV.into());
    }
    Ok(fd)
}

/// `O_CLOEXEC`, and `O_NOCTTY` where it is allowed (`openat2` refuses it with `O_PATH`).
fn with_defaults(flags: OFlags) -> OFlags {
    if flags.contains(OFlags::PATH) {
        flags | OFlags::CLOEXEC
    } else {
        flags | OFlags::CLOEXEC | OFlags::NOCTTY
    }
}

/// True when `rel` is relative and made of plain names (no `.`, `..` or root).
fn is_plain(rel: &Path) -> bool {
    rel.components().all(|c| matches!(c, Component::Normal(_)))
}

fn is_symlink_at(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Tree {
        _tmp: tempfile::TempDir,
        root: std::path::PathBuf,
        outside: std::path::PathBuf,
    }

    /// `root/d/f` (inside), `outside/f` (outside), `root/out -> outside`, `root/in -> d`.
    fn tree() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        fs::create_dir_all(root.join("d")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("d/f"), "inside").unwrap();
        fs::write(outside.join("f"), "outside").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink("d", root.join("in")).unwrap();
        std::os::unix::fs::symlink("d/f", root.join("flink")).unwrap();
        Tree {
            _tmp: tmp,
            root,
            outside,
        }
    }

    type Opener = fn(BorrowedFd<'_>, &Path, &Path, OFlags, Mode) -> std::io::Result<OwnedFd>;

    fn read(open: Opener, t: &Tree, rel: &str) -> std::io::Result<String> {
        let dir = open_dir_path(&t.root).unwrap();
        let fd = open(
            dir.as_fd(),
            &t.root,
            Path::new(rel),
            OFlags::RDONLY,
            Mode::empty(),
        )?;
        Ok(std::io::read_to_string(fs::File::from(fd)).unwrap())
    }

    #[test]
    fn both_strategies_open_plain_paths_and_refuse_symlinks_and_escapes() {
        for (what, open) in [
            ("openat2", open_beneath as Opener),
            ("walk", open_by_walk as Opener),
        ] {
            let t = tree();
            assert_eq!(read(open, &t, "d/f").unwrap(), "inside", "{what}");
            for rel in ["out/f", "in/f", "flink"] {
                let err = read(open, &t, rel).unwrap_err();
                assert_eq!(
                    err.raw_os_error(),
                    Some(libc_eloop()),
                    "{what} {rel}: {err}"
                );
            }
            for rel in ["../outside/f", "/etc/passwd", "./d/f"] {
                let err = read(open, &t, rel).unwrap_err();
                assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{what} {rel}");
            }
            let err = read(open, &t, "d/missing").unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{what}");
            let dir = open_dir_path(&t.root).unwrap();
            let err = open(
                dir.as_fd(),
                &t.root,
                Path::new("flink"),
                OFlags::PATH,
                Mode::empty(),
            )
            .unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc_eloop()), "{what} O_PATH link");
            assert!(t.outside.join("f").exists());
        }
    }

    #[test]
    fn the_walk_refuses_a_directory_that_is_not_where_it_should_be() {
        let t = tree();
        // Pretend the root lives elsewhere: the opened file's real path does not match.
        let dir = open_dir_path(&t.root).unwrap();
        let err = open_by_walk(
            dir.as_fd(),
            &t.outside,
            Path::new("d/f"),
            OFlags::RDONLY,
            Mode::empty(),
        )
        .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(Errno::XDEV.raw_os_error()));
    }

    #[test]
    fn the_walk_never_reads_outside_while_a_directory_and_a_symlink_swap() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64};
        let t = tree();
        fs::write(t.outside.join("f"), "outside").unwrap();
        let root = open_dir_path(&t.root).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let swapper = {
            let dir = open_dir_path(&t.root).unwrap();
            let (stop, swaps) = (stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let flags = rustix::fs::RenameFlags::EXCHANGE;
                    rustix::fs::renameat_with(&dir, "d", &dir, "out", flags).unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        while swaps.load(Ordering::Relaxed) == 0 {
            std::hint::spin_loop();
        }
        let (mut inside, mut refused) = (0, 0);
        // At least 2000 opens, and on until both states were met (bounded).
        for round in 0..1_000_000 {
            if round >= 2000 && inside > 0 && refused > 0 {
                break;
            }
            let rel = Path::new("d/f");
            match open_by_walk(root.as_fd(), &t.root, rel, OFlags::RDONLY, Mode::empty()) {
                Ok(fd) => {
                    let text = std::io::read_to_string(fs::File::from(fd)).unwrap();
                    assert_eq!(text, "inside");
                    inside += 1;
                }
                Err(_) => refused += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(
            inside > 0 && refused > 0,
            "{inside} inside, {refused} refused"
        );
    }

    fn libc_eloop() -> i32 {
        Errno::LOOP.raw_os_error()
    }
}
