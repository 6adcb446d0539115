//! Which paths belong to a task: the tool-reported paths cross-checked
//! against the work tree's actual changes and the start-of-task snapshot.
//!
//! The rules, in order, for every path that is dirty now, was dirty at
//! the start, or was reported by a tool:
//!
//! 1. Dirty at the start (the user's): never the task's. Listed in
//!    `skipped_user_dirty` if a tool reported it or its content changed
//!    since the snapshot; otherwise silently left alone.
//! 2. Dirty now, clean at the start, reported by a tool (or inside a
//!    reported directory): the task's.
//! 3. Dirty now, clean at the start, not reported, inside the workdir: the
//!    task's too, listed in `unreported`. `run_shell` (`sed -i`, a code
//!    generator, a formatter) changes files no tool reports, and a commit
//!    without them would not build. Files the checks create belong here
//!    too; keep build output in `.gitignore`.
//! 4. Dirty now, clean at the start, not reported, outside the workdir:
//!    not the task's (skipped, `outside_workdir`): tasks run confined to
//!    their workdir, so something else changed it.
//! 5. Reported but inside ybs's own outputs (`Workspace::excluding`):
//!    skipped, `ybs_output`. Unreported changes there are not listed at
//!    all: the runner writes them while the task runs.
//! 6. Reported but not dirty: ignored by `.gitignore` (skipped,
//!    `ignored`), or unchanged (nothing to do).
//! 7. Not tracked at the start and ignored by the ignore rules of the
//!    start (the task rewrote `.gitignore`): never the task's (skipped,
//!    `ignored_at_start`), reported or not. The user's ignored `.npmrc`
//!    stays out of the commit whatever the task does to `.gitignore`; so
//!    does a new file matching an old rule. Rules 2-3 already leave out
//!    what the rules of now ignore.
//!
//! A path whose name is not UTF-8, or that is a directory (an untracked
//! nested repository) or a special file, is skipped as `unsupported`, a
//! file over 100 MiB as `too_large` (never read); a
//! file `git add` would pass through a filter driver configured in git
//! config (`filter.<driver>.clean`/`process`, e.g. Git LFS) or a
//! `working-tree-encoding` conversion is skipped as `needs_filter`: ybs
//! runs no repository-configured program, and committing the raw bytes
//! instead would store something other than what git would (a whole
//! binary instead of an LFS pointer).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use git2::{AttrCheckFlags, AttrValue, Repository};
use serde::{Deserialize, Serialize};

use super::beneath::WorkRoot;
use super::commit::push_skips;
use super::ignore::{IgnoreRules, Matcher};
use super::status::{Change, Content, DirtyPath, MAX_FILE_BYTES, content_of, dirty};
use super::tree::{files, list};
use super::{GitError, Snapshot, Workspace};
use crate::core::event::GitOutcome;

/// The task's changes as ybs would commit them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskChanges {
    /// Paths the task created, modified or deleted (repository-relative,
    /// `/`-separated, sorted).
    pub files: Vec<String>,
    /// The subset of `files` no tool reported (changed by `run_shell` or a
    /// check).
    pub unreported: Vec<String>,
    /// Paths the user had uncommitted changes in at task start and the task
    /// touched as well: never committed; the summary must say so.
    pub skipped_user_dirty: Vec<String>,
    /// Other paths left out, with why.
    pub skipped: Vec<SkippedPath>,
}

impl TaskChanges {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The report for a failed task, whose changes stay uncommitted in the
    /// work tree: `left 2 files uncommitted in /w: a.txt, b.txt`.
    pub fn left_in_place(&self, workdir: &Path) -> GitOutcome {
        let mut note = if self.files.is_empty() {
            "no changes to keep".to_owned()
        } else {
            format!(
                "left {} uncommitted in {}: {}",
                files(self.files.len()),
                workdir.display(),
                list(&self.files)
            )
        };
        push_skips(&mut note, self);
        GitOutcome {
            files: self.files.clone(),
            note,
            ..GitOutcome::default()
        }
    }
}

