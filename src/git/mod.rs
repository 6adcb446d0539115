//! L2 git: libgit2 only. Dirty check, commit of the task's files with
//! trailers, salvage refs (SPEC §8, SECURITY S12).
//!
//! How the runner uses it, per task:
//!
//! 1. [`Workspace::open`] on the task's workdir: `None` means no
//!    repository (no commit; the summary says so).
//! 2. [`Workspace::snapshot`] before the agent starts. A snapshot that is
//!    not [`Snapshot::is_clean`] stops the task (reason names the paths,
//!    see [`describe_dirty`]) unless `--allow-dirty`; with it, those paths
//!    are the user's and are never committed.
//! 3. After the checks pass: [`Workspace::commit_task`]. After a failed
//!    task: nothing is committed; [`Workspace::task_changes`] lists what
//!    is left in the work tree. After a limit stop:
//!    [`Workspace::salvage`].
//!
//! Guarantees (SECURITY S12): the user's uncommitted changes are never
//! reset, stashed or committed; the index is written only for the paths a
//! commit contains; ignored files are never committed; nothing is pushed,
//! no history is rewritten, and no repository-configured program runs
//! (libgit2 has no hooks, no fsmonitor, runs no filter drivers and never
//! signs). Paths in outcomes are relative to the repository root and
//! `/`-separated, as `git show --stat` prints them.

mod changes;
mod commit;
mod error;
mod salvage;
mod status;
mod tree;
mod workspace;

#[cfg(test)]
mod tests;

pub use changes::{SkipReason, SkippedPath, TaskChanges};
pub use commit::{CommitOutcome, CommitRequest};
pub use error::GitError;
pub use salvage::SalvageOutcome;
pub use status::{Change, Content, DirtyPath, Head, Snapshot, describe_dirty};
pub use workspace::Workspace;
