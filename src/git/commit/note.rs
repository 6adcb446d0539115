//! The note a commit leaves in the task's result: what was committed, or
//! why nothing was, and the paths it skipped.

use super::{CommitOutcome, Moved, Target};
use crate::git::Snapshot;
use crate::git::changes::TaskChanges;
use crate::git::status::{HeadInfo, short};
use crate::git::tree::{files, list};

pub(super) fn nothing_to_commit(changes: &TaskChanges, why: &str) -> String {
    let mut note = format!("nothing to commit: {why}");
    push_skips(&mut note, changes);
    note
}

pub(super) fn committed_note(
    outcome: &CommitOutcome,
    changes: &TaskChanges,
    head: &HeadInfo,
    snapshot: &Snapshot,
    target: &Target,
    moved: &Moved,
) -> String {
    let sha = outcome.sha.as_deref().map(short).unwrap_or_default();
    let branch = moved.branch.as_deref().unwrap_or_default();
    let mut note = format!("committed {} as {sha}", files(outcome.files.len()));
    note.push_str(&match target {
        Target::Branch { .. } => format!(" on {branch}"),
        Target::Unborn { .. } => format!(" on {branch} (its first commit)"),
        Target::Switch { .. } if moved.created => format!(" on new branch {branch}"),
        Target::Switch { .. } => format!(" on branch {branch}"),
        Target::Detached { .. } => match &moved.warning {
            Some(warning) => format!(" on a detached HEAD; {warning}"),
            None if moved.created => format!(" on a detached HEAD; created branch {branch}"),
            None => format!(" on a detached HEAD; advanced branch {branch}"),
        },
    });
    if !outcome.unreported.is_empty() {
        note.push_str(&format!(
            "; {} changed outside the file tools: {}",
            files(outcome.unreported.len()),
            list(&outcome.unreported)
        ));
    }
    push_skips(&mut note, changes);
    if outcome.identity_fallback {
        note.push_str(&format!(
            "; as {} (no user.name/user.email in git config; set YBS_GIT_AUTHOR)",
            outcome.identity
        ));
    }
    let base = head.oid.map(|oid| oid.to_string());
    if base != snapshot.base {
        note.push_str(&format!(
            "; HEAD moved during the task (from {} to {})",
            snapshot.base.as_deref().map_or("an unborn branch", short),
            base.as_deref().map_or("an unborn branch", short)
        ));
    }
    note
}

/// Appends the paths left out to a note.
pub(crate) fn push_skips(note: &mut String, changes: &TaskChanges) {
    if !changes.skipped_user_dirty.is_empty() {
        note.push_str(&format!(
            "; not committed because they already had uncommitted changes when the task started: {}",
            list(&changes.skipped_user_dirty)
        ));
    }
    if !changes.skipped.is_empty() {
        let skipped: Vec<String> = changes
            .skipped
            .iter()
            .map(|skip| format!("{} ({})", skip.path, skip.reason.as_str()))
            .collect();
        note.push_str(&format!("; not committed: {}", list(&skipped)));
    }
}
