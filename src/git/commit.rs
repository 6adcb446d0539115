//! Committing a task's files (docs/git.md, docs/security.md S12).
//!
//! Order of work, so that a failure never leaves a half-made commit:
//! 1. checks that write nothing: no merge/rebase under way, no
//!    `index.lock`, a valid identity, a branch ybs may move;
//! 2. objects only: blobs of the task's files, a tree built from HEAD's
//!    tree plus those files in a fresh in-memory index (so the user's
//!    staged changes never get in), the commit object;
//! 3. the repository index: only the committed paths are updated, so the
//!    user's other staged and unstaged changes stay exactly as they were;
//! 4. refs, compare-and-swap against the HEAD read in step 1; on failure
//!    the index entries of step 3 are put back.
//!
//! Until step 4 succeeds no ref points at the new objects. libgit2 runs no
//! hooks (it has no hook support at all), has no `core.fsmonitor` support,
//! never signs commits (`commit.gpgSign` is ignored) and runs no filter
//! programs (see `tree.rs`).

use std::path::{Path, PathBuf};

use git2::{Commit, ErrorCode, Oid, Reference, Repository, RepositoryState};
use serde::{Deserialize, Serialize};

use super::changes::{SkippedPath, TaskChanges};
use super::secrets;
use super::status::{Head, HeadInfo, read_head, short};
use super::tree::{self, Identity, commit_message};
use super::{GitError, Snapshot, Workspace};
use crate::core::Redactor;
use crate::core::event::GitOutcome;

mod note;
pub(crate) use note::push_skips;
use note::{committed_note, nothing_to_commit};

mod index;
use index::{restore_index, update_index, write_index};

/// What to commit, and how to describe it. The same request serves
/// [`Workspace::salvage`].
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// The state at task start.
    pub snapshot: &'a Snapshot,
    /// The files the tools reported creating, modifying or deleting,
    /// relative to the workdir (or absolute).
    pub paths: &'a [PathBuf],
    pub task_id: &'a str,
    pub run_id: &'a str,
    pub model: &'a str,
    /// The task's `commit.message`, or the model's summary. Its first line
    /// becomes the subject after `<prefix> <task-id>: `; the rest the body.
    pub message: &'a str,
    /// `git.commit_message_prefix`: `[ybs]` unless configured.
    pub prefix: &'a str,
    /// `YBS_GIT_AUTHOR` (`Name <email>`), if set.
    pub author: Option<&'a str>,
    /// The task's `commit.branch`: commit on this branch instead of HEAD's.
    /// Created at HEAD if missing; HEAD is switched to it (the work tree
    /// is not touched). An existing branch that is not at HEAD is refused.
    pub branch: Option<&'a str>,
    /// Masks secrets in the message.
    pub redactor: Option<&'a Redactor>,
    /// `git.allow_secret_paths`: globs of paths committed even when they
    /// look like they hold a credential. Every other such file stops the
    /// commit ([`GitError::SecretInCommit`]) and is left out of a salvage.
    pub allow_secret_paths: &'a [String],
}

impl CommitRequest<'_> {
    /// The trailers every ybs commit carries.
    pub(crate) fn trailers(&self) -> [(&str, &str); 3] {
        [
            ("Ybs-Task", self.task_id),
            ("Ybs-Run", self.run_id),
            ("Ybs-Model", self.model),
        ]
    }
}

/// What `commit_task` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitOutcome {
    /// The new commit; `None` when there was nothing to commit.
    pub sha: Option<String>,
    /// The branch that points at the commit: HEAD's branch, the requested
    /// branch, or `ybs/<run-id>` on a detached HEAD.
    pub branch: Option<String>,
    /// True if and only if HEAD is detached (at the new commit).
    pub detached: bool,
    /// Committed paths, repository-relative, `/`-separated, sorted.
    pub files: Vec<String>,
    /// The subset of `files` no tool reported.
    pub unreported: Vec<String>,
    /// Paths the user had uncommitted changes in, which the task touched:
    /// left uncommitted in the work tree.
    pub skipped_user_dirty: Vec<String>,
    /// Other paths left out, with why.
    pub skipped: Vec<SkippedPath>,
    /// `Name <email>` of author and committer.
    pub identity: String,
    /// True if and only if no identity was configured and
    /// `ybs <ybs@localhost>` was used.
    pub identity_fallback: bool,
    /// A one-line account for the summary, e.g.
    /// `committed 2 files as 1a2b3c4 on main`.
    pub note: String,
}

