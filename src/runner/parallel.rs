//! `--jobs N` for tasks that do not commit (docs/git.md, "Tasks in
//! parallel"): each gets its own worktree like a committing task, so a
//! batch of review or triage tasks runs at once instead of one after
//! another in the user's checkout. What such a task changed is kept where
//! the user can get it: `OUT/<task>/changes.patch`, and its worktree too
//! when the task did not pass. A task that cannot have a worktree runs in
//! its workdir, and the console says which tasks wait for each other and
//! why.

use std::path::{Path, PathBuf};

use super::RunContext;
use super::error::SetupError;
use super::prepare::PreparedTask;
use super::workspace::TaskGit;
use crate::core::event::GitOutcome;
use crate::core::{Redactor, Status};
use crate::git::{GitError, TaskWorktree};
use crate::report::OutDir;
use crate::report::rates::{MODEL_MARK, RUN_MARK};
use crate::task::TaskSpec;

/// The file, in the task's output directory, that holds the changes of a
/// task that ran in its own worktree without committing.
pub const CHANGES_PATCH: &str = "changes.patch";

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
    super::prepare::isolate(run, task, found)?.ok_or(InPlace::NoRepository)
}

/// One line per group of tasks that cannot run at once because they
/// share a workdir without a worktree of their own: which tasks, where,
/// and why (for the console, before the run).
pub fn serial_notes(prepared: &[PreparedTask]) -> Vec<String> {
    let mut groups: Vec<Vec<&PreparedTask>> = Vec::new();
    for task in prepared.iter().filter(|task| task.in_place.is_some()) {
        match groups
            .iter_mut()
            .find(|group| group.iter().any(|other| super::shares_workdir(task, other)))
        {
            Some(group) => group.push(task),
            None => groups.push(vec![task]),
        }
    }
    groups
        .into_iter()
        .filter(|group| group.len() > 1)
        .map(|group| {
            let ids: Vec<&str> = group.iter().map(|task| task.task.id.as_str()).collect();
            let mut why: Vec<&str> = Vec::new();
            for task in &group {
                if let Some(reason) = task.in_place.as_deref()
                    && !why.contains(&reason)
                {
                    why.push(reason);
                }
            }
            // Copies of one task (`--repeat`, `--models`) are not isolated
            // from each other then: say it.
            let copies = ids.iter().any(|id| id.contains([MODEL_MARK, RUN_MARK]));
            format!(
                "ybs: tasks {} share workdir {} and run one after another, not at once: {}{}",
                ids.join(", "),
                group[0].tool_ctx.workdir.display(),
                why.join("; "),
                if copies {
                    "; each sees what the ones before it changed there"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// The end of a task that ran in its own worktree and does not commit:
/// its changes go to `OUT/<task>/changes.patch` (masked); the worktree
/// goes with its branch when the task passed or changed nothing, and
/// stays when it did not pass. Returns the git note, and a line for the
/// console when the worktree stays.
pub(super) fn settle_reader(
    worktree: &TaskWorktree,
    outcome: &GitOutcome,
    out: &OutDir,
    task_id: &str,
    status: Status,
    redactor: &Redactor,
) -> (String, Option<String>) {
    let note = &outcome.note;
    let where_ = format!(
        "worktree {} (branch {})",
        worktree.root().display(),
        worktree.branch
    );
    let patch = match worktree.patch() {
        Ok(None) => None,
        Ok(Some(bytes)) => {
            let text = String::from_utf8_lossy(&bytes);
            let masked = redactor.redact(&text);
            let caveat = if masked == text {
                ""
            } else {
                " (secrets masked in it: those lines do not apply)"
            };
            Some(
                out.write_atomic(Some(task_id), CHANGES_PATCH, masked.as_bytes())
                    .map(|_| {
                        format!(
                            "{}{caveat}",
                            out.path().join(task_id).join(CHANGES_PATCH).display()
                        )
                    })
                    .map_err(|error| error.to_string()),
            )
        }
        Err(error) => Some(Err(error.to_string())),
    };
    let remove = |done: String| match worktree.discard() {
        Ok(()) => (
            format!("{done}; worktree and branch {} removed", worktree.branch),
            None,
        ),
        Err(error) => {
            let text = format!("{done}; {where_} could not be removed: {error}");
            (text.clone(), Some(text))
        }
    };
    match patch {
        // Changed files, but none a patch holds (git ignores them): only
        // the worktree keeps them.
        None if !outcome.files.is_empty() => {
            let kept =
                format!("its changes are to files git ignores, so only {where_} holds them, kept");
            (format!("{note}; {kept}"), Some(kept))
        }
        None => remove(format!("{note}; nothing to keep")),
        Some(Ok(patch)) if status == Status::Passed => {
            remove(format!("{note}; its changes are in {patch}"))
        }
        Some(Ok(patch)) => {
            let kept = format!("its changes are in {patch} and in {where_}, kept");
            (format!("{note}; {kept}"), Some(kept))
        }
        Some(Err(error)) => {
            let kept = format!(
                "its changes could not be written as a patch ({error}); they stay in {where_}"
            );
            (format!("{note}; {kept}"), Some(kept))
        }
    }
}
