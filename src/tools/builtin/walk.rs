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
}

impl WalkCtx {
    pub(super) fn new(ctx: &ToolCtx, root: PathBuf) -> Self {
        Self::with_limit(ctx, root, MAX_WALK_ENTRIES)
    }

    pub(super) fn with_limit(ctx: &ToolCtx, root: PathBuf, limit: usize) -> Self {
        Self {
            workdir: ctx.workdir.clone(),
            root,
            blocklist: Arc::new(Blocklist::new(ctx)),
            limit,
            seen: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A parallel walker over `root`. Entries past the limit are dropped
    /// as they are read (never queued).
    pub(super) fn walker(&self) -> WalkParallel {
        let blocklist = Arc::clone(&self.blocklist);
        let workdir = self.workdir.clone();
        let seen = Arc::clone(&self.seen);
        let limit = self.limit;
        WalkBuilder::new(&self.root)
            .hidden(false)
            .require_git(false)
            .follow_links(false)
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
                !blocklist.blocks_entry(path, relative)
            })
            .build_parallel()
    }

    /// After a walk: the note for the result when the walk stopped at the
    /// entry limit (what it returns is then from part of the tree only).
    pub(super) fn limit_note(&self) -> Option<String> {
        (self.seen.load(Ordering::Relaxed) > self.limit).then(|| {
            format!(
                "the walk stopped after {} entries (the walk limit): results come from part of \
                 the tree only; narrow `path` or the pattern",
                self.limit
            )
        })
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
            by_name: !pattern.contains('/'),
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