impl CommitOutcome {
    /// The record the transcript, JUnit and summary carry.
    pub fn report(&self) -> GitOutcome {
        GitOutcome {
            commit: self.sha.clone(),
            branch: self.branch.clone(),
            salvage_ref: None,
            files: self.files.clone(),
            note: self.note.clone(),
        }
    }
}

/// Where the commit goes.
enum Target {
    /// HEAD's branch advances.
    Branch { refname: String, old: Oid },
    /// HEAD's unborn branch is born.
    Unborn { refname: String },
    /// The requested branch (created, or existing at HEAD) gets the commit
    /// and HEAD is switched to it.
    Switch { refname: String, old: Option<Oid> },
    /// HEAD advances detached; `ybs/<run-id>` is created or advanced.
    Detached {
        old: Oid,
        refname: String,
        branch_old: Option<Oid>,
    },
}

impl Workspace {
    /// The commit `sha` as a reader wants it: its id, its message (with
    /// its trailers), then its changes against its first parent as a
    /// patch (`git show`'s content).
    pub fn commit_patch(&self, sha: &str) -> Result<Vec<u8>, GitError> {
        let repo = self.repo()?;
        let commit = Oid::from_str(sha)
            .and_then(|oid| repo.find_commit(oid))
            .map_err(GitError::git(format!("cannot find commit {sha}")))?;
        let tree = commit
            .tree()
            .map_err(GitError::git("cannot read the commit's tree"))?;
        let parent = commit.parent(0).ok().and_then(|parent| parent.tree().ok());
        let mut options = git2::DiffOptions::new();
        options.show_binary(true);
        let diff = repo
            .diff_tree_to_tree(parent.as_ref(), Some(&tree), Some(&mut options))
            .map_err(GitError::git("cannot diff the commit"))?;
        let mut patch = format!(
            "commit {sha}\n\n{}\n",
            String::from_utf8_lossy(commit.message_bytes()).trim_end()
        )
        .into_bytes();
        diff.print(git2::DiffFormat::Patch, |_, _, line| {
            if let origin @ ('+' | '-' | ' ') = line.origin() {
                patch.push(u8::try_from(origin).unwrap_or(b' '));
            }
            patch.extend_from_slice(line.content());
            true
        })
        .map_err(GitError::git("cannot write the commit as a patch"))?;
        Ok(patch)
    }

