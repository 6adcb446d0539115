//! The task's git side (docs/git.md, docs/security.md S12): snapshot at start, then
//! commit after passing checks, salvage after a limit stop, or report the
//! changes left in place after a failure. Never loses work.

use std::path::{Path, PathBuf};

use super::state::State;
use crate::core::Reason;
use crate::core::event::GitOutcome;
use crate::git::{self, CommitRequest, GitError, SavedWork, Snapshot, Workspace};

/// A task's repository, if its workdir is in one.
pub struct TaskGit {
    workdir: PathBuf,
    repo: Option<(Workspace, Snapshot)>,
}

/// What the task's end calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Checks passed: commit the task's files.
    Commit,
    /// Stopped by a limit: keep the changes, save them on a salvage ref.
    Salvage(Reason),
    /// Failed otherwise: leave the changes in place and say where.
    LeaveInPlace,
    /// Commits are off (the flag or setting named): no git writes at all;
    /// say what stays in place.
    Disabled(&'static str),
}

/// Who and what a commit names.
pub struct CommitInfo<'a> {
    pub task_id: &'a str,
    pub run_id: &'a str,
    pub model: &'a str,
    pub message: &'a str,
    /// `git.commit_message_prefix`.
    pub prefix: &'a str,
    pub author: Option<&'a str>,
    pub branch: Option<&'a str>,
    pub redactor: &'a crate::core::Redactor,
    /// `git.allow_secret_paths`.
    pub allow_secret_paths: &'a [String],
}

impl TaskGit {
    /// Opens the repository around `workdir` and snapshots it. `outputs`
    /// are ybs's own files (output directory, JUnit file, cassette being
    /// recorded): never dirty, never committed.
    pub fn open(workdir: &Path, outputs: &[PathBuf]) -> Result<Self, GitError> {
        let repo = match Workspace::open(workdir)? {
            Some(workspace) => {
                let workspace = workspace.excluding(outputs);
                let snapshot = workspace.snapshot()?;
                Some((workspace, snapshot))
            }
            None => None,
        };
        Ok(Self {
            workdir: workdir.to_owned(),
            repo,
        })
    }

    /// [`TaskGit::open`] from the repository the task's set-up opened.
    pub fn found(
        found: &git::Found,
        workdir: &Path,
        outputs: &[PathBuf],
    ) -> Result<Self, GitError> {
        Ok(Self {
            workdir: workdir.to_owned(),
            repo: found.snapshot(outputs)?,
        })
    }

    /// Like [`TaskGit::ready_to_commit`], with the repository the task's
    /// set-up opened.
    pub fn ready_in(&self, found: &git::Found) -> Result<(), GitError> {
        match &self.repo {
            Some((workspace, _)) => found.ready_to_commit(workspace),
            None => Ok(()),
        }
    }

    /// `ybs resume`: the repository around `workdir` with the snapshot
    /// the paused task took at its start, so its commit takes what the
    /// task changed before and after the pause and never the user's
    /// paths of the start.
    pub fn resumed(
        workdir: &Path,
        outputs: &[PathBuf],
        snapshot: Snapshot,
    ) -> Result<Self, GitError> {
        let repo =
            Workspace::open(workdir)?.map(|workspace| (workspace.excluding(outputs), snapshot));
        Ok(Self {
            workdir: workdir.to_owned(),
            repo,
        })
    }

    /// The repository and the snapshot of the start, if any.
    pub fn parts(&self) -> Option<(&Workspace, &Snapshot)> {
        self.repo
            .as_ref()
            .map(|(workspace, snapshot)| (workspace, snapshot))
    }

    pub fn base_commit(&self) -> Option<String> {
        self.repo
            .as_ref()
            .and_then(|(_, snapshot)| snapshot.base.clone())
    }

    /// Whether a commit could be made now (no `index.lock`, no merge or
    /// rebase under way). Always fine without a repository.
    pub fn ready_to_commit(&self) -> Result<(), GitError> {
        match &self.repo {
            Some((workspace, _)) => workspace.ready_to_commit(),
            None => Ok(()),
        }
    }

    /// The dirty paths at start, described, when the tree is not clean.
    pub fn dirty(&self) -> Option<String> {
        let (_, snapshot) = self.repo.as_ref()?;
        (!snapshot.is_clean()).then(|| git::describe_dirty(&snapshot.dirty))
    }

    /// `--allow-dirty`: saves the user's uncommitted paths on
    /// `refs/ybs/saved/<run-id>` (kept if an earlier task of the run saved
    /// this repository already). `Ok(None)` when the tree is clean or there
    /// is no repository.
    pub fn save_users_work(
        &self,
        run_id: &str,
        author: Option<&str>,
    ) -> Result<Option<SavedWork>, GitError> {
        match &self.repo {
            Some((workspace, snapshot)) => workspace.save_dirty(snapshot, run_id, author),
            None => Ok(None),
        }
    }

    /// The user's work saved for `run_id` in this repository, if any.
    pub fn saved(&self, run_id: &str) -> Option<SavedWork> {
        let (workspace, _) = self.repo.as_ref()?;
        workspace.saved(run_id).ok().flatten()
    }

    /// The absolute paths of `saved`'s files in this work tree.
    pub fn paths_of(&self, saved: &SavedWork) -> Vec<PathBuf> {
        self.repo.as_ref().map_or_else(Vec::new, |(workspace, _)| {
            saved
                .files
                .iter()
                .map(|path| workspace.root().join(path))
                .collect()
        })
    }

