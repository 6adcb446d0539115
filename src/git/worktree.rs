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
    /// `ybs resume` found it as the paused task left it: it holds that
    /// task's work, and a resume that stops before the task goes on
    /// leaves it in place.
    pub reopened: bool,
}

/// Where the worktree of task `task_id` of run `run_id` is, relative to
/// the repository root: `.ybs-worktrees/<run-id>/<task-id>`.
fn worktree_path(run_id: &str, task_id: &str) -> PathBuf {
    Path::new(WORKTREES_DIR).join(run_id).join(task_id)
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
        self.make_worktree(&repo, run_id, task_id, &head, false)
    }

    /// `ybs resume`: the worktree task `task_id` of run `run_id` paused
    /// in, on its branch at commit `base`. Reopened when it is still
    /// there (`reopened` is then true: it holds the paused task's work);
    /// else made again from `base` (a fresh clone in another job), on the
    /// branch if it is still at `base`. A branch that moved on is an error.
    pub fn resume_worktree(
        &self,
        run_id: &str,
        task_id: &str,
        base: &str,
    ) -> Result<TaskWorktree, GitError> {
        let repo = self.repo()?;
        let name = format!("ybs-{run_id}-{task_id}");
        let branch_name = format!("ybs/{run_id}/{task_id}");
        let root = self.root().join(worktree_path(run_id, task_id));
        if let Ok(found) = repo.find_worktree(&name) {
            if found.validate().is_ok() {
                let same = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_owned());
                if same(found.path()) != same(&root) {
                    return Err(GitError::git(format!(
                        "worktree {name} is at {}, not at {}",
                        found.path().display(),
                        root.display()
                    ))(git2::Error::from_str(
                        "the paused task's worktree was moved",
                    )));
                }
                let linked = git2::Repository::open_from_worktree(&found).map_err(
                    GitError::git(format!("cannot open worktree {}", root.display())),
                )?;
                let head = linked.find_reference("HEAD").ok();
                let on_branch = head
                    .as_ref()
                    .and_then(|head| head.symbolic_target().ok().flatten());
                if on_branch != Some(format!("refs/heads/{branch_name}").as_str()) {
                    return Err(GitError::git(format!(
                        "worktree {} is not on branch {branch_name}",
                        root.display()
                    ))(git2::Error::from_str(
                        "the paused task's branch was changed",
                    )));
                }
                return Ok(TaskWorktree {
                    git_dir: repo.commondir().to_path_buf(),
                    name,
                    workdir: root.join(self.prefix()),
                    root,
                    branch: branch_name,
                    source_root: self.root().to_owned(),
                    reopened: true,
                });
            }
            // Its directory is gone: git's record of it goes too.
            found
                .prune(Some(WorktreePruneOptions::new().valid(false).locked(false)))
                .map_err(GitError::git(format!("cannot prune worktree {name}")))?;
        }
        let commit = git2::Oid::from_str(base)
            .and_then(|oid| repo.find_commit(oid))
            .map_err(GitError::git(format!(
                "the paused task's base commit {base} is not in this repository"
            )))?;
        let reuse = match repo.find_branch(&branch_name, BranchType::Local) {
            Ok(branch) => {
                let at = branch.get().target();
                if at != Some(commit.id()) {
                    let at = at.map_or_else(|| "(none)".to_owned(), |oid| oid.to_string());
                    return Err(GitError::git(format!(
                        "branch {branch_name} is at {at}, not at {base} where the paused task started"
                    ))(git2::Error::from_str(
                        "ybs never moves a branch it did not build on",
                    )));
                }
                true
            }
            Err(_) => false,
        };
        self.make_worktree(&repo, run_id, task_id, &commit, reuse)
    }

    /// The worktree of `task_id` on branch `ybs/<run_id>/<task_id>`, made
    /// at `start` (or taken as it is when `reuse`).
    fn make_worktree(
        &self,
        repo: &git2::Repository,
        run_id: &str,
        task_id: &str,
        start: &git2::Commit<'_>,
        reuse: bool,
    ) -> Result<TaskWorktree, GitError> {
        let _one_at_a_time = worktree_lock();
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
        let root = self.root().join(worktree_path(run_id, task_id));
        let branch_name = format!("ybs/{run_id}/{task_id}");
        let branch = if reuse {
            repo.find_branch(&branch_name, BranchType::Local)
                .map_err(GitError::git(format!("cannot find branch {branch_name}")))?
        } else {
            repo.branch(&branch_name, start, false)
                .map_err(GitError::git(format!("cannot create branch {branch_name}")))?
        };
        let name = format!("ybs-{run_id}-{task_id}");
        let mut options = WorktreeAddOptions::new();
        options.reference(Some(branch.get()));
        if let Err(error) = repo.worktree(&name, &root, Some(&options)) {
            // Leave nothing behind: the branch is still at its start.
            if !reuse {
                let _ = repo
                    .find_branch(&branch_name, BranchType::Local)
                    .and_then(|mut branch| branch.delete());
            }
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
            reopened: false,
        })
    }
}