    /// Commits exactly the task's files (see [`Workspace::task_changes`]
    /// for which paths those are) on HEAD. Never an empty commit, never a
    /// path the user had dirty, never an ignored file; the user's other
    /// changes stay as they were in the work tree and the index.
    pub fn commit_task(&self, request: &CommitRequest<'_>) -> Result<CommitOutcome, GitError> {
        let repo = self.repo()?;
        // 1. Checks.
        self.ready(&repo)?;
        let lock = self.index_lock();
        let identity = tree::identity(&repo, request.author)?;
        let head = read_head(&repo)?;
        let target = plan(&repo, &head, request)?;
        let changes = self.classify(&repo, request.paths, request.snapshot)?;
        let mut outcome = CommitOutcome::new(&changes, &identity);
        if changes.is_empty() {
            outcome.note = nothing_to_commit(&changes, "the task changed no files");
            return Ok(outcome);
        }
        // 2. Objects: each file read once, scanned, and only then stored.
        let StagedChanges {
            head_commit,
            head_tree,
            read,
        } = self.stage_changes(&repo, &head, &changes.files, request)?;
        if !read.secrets.is_empty() {
            return Err(GitError::SecretInCommit {
                found: read.secrets,
            });
        }
        let staged = read.staged;
        let tree_oid = tree::write_tree(&repo, head_tree.as_ref(), &staged)?;
        outcome.files = tree::changed_paths(head_tree.as_ref(), &staged);
        outcome
            .unreported
            .retain(|path| outcome.files.contains(path));
        if head_tree.as_ref().map(git2::Tree::id) == Some(tree_oid) {
            outcome.files.clear();
            outcome.unreported.clear();
            outcome.note = nothing_to_commit(
                &changes,
                "the changed files match HEAD once normalised by git",
            );
            return Ok(outcome);
        }
        let new_tree = repo
            .find_tree(tree_oid)
            .map_err(GitError::git("cannot read the new tree"))?;
        let (subject, message) = commit_message(
            request.prefix,
            request.task_id,
            request.message,
            &request.trailers(),
            request.redactor,
        );
        let signature = identity.signature()?;
        let parents: Vec<&Commit<'_>> = head_commit.iter().collect();
        let oid = repo
            .commit(None, &signature, &signature, &message, &new_tree, &parents)
            .map_err(GitError::git("cannot create the commit"))?;

        // 3. Index.
        let mut index = repo
            .index()
            .map_err(GitError::git("cannot read the index"))?;
        let previous: Vec<_> = staged
            .iter()
            .map(|item| (item.path.clone(), index.get_path(Path::new(&item.path), 0)))
            .collect();
        update_index(&mut index, &staged)?;
        write_index(&mut index, &lock)?;

        // 4. Refs.
        let initial = if parents.is_empty() { " (initial)" } else { "" };
        let reflog = format!("commit{initial}: {subject}");
        let moved = match move_refs(&repo, &target, oid, &reflog) {
            Ok(moved) => moved,
            Err(error) => {
                restore_index(&mut index, &previous, &lock);
                return Err(error);
            }
        };

        outcome.sha = Some(oid.to_string());
        outcome.branch = moved.branch.clone();
        outcome.detached = matches!(target, Target::Detached { .. });
        outcome.note = committed_note(&outcome, &changes, &head, request.snapshot, &target, &moved);
        Ok(outcome)
    }
}

impl Workspace {
    /// The checks [`Workspace::commit_task`] makes first that need nothing
    /// from the task: no merge, rebase, ... under way and no `index.lock`.
    /// Read-only. The runner calls it before any task runs, so a
    /// repository that cannot take a commit is reported before the model
    /// spends anything.
    pub fn ready_to_commit(&self) -> Result<(), GitError> {
        self.ready(&self.repo()?)
    }

    pub(crate) fn ready(&self, repo: &Repository) -> Result<(), GitError> {
        check_state(repo)?;
        let lock = self.index_lock();
        if lock.symlink_metadata().is_ok() {
            return Err(GitError::IndexLocked { lock });
        }
        Ok(())
    }
}

impl CommitOutcome {
    fn new(changes: &TaskChanges, identity: &Identity) -> Self {
        Self {
            sha: None,
            branch: None,
            detached: false,
            files: changes.files.clone(),
            unreported: changes.unreported.clone(),
            skipped_user_dirty: changes.skipped_user_dirty.clone(),
            skipped: changes.skipped.clone(),
            identity: identity.display(),
            identity_fallback: identity.fallback,
            note: String::new(),
        }
    }
}

fn check_state(repo: &Repository) -> Result<(), GitError> {
    let state = match repo.state() {
        RepositoryState::Clean => return Ok(()),
        RepositoryState::Merge => "merge",
        RepositoryState::Revert | RepositoryState::RevertSequence => "revert",
        RepositoryState::CherryPick | RepositoryState::CherryPickSequence => "cherry-pick",
        RepositoryState::Bisect => "bisect",
        RepositoryState::Rebase
        | RepositoryState::RebaseInteractive
        | RepositoryState::RebaseMerge => "rebase",
        RepositoryState::ApplyMailbox | RepositoryState::ApplyMailboxOrRebase => "`git am`",
    };
    Err(GitError::InProgress { state })
}

