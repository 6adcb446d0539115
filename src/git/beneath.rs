//! Reading the work tree for a commit without following a link
//! (docs/git.md "What a commit reads"): every file a commit, a salvage
//! ref, the saved work and a pause state take is opened once, beneath the
//! work tree's root through a directory handle, never through a symbolic
//! link. The parent directories are opened with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)` (one `O_NOFOLLOW` `openat` per component where
//! the kernel has no `openat2`); the last component is looked at with
//! `fstatat(AT_SYMLINK_NOFOLLOW)`: a symlink is read as a symlink (its
//! target text), a regular file is opened `O_NOFOLLOW | O_NONBLOCK`,
//! checked again with `fstat` (still a regular file, size) and read whole
//! into memory; a FIFO, socket or device is never opened. The caller
//! scans and hashes those same bytes, so what the secret scan saw is
//! exactly what goes into the blob.
//!
//! A path below a component that is a symlink (a directory swapped for a
//! link to `~/.ssh`) is absent, as git sees it: nothing outside the tree
//! is ever read.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat};

use super::GitError;

/// What is at a path of the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkEntry {
    /// Nothing, or something git does not see as a path of its own: a
    /// component above it is missing, not a directory, or a symlink.
    Absent,
    Directory,
    /// A symbolic link, with its target (never followed).
    Symlink(Vec<u8>),
    /// A regular file's bytes, read once.
    File {
        bytes: Vec<u8>,
        executable: bool,
    },
    /// A regular file larger than the limit the caller gave (not read).
    TooLarge {
        size: u64,
    },
    /// A FIFO, socket or device: never opened.
    Special,
}

/// A handle on the work tree's root directory.
#[derive(Debug)]
pub struct WorkRoot {
    dir: OwnedFd,
    path: PathBuf,
}

impl WorkRoot {
    /// Opens `root` (the one path resolved the ordinary way: it is where
    /// the user put their repository).
    pub fn open(root: &Path) -> Result<Self, GitError> {
        let dir = nix::fcntl::open(
            root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| GitError::io("cannot open the work tree", root)(errno.into()))?;
        Ok(Self {
            dir,
            path: root.to_owned(),
        })
    }

    /// What is at `relative` (`/`-separated, no `.` or `..`), reading a
    /// regular file of at most `max_bytes`.
    pub fn read(&self, relative: &str, max_bytes: u64) -> Result<WorkEntry, GitError> {
        let full = self.path.join(relative);
        let mut components: Vec<&str> = relative.split('/').collect();
        let Some(name) = components.pop() else {
            return Ok(WorkEntry::Absent);
        };
        if name.is_empty()
            || components
                .iter()
                .chain(std::iter::once(&name))
                .any(|part| part.is_empty() || *part == "." || *part == "..")
        {
            return Err(GitError::io("refusing to read", &full)(
                std::io::Error::other("not a plain path below the work tree"),
            ));
        }
        let parent = match self.parent(&components) {
            Ok(Some(parent)) => parent,
            Ok(None) => return Ok(WorkEntry::Absent),
            Err(errno) => {
                return Err(GitError::io("cannot open the directory of", &full)(
                    errno.into(),
                ));
            }
        };
        let dir = parent.as_ref().map_or(self.dir.as_fd(), AsFd::as_fd);
        read_entry(dir, name, max_bytes)
            .map_err(|(context, cause)| GitError::io(context, &full)(cause))
    }

    /// The directory holding a path with these parent components: `None`
    /// for the root itself (`Some(None)`), `Ok(None)` when a component
    /// is missing, not a directory, or a symlink.
    #[expect(
        clippy::option_option,
        reason = "the root needs no handle of its own; absent is not an error"
    )]
    fn parent(&self, components: &[&str]) -> Result<Option<Option<OwnedFd>>, Errno> {
        if components.is_empty() {
            return Ok(Some(None));
        }
        let absent = |errno: Errno| match errno {
            Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::EXDEV => Ok(None),
            other => Err(other),
        };
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        #[cfg(target_os = "linux")]
        {
            use nix::fcntl::{OpenHow, ResolveFlag, openat2};
            let how = OpenHow::new()
                .flags(flags)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
            let joined = components.join("/");
            match openat2(self.dir.as_fd(), joined.as_str(), how) {
                Ok(fd) => return Ok(Some(Some(fd))),
                // No openat2 (old kernel, or a seccomp filter refusing
                // it): one component at a time with O_NOFOLLOW.
                Err(Errno::ENOSYS | Errno::EPERM | Errno::EAGAIN) => {}
                Err(errno) => return absent(errno),
            }
        }
        let mut current: Option<OwnedFd> = None;
        for part in components {
            let dir = current.as_ref().map_or(self.dir.as_fd(), AsFd::as_fd);
            match nix::fcntl::openat(dir, OsStr::new(part).as_bytes(), flags, Mode::empty()) {
                Ok(fd) => current = Some(fd),
                Err(errno) => return absent(errno),
            }
        }
        Ok(Some(current))
    }
}

