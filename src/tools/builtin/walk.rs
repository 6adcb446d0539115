//! The directory walk shared by `list_files` and `search_files`: ripgrep's
//! `ignore` walker, in parallel, honouring `.gitignore` (also outside a git
//! repository), `.ignore` and global excludes, showing dotfiles but never
//! `.git/`, never following symlinks, and pruning blocked paths.
//!
//! A walk looks at no more than [`MAX_WALK_ENTRIES`] entries: the ones
//! past the limit are dropped as the directory is read, before the walker
//! queues them, so a huge tree costs time up to the limit and no memory
//! beyond it. The result then says the walk stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use globset::{Candidate, GlobBuilder, GlobMatcher};
use ignore::{WalkBuilder, WalkParallel};

use crate::tools::paths::Blocklist;
use crate::tools::{ToolCtx, ToolError};

/// The most entries (files and directories) one walk looks at.
pub(super) const MAX_WALK_ENTRIES: usize = 100_000;

/// What a walk needs, owned so it can move to the blocking pool.
pub(super) struct WalkCtx {
    pub workdir: PathBuf,
    /// The walked directory (or searched file), absolute, symlink-free.
    pub root: PathBuf,
    pub blocklist: Arc<Blocklist>,
    /// The entry limit of this walk.
    limit: usize,
    /// Entries seen so far (those past the limit included).
    seen: Arc<AtomicUsize>,
    /// Directories left out because an ignore file in them is not a
    /// regular file (workdir-relative).
    special: Arc<std::sync::Mutex<Vec<String>>>,
    /// The walked directory or one above it has such an ignore file: the
    /// walk applies no ignore rules at all.
    unfiltered: Option<String>,
}

impl WalkCtx {
    pub(super) fn new(ctx: &ToolCtx, root: PathBuf) -> Self {
        Self::with_limit(ctx, root, MAX_WALK_ENTRIES)
    }

    pub(super) fn with_limit(ctx: &ToolCtx, root: PathBuf, limit: usize) -> Self {
        let unfiltered = root
            .ancestors()
            .find_map(special_ignore_file)
            .map(|path| display(&ctx.workdir, &path));
        Self {
            workdir: ctx.workdir.clone(),
            root,
            blocklist: Arc::new(Blocklist::new(ctx)),
            limit,
            seen: Arc::new(AtomicUsize::new(0)),
            special: Arc::default(),
            unfiltered,
        }
    }

    /// A parallel walker over `root`. Entries past the limit are dropped
    /// as they are read (never queued).
    pub(super) fn walker(&self) -> WalkParallel {
        let blocklist = Arc::clone(&self.blocklist);
        let workdir = self.workdir.clone();
        let seen = Arc::clone(&self.seen);
        let limit = self.limit;
        let special = Arc::clone(&self.special);
        let filtered = self.unfiltered.is_none();
        WalkBuilder::new(&self.root)
            .hidden(false)
            .require_git(false)
            .follow_links(false)
            .git_ignore(filtered)
            .git_exclude(filtered)
            .git_global(filtered)
            .ignore(filtered)
            .parents(filtered)
            .filter_entry(move |entry| {
                if entry.depth() == 0 {
                    return true;
                }
                if seen.fetch_add(1, Ordering::Relaxed) >= limit {
                    return false;
                }
                if entry.file_name() == ".git" {
                    return false;
                }
                let path = entry.path();
                let relative = path.strip_prefix(&workdir).unwrap_or(path);
                if blocklist.blocks_entry(path, relative) {
                    return false;
                }
                // The walker would open the ignore files of a directory it
                // enters: a FIFO there would block it for good.
                if filtered
                    && entry.file_type().is_some_and(|kind| kind.is_dir())
                    && let Some(file) = special_ignore_file(path)
                {
                    special
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(display(&workdir, &file));
                    return false;
                }
                true
            })
            .build_parallel()
    }

    /// After a walk: the note for the result when the walk stopped at the
    /// entry limit (what it returns is then from part of the tree only).
    /// Also says which ignore files were not regular files.
    pub(super) fn limit_note(&self) -> Option<String> {
        let mut notes = Vec::new();
        if self.seen.load(Ordering::Relaxed) > self.limit {
            notes.push(format!(
                "the walk stopped after {} entries (the walk limit): results come from part of \
                 the tree only; narrow `path` or the pattern",
                self.limit
            ));
        }
        if let Some(file) = &self.unfiltered {
            notes.push(format!(
                "`{file}` is not a regular file, so no ignore rules were applied"
            ));
        }
        let mut special = self
            .special
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        special.sort();
        for file in special {
            notes.push(format!(
                "`{file}` is not a regular file, so its directory was not walked"
            ));
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// `path` relative to the walked directory and to the workdir.
    pub(super) fn relative<'p>(&self, path: &'p Path) -> (&'p Path, &'p Path) {
        (
            path.strip_prefix(&self.root).unwrap_or(path),
            path.strip_prefix(&self.workdir).unwrap_or(path),
        )
    }

    /// The display form of a walked path (relative to the workdir when
    /// inside it).
    pub(super) fn display(&self, path: &Path) -> String {
        path.strip_prefix(&self.workdir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }
}

/// The ignore files the walker reads in a directory.
const IGNORE_FILES: &[&str] = &[".gitignore", ".ignore"];

/// An ignore file in `dir` that is there but, symlinks followed, neither
/// a regular file nor a directory: opening a FIFO would wait for a writer
/// forever.
fn special_ignore_file(dir: &Path) -> Option<PathBuf> {
    IGNORE_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| std::fs::metadata(path).is_ok_and(|meta| !meta.is_file() && !meta.is_dir()))
}

fn display(workdir: &Path, path: &Path) -> String {
    path.strip_prefix(workdir)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// A glob as the model means it: with a `/`, matched against the path
/// (relative to the walked directory or to the workdir); without, matched
/// against the file name at any depth.
#[derive(Clone)]
pub(super) struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    pub(super) fn new(parameter: &str, pattern: &str) -> Result<Self, ToolError> {
        let mut glob = Self::path(parameter, pattern)?;
        glob.by_name = !pattern.contains('/');
        Ok(glob)
    }

    /// A glob matched against the whole path, with or without a `/`.
    pub(super) fn path(parameter: &str, pattern: &str) -> Result<Self, ToolError> {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|error| {
                ToolError::Model(format!("`{parameter}` is not a valid glob: {error}"))
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            by_name: false,
        })
    }

    /// `path` relative to the walked directory and to the workdir.
    pub(super) fn is_match(&self, in_walk: &Path, in_workdir: &Path) -> bool {
        if self.by_name {
            return in_walk
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name));
        }
        self.matcher.is_match_candidate(&Candidate::new(in_walk))
            || self.matcher.is_match_candidate(&Candidate::new(in_workdir))
    }
}

/// Runs `work` on the blocking pool (walks and searches are synchronous).
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ToolError::Fatal(format!("file walk failed: {error}")))?
}
