//! Reading the files cadre itself loads (configuration, agent definitions, skills, project
//! memory): only regular files, opened without blocking and read up to a cap, so a FIFO, a
//! device or a huge (sparse) file planted in a cloned repository can neither hang cadre nor
//! exhaust its memory.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a capped read failed.
#[derive(Debug, thiserror::Error)]
pub enum CappedReadError {
    /// Nothing exists at the path.
    #[error("{} does not exist", .path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// The path is a directory, FIFO, socket or device.
    #[error("{} is not a regular file (it is a {kind})", .path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The file is larger than the cap.
    #[error("{} is larger than the limit of {max} bytes", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        max: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{} is not UTF-8 text", .path.display())]
    NotText {
        /// The file.
        path: PathBuf,
    },
    /// Another I/O error.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl CappedReadError {
    /// True when the file simply does not exist (callers often treat that as "no file").
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// Read at most `max_bytes` of the regular file at `path` (symlinks followed) as bytes.
pub fn read_capped(path: &Path, max_bytes: u64) -> Result<Vec<u8>, CappedReadError> {
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::NotFound => CappedReadError::NotFound {
            path: path.to_path_buf(),
        },
        _ => CappedReadError::Io {
            path: path.to_path_buf(),
            source,
        },
    };
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. It
    // changes nothing for regular files.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(CappedReadError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    let too_large = || CappedReadError::TooLarge {
        path: path.to_path_buf(),
        max: max_bytes,
    };
    if meta.len() > max_bytes {
        return Err(too_large());
    }
    // The size can change between the check and the read: never read more than the cap + 1.
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(io)?;
    if buf.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(buf)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_to_string_capped(path: &Path, max_bytes: u64) -> Result<String, CappedReadError> {
    String::from_utf8(read_capped(path, max_bytes)?).map_err(|_| CappedReadError::NotText {
        path: path.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_small_regular_files_and_refuses_what_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.toml");
        std::fs::write(&f, "x = 1\n").unwrap();
        assert_eq!(read_to_string_capped(&f, 100).unwrap(), "x = 1\n");
        assert!(matches!(
            read_to_string_capped(&f, 3),
            Err(CappedReadError::TooLarge { max: 3, .. })
        ));
        assert!(
            read_to_string_capped(&dir.path().join("none"), 10)
                .unwrap_err()
                .is_not_found()
        );
        assert!(matches!(
            read_to_string_capped(dir.path(), 10),
            Err(CappedReadError::NotRegular {
                kind: "directory",
                ..
            })
        ));
        std::fs::write(dir.path().join("bin"), [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_to_string_capped(&dir.path().join("bin"), 10),
            Err(CappedReadError::NotText { .. })
        ));
    }

    #[test]
    fn a_fifo_is_refused_at_once_and_a_device_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Without O_NONBLOCK this open would block forever (no writer).
        assert!(matches!(
            read_to_string_capped(&fifo, 1 << 20),
            Err(CappedReadError::NotRegular { kind: "FIFO", .. })
        ));
        let link = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read_to_string_capped(&link, 1 << 20),
            Err(CappedReadError::NotRegular { kind: "device", .. })
        ));
    }

    #[test]
    fn a_huge_sparse_file_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big.md");
        let file = std::fs::File::create(&f).unwrap();
        file.set_len(1 << 34).unwrap(); // 16 GiB, sparse
        assert!(matches!(
            read_capped(&f, 1 << 20),
            Err(CappedReadError::TooLarge { .. })
        ));
    }
}