/// A path ybs did not commit, for a reason other than the user's changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedPath {
    pub path: String,
    pub reason: SkipReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Matched by `.gitignore` (or `info/exclude`, `core.excludesFile`).
    Ignored,
    /// Not tracked, and matched by the ignore rules as they were when the
    /// task started (it changed them since).
    IgnoredAtStart,
    /// Changed outside the task's workdir and not reported by a tool.
    OutsideWorkdir,
    /// A reported path outside the repository's work tree (or in `.git`).
    OutsideRepository,
    /// Not a regular file or symlink, or a name that is not UTF-8.
    Unsupported,
    /// `git add` would run a configured filter program (Git LFS, ...) or
    /// a `working-tree-encoding` conversion on it, which ybs never does.
    NeedsFilter,
    /// Inside ybs's own outputs (the output directory, the JUnit file).
    YbsOutput,
    /// Looks like it holds a credential (left out of a salvage commit).
    Credential,
    /// A file over 100 MiB: never read, never committed.
    TooLarge,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ignored => "ignored",
            Self::IgnoredAtStart => "ignored when the task started",
            Self::OutsideWorkdir => "outside the workdir",
            Self::OutsideRepository => "outside the repository",
            Self::Unsupported => "not a regular file",
            Self::NeedsFilter => "needs a git filter program, which ybs never runs",
            Self::YbsOutput => "ybs's own output",
            Self::Credential => "looks like it holds a credential",
            Self::TooLarge => "larger than 100 MiB",
        }
    }
}

impl Workspace {
    /// The task's changes (see the module docs for the rules), without
    /// committing anything. After a failed task the runner reports these
    /// as left uncommitted in the work tree.
    pub fn task_changes(
        &self,
        paths: &[PathBuf],
        snapshot: &Snapshot,
    ) -> Result<TaskChanges, GitError> {
        self.classify(&self.repo()?, paths, snapshot)
    }

    pub(crate) fn classify(
        &self,
        repo: &Repository,
        paths: &[PathBuf],
        snapshot: &Snapshot,
    ) -> Result<TaskChanges, GitError> {
        let mut changes = TaskChanges::default();
        let reported = self.reported(paths, &mut changes.skipped);
        let now = dirty(self, repo)?;
        let config = repo
            .config()
            .map_err(GitError::git("cannot read the git config"))?;
        let start_rules = changed_ignore_rules(self, repo, snapshot, &now);
        let base_tree = base_tree(repo, snapshot)?;
        let ignored_at_start = |path: &str| {
            start_rules.as_ref().is_some_and(|matcher| {
                let tracked = base_tree
                    .as_ref()
                    .is_some_and(|tree| tree.get_path(Path::new(path)).is_ok());
                !tracked && matcher.ignores(path)
            })
        };

        // Rule 1: the user's paths.
        let user = self.touched_user_paths(snapshot, &reported)?;

        // Rules 2-4: what changed since.
        for (path, entry) in &now {
            if snapshot.dirty_path(path).is_some() {
                continue;
            }
            let was_reported = is_reported(path, &reported);
            if unsupported(entry) || has_git_component(path) {
                let large = std::fs::symlink_metadata(self.root().join(path))
                    .is_ok_and(|meta| meta.is_file() && meta.len() > MAX_FILE_BYTES);
                changes.skipped.push(SkippedPath {
                    path: path.clone(),
                    reason: if large {
                        SkipReason::TooLarge
                    } else {
                        SkipReason::Unsupported
                    },
                });
            } else if matches!(entry.content, Content::File { .. })
                && needs_filter(repo, &config, path)
            {
                changes.skipped.push(SkippedPath {
                    path: path.clone(),
                    reason: SkipReason::NeedsFilter,
                });
            } else if ignored_at_start(path) {
                changes.skipped.push(SkippedPath {
                    path: path.clone(),
                    reason: SkipReason::IgnoredAtStart,
                });
            } else if was_reported || path.starts_with(self.prefix()) {
                changes.files.push(path.clone());
                if !was_reported {
                    changes.unreported.push(path.clone());
                }
            } else {
                changes.skipped.push(SkippedPath {
                    path: path.clone(),
                    reason: SkipReason::OutsideWorkdir,
                });
            }
        }

        // Rule 6: reported paths with no change to commit.
        for path in &reported {
            if path.is_empty() || now.contains_key(path) || snapshot.dirty_path(path).is_some() {
                continue;
            }
            if self.is_ignored(repo, path) {
                changes.skipped.push(SkippedPath {
                    path: path.clone(),
                    reason: SkipReason::Ignored,
                });
            }
        }

        changes.skipped_user_dirty = user.into_iter().collect();
        changes.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    /// The reported `paths` relative to the repository; those that are
    /// ybs's own output or outside the repository go to `skipped`.
    fn reported(&self, paths: &[PathBuf], skipped: &mut Vec<SkippedPath>) -> BTreeSet<String> {
        let mut reported = BTreeSet::new();
        for path in paths {
            match self.repo_relative(path) {
                Some(relative) if self.is_excluded(&relative) => {
                    skipped.push(SkippedPath {
                        path: relative,
                        reason: SkipReason::YbsOutput,
                    });
                }
                Some(relative) => {
                    reported.insert(relative);
                }
                None => skipped.push(SkippedPath {
                    path: path.display().to_string(),
                    reason: SkipReason::OutsideRepository,
                }),
            }
        }
        reported
    }

    /// Rule 1: the paths dirty at the start that the task reported or
    /// whose content changed since.
    fn touched_user_paths(
        &self,
        snapshot: &Snapshot,
        reported: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, GitError> {
        let work = WorkRoot::open(self.root())?;
        let mut user = BTreeSet::new();
        for before in &snapshot.dirty {
            // `Other` has no hash to compare: only a report counts.
            let touched = is_reported(&before.path, reported)
                || (before.content != Content::Other
                    && content_of(&work, &before.path)? != before.content);
            if touched {
                user.insert(before.path.clone());
            }
        }
        Ok(user)
    }

    /// `path` (a file, a directory, or nothing) is ignored by git.
    fn is_ignored(&self, repo: &Repository, path: &str) -> bool {
        match repo.status_file(Path::new(path)) {
            Ok(status) => status.contains(git2::Status::IGNORED),
            // A directory, or a path that does not exist.
            Err(_) => {
                self.root().join(path).symlink_metadata().is_ok()
                    && repo.status_should_ignore(Path::new(path)).unwrap_or(false)
            }
        }
    }
}

/// The matcher of the ignore rules at the start when the task changed
/// them; `None` when they are unchanged (or the snapshot predates them).
fn changed_ignore_rules(
    workspace: &Workspace,
    repo: &Repository,
    snapshot: &Snapshot,
    now: &std::collections::BTreeMap<String, DirtyPath>,
) -> Option<Matcher> {
    let start = snapshot.ignore_rules.as_ref()?;
    match IgnoreRules::read(workspace, repo, now) {
        Ok(current) if current == *start => None,
        // Unreadable now: hold to the rules of the start.
        _ => Some(start.matcher()),
    }
}

/// The tree of the commit the task started from; `None` on an unborn branch.
fn base_tree<'r>(
    repo: &'r Repository,
    snapshot: &Snapshot,
) -> Result<Option<git2::Tree<'r>>, GitError> {
    let Some(base) = &snapshot.base else {
        return Ok(None);
    };
    let oid = git2::Oid::from_str(base).map_err(GitError::git("the base commit is not a SHA"))?;
    repo.find_commit(oid)
        .and_then(|commit| commit.tree())
        .map(Some)
        .map_err(GitError::git("cannot read the tree of the base commit"))
}