/// Removes the worktree `name` at `root` (its directory and git's record
/// of it; its branch stays), then the run's directory when that was its
/// last worktree.
pub(super) fn prune_worktree(
    repo: &git2::Repository,
    name: &str,
    root: &Path,
) -> Result<(), GitError> {
    let _one_at_a_time = worktree_lock();
    let worktree = repo
        .find_worktree(name)
        .map_err(GitError::git(format!("cannot find worktree {name}")))?;
    worktree
        .prune(Some(
            WorktreePruneOptions::new()
                .valid(true)
                .locked(false)
                .working_tree(true),
        ))
        .map_err(GitError::git(format!(
            "cannot remove worktree {}",
            root.display()
        )))?;
    if let Some(parent) = root.parent() {
        // Only when empty: the last worktree of the run.
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}

impl TaskWorktree {
    /// Removes the worktree's directory and git's record of it; the branch
    /// stays. Only for a worktree whose work is committed.
    pub fn remove(&self) -> Result<(), GitError> {
        let repo = git2::Repository::open(&self.git_dir)
            .map_err(GitError::git("cannot reopen the repository"))?;
        prune_worktree(&repo, &self.name, &self.root)
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

    /// The worktree's changes against the commit it was made at, as a
    /// patch `git apply` takes (new and binary files included, ignored
    /// files left out); `None` when it holds no change. For a task that
    /// does not commit: its work stays where the user can get it.
    pub fn patch(&self) -> Result<Option<Vec<u8>>, GitError> {
        let repo = git2::Repository::open(&self.root).map_err(GitError::git(format!(
            "cannot open worktree {}",
            self.root.display()
        )))?;
        let tree = repo
            .head()
            .and_then(|head| head.peel_to_tree())
            .map_err(GitError::git("cannot read the worktree's HEAD commit"))?;
        let mut options = git2::DiffOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .show_untracked_content(true)
            .show_binary(true);
        let diff = repo
            .diff_tree_to_workdir_with_index(Some(&tree), Some(&mut options))
            .map_err(GitError::git("cannot diff the worktree"))?;
        let mut patch = Vec::new();
        diff.print(git2::DiffFormat::Patch, |_, _, line| {
            if let origin @ ('+' | '-' | ' ') = line.origin() {
                patch.push(u8::try_from(origin).unwrap_or(b' '));
            }
            patch.extend_from_slice(line.content());
            true
        })
        .map_err(GitError::git(
            "cannot write the worktree's changes as a patch",
        ))?;
        Ok((!patch.is_empty()).then_some(patch))
    }

    /// Where `path`, in the work tree the worktree was made from, is in the
    /// worktree; `None` when it is outside that work tree.
    pub fn map(&self, path: &Path) -> Option<PathBuf> {
        let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        let relative = path.strip_prefix(&self.source_root).ok()?;
        Some(self.root.join(relative))
    }

    /// The worktree's root relative to the work tree it was made from,
    /// `/`-separated: `.ybs-worktrees/<run-id>/<task-id>`.
    pub fn relative_root(&self) -> String {
        let relative = self
            .root
            .strip_prefix(&self.source_root)
            .unwrap_or(&self.root);
        relative
            .components()
            .map(|part| part.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The worktree's root, for messages.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Worktrees are made and removed one at a time in a process: under
/// `--jobs` one is made while another task's goes, and libgit2 reads
/// every worktree's record to make one (a record half removed fails it),
/// and removes the run's directory with its last worktree.
fn worktree_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{RUN, Repo};

    #[test]
    fn a_worktrees_patch_holds_new_changed_and_deleted_files() {
        let repo = Repo::new();
        let made = repo.workspace().add_worktree(RUN, "p").unwrap();
        assert_eq!(made.patch().unwrap(), None, "no change, no patch");
        std::fs::write(made.root.join("a.txt"), "changed\n").unwrap();
        std::fs::create_dir_all(made.root.join("new")).unwrap();
        std::fs::write(made.root.join("new/n.txt"), "new\n").unwrap();
        std::fs::remove_file(made.root.join("b.txt")).unwrap();
        // Ignored: not in the patch.
        std::fs::write(made.root.join("x.log"), "log\n").unwrap();
        let patch = String::from_utf8(made.patch().unwrap().unwrap()).unwrap();
        assert!(patch.contains("+changed"), "{patch}");
        assert!(patch.contains("+++ b/new/n.txt"), "{patch}");
        assert!(patch.contains("deleted file mode"), "{patch}");
        assert!(!patch.contains("x.log"), "{patch}");
        // It applies to the checkout the worktree was made from.
        let file = repo.path("p.patch");
        std::fs::write(&file, &patch).unwrap();
        repo.git(&["apply", "--check", file.to_str().unwrap()]);
        made.discard().unwrap();
    }

    #[test]
    fn a_paused_tasks_worktree_is_reopened_or_made_again_at_its_base() {
        let repo = Repo::new();
        let base = repo.head();
        let workspace = repo.workspace();
        let branch = format!("ybs/{RUN}/t");
        let made = workspace.add_worktree(RUN, "t").unwrap();
        std::fs::write(made.workdir.join("new.txt"), "x").unwrap();
        // Still there: reopened as it is, the work in it.
        let again = workspace.resume_worktree(RUN, "t", &base).unwrap();
        assert!(again.reopened);
        assert_eq!(again.root, made.root);
        assert!(again.workdir.join("new.txt").is_file());
        // The user's checkout moves on; the worktree goes (its record
        // stays): made again at the base on the same branch, not at HEAD.
        repo.write("d.txt", "d\n");
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "later"]);
        std::fs::remove_dir_all(&made.root).unwrap();
        let remade = workspace.resume_worktree(RUN, "t", &base).unwrap();
        assert!(!remade.reopened);
        assert!(remade.root.join("a.txt").is_file());
        assert!(!remade.root.join("d.txt").exists());
        assert!(!remade.workdir.join("new.txt").exists());
        assert_eq!(repo.git(&["rev-parse", &branch]).trim(), base);
        // Gone with its branch (a fresh clone): made again as well.
        remade.discard().unwrap();
        let fresh = workspace.resume_worktree(RUN, "t", &base).unwrap();
        assert!(!fresh.reopened);
        assert_eq!(repo.git(&["rev-parse", &branch]).trim(), base);
        // A branch that moved on, or a base the repository lacks: refused.
        fresh.remove().unwrap();
        repo.git(&["branch", "-f", &branch, "HEAD"]);
        let error = workspace.resume_worktree(RUN, "t", &base).unwrap_err();
        assert!(
            error.to_string().contains("where the paused task started"),
            "{error}"
        );
        repo.git(&["branch", "-D", &branch]);
        let missing = "0123456789abcdef0123456789abcdef01234567";
        let error = workspace.resume_worktree(RUN, "t", missing).unwrap_err();
        assert!(
            error.to_string().contains("is not in this repository"),
            "{error}"
        );
    }
}
