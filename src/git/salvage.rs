//! Saving a stopped task's work without touching HEAD, the index or the
//! work tree (docs/agent-loop.md): a commit of HEAD's tree plus the task's files, on
//! `refs/ybs/salvage/<run-id>/<task-id>`.

use git2::{Commit, Reference};
use serde::{Deserialize, Serialize};

use super::changes::{SkipReason, SkippedPath};
use super::commit::{CommitRequest, StagedChanges, push_skips};
use super::status::{read_head, short};
use super::tree::{self, commit_message, files};
use super::{GitError, Workspace};
use crate::core::event::GitOutcome;

/// What `salvage` saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SalvageOutcome {
    /// `refs/ybs/salvage/<run-id>/<task-id>`.
    pub ref_name: String,
    pub sha: String,
    /// Saved paths, repository-relative.
    pub files: Vec<String>,
    pub unreported: Vec<String>,
    pub skipped_user_dirty: Vec<String>,
    pub skipped: Vec<SkippedPath>,
    pub identity_fallback: bool,
    /// e.g. `saved 2 files as 1a2b3c4 on refs/ybs/salvage/<run>/<task>`.
    pub note: String,
}

impl SalvageOutcome {
    /// The record the transcript, JUnit and summary carry.
    pub fn report(&self) -> GitOutcome {
        GitOutcome {
            commit: None,
            branch: None,
            salvage_ref: Some(self.ref_name.clone()),
            files: self.files.clone(),
            note: self.note.clone(),
        }
    }
}

impl Workspace {
    /// For a task stopped by a limit (`reason`, e.g. `max_iterations`):
    /// commits HEAD's tree plus the task's files (the same files
    /// `commit_task` would commit) with HEAD as parent, and points
    /// `refs/ybs/salvage/<run-id>/<task-id>` at it, replacing an earlier
    /// salvage of the same task. HEAD, the index and the work tree are left
    /// alone, so it works with a locked index, mid-merge, or detached.
    /// `Ok(None)` when the task changed nothing.
    pub fn salvage(
        &self,
        request: &CommitRequest<'_>,
        reason: &str,
    ) -> Result<Option<SalvageOutcome>, GitError> {
        let repo = self.repo()?;
        let ref_name = format!("refs/ybs/salvage/{}/{}", request.run_id, request.task_id);
        if !Reference::is_valid_name(&ref_name) {
            return Err(GitError::InvalidBranch { name: ref_name });
        }
        let identity = tree::identity(&repo, request.author)?;
        let head = read_head(&repo)?;
        let mut changes = self.classify(&repo, request.paths, request.snapshot)?;
        // A salvage ref is a commit like any other: no credential in it.
        let StagedChanges {
            head_commit,
            head_tree,
            read,
        } = self.stage_changes(&repo, &head, &changes.files, request)?;
        for secret in read.secrets {
            changes.files.retain(|path| *path != secret.path);
            changes.unreported.retain(|path| *path != secret.path);
            changes.skipped.push(SkippedPath {
                path: secret.path,
                reason: SkipReason::Credential,
            });
        }
        if changes.is_empty() {
            return Ok(None);
        }
        let staged = read.staged;
        let tree_oid = tree::write_tree(&repo, head_tree.as_ref(), &staged)?;
        let saved = tree::changed_paths(head_tree.as_ref(), &staged);
        if head_tree.as_ref().map(git2::Tree::id) == Some(tree_oid) {
            return Ok(None);
        }
        let new_tree = repo
            .find_tree(tree_oid)
            .map_err(GitError::git("cannot read the salvage tree"))?;
        let text = format!("salvaged after {reason}\n\n{}", request.message);
        let (subject, message) = commit_message(
            request.prefix,
            request.task_id,
            &text,
            &request.trailers(),
            request.redactor,
        );
        let signature = identity.signature()?;
        let parents: Vec<&Commit<'_>> = head_commit.iter().collect();
        let oid = repo
            .commit(None, &signature, &signature, &message, &new_tree, &parents)
            .map_err(GitError::git("cannot create the salvage commit"))?;
        repo.reference(&ref_name, oid, true, &format!("ybs salvage: {subject}"))
            .map_err(GitError::git(format!("cannot write {ref_name}")))?;

        let sha = oid.to_string();
        let mut note = format!(
            "saved {} as {} on {ref_name}",
            files(saved.len()),
            short(&sha)
        );
        push_skips(&mut note, &changes);
        Ok(Some(SalvageOutcome {
            ref_name,
            sha,
            unreported: changes
                .unreported
                .into_iter()
                .filter(|path| saved.contains(path))
                .collect(),
            files: saved,
            skipped_user_dirty: changes.skipped_user_dirty,
            skipped: changes.skipped,
            identity_fallback: identity.fallback,
            note,
        }))
    }
}
