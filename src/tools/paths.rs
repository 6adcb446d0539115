//! Safe path resolution for the file tools (docs/security.md S2, S6).
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
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};

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
    if let Some(control) = raw.chars().find(|c| c.is_control()) {
        let name = match control {
            '\0' => "a NUL byte".to_owned(),
            '\n' => "a newline".to_owned(),
            '\r' => "a carriage return".to_owned(),
            '\t' => "a tab".to_owned(),
            '\x1b' => "an escape character (ESC)".to_owned(),
            other => format!("the control character U+{:04X}", u32::from(other)),
        };
        return Err(ToolError::Model(format!(
            "the path `{}` contains {name}; paths with control characters are refused",
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
    let outside = |via: &Option<String>| outside(raw, via.as_deref());
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
            Err(error) => return Err(unreadable(ctx, &current, &error)),
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
        let target = fs::read_link(&current).map_err(|error| unreadable(ctx, &current, &error))?;
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

/// `raw` leads outside the roots, maybe `via` a symlink.
fn outside(raw: &str, via: Option<&str>) -> ToolError {
    let through = via
        .map(|link| format!(" (through the symlink `{link}`)"))
        .unwrap_or_default();
    ToolError::Model(format!(
        "`{raw}` resolves outside the working directory{through}"
    ))
}

/// `path` cannot be looked at.
fn unreadable(ctx: &ToolCtx, path: &Path, error: &std::io::Error) -> ToolError {
    ToolError::Model(format!("`{}`: {}", display(ctx, path), io_reason(error)))
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

/// Whether a blocked-paths entry is a glob.
fn is_glob(entry: &str) -> bool {
    entry.contains(['*', '?', '[', '{'])
}

/// The globs among `entries`, compiled once per distinct list: every
/// path a tool names is checked against them, and building the set
/// compiles an automaton each time.
fn globs_of(entries: &[String]) -> Arc<GlobSet> {
    static BUILT: Mutex<Vec<(Vec<String>, Arc<GlobSet>)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, globs)) = built.iter().find(|(list, _)| list.as_slice() == entries) {
        return globs.clone();
    }
    let mut globs = GlobSetBuilder::new();
    for entry in entries.iter().filter(|entry| is_glob(entry)) {
        if let Ok(glob) = GlobBuilder::new(entry).literal_separator(true).build() {
            globs.add(glob);
        }
    }
    let globs = Arc::new(globs.build().unwrap_or_else(|_| GlobSet::empty()));
    // A few lists per process (one per task config); bounded all the same.
    if built.len() >= 16 {
        built.remove(0);
    }
    built.push((entries.to_vec(), globs.clone()));
    globs
}

/// `safety.blocked_paths`, compiled: literal entries block a path and
/// everything under it; entries with glob characters are globs matched
/// against absolute and workdir-relative paths.
pub struct Blocklist {
    prefixes: Vec<PathBuf>,
    globs: Arc<GlobSet>,
}

impl Blocklist {
    pub fn new(ctx: &ToolCtx) -> Self {
        let mut prefixes = Vec::new();
        for entry in &ctx.blocked_paths {
            if is_glob(entry) {
                continue;
            }
            let path = ctx.workdir.join(entry);
            // Resolved at each call: a link made since points elsewhere.
            if let Ok(canonical) = fs::canonicalize(&path)
                && canonical != path
            {
                prefixes.push(canonical);
            }
            prefixes.push(path);
        }
        Self {
            prefixes,
            globs: globs_of(&ctx.blocked_paths),
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
        for ci in ["workflows", "actions"] {
            if names
                .windows(2)
                .any(|pair| is_named(pair[0], ".github") && is_named(pair[1], ci))
            {
                return Err(ToolError::Model(format!(
                    "`{}`: writing under .github/{ci}/ is not allowed",
                    resolved.display
                )));
            }
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

mod io;

use io::io_reason;
pub use io::{not_found, open_no_symlinks, open_regular, read_bytes, write_bytes};

#[cfg(test)]
mod tests;
