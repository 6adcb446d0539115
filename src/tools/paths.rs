//! Safe path resolution for the file tools (SECURITY S2, S6).
//!
//! The built-in file tools run inside ybs, outside any child sandbox, so
//! this module is their boundary. A path from the model is resolved
//! component by component against the working directory: `..` may not
//! climb out of the allowed roots, every symlink is read and its target
//! followed by hand (recursively) and must stay inside them too, and roots
//! are compared by path components, never by string prefix. The result is
//! an absolute path with no symlink and no `..` in it.
//!
//! Files are then opened with `openat2(RESOLVE_NO_SYMLINKS)` (plain
//! `O_NOFOLLOW` where the kernel lacks it), so a directory swapped for a
//! symlink between resolution and use makes the call fail instead of
//! escaping. Reads open with `O_NONBLOCK` and check `fstat`, so a FIFO
//! cannot hang ybs. Writes go to a temporary file in the target directory
//! (reached through directory descriptors, created one level at a time
//! with `mkdirat`) and are renamed over the target: never written in place,
//! never through a hard link.
//!
//! Guards no caller can loosen: blocked paths are never read or written;
//! nothing under a `.git` directory or `.github/workflows/` and none of the
//! protected control files are written.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};

use super::{ToolCtx, ToolError};

/// Largest file `read_file` and `edit_file` will read.
pub const MAX_READ_BYTES: u64 = 10 * 1024 * 1024;
/// Largest content `write_file` and `edit_file` will write.
pub const MAX_WRITE_BYTES: usize = 10 * 1024 * 1024;
/// Symlinks followed while resolving one path, as the kernel's limit.
const MAX_SYMLINKS: usize = 40;

/// What the caller is about to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// What a resolved path names right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    /// A FIFO, socket or device, named for messages.
    Special(&'static str),
}

/// A path resolved inside the allowed roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute, with no symlink and no `.`/`..` component.
    pub abs: PathBuf,
    /// Relative to the workdir when inside it (`.` for the workdir itself),
    /// else absolute. For messages, targets and `changed`.
    pub display: String,
    /// What is there; `None` if nothing is.
    pub kind: Option<Kind>,
}

impl Resolved {
    /// `display` as a path, for `ToolOutput::changed`.
    pub fn display_path(&self) -> PathBuf {
        PathBuf::from(&self.display)
    }
}

/// Resolves `raw` (from the model) for `access`, applying every guard.
pub fn resolve(ctx: &ToolCtx, raw: &str, access: Access) -> Result<Resolved, ToolError> {
    if raw.is_empty() {
        return Err(ToolError::Model("the path is empty".to_owned()));
    }
    if raw.contains('\0') {
        return Err(ToolError::Model(format!(
            "`{}` contains a NUL byte",
            raw.escape_debug()
        )));
    }
    if raw == "~" || raw.starts_with("~/") {
        return Err(ToolError::Model(format!(
            "`{raw}`: `~` is not expanded; give a path relative to the working directory"
        )));
    }
    let (abs, kind) = walk(ctx, raw)?;
    let resolved = Resolved {
        display: display(ctx, &abs),
        abs,
        kind,
    };
    let lexical = lexical_relative(raw);
    if Blocklist::new(ctx).blocks_path(ctx, &resolved.abs, lexical.as_deref()) {
        return Err(ToolError::Model(format!(
            "`{}` is a blocked path (safety.blocked_paths): it is never read or written",
            resolved.display
        )));
    }
    if access == Access::Write {
        check_writable(ctx, &resolved, raw)?;
    }
    Ok(resolved)
}

/// Resolves `raw` as an existing directory to read (list, search, cwd).
pub fn resolve_dir(ctx: &ToolCtx, raw: &str) -> Result<Resolved, ToolError> {
    let resolved = resolve(ctx, raw, Access::Read)?;
    match resolved.kind {
        Some(Kind::Dir) => Ok(resolved),
        Some(Kind::File | Kind::Special(_)) => Err(ToolError::Model(format!(
            "`{}` is not a directory",
            resolved.display
        ))),
        None => Err(not_found(&resolved)),
    }
}

/// The display form of an absolute path: relative to the workdir when
/// inside it.
pub fn display(ctx: &ToolCtx, abs: &Path) -> String {
    match abs.strip_prefix(&ctx.workdir) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => abs.to_string_lossy().into_owned(),
    }
}

fn roots(ctx: &ToolCtx) -> impl Iterator<Item = &Path> {
    std::iter::once(ctx.workdir.as_path()).chain(ctx.allowed_roots.iter().map(PathBuf::as_path))
}

fn inside_roots(ctx: &ToolCtx, path: &Path) -> bool {
    roots(ctx).any(|root| path.starts_with(root))
}

