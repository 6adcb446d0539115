//! L2 git: libgit2 only. Dirty check, commit of the task's files with
//! trailers, salvage refs (docs/git.md, docs/security.md S12).
//!
//! How the runner uses it, per task (every call is blocking libgit2 work:
//! use `spawn_blocking` from async code):
//!
//! 0. The runner's set-up opens the repository once, [`Found::open`], and
//!    asks that handle for the run lock, the workspace, the snapshot, the
//!    ready-to-commit check and the submodules; later steps reopen it.
//! 1. [`Workspace::open`] on the task's workdir. `None`: no repository;
//!    nothing is committed and [`no_repository`] is the report. Then
//!    [`Workspace::excluding`] with ybs's own output paths, which are never
//!    dirty and never committed.
//! 2. Before any task runs: [`Workspace::ready_to_commit`] (no
//!    `index.lock`, no merge or rebase under way), so a repository that
//!    cannot take a commit is reported before the model spends anything.
//!    [`Workspace::snapshot`] before the agent starts. A snapshot that is
//!    not [`Snapshot::is_clean`] stops the task (its reason names the
//!    paths: [`describe_dirty`]) unless `--allow-dirty`; with it, those
//!    paths are the user's and are never committed. The snapshot is
//!    serializable, for `state.json` when the run pauses.
//! 3. After the checks pass (and unless `--no-commit`/`commit: false`):
//!    [`Workspace::commit_task`], then [`CommitOutcome::report`].
//!    After a failed task: nothing is committed;
//!    [`Workspace::task_changes`] then [`TaskChanges::left_in_place`] say
//!    what stays in the work tree. After a limit stop:
//!    [`Workspace::salvage`] with the reason, then
//!    [`SalvageOutcome::report`].
//!
//! Guarantees (docs/security.md S12): the user's uncommitted changes are never
//! reset, stashed or committed; the index is written only for the paths a
//! commit contains; ignored files are never committed; nothing is pushed,
//! no history is rewritten, and no repository-configured program runs
//! (libgit2 has no hooks and no fsmonitor, runs no filter drivers and never
//! signs; files that need a filter driver are skipped, see `changes.rs`).
//!
//! Decisions:
//! - Which paths a commit takes is decided in `changes.rs`: the task's
//!   reported paths plus unreported changes inside the workdir, never a
//!   path that was dirty at the start, nor one the ignore rules of the
//!   start ignored (`ignore.rs`: a rewritten `.gitignore` brings nothing
//!   old in).
//! - A file that looks like it holds a credential stops the commit
//!   (`secrets.rs`, [`GitError::SecretInCommit`]) unless the operator
//!   allowed its path.
//! - `--allow-dirty`: [`Workspace::save_dirty`] saves the user's work on
//!   `refs/ybs/saved/<run-id>` before anything runs (`saved.rs`).
//! - The dirty check covers the whole repository, not only the workdir.
//!   Submodules are left out of both the check and commits.
//! - The commit's tree is HEAD's tree plus the task's files, built in a
//!   fresh in-memory index, so the user's staged changes never leak in.
//! - Refs move by compare-and-swap against the HEAD read before the
//!   commit. If HEAD moved during the task (the agent committed), ybs
//!   commits on top of the new HEAD and the note says so.
//! - A merge, rebase, cherry-pick, revert, bisect or `git am` under way is
//!   an error; salvage still works then.
//! - Identity: the request's author (`YBS_GIT_AUTHOR`), else
//!   `user.name`/`user.email` from git config, else `ybs <ybs@localhost>`.
//!   Environment variables (`GIT_DIR`, `GIT_AUTHOR_NAME`, ...) are not read:
//!   the library is a function of its arguments and the repository.
//! - `--jobs`: [`Workspace::add_worktree`] gives a task its own linked
//!   worktree on branch `ybs/<run-id>/<task-id>` (see `worktree.rs`); the
//!   task's workspace is then opened inside it, so its commit advances
//!   that branch and never the user's HEAD.
//! - Paths in outcomes are relative to the repository root and
//!   `/`-separated, as `git show --stat` prints them.

mod beneath;
mod changes;
mod commit;
mod error;
mod ignore;
mod leftovers;
mod runlock;
mod salvage;
mod saved;
mod secrets;
mod status;
mod tree;
mod workspace;
mod worktree;

#[cfg(test)]
mod tests;

pub use beneath::{WorkEntry, WorkRoot};
pub use changes::{SkipReason, SkippedPath, TaskChanges};
pub use commit::{CommitOutcome, CommitRequest};
pub use error::GitError;
pub use ignore::IgnoreRules;
pub use leftovers::{Leftover, LeftoverKind, leftover_note, plan as clean_plan};
pub use runlock::lock_repository;
pub use salvage::SalvageOutcome;
pub use saved::{SavedWork, saved_ref};
pub use secrets::SecretFile;
pub use status::{Change, Content, DirtyPath, Head, Snapshot, describe_dirty};
pub use workspace::{Found, Workspace, no_repository, submodule_paths};
pub use worktree::{TaskWorktree, WORKTREES_DIR};