/// Decides where the commit goes, and refuses (before anything is
/// written) a branch ybs may not move.
fn plan(
    repo: &Repository,
    head: &HeadInfo,
    request: &CommitRequest<'_>,
) -> Result<Target, GitError> {
    let head_text = || {
        head.oid.map_or_else(
            || "an unborn branch".to_owned(),
            |oid| short(&oid.to_string()).to_owned(),
        )
    };
    if let Some(branch) = request
        .branch
        .map(str::trim)
        .filter(|branch| !branch.is_empty())
    {
        let refname = branch_refname(branch)?;
        if head.refname.as_deref() != Some(refname.as_str()) {
            let old = existing(repo, &refname)?;
            if let Some(at) = old
                && Some(at) != head.oid
            {
                return Err(GitError::BranchConflict {
                    branch: branch.to_owned(),
                    at: short(&at.to_string()).to_owned(),
                    head: head_text(),
                });
            }
            return Ok(Target::Switch { refname, old });
        }
    }
    match (&head.head, head.oid, &head.refname) {
        (Head::Branch { .. }, Some(old), Some(refname)) => Ok(Target::Branch {
            refname: refname.clone(),
            old,
        }),
        (Head::Unborn { .. }, _, Some(refname)) => Ok(Target::Unborn {
            refname: refname.clone(),
        }),
        (Head::Detached { .. }, Some(old), _) => {
            let branch = format!("ybs/{}", request.run_id);
            let refname = branch_refname(&branch)?;
            let branch_old = existing(repo, &refname)?;
            if let Some(at) = branch_old
                && at != old
            {
                return Err(GitError::BranchConflict {
                    branch,
                    at: short(&at.to_string()).to_owned(),
                    head: head_text(),
                });
            }
            Ok(Target::Detached {
                old,
                refname,
                branch_old,
            })
        }
        _ => Err(GitError::Git {
            context: "cannot read HEAD".into(),
            cause: git2::Error::from_str("inconsistent HEAD"),
        }),
    }
}