type ReadError = (&'static str, std::io::Error);

/// The entry `name` in `dir`, never following it.
fn read_entry(dir: BorrowedFd<'_>, name: &str, max_bytes: u64) -> Result<WorkEntry, ReadError> {
    let stat = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(WorkEntry::Absent),
        Err(errno) => return Err(("cannot inspect", errno.into())),
    };
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFLNK {
        return nix::fcntl::readlinkat(dir, name)
            .map(|target| WorkEntry::Symlink(target.as_bytes().to_vec()))
            .map_err(|errno| ("cannot read the symlink", errno.into()));
    }
    if kind == SFlag::S_IFDIR {
        return Ok(WorkEntry::Directory);
    }
    if kind != SFlag::S_IFREG {
        return Ok(WorkEntry::Special);
    }
    let fd = nix::fcntl::openat(
        dir,
        name,
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| ("cannot open", std::io::Error::from(errno)))?;
    let stat = fstat(&fd).map_err(|errno| ("cannot inspect", errno.into()))?;
    if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err((
            "changed while committing",
            std::io::Error::other("no longer a regular file"),
        ));
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max_bytes {
        return Ok(WorkEntry::TooLarge { size });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    std::fs::File::from(fd)
        .take(size.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| ("cannot read", error))?;
    if bytes.len() as u64 != size {
        return Err((
            "changed while committing",
            std::io::Error::other(format!(
                "{} bytes read where the file had {size}",
                bytes.len()
            )),
        ));
    }
    Ok(WorkEntry::File {
        bytes,
        executable: stat.st_mode & 0o111 != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 1 << 20;

    #[test]
    fn files_links_and_directories_are_read_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f.txt"), "hello").unwrap();
        std::os::unix::fs::symlink("b/f.txt", dir.path().join("a/link")).unwrap();
        let root = WorkRoot::open(dir.path()).unwrap();
        assert_eq!(
            root.read("a/b/f.txt", MAX).unwrap(),
            WorkEntry::File {
                bytes: b"hello".to_vec(),
                executable: false
            }
        );
        assert_eq!(
            root.read("a/link", MAX).unwrap(),
            WorkEntry::Symlink(b"b/f.txt".to_vec())
        );
        assert_eq!(root.read("a/b", MAX).unwrap(), WorkEntry::Directory);
        assert_eq!(root.read("a/missing", MAX).unwrap(), WorkEntry::Absent);
        assert_eq!(root.read("a/b/f.txt/x", MAX).unwrap(), WorkEntry::Absent);
        assert_eq!(
            root.read("a/b/f.txt", 2).unwrap(),
            WorkEntry::TooLarge { size: 5 }
        );
        assert!(root.read("a/../a/b/f.txt", MAX).is_err());
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_is_not_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_rsa"), "outside secret").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/id_rsa"), "inside").unwrap();
        let root = WorkRoot::open(dir.path()).unwrap();
        assert!(matches!(
            root.read("d/id_rsa", MAX).unwrap(),
            WorkEntry::File { .. }
        ));
        std::fs::rename(dir.path().join("d"), dir.path().join("d.real")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("d")).unwrap();
        assert_eq!(root.read("d/id_rsa", MAX).unwrap(), WorkEntry::Absent);
        // Deeper too, and with a relative link.
        std::fs::create_dir_all(dir.path().join("x/y")).unwrap();
        std::os::unix::fs::symlink("../d", dir.path().join("x/z")).unwrap();
        assert_eq!(root.read("x/z/id_rsa", MAX).unwrap(), WorkEntry::Absent);
        // The link itself is read as a link.
        assert_eq!(
            root.read("d", MAX).unwrap(),
            WorkEntry::Symlink(outside.path().as_os_str().as_bytes().to_vec())
        );
    }

    #[test]
    fn a_fifo_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("pipe"), Mode::from_bits_truncate(0o644)).unwrap();
        let root = WorkRoot::open(dir.path()).unwrap();
        // Opening it for reading would block: nobody writes.
        assert_eq!(root.read("pipe", MAX).unwrap(), WorkEntry::Special);
    }
}
