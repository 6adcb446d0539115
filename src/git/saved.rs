//! `--allow-dirty`: the user's uncommitted work saved before anything runs
//! (docs/security.md S12), as a commit on `refs/ybs/saved/<run-id>` whose tree is
//! HEAD's plus the work tree's version of every dirty path (tracked
//! changes, staged or not, and untracked files; ignored files never).
//! HEAD, the index and the work tree are not touched: it is `git stash
//! create -u` without the stash, recoverable with `git checkout
//! refs/ybs/saved/<run-id> -- PATH`.

use git2::{Commit, ErrorCode, Oid, Reference};
use serde::{Deserialize, Serialize};

use super::status::{Content, read_head, short};
use super::tree::{self, files};
use super::{GitError, Snapshot, Workspace};

/// Where the user's work was saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedWork {
    /// `refs/ybs/saved/<run-id>`.
    pub ref_name: String,
    pub sha: String,
    /// The saved paths, repository-relative.
    pub files: Vec<String>,
    /// Dirty paths that could not be saved (a nested repository, a FIFO,
    /// a name that is not UTF-8).
    pub unsaved: Vec<String>,
}

impl SavedWork {
    /// `your uncommitted changes (2 files) are saved as 1a2b3c4 on refs/ybs/saved/<run>`.
    pub fn note(&self) -> String {
        let mut note = format!(
            "your uncommitted changes ({}) are saved as {} on {}",
            files(self.files.len()),
            short(&self.sha),
            self.ref_name
        );
        if !self.unsaved.is_empty() {
            note.push_str(&format!(
                "; not saved (not regular files): {}",
                tree::list(&self.unsaved)
            ));
        }
        note
    }
}

/// The ref that holds a run's saved work.
pub fn saved_ref(run_id: &str) -> String {
    format!("refs/ybs/saved/{run_id}")
}

impl Workspace {
    /// Saves the dirty paths of `snapshot` on `refs/ybs/saved/<run_id>`.
    /// `Ok(None)` when the snapshot is clean. When the ref already exists
    /// (an earlier task of the same run saved this repository first), it
    /// is kept: it holds the state before the run.
    pub fn save_dirty(
        &self,
        snapshot: &Snapshot,
        run_id: &str,
        author: Option<&str>,
    ) -> Result<Option<SavedWork>, GitError> {
        if snapshot.is_clean() {
            return Ok(None);
        }
        let ref_name = saved_ref(run_id);
        if !Reference::is_valid_name(&ref_name) {
            return Err(GitError::InvalidBranch { name: ref_name });
        }
        if let Some(existing) = self.saved(run_id)? {
            return Ok(Some(existing));
        }
        let repo = self.repo()?;
        let (paths, unsaved): (Vec<_>, Vec<_>) =
            snapshot
                .dirty
                .iter()
                .partition(|dirty| match dirty.content {
                    Content::Absent | Content::File { .. } | Content::Symlink { .. } => true,
                    Content::Directory | Content::Other => false,
                });
        let paths: Vec<String> = paths.into_iter().map(|dirty| dirty.path.clone()).collect();
        let head = read_head(&repo)?;
        let (head_commit, head_tree) = super::commit::head_commit_and_tree(&repo, &head)?;
        let staged =
            tree::stage_from_workdir(&repo, self.root(), &paths, head_tree.as_ref(), None)?.staged;
        let tree_oid = tree::write_tree(&repo, head_tree.as_ref(), &staged)?;
        let new_tree = repo
            .find_tree(tree_oid)
            .map_err(GitError::git("cannot read the saved tree"))?;
        let identity = tree::identity(&repo, author)?;
        let signature = identity.signature()?;
        let message = format!(
            "ybs: uncommitted changes before run {run_id}\n\n{}\n",
            paths.join("\n")
        );
        let parents: Vec<&Commit<'_>> = head_commit.iter().collect();
        let oid = repo
            .commit(None, &signature, &signature, &message, &new_tree, &parents)
            .map_err(GitError::git(
                "cannot create the commit saving your changes",
            ))?;
        // Never replaces: another process saving first keeps its version.
        repo.reference(&ref_name, oid, false, "ybs: save uncommitted changes")
            .map_err(GitError::git(format!("cannot write {ref_name}")))?;
        Ok(Some(SavedWork {
            ref_name,
            sha: oid.to_string(),
            files: paths,
            unsaved: unsaved
                .into_iter()
                .map(|dirty| dirty.path.clone())
                .collect(),
        }))
    }

    /// The work saved for `run_id`, if any. Read-only.
    pub fn saved(&self, run_id: &str) -> Result<Option<SavedWork>, GitError> {
        let repo = self.repo()?;
        let ref_name = saved_ref(run_id);
        let oid = match repo.refname_to_id(&ref_name) {
            Ok(oid) => oid,
            Err(error) if matches!(error.code(), ErrorCode::NotFound | ErrorCode::InvalidSpec) => {
                return Ok(None);
            }
            Err(error) => return Err(GitError::git(format!("cannot read {ref_name}"))(error)),
        };
        let commit = repo
            .find_commit(oid)
            .map_err(GitError::git(format!("{ref_name} is not a commit")))?;
        let context = "cannot read the saved commit";
        let tree = commit.tree().map_err(GitError::git(context))?;
        let parent_tree = match commit.parents().next() {
            Some(parent) => Some(parent.tree().map_err(GitError::git(context))?),
            None => None,
        };
        let diff = repo
            .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
            .map_err(GitError::git(context))?;
        let files = diff
            .deltas()
            .filter_map(|delta| {
                delta
                    .new_file()
                    .path()
                    .or_else(|| delta.old_file().path())
                    .and_then(|path| path.to_str())
                    .map(str::to_owned)
            })
            .collect();
        Ok(Some(SavedWork {
            ref_name,
            sha: Oid::to_string(&oid),
            files,
            unsaved: Vec::new(),
        }))
    }
}
