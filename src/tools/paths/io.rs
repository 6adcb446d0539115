//! Reading and writing resolved paths: `O_NOFOLLOW`/`RESOLVE_NO_SYMLINKS`
//! opens, `fstat` checks, and writes through a temporary file renamed over
//! the target.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};

use super::{Kind, MAX_WRITE_BYTES, Resolved, root_of};
use crate::tools::ToolCtx;
use crate::tools::ToolError;

/// The error for a path that does not exist, with a "did you mean" when a
/// sibling's name is close.
pub fn not_found(resolved: &Resolved) -> ToolError {
    let mut message = format!("`{}` does not exist", resolved.display);
    let hint = resolved
        .abs
        .parent()
        .zip(resolved.abs.file_name())
        .and_then(|(parent, name)| {
            let name = name.to_str()?;
            let siblings: Vec<String> = fs::read_dir(parent)
                .ok()?
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect();
            crate::core::text::closest(name, siblings.iter().map(String::as_str)).map(str::to_owned)
        });
    if let Some(hint) = hint {
        // Spelled like the path asked for, not as a bare file name.
        let hint = Path::new(&resolved.display)
            .parent()
            .map_or_else(|| PathBuf::from(&hint), |parent| parent.join(&hint));
        message.push_str(&format!("; did you mean `{}`?", hint.display()));
    }
    ToolError::Model(message)
}

/// Reads the regular file at `resolved`, refusing anything else and files
/// larger than `max_bytes`.
pub fn read_bytes(resolved: &Resolved, max_bytes: u64) -> Result<Vec<u8>, ToolError> {
    match resolved.kind {
        None => return Err(not_found(resolved)),
        Some(Kind::Dir) => {
            return Err(ToolError::Model(format!(
                "`{}` is a directory, not a file; use list_files",
                resolved.display
            )));
        }
        Some(Kind::Special(what)) => {
            return Err(ToolError::Model(format!(
                "`{}` is a {what}, not a regular file",
                resolved.display
            )));
        }
        Some(Kind::File) => {}
    }
    let fd = open_no_symlinks(&resolved.abs, OFlag::O_RDONLY | OFlag::O_NONBLOCK)
        .map_err(|errno| errno_error(resolved, errno))?;
    let stat = nix::sys::stat::fstat(&fd).map_err(|errno| errno_error(resolved, errno))?;
    if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(ToolError::Model(format!(
            "`{}` is not a regular file",
            resolved.display
        )));
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max_bytes {
        return Err(too_large(resolved, size, max_bytes));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    File::from(fd)
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| {
            ToolError::Model(format!("`{}`: {}", resolved.display, io_reason(&error)))
        })?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(resolved, bytes.len() as u64, max_bytes));
    }
    Ok(bytes)
}

fn too_large(resolved: &Resolved, size: u64, max_bytes: u64) -> ToolError {
    ToolError::Model(format!(
        "`{}` is {} bytes, over the {} MB limit for reading; use search_files, or run_shell with head/sed",
        resolved.display,
        size,
        max_bytes / (1024 * 1024)
    ))
}