/// True if and only if `path` or one of its parent directories was
/// reported (`""` reports the whole work tree).
fn is_reported(path: &str, reported: &BTreeSet<String>) -> bool {
    if reported.contains(path) || reported.contains("") {
        return true;
    }
    path.match_indices('/').any(|(index, _)| {
        path.get(..index)
            .is_some_and(|parent| reported.contains(parent))
    })
}

/// `.git` as a path component anywhere: git refuses to track such paths.
fn has_git_component(path: &str) -> bool {
    path.split('/')
        .any(|part| part.eq_ignore_ascii_case(".git"))
}

/// True if and only if `git add path` would run a filter driver set up in
/// git config or convert a `working-tree-encoding`. Reading attributes runs
/// nothing. A driver named in `.gitattributes` but absent from the config
/// runs nothing in git either, so it does not count.
fn needs_filter(repo: &Repository, config: &git2::Config, path: &str) -> bool {
    let attribute = |name: &str| {
        repo.get_attr(Path::new(path), name, AttrCheckFlags::default())
            .ok()
            .flatten()
            .and_then(|value| match AttrValue::from_string(Some(value)) {
                AttrValue::String(text) => Some(text.to_owned()),
                _ => None,
            })
    };
    let driver_configured = attribute("filter").is_some_and(|driver| {
        ["clean", "process"]
            .iter()
            .any(|key| config.get_entry(&format!("filter.{driver}.{key}")).is_ok())
    });
    driver_configured || attribute("working-tree-encoding").is_some()
}

/// An untracked nested repository (listed as a directory), a special file
/// or a name that is not UTF-8. A tracked file replaced by a directory is
/// a deletion (the directory's files are listed on their own).
fn unsupported(entry: &DirtyPath) -> bool {
    match entry.content {
        Content::Other => true,
        Content::Directory => entry.change != Change::Deleted,
        Content::Absent | Content::File { .. } | Content::Symlink { .. } => false,
    }
}
