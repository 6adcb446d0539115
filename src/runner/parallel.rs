//! `--jobs N` for tasks that do not commit (docs/git.md, "Tasks in
//! parallel"): each gets its own worktree like a committing task, so a
//! batch of review or triage tasks runs at once instead of one after
//! another in the user's checkout. What such a task changed is kept where
//! the user can get it: `OUT/<task>/changes.patch`, and its worktree too
//! when the task did not pass. A task that cannot have a worktree runs in
//! its workdir, and the console says which tasks wait for each other and
//! why.

use super::prepare::PreparedTask;
use crate::core::event::GitOutcome;
use crate::core::{Redactor, Status};
use crate::git::TaskWorktree;
use crate::report::OutDir;
use crate::report::rates::{MODEL_MARK, RUN_MARK};

/// The file, in the task's output directory, that holds the changes of a
/// task that ran in its own worktree without committing.
pub const CHANGES_PATCH: &str = "changes.patch";

/// One line per group of tasks that cannot run at once because they
/// share a workdir without a worktree of their own: which tasks, where,
/// and why (for the console, before the run).
pub fn serial_notes(prepared: &[PreparedTask]) -> Vec<String> {
    let mut groups: Vec<Vec<&PreparedTask>> = Vec::new();
    for task in prepared.iter().filter(|task| task.in_place.is_some()) {
        match groups
            .iter_mut()
            .find(|group| group.iter().any(|other| shares_workdir(task, other)))
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

/// Whether two tasks would work in one directory: neither has its own
/// worktree and one workdir is, or contains, the other.
pub(crate) fn shares_workdir(a: &PreparedTask, b: &PreparedTask) -> bool {
    let own = |task: &PreparedTask| task.worktree.is_some() || task.deferred.is_some();
    if own(a) || own(b) {
        return false;
    }
    let (a, b) = (&a.tool_ctx.workdir, &b.tool_ctx.workdir);
    a.starts_with(b) || b.starts_with(a)
}

/// An interrupted task's worktree: kept (and named) when it holds
/// changes, removed with its branch when it holds none.
pub(super) fn interrupted_worktree(worktree: &TaskWorktree, message: String) -> String {
    if worktree.has_changes().unwrap_or(true) {
        return format!(
            "{message}; its changes stay in worktree {} (branch {})",
            worktree.root().display(),
            worktree.branch
        );
    }
    match worktree.discard() {
        Ok(()) => format!(
            "{message}; its worktree held no change and was removed with branch {}",
            worktree.branch
        ),
        Err(error) => format!(
            "{message}; its worktree {} (branch {}) could not be removed: {error}",
            worktree.root().display(),
            worktree.branch
        ),
    }
}
