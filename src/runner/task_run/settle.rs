//! A task's git side at its end: commit, salvage or leave the changes,
//! and say where a worktree's changes are.

use super::super::RunContext;
use super::super::workspace::{CommitInfo, Finish};
use super::{Settle, TaskRun, apply_expect};
use crate::agent::Emitter;
use crate::config::GitAuthor;
use crate::core::Reason;
use crate::core::event::{Event, Git, GitOutcome, HINT};
use crate::git::GitError;
use crate::git::TaskWorktree;
use crate::task::{Expect, TaskSpec};

/// The note of a `--dry-run` task with checks: they are not run.
pub(super) fn checks_not_run(task: &TaskSpec) -> String {
    format!(
        "dry run: {} not run: {}",
        if task.checks.len() == 1 {
            "check"
        } else {
            "checks"
        },
        task.checks
            .iter()
            .map(|check| check.run.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// Why commits are off for `task`, if they are: no git writes then.
pub(super) fn commit_off(run: &RunContext, task: &TaskSpec) -> Option<&'static str> {
    if run.dry_run {
        Some("--dry-run")
    } else if run.no_commit {
        Some("--no-commit")
    } else if !task.commit.enabled {
        Some("commit: false")
    } else if !run.config.git.auto_commit {
        Some("git.auto_commit: false")
    } else {
        None
    }
}

impl TaskRun<'_> {
    /// Commits, salvages or reports the changes left in place, and records
    /// it. A git failure after passing checks makes the task an error.
    pub(super) fn settle_git(
        &self,
        settle: &Settle<'_, '_>,
        (reason, message): (Reason, Option<String>),
        emitter: &mut Emitter<'_>,
    ) -> (Reason, Option<String>) {
        let task = &self.prepared.task;
        let saved_note = settle
            .saved
            .map(|saved| format!("; {}", saved.note()))
            .unwrap_or_default();
        let action = match (settle.commit_off, reason, task.expect) {
            (Some(why), _, _) => Finish::Disabled(why),
            (None, Reason::Completed, Expect::Pass) => Finish::Commit,
            (None, reason, _) if reason.is_limit() => Finish::Salvage(reason),
            _ => Finish::LeaveInPlace,
        };
        let config = &self.run.config.git;
        let author = config.author.as_ref().map(GitAuthor::signature);
        let changed: Vec<_> = settle.agent.changed.iter().cloned().collect();
        let summary = super::super::subject::commit_message(
            task.commit.message.as_deref(),
            settle.answer,
            &changed,
        );
        let info = self.commit_info(&summary, author.as_deref());
        let (text, ended) = match settle.git.finish(action, &changed, &info) {
            Ok(mut outcome) => {
                // A `--scratch` copy is gone when the run ends: name it
                // by what it was, not by a path that no longer exists.
                if self.run.scratch && !settle.git.in_repository() {
                    outcome.note = "the --scratch copy is no git repository: nothing committed \
                                    (the changes went with the copy; the transcript says what they were)"
                        .to_owned();
                }
                if let Some(sha) = outcome.commit.as_deref()
                    && let Err(error) =
                        settle
                            .git
                            .write_commit_patch(sha, self.out, &task.id, &self.run.redactor)
                {
                    outcome.note = format!("{}; commit.patch not written: {error}", outcome.note);
                }
                self.worktree_outcome(&mut outcome, settle.commit_off, reason, emitter);
                outcome.note.push_str(&saved_note);
                emitter.emit(Event::Git(Git { outcome }));
                return (reason, message);
            }
            Err(error @ GitError::SecretInCommit { .. }) => {
                let text = format!("{error}; they are left in {}", self.left_in());
                (text.clone(), (Reason::SecretInCommit, Some(text)))
            }
            Err(error) => {
                let text = format!(
                    "git: {error}; the task's changes are left in {}",
                    self.left_in()
                );
                match action {
                    Finish::Commit => (text.clone(), (Reason::GitError, Some(text))),
                    _ => (text, (reason, message)),
                }
            }
        };
        emitter.emit(Event::Git(Git {
            outcome: GitOutcome {
                note: format!("{text}{saved_note}"),
                ..GitOutcome::default()
            },
        }));
        ended
    }

    /// What the commit says and where it goes.
    fn commit_info<'i>(&'i self, message: &'i str, author: Option<&'i str>) -> CommitInfo<'i> {
        let (run, prepared) = (self.run, self.prepared);
        let task = &prepared.task;
        CommitInfo {
            task_id: &task.id,
            run_id: &run.run_id,
            model: &prepared.settings.model,
            message,
            prefix: &run.config.git.commit_message_prefix,
            author,
            // With `--jobs` the commit stays on the task's own branch: moving
            // `commit.branch` from a worktree could move a branch checked out
            // elsewhere (the user's) under its work tree.
            branch: if prepared.worktree.is_some() {
                None
            } else {
                task.commit.branch.as_deref()
            },
            redactor: &run.redactor,
            allow_secret_paths: &run.config.git.allow_secret_paths,
        }
    }

    /// Where the task's uncommitted changes are.
    fn left_in(&self) -> String {
        self.prepared.worktree.as_ref().map_or_else(
            || "the work tree".to_owned(),
            |worktree| format!("worktree {}", worktree.root().display()),
        )
    }

    /// `--jobs`: what became of the task's worktree, in the git note (a
    /// task that does not commit hands its changes to the reader).
    fn worktree_outcome(
        &self,
        outcome: &mut GitOutcome,
        commit_off: Option<&'static str>,
        reason: Reason,
        emitter: &mut Emitter<'_>,
    ) {
        let task = &self.prepared.task;
        let Some(worktree) = &self.prepared.worktree else {
            return;
        };
        if commit_off.is_some() {
            let status = apply_expect(task.expect, reason, None).0;
            let redactor = &self.run.redactor;
            let (note, kept) = super::super::parallel::settle_reader(
                worktree, outcome, self.out, &task.id, status, redactor,
            );
            outcome.note = note;
            if let Some(kept) = kept {
                emitter.note(format!("{HINT}{kept}"));
            }
            return;
        }
        outcome.note = worktree_note(worktree, outcome);
        if let Some(branch) = &task.commit.branch {
            outcome.note = format!(
                "{}; commit.branch `{branch}` is not used with --jobs: the task's branch is {}",
                outcome.note, worktree.branch
            );
        }
    }
}

/// `--jobs`: a committed task's worktree is removed (its branch stays);
/// one that committed nothing and holds no change goes with its branch,
/// so a batch of no-op tasks leaves no litter; any other keeps both, and
/// the note says where.
pub(super) fn worktree_note(worktree: &TaskWorktree, outcome: &GitOutcome) -> String {
    let note = &outcome.note;
    if outcome.commit.is_some() {
        return match worktree.remove() {
            Ok(()) => format!("{note}; worktree removed, branch {} kept", worktree.branch),
            Err(error) => format!(
                "{note}; worktree {} could not be removed: {error}",
                worktree.root().display()
            ),
        };
    }
    let keeps_work = !outcome.files.is_empty() || worktree.has_changes().unwrap_or(true);
    if keeps_work {
        return format!(
            "{note} (worktree {} on branch {})",
            worktree.root().display(),
            worktree.branch
        );
    }
    match worktree.discard() {
        Ok(()) => format!(
            "{note}; worktree and branch {} removed (nothing to keep)",
            worktree.branch
        ),
        Err(error) => format!(
            "{note}; worktree {} on branch {} could not be removed: {error}",
            worktree.root().display(),
            worktree.branch
        ),
    }
}