/// `refs/heads/<branch>` for a task's `commit.branch`: a valid ref name
/// that `git branch` would also accept (not `HEAD`, `@` or `-…`, which
/// a later `git push origin <branch>` would take as an option), and not
/// one that reads as another ref (`refs/…`, `FETCH_HEAD`, `ORIG_HEAD`…).
fn branch_refname(branch: &str) -> Result<String, GitError> {
    let refname = format!("refs/heads/{branch}");
    let ambiguous = branch == "@"
        || branch.starts_with("refs/")
        || (branch.ends_with("HEAD")
            && branch.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'));
    if Reference::is_valid_name(&refname)
        && git2::Branch::name_is_valid(branch).unwrap_or(false)
        && !ambiguous
    {
        Ok(refname)
    } else {
        Err(GitError::InvalidBranch {
            name: branch.to_owned(),
        })
    }
}

/// The commit a ref points at, `None` if it does not exist.
fn existing(repo: &Repository, refname: &str) -> Result<Option<Oid>, GitError> {
    match repo.refname_to_id(refname) {
        Ok(oid) => Ok(Some(oid)),
        Err(error) if error.code() == ErrorCode::NotFound => Ok(None),
        Err(error) => Err(GitError::git(format!("cannot read {refname}"))(error)),
    }
}

/// What moving the refs achieved.
struct Moved {
    branch: Option<String>,
    /// Set when the branch beside a detached HEAD could not be written
    /// (the commit and HEAD are in place).
    warning: Option<String>,
    created: bool,
}

fn move_refs(
    repo: &Repository,
    target: &Target,
    new: Oid,
    reflog: &str,
) -> Result<Moved, GitError> {
    let short_name = |refname: &str| {
        refname
            .strip_prefix("refs/heads/")
            .unwrap_or(refname)
            .to_owned()
    };
    let moved = |refname: &str, created: bool| Moved {
        branch: Some(short_name(refname)),
        warning: None,
        created,
    };
    let failed = |what: &str| {
        GitError::git(format!(
            "cannot {what} (moved or locked by another git process); nothing was committed and the index was put back"
        ))
    };
    match target {
        Target::Branch { refname, old } => {
            repo.reference_matching(refname, new, true, *old, reflog)
                .map_err(failed(&format!("advance {refname}")))?;
            Ok(moved(refname, false))
        }
        Target::Unborn { refname } => {
            repo.reference(refname, new, false, reflog)
                .map_err(failed(&format!("create {refname}")))?;
            Ok(moved(refname, true))
        }
        Target::Switch { refname, old } => {
            match old {
                Some(old) => repo.reference_matching(refname, new, true, *old, reflog),
                None => repo.reference(refname, new, false, reflog),
            }
            .map_err(failed(&format!("write {refname}")))?;
            repo.set_head(refname)
                .map_err(failed(&format!("switch HEAD to {refname}")))?;
            Ok(moved(refname, old.is_none()))
        }
        Target::Detached {
            old,
            refname,
            branch_old,
        } => {
            repo.reference_matching("HEAD", new, true, *old, reflog)
                .map_err(failed("advance the detached HEAD"))?;
            let branch = match branch_old {
                Some(branch_old) => {
                    repo.reference_matching(refname, new, true, *branch_old, reflog)
                }
                None => repo.reference(refname, new, false, reflog),
            };
            Ok(match branch {
                Ok(_) => moved(refname, branch_old.is_none()),
                Err(error) => Moved {
                    branch: None,
                    warning: Some(format!(
                        "could not write branch {}: {}",
                        short_name(refname),
                        error.message()
                    )),
                    created: false,
                },
            })
        }
    }
}

/// HEAD's commit and tree; both `None` on an unborn branch.
/// What a commit and a salvage start from: HEAD's commit and tree, and
/// the task's files as read from the work tree.
pub(super) struct StagedChanges<'r> {
    pub head_commit: Option<Commit<'r>>,
    pub head_tree: Option<git2::Tree<'r>>,
    /// The files' new states; a file holding a credential (its path not
    /// in `git.allow_secret_paths`) is listed in `secrets`, never stored.
    pub read: tree::StagedFiles,
}

impl Workspace {
    /// Reads HEAD and stages `files` from the work tree as objects (each
    /// file read once, scanned for a credential, and only then stored);
    /// neither the index nor any ref is touched.
    pub(super) fn stage_changes<'r>(
        &self,
        repo: &'r Repository,
        head: &HeadInfo,
        files: &[String],
        request: &CommitRequest<'_>,
    ) -> Result<StagedChanges<'r>, GitError> {
        let allow = secrets::allowed(request.allow_secret_paths);
        let (head_commit, head_tree) = head_commit_and_tree(repo, head)?;
        let read =
            tree::stage_from_workdir(repo, self.root(), files, head_tree.as_ref(), Some(&allow))?;
        Ok(StagedChanges {
            head_commit,
            head_tree,
            read,
        })
    }
}

pub(super) fn head_commit_and_tree<'r>(
    repo: &'r git2::Repository,
    head: &HeadInfo,
) -> Result<(Option<Commit<'r>>, Option<git2::Tree<'r>>), GitError> {
    let commit = head
        .oid
        .map(|oid| repo.find_commit(oid))
        .transpose()
        .map_err(GitError::git("cannot read the HEAD commit"))?;
    let tree = commit
        .as_ref()
        .map(Commit::tree)
        .transpose()
        .map_err(GitError::git("cannot read the HEAD tree"))?;
    Ok((commit, tree))
}