    /// `OUT/<task>/commit.patch`: the task's commit `sha` (message,
    /// trailers, diff), masked, for the HTML report. Returns why it could
    /// not be written.
    pub fn write_commit_patch(
        &self,
        sha: &str,
        out: &crate::report::OutDir,
        task_id: &str,
        redactor: &crate::core::Redactor,
    ) -> Result<(), String> {
        let Some((workspace, _)) = &self.repo else {
            return Ok(());
        };
        let patch = workspace
            .commit_patch(sha)
            .map_err(|error| error.to_string())?;
        let masked = redactor.redact(&String::from_utf8_lossy(&patch));
        out.write_atomic(
            Some(task_id),
            crate::report::COMMIT_PATCH_FILE,
            masked.as_bytes(),
        )
        .map(drop)
        .map_err(|error| error.to_string())
    }

    /// True if and only if the task's workdir is in a git repository.
    pub fn in_repository(&self) -> bool {
        self.repo.is_some()
    }

    /// Does what `finish` calls for with the task's changed files.
    pub fn finish(
        &self,
        finish: Finish,
        changed: &[PathBuf],
        info: &CommitInfo<'_>,
    ) -> Result<GitOutcome, GitError> {
        let Some((workspace, snapshot)) = &self.repo else {
            return Ok(git::no_repository(&self.workdir));
        };
        let request = CommitRequest {
            snapshot,
            paths: changed,
            task_id: info.task_id,
            run_id: info.run_id,
            model: info.model,
            message: info.message,
            prefix: info.prefix,
            author: info.author,
            branch: info.branch,
            redactor: Some(info.redactor),
            allow_secret_paths: info.allow_secret_paths,
        };
        match finish {
            Finish::Commit => Ok(workspace.commit_task(&request)?.report()),
            Finish::Salvage(reason) => {
                let mut outcome = match workspace.salvage(&request, reason.as_str())? {
                    Some(salvage) => salvage.report(),
                    None => GitOutcome {
                        note: "the task changed no file: nothing to salvage".to_owned(),
                        ..GitOutcome::default()
                    },
                };
                let left = workspace
                    .task_changes(changed, snapshot)?
                    .left_in_place(&self.workdir);
                if !left.files.is_empty() {
                    outcome.note = format!("{}; {}", outcome.note, left.note);
                    outcome.files = left.files;
                }
                Ok(outcome)
            }
            Finish::LeaveInPlace => Ok(workspace
                .task_changes(changed, snapshot)?
                .left_in_place(&self.workdir)),
            Finish::Disabled(why) => {
                let mut outcome = workspace
                    .task_changes(changed, snapshot)?
                    .left_in_place(&self.workdir);
                outcome.note = format!("not committed ({why}): {}", outcome.note);
                Ok(outcome)
            }
        }
    }
}

/// `--allow-dirty`, before any task runs: saves the user's uncommitted
/// work in the repository around `workdir` (docs/security.md S12). A workdir in no
/// usable repository has nothing to save; a save that fails stops the run.
pub fn save_users_work(
    git: Result<&TaskGit, &GitError>,
    run_id: &str,
    author: Option<&str>,
) -> Result<Option<SavedWork>, (String, &'static str)> {
    let Ok(git) = git else {
        return Ok(None);
    };
    git.save_users_work(run_id, author).map_err(|error| {
        (
            format!("cannot save your uncommitted changes before the run: {error}"),
            "commit or stash them first, or drop --allow-dirty",
        )
    })
}

/// Where a task that paused in its own `--jobs` worktree goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InWorktree {
    /// The run that made the worktree (`ybs/<run-id>/<task-id>`), which
    /// may be an earlier one than the run that paused last.
    pub run_id: String,
    /// The commit the task started from: a worktree made again (a fresh
    /// clone) starts there.
    pub base: String,
}

impl InWorktree {
    /// From a state that names a worktree: its branch must be
    /// `ybs/<run-id>/<task-id>` and its path `.ybs-worktrees/<run-id>/<task-id>`.
    pub fn of(state: &State) -> Result<Option<Self>, super::RunError> {
        let Some(worktree) = &state.worktree else {
            return Ok(None);
        };
        let task = &state.task.id;
        let run_id = worktree
            .branch
            .strip_prefix("ybs/")
            .and_then(|rest| rest.strip_suffix(&format!("/{task}")))
            .filter(|run| {
                !run.is_empty()
                    && run
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            });
        let bad = || {
            super::RunError::usage(
                format!(
                    "task `{task}`: the state names an invalid worktree `{}` on `{}`",
                    worktree.path, worktree.branch
                ),
                Some("resume with the ybs version that paused the task"),
            )
        };
        let run_id = run_id.ok_or_else(bad)?;
        if worktree.path != format!("{}/{run_id}/{task}", git::WORKTREES_DIR) {
            return Err(bad());
        }
        let base = state.base_commit.clone().ok_or_else(bad)?;
        Ok(Some(Self {
            run_id: run_id.to_owned(),
            base,
        }))
    }
}

/// The worktree task `task` paused in, reopened, or made again at its
/// base commit when it is gone (a fresh clone): the repository is the one
/// around `workdir`, the task's workdir in the checkout.
pub fn reopen_worktree(
    workdir: &Path,
    task: &str,
    place: &InWorktree,
) -> Result<git::TaskWorktree, super::error::SetupError> {
    let failed = |message: String| super::error::SetupError::Git {
        message,
        hint: "resume in the checkout the run paused in, or in a clone that holds the commit it started from",
    };
    let workspace = Workspace::open(workdir)
        .map_err(|error| failed(format!("git: {error}")))?
        .ok_or_else(|| {
            failed(format!(
                "task `{task}` paused in a worktree of a git repository; {} is not in one",
                workdir.display()
            ))
        })?;
    workspace
        .resume_worktree(&place.run_id, task, &place.base)
        .map_err(|error| failed(format!("task `{task}`: its worktree: {error}")))
}
