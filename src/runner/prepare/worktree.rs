//! Stage 2 of task assembly: the repository around the workdir, ready
//! for the task's commit (the preflight), and the task's own worktree
//! under `--jobs`, `--repeat` and `--models`.

use std::path::{Path, PathBuf};

use crate::git::{GitError, TaskWorktree};
use crate::task::TaskSpec;

use super::super::RunContext;
use super::super::error::SetupError;
use super::super::workspace::TaskGit;

/// docs/git.md: a repository that cannot take the task's commit stops the run
/// before anything runs (exit 2): the user's uncommitted changes (unless
/// `--allow-dirty`), a locked index, a merge or rebase under way, a
/// repository ybs cannot use. Read-only.
/// `read`: the workspace and snapshot read already (`--allow-dirty`).
/// Returns them, for the task's start.
pub(super) fn git_preflight(
    run: &RunContext,
    found: &crate::git::Found,
    workdir: &Path,
    outputs: &[PathBuf],
    read: Option<TaskGit>,
) -> Result<TaskGit, SetupError> {
    let git = match read {
        Some(git) => git,
        None => TaskGit::found(found, workdir, outputs).map_err(|error| SetupError::Git {
            message: format!("git: {error}"),
            hint: "pass --no-commit to run without git",
        })?,
    };
    if !run.allow_dirty
        && !run.resuming
        && let Some(paths) = git.dirty()
    {
        return Err(SetupError::Git {
            message: format!("the work tree has uncommitted changes: {paths}"),
            hint: "commit or stash them first, or pass --allow-dirty (your changes then stay out of the task's commit), or --no-commit",
        });
    }
    git.ready_in(found).map_err(|error| match error {
        GitError::IndexLocked { lock } => SetupError::Git {
            message: format!(
                "the git index is locked: {} exists, so another git process is running or one crashed",
                lock.display()
            ),
            hint: "remove that file once no git process is running, or pass --no-commit",
        },
        GitError::InProgress { state } => SetupError::Git {
            message: format!("the repository is in the middle of a {state}"),
            hint: "finish or abort it first, or pass --no-commit",
        },
        error => SetupError::Git {
            message: format!("git: {error}"),
            hint: "pass --no-commit to run without git",
        },
    })?;
    Ok(git)
}

/// The task's own worktree when the workdir is in a repository.
pub(super) fn isolate(
    run: &RunContext,
    task: &TaskSpec,
    found: &crate::git::Found,
) -> Result<Option<TaskWorktree>, SetupError> {
    let git = |error: GitError| SetupError::Git {
        message: format!("git: {error}"),
        hint: "pass --no-commit to run without git",
    };
    let workspace = found.workspace().map_err(git)?;
    workspace
        .map(|workspace| workspace.add_worktree(&run.run_id, &task.id))
        .transpose()
        .map_err(git)
}

/// Why a task that does not commit runs in its workdir rather than a
/// worktree of its own (the console says it).
#[derive(Debug, thiserror::Error)]
pub(super) enum InPlace {
    #[error("--no-commit makes no git worktree")]
    NoCommit,
    #[error("--dry-run makes no git worktree")]
    DryRun,
    #[error("git: {0}")]
    Git(#[from] GitError),
    #[error("the workdir is not in a git repository")]
    NoRepository,
    #[error("the repository has no commit to start a worktree from")]
    NoBase,
    /// A worktree starts at HEAD: the user's uncommitted changes would
    /// not be in it, and the task would see another tree than the one asked.
    #[error("the work tree has uncommitted changes, which a worktree would not hold")]
    Dirty,
    #[error(transparent)]
    Setup(#[from] SetupError),
}

/// `--jobs N` (N > 1), a task that does not commit: its own worktree, or
/// why it runs in `workdir` instead.
pub(super) fn isolate_reader(
    run: &RunContext,
    task: &TaskSpec,
    found: &crate::git::Found,
    workdir: &Path,
) -> Result<TaskWorktree, InPlace> {
    reader_may_isolate(run, found, workdir)?;
    isolate(run, task, found)?.ok_or(InPlace::NoRepository)
}

/// Whether a task that does not commit can have a worktree of its own
/// in `workdir`'s repository, or why it runs in `workdir` instead.
pub(super) fn reader_may_isolate(
    run: &RunContext,
    found: &crate::git::Found,
    workdir: &Path,
) -> Result<(), InPlace> {
    if run.no_commit {
        return Err(InPlace::NoCommit);
    }
    if run.dry_run {
        return Err(InPlace::DryRun);
    }
    let outputs: Vec<PathBuf> = run.outputs.iter().map(|path| run.cwd.join(path)).collect();
    let git = TaskGit::found(found, workdir, &outputs)?;
    if git.parts().is_none() {
        return Err(InPlace::NoRepository);
    }
    if git.base_commit().is_none() {
        return Err(InPlace::NoBase);
    }
    if git.dirty().is_some() {
        return Err(InPlace::Dirty);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::prepare::fixture::Site;

    fn git(dir: &Path, args: &[&str]) {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {status:?}");
    }

    /// A repository with one commit, in the site's `dir`.
    fn repository(site: &Site, dir: &str) -> PathBuf {
        let repo = site.dir(dir);
        git(&repo, &["init", "-q"]);
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", "start"]);
        repo
    }

    #[test]
    fn a_task_that_does_not_commit_says_why_it_has_no_worktree() {
        let mut site = Site::new();
        let task = site.task("id: t\nprompt: p\n");
        let plain = site.dir("plain");
        let why = |run: &RunContext| {
            let found = crate::git::Found::open(&plain);
            isolate_reader(run, &task, &found, &plain)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(why(&site.run), "the workdir is not in a git repository");
        site.run.dry_run = true;
        assert_eq!(why(&site.run), "--dry-run makes no git worktree");
        site.run.no_commit = true;
        assert_eq!(why(&site.run), "--no-commit makes no git worktree");
    }

    #[test]
    fn a_reader_in_a_repository_gets_a_worktree_unless_the_tree_is_dirty() {
        let site = Site::new();
        let task = site.task("id: t\nprompt: p\n");
        let repo = repository(&site, "work");
        let found = crate::git::Found::open(&repo);
        let worktree = isolate_reader(&site.run, &task, &found, &repo).unwrap();
        assert!(worktree.workdir.join("a.txt").is_file());
        assert_ne!(worktree.workdir, repo);
        worktree.discard().unwrap();
        std::fs::write(repo.join("a.txt"), "changed\n").unwrap();
        let found = crate::git::Found::open(&repo);
        let why = isolate_reader(&site.run, &task, &found, &repo).unwrap_err();
        assert!(matches!(why, InPlace::Dirty), "{why}");
    }

    #[test]
    fn the_preflight_refuses_uncommitted_changes_unless_allowed() {
        let mut site = Site::new();
        let repo = repository(&site, "work");
        std::fs::write(repo.join("a.txt"), "changed\n").unwrap();
        let found = crate::git::Found::open(&repo);
        let Err(error) = git_preflight(&site.run, &found, &repo, &[], None) else {
            panic!("a dirty tree passed the preflight");
        };
        assert_eq!(
            error.to_string(),
            "the work tree has uncommitted changes: a.txt (modified)"
        );
        assert!(error.hint_text().unwrap().contains("--allow-dirty"));
        site.run.allow_dirty = true;
        assert!(git_preflight(&site.run, &found, &repo, &[], None).is_ok());
    }
}