/// The deepest root `path` lies in.
fn root_of<'c>(ctx: &'c ToolCtx, path: &Path) -> Option<&'c Path> {
    roots(ctx)
        .filter(|root| path.starts_with(root))
        .max_by_key(|root| root.components().count())
}

enum Step {
    Parent,
    Name(OsString),
}

fn steps_of(path: &Path) -> impl DoubleEndedIterator<Item = Step> + '_ {
    path.components().filter_map(|component| match component {
        Component::ParentDir => Some(Step::Parent),
        Component::Normal(name) => Some(Step::Name(name.to_owned())),
        Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
    })
}

/// Walks `raw` from the workdir (or the root an absolute path names), one
/// component at a time, following symlinks by hand.
fn walk(ctx: &ToolCtx, raw: &str) -> Result<(PathBuf, Option<Kind>), ToolError> {
    let outside = |via: &Option<String>| {
        let through = via
            .as_ref()
            .map(|link| format!(" (through the symlink `{link}`)"))
            .unwrap_or_default();
        ToolError::Model(format!(
            "`{raw}` resolves outside the working directory{through}"
        ))
    };
    let raw_path = Path::new(raw);
    let mut current = if raw_path.is_absolute() {
        root_of(ctx, raw_path)
            .ok_or_else(|| outside(&None))?
            .to_path_buf()
    } else {
        ctx.workdir.clone()
    };
    let rest = raw_path.strip_prefix(&current).unwrap_or(raw_path);
    let mut pending: VecDeque<Step> = steps_of(rest).collect();
    let mut kind = Some(Kind::Dir);
    let mut via: Option<String> = None;
    let mut links = 0;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Parent => {
                if kind.is_none() {
                    return Err(ToolError::Model(format!(
                        "`{raw}`: `..` after `{}`, which does not exist",
                        display(ctx, &current)
                    )));
                }
                if !current.pop() || !inside_roots(ctx, &current) {
                    return Err(outside(&via));
                }
                kind = Some(Kind::Dir);
                continue;
            }
            Step::Name(name) => name,
        };
        match kind {
            None => {
                current.push(name);
                continue;
            }
            Some(Kind::Dir) => current.push(name),
            Some(Kind::File | Kind::Special(_)) => {
                return Err(ToolError::Model(format!(
                    "`{raw}`: `{}` is not a directory",
                    display(ctx, &current)
                )));
            }
        }
        let metadata = match fs::symlink_metadata(&current) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                kind = None;
                continue;
            }
            Err(error) => {
                return Err(ToolError::Model(format!(
                    "`{}`: {}",
                    display(ctx, &current),
                    io_reason(&error)
                )));
            }
        };
        let file_type = metadata.file_type();
        if !file_type.is_symlink() {
            kind = Some(kind_of(&file_type));
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return Err(ToolError::Model(format!(
                "`{raw}`: too many levels of symbolic links"
            )));
        }
        let target = fs::read_link(&current).map_err(|error| {
            ToolError::Model(format!(
                "`{}`: {}",
                display(ctx, &current),
                io_reason(&error)
            ))
        })?;
        via = Some(display(ctx, &current));
        current.pop();
        let target_rest = if target.is_absolute() {
            let root = root_of(ctx, &target).ok_or_else(|| outside(&via))?;
            current = root.to_path_buf();
            target.strip_prefix(root).unwrap_or(&target).to_path_buf()
        } else {
            target
        };
        for step in steps_of(&target_rest).rev() {
            pending.push_front(step);
        }
        kind = Some(Kind::Dir);
    }
    Ok((current, kind))
}

fn kind_of(file_type: &fs::FileType) -> Kind {
    if file_type.is_file() {
        Kind::File
    } else if file_type.is_dir() {
        Kind::Dir
    } else if file_type.is_fifo() {
        Kind::Special("FIFO")
    } else if file_type.is_socket() {
        Kind::Special("socket")
    } else if file_type.is_char_device() {
        Kind::Special("character device")
    } else if file_type.is_block_device() {
        Kind::Special("block device")
    } else {
        Kind::Special("special file")
    }
}

/// `raw` as a relative path with `.` dropped, when it is relative and has
/// no `..` (the lexical spelling the model used, for the guards).
fn lexical_relative(raw: &str) -> Option<PathBuf> {
    let path = Path::new(raw);
    if path.is_absolute() {
        return None;
    }
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => lexical.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(lexical)
}

// ---------------------------------------------------------------------------
// Guards.

/// `safety.blocked_paths`, compiled: literal entries block a path and
/// everything under it; entries with glob characters are globs matched
/// against absolute and workdir-relative paths.
pub struct Blocklist {
    prefixes: Vec<PathBuf>,
    globs: GlobSet,
}

