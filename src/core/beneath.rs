//! Writing beneath a directory held open, never through a symbolic link
//! (docs/security.md S8): the primitive under ybs's outputs and its
//! `--record` cassettes, both in places a confined program may write to.
//!
//! A file is opened one plain name below a directory handle:
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has
//! it, `openat(O_NOFOLLOW)` otherwise. A file replaced whole is written to
//! a new temporary name beside it, created exclusively (a name planted
//! there, a link or not, is skipped, never opened), then renamed over the
//! old one, which replaces a planted link instead of following it.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// The error of opening a symbolic link without following it.
pub fn is_link_error(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(code) if code == Errno::ELOOP as i32 || code == Errno::EXDEV as i32
    )
}

/// Opens the single component `name` below `dir` without following a
/// link: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the
/// kernel has it, `openat` with `O_NOFOLLOW` otherwise.
pub fn open_beneath<P: AsRef<OsStr> + ?Sized>(
    dir: BorrowedFd<'_>,
    name: &P,
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let name = name.as_ref();
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    #[cfg(target_os = "linux")]
    {
        use nix::fcntl::{OpenHow, ResolveFlag, openat2};
        let how = OpenHow::new()
            .flags(flags)
            .mode(mode)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        match openat2(dir, name.as_bytes(), how) {
            // No openat2 (old kernel, or a seccomp filter refusing it):
            // one component with O_NOFOLLOW is as safe.
            Err(Errno::ENOSYS | Errno::EPERM | Errno::EAGAIN) => {}
            other => return other.map_err(io::Error::from),
        }
    }
    open_nofollow(dir, name, flags, mode)
}

/// The fallback of [`open_beneath`]: `openat` with `O_NOFOLLOW`, for one
/// path component.
pub fn open_nofollow(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    if name.as_bytes().contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a single path component",
        ));
    }
    nix::fcntl::openat(
        dir,
        name.as_bytes(),
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        mode,
    )
    .map_err(io::Error::from)
}

/// Reads the regular file `relative` (a path of plain names, no `..`)
/// beneath the directory `root`, never through a symbolic link:
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has
/// it, one [`open_nofollow`] a component otherwise. A FIFO or device is
/// refused unopened for reading (no hang); at most `max_bytes + 1` bytes
/// are read, and more is [`io::ErrorKind::FileTooLarge`].
pub fn read_beneath(
    root: &std::path::Path,
    relative: &std::path::Path,
    max_bytes: u64,
) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::fd::AsFd as _;
    use std::path::Component;
    let mut names = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a path beneath the directory",
                ));
            }
        }
    }
    let Some((last, dirs)) = names.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no file named"));
    };
    let root = OwnedFd::from(File::open(root)?);
    let read = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let joined: std::path::PathBuf = names.iter().collect();
    let fd = match open_beneath(root.as_fd(), joined.as_os_str(), read, Mode::empty()) {
        Ok(fd) => fd,
        // The fallback of `open_beneath` opens one component: walk them.
        Err(err) if err.kind() == io::ErrorKind::InvalidInput && !dirs.is_empty() => {
            let mut dir = root;
            for name in dirs {
                dir = open_nofollow(
                    dir.as_fd(),
                    name,
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                    Mode::empty(),
                )?;
            }
            open_nofollow(dir.as_fd(), last, read, Mode::empty())?
        }
        Err(err) => return Err(err),
    };
    let file = File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {max_bytes} bytes"),
        ));
    }
    Ok(bytes)
}

/// A new file with a unique name beside `name`, created exclusively.
pub fn temp_file(dir: BorrowedFd<'_>, name: &str) -> io::Result<(String, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let temp = format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        match open_beneath(
            dir,
            temp.as_str(),
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL,
            Mode::from_bits_truncate(0o644),
        ) {
            Ok(fd) => return Ok((temp, File::from(fd))),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
    }
}

/// Replaces `name` below `dir` with `contents`: a [`temp_file`] beside it,
/// written and synced, then renamed over `name` (a link there is
/// replaced, not followed). Returns the file written, for its identity.
pub fn replace_file(dir: BorrowedFd<'_>, name: &str, contents: &[u8]) -> io::Result<File> {
    let (temp, mut file) = temp_file(dir, name)?;
    let result = (|| {
        file.write_all(contents)?;
        file.sync_all()?;
        nix::fcntl::renameat(dir, temp.as_str(), dir, name)?;
        Ok::<_, io::Error>(())
    })();
    if let Err(err) = result {
        let _ = nix::unistd::unlinkat(dir, temp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(err);
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn both_ways_of_opening_refuse_links() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("real"), "x").unwrap();
        symlink(root.path().join("real"), root.path().join("link")).unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        let dir = OwnedFd::from(File::open(root.path()).unwrap());
        let read = OFlag::O_RDONLY;
        let name = root.path().file_name().unwrap().to_string_lossy();
        let escape = format!("../{name}/real");
        for open in [open_beneath::<OsStr>, open_nofollow] {
            let err = open(dir.as_fd(), OsStr::new("link"), read, Mode::empty()).unwrap_err();
            assert!(is_link_error(&err), "{err}");
            assert!(open(dir.as_fd(), OsStr::new("real"), read, Mode::empty()).is_ok());
            // Out and back in again: not beneath.
            let err = open(dir.as_fd(), OsStr::new(&escape), read, Mode::empty());
            assert!(err.is_err(), "{escape}");
        }
    }

    #[test]
    fn replacing_skips_planted_temp_names_and_replaces_links() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        symlink(&victim, root.path().join("c.json")).unwrap();
        let dir = OwnedFd::from(File::open(root.path()).unwrap());
        replace_file(dir.as_fd(), "c.json", b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(root.path().join("c.json")).unwrap(),
            "new"
        );
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 2);
    }
}
