//! `--jobs N`: each task in its own linked worktree (docs/git.md), created
//! from HEAD on branch `ybs/<run-id>/<task-id>` under
//! `<repo-root>/.ybs-worktrees/<run-id>/<task-id>`. The directory holds a
//! `.gitignore` of `*`, so the user's tree never sees it as a change.

use std::path::{Path, PathBuf};

use git2::{BranchType, WorktreeAddOptions, WorktreePruneOptions};

use super::{GitError, Workspace};

/// The directory, under the repository root, that holds ybs's worktrees.
pub const WORKTREES_DIR: &str = ".ybs-worktrees";

/// A task's linked worktree.
#[derive(Debug, Clone)]
pub struct TaskWorktree {
    /// The repository's git directory (the user's), to reopen it.
    git_dir: PathBuf,
    /// libgit2's name for the worktree (`.git/worktrees/<name>`).
    name: String,
    /// The worktree's root.
    pub root: PathBuf,
    /// The task's workdir inside it: the same subdirectory as in the user's tree.
    pub workdir: PathBuf,
    /// `ybs/<run-id>/<task-id>`.
    pub branch: String,
    /// The root of the work tree the worktree was made from.
    source_root: PathBuf,
}

impl Workspace {
    /// Creates branch `ybs/<run_id>/<task_id>` at HEAD and a worktree on it.
    /// HEAD, the index and the user's work tree are not touched.
    pub fn add_worktree(&self, run_id: &str, task_id: &str) -> Result<TaskWorktree, GitError> {
        let repo = self.repo()?;
        let head = repo
            .head()
            .and_then(|head| head.peel_to_commit())
            .map_err(GitError::git(
                "cannot read the HEAD commit to start a worktree from",
            ))?;
        let base = self.root().join(WORKTREES_DIR);
        std::fs::create_dir_all(base.join(run_id))
            .map_err(GitError::io("cannot create the worktree directory", &base))?;
        let ignore = base.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(
                &ignore,
                "# Written by ybs: its worktrees are never part of the repository.\n*\n",
            )
            .map_err(GitError::io("cannot write", &ignore))?;
        }
        let root = base.join(run_id).join(task_id);
        let branch_name = format!("ybs/{run_id}/{task_id}");
        let branch = repo
            .branch(&branch_name, &head, false)
            .map_err(GitError::git(format!("cannot create branch {branch_name}")))?;
        let name = format!("ybs-{run_id}-{task_id}");
        let mut options = WorktreeAddOptions::new();
        options.reference(Some(branch.get()));
        if let Err(error) = repo.worktree(&name, &root, Some(&options)) {
            // Leave nothing behind: the branch is still at HEAD.
            let _ = repo
                .find_branch(&branch_name, BranchType::Local)
                .and_then(|mut branch| branch.delete());
            return Err(GitError::git(format!(
                "cannot create a worktree at {}",
                root.display()
            ))(error));
        }
        let workdir = root.join(self.prefix());
        std::fs::create_dir_all(&workdir).map_err(GitError::io(
            "cannot create the workdir in the worktree",
            &workdir,
        ))?;
        Ok(TaskWorktree {
            git_dir: repo.commondir().to_path_buf(),
            name,
            root,
            workdir,
            branch: branch_name,
            source_root: self.root().to_owned(),
        })
    }
}

impl TaskWorktree {
    /// Removes the worktree's directory and git's record of it; the branch
    /// stays. Only for a worktree whose work is committed.
    pub fn remove(&self) -> Result<(), GitError> {
        let repo = git2::Repository::open(&self.git_dir)
            .map_err(GitError::git("cannot reopen the repository"))?;
        let worktree = repo
            .find_worktree(&self.name)
            .map_err(GitError::git(format!("cannot find worktree {}", self.name)))?;
        worktree
            .prune(Some(
                WorktreePruneOptions::new()
                    .valid(true)
                    .locked(false)
                    .working_tree(true),
            ))
            .map_err(GitError::git(format!(
                "cannot remove worktree {}",
                self.root.display()
            )))?;
        if let Some(parent) = self.root.parent() {
            // Only when empty: the last worktree of the run.
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }

    /// Removes the worktree and its branch: for a task that never ran, or
    /// that committed nothing and left nothing behind.
    pub fn discard(&self) -> Result<(), GitError> {
        self.remove()?;
        let repo = git2::Repository::open(&self.git_dir)
            .map_err(GitError::git("cannot reopen the repository"))?;
        repo.find_branch(&self.branch, BranchType::Local)
            .and_then(|mut branch| branch.delete())
            .map_err(GitError::git(format!(
                "cannot delete branch {}",
                self.branch
            )))
    }

    /// True if and only if the worktree holds uncommitted changes (ignored
    /// files aside): then it keeps work that must not be thrown away.
    pub fn has_changes(&self) -> Result<bool, GitError> {
        match Workspace::open(&self.root)? {
            Some(workspace) => Ok(!workspace.dirty_paths()?.is_empty()),
            None => Ok(false),
        }
    }

    /// Where `path`, in the work tree the worktree was made from, is in the
    /// worktree; `None` when it is outside that work tree.
    pub fn map(&self, path: &Path) -> Option<PathBuf> {
        let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        let relative = path.strip_prefix(&self.source_root).ok()?;
        Some(self.root.join(relative))
    }

    /// The worktree's root, for messages.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