impl Blocklist {
    pub fn new(ctx: &ToolCtx) -> Self {
        let mut prefixes = Vec::new();
        let mut globs = GlobSetBuilder::new();
        for entry in &ctx.blocked_paths {
            let entry = expand_home(entry);
            if entry.contains(['*', '?', '[', '{']) {
                let glob = GlobBuilder::new(&entry).literal_separator(true).build();
                if let Ok(glob) = glob {
                    globs.add(glob);
                }
                continue;
            }
            let path = ctx.workdir.join(&entry);
            if let Ok(canonical) = fs::canonicalize(&path)
                && canonical != path
            {
                prefixes.push(canonical);
            }
            prefixes.push(path);
        }
        Self {
            prefixes,
            globs: globs.build().unwrap_or_else(|_| GlobSet::empty()),
        }
    }

    /// True if `abs` or any directory above it is blocked; `lexical` is the
    /// spelling the model used, relative to the workdir.
    pub fn blocks_path(&self, ctx: &ToolCtx, abs: &Path, lexical: Option<&Path>) -> bool {
        if self.prefixes.iter().any(|prefix| abs.starts_with(prefix)) {
            return true;
        }
        if self.globs.is_empty() {
            return false;
        }
        let relative = abs.strip_prefix(&ctx.workdir).ok();
        let candidates = abs
            .ancestors()
            .chain(relative.into_iter().flat_map(Path::ancestors))
            .chain(lexical.into_iter().flat_map(Path::ancestors))
            .filter(|path| !path.as_os_str().is_empty());
        candidates
            .into_iter()
            .any(|path| self.globs.is_match_candidate(&Candidate::new(path)))
    }

    /// True if this one entry is blocked (its parents were checked when
    /// the walk entered them).
    pub fn blocks_entry(&self, abs: &Path, relative: &Path) -> bool {
        self.prefixes.iter().any(|prefix| abs.starts_with(prefix))
            || (!self.globs.is_empty()
                && (self.globs.is_match(abs) || self.globs.is_match(relative)))
    }
}

fn expand_home(entry: &str) -> String {
    match (entry.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest).to_string_lossy().into_owned(),
        _ => entry.to_owned(),
    }
}

fn check_writable(ctx: &ToolCtx, resolved: &Resolved, raw: &str) -> Result<(), ToolError> {
    let within_root = root_of(ctx, &resolved.abs)
        .and_then(|root| resolved.abs.strip_prefix(root).ok())
        .unwrap_or(&resolved.abs);
    let lexical = lexical_relative(raw);
    let spellings = [Some(within_root), lexical.as_deref()];
    for path in spellings.into_iter().flatten() {
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|component| match component {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        if names.iter().any(|name| is_named(name, ".git")) {
            return Err(ToolError::Model(format!(
                "`{}`: writing under .git/ is not allowed",
                resolved.display
            )));
        }
        if names
            .windows(2)
            .any(|pair| is_named(pair[0], ".github") && is_named(pair[1], "workflows"))
        {
            return Err(ToolError::Model(format!(
                "`{}`: writing under .github/workflows/ is not allowed",
                resolved.display
            )));
        }
    }
    if is_protected(ctx, &resolved.abs) {
        return Err(ToolError::Model(format!(
            "`{}` is a control file of this run and cannot be written",
            resolved.display
        )));
    }
    Ok(())
}

/// Case-insensitive, as some file systems are.
fn is_named(name: &OsStr, expected: &str) -> bool {
    name.as_bytes().eq_ignore_ascii_case(expected.as_bytes())
}

fn is_protected(ctx: &ToolCtx, abs: &Path) -> bool {
    ctx.protected_paths.iter().any(|protected| {
        if abs.starts_with(protected) {
            return true;
        }
        // The protected path may be spelled through a symlink; compare its
        // canonical parent too (the file itself may not exist yet).
        let (Some(parent), Some(name)) = (protected.parent(), protected.file_name()) else {
            return false;
        };
        fs::canonicalize(parent).is_ok_and(|parent| abs.starts_with(parent.join(name)))
    })
}

// ---------------------------------------------------------------------------
// Reading and writing.

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
        message.push_str(&format!("; did you mean `{hint}`?"));
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
/// over it. An existing file keeps its permission bits.
pub fn write_bytes(resolved: &Resolved, content: &[u8]) -> Result<(), ToolError> {
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
    let dir = open_dir_creating(parent).map_err(fail)?;
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
/// missing parents one level at a time through directory descriptors.
fn open_dir_creating(dir: &Path) -> Result<OwnedFd, Errno> {
    match open_no_symlinks(dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY) {
        Err(Errno::ENOENT) => {}
        other => return other,
    }
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(Errno::ENOENT);
    };
    let parent = open_dir_creating(parent)?;
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
fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