/// Replaces the file at `resolved` with `content`, creating missing
/// parent directories: written to a temporary file beside it, then renamed
/// over it. An existing file keeps its permission bits. Directories are
/// only created inside the root the path lies in.
pub fn write_bytes(ctx: &ToolCtx, resolved: &Resolved, content: &[u8]) -> Result<(), ToolError> {
    match resolved.kind {
        Some(Kind::Dir) => {
            return Err(ToolError::Model(format!(
                "`{}` is a directory",
                resolved.display
            )));
        }
        Some(Kind::Special(what)) => {
            return Err(ToolError::Model(format!(
                "`{}` exists and is a {what}, not a regular file",
                resolved.display
            )));
        }
        Some(Kind::File) | None => {}
    }
    if content.len() > MAX_WRITE_BYTES {
        return Err(ToolError::Model(format!(
            "content is {} bytes, over the {} MB limit for writing",
            content.len(),
            MAX_WRITE_BYTES / (1024 * 1024)
        )));
    }
    let fail = |errno: Errno| errno_error(resolved, errno);
    let (Some(parent), Some(name)) = (resolved.abs.parent(), resolved.abs.file_name()) else {
        return Err(ToolError::Model(format!(
            "`{}` cannot be written",
            resolved.display
        )));
    };
    let floor = root_of(ctx, &resolved.abs).unwrap_or(parent);
    let dir = open_dir_creating(parent, floor).map_err(fail)?;
    let mode = match nix::sys::stat::fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
                return Err(ToolError::Model(format!(
                    "`{}` exists and is not a regular file",
                    resolved.display
                )));
            }
            Some(Mode::from_bits_truncate(stat.st_mode & 0o777))
        }
        Err(Errno::ENOENT) => None,
        Err(errno) => return Err(fail(errno)),
    };
    let temp = temp_name(name);
    let file = nix::fcntl::openat(
        &dir,
        temp.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o666),
    )
    .map_err(fail)?;
    let written = (|| {
        if let Some(mode) = mode {
            nix::sys::stat::fchmod(&file, mode)?;
        }
        File::from(file)
            .write_all(content)
            .map_err(|error| Errno::from_raw(error.raw_os_error().unwrap_or(nix::libc::EIO)))?;
        nix::fcntl::renameat(&dir, temp.as_os_str(), &dir, name)
    })();
    if let Err(errno) = written {
        let _ = nix::unistd::unlinkat(
            &dir,
            temp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        return Err(fail(errno));
    }
    Ok(())
}

fn temp_name(name: &OsStr) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(format!(
        ".ybs-{}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    temp
}

/// Opens directory `dir` (absolute, symlink-free), creating it and its
/// missing parents one level at a time through directory descriptors;
/// never `floor` or anything above it.
fn open_dir_creating(dir: &Path, floor: &Path) -> Result<OwnedFd, Errno> {
    match open_no_symlinks(dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY) {
        Err(Errno::ENOENT) => {}
        other => return other,
    }
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(Errno::ENOENT);
    };
    if dir == floor || !dir.starts_with(floor) {
        return Err(Errno::ENOENT);
    }
    let parent = open_dir_creating(parent, floor)?;
    match nix::sys::stat::mkdirat(&parent, name, Mode::from_bits_truncate(0o777)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(errno) => return Err(errno),
    }
    nix::fcntl::openat(
        &parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `path` refusing a symlink anywhere in it (`openat2` with
/// `RESOLVE_NO_SYMLINKS`), or in its last component where the kernel has
/// no `openat2`.
pub fn open_no_symlinks(path: &Path, flags: OFlag) -> Result<OwnedFd, Errno> {
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    #[cfg(target_os = "linux")]
    {
        use std::sync::atomic::AtomicBool;
        static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            use nix::fcntl::{OpenHow, ResolveFlag};
            let how = OpenHow::new()
                .flags(flags)
                .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            match nix::fcntl::openat2(AT_FDCWD, path, how) {
                Err(Errno::ENOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
                other => return other,
            }
        }
    }
    nix::fcntl::openat(AT_FDCWD, path, flags, Mode::empty())
}

/// Opens a file for reading as a `File` (for searches over walked paths).
pub fn open_regular(path: &Path) -> Option<File> {
    let fd = open_no_symlinks(path, OFlag::O_RDONLY | OFlag::O_NONBLOCK).ok()?;
    let stat = nix::sys::stat::fstat(fd.as_fd()).ok()?;
    (SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG)
        .then(|| File::from(fd))
}

fn errno_error(resolved: &Resolved, errno: Errno) -> ToolError {
    let reason = match errno {
        Errno::ELOOP => "a symlink appeared in the path during the call; not followed".to_owned(),
        Errno::ENOENT => return not_found(resolved),
        other => io_reason(&std::io::Error::from(other)),
    };
    ToolError::Model(format!("`{}`: {reason}", resolved.display))
}

/// An I/O error as a lowercase reason without the "(os error N)" suffix.
pub(super) fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_owned(),
    }
}
