//! What earlier runs left in a repository (docs/git.md, "What a run
//! leaves"): the worktrees under `.ybs-worktrees/<run-id>/<task-id>`,
//! the branches `ybs/<run-id>/<task-id>` and the salvage refs
//! `refs/ybs/salvage/<run-id>/<task-id>`. A run that was killed leaves
//! them all; a run that ended keeps only what holds work. The next run
//! names them, and `ybs clean` removes what holds none.

use std::path::PathBuf;

use git2::{BranchType, Repository};

use super::{GitError, WORKTREES_DIR, Workspace};

/// One thing an earlier run left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub run_id: String,
    pub task_id: String,
    pub kind: LeftoverKind,
    /// It holds work found nowhere else: a worktree with uncommitted
    /// changes, a branch whose commits no other branch has, a salvage
    /// ref. `ybs clean` keeps it unless `--force` (a salvage ref always).
    pub holds_work: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftoverKind {
    /// A linked worktree, and git's name for it.
    Worktree { path: PathBuf, name: String },
    /// `ybs/<run-id>/<task-id>`.
    Branch { name: String },
    /// `refs/ybs/salvage/<run-id>/<task-id>`.
    Salvage { name: String },
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let work = if self.holds_work { " (holds work)" } else { "" };
        match &self.kind {
            LeftoverKind::Worktree { path, .. } => {
                write!(f, "worktree {}{work}", path.display())
            }
            LeftoverKind::Branch { name } => write!(f, "branch {name}{work}"),
            LeftoverKind::Salvage { name } => write!(f, "salvage ref {name}"),
        }
    }
}

/// `<run-id>/<task-id>` of a name, when it has exactly those two parts.
fn run_and_task(rest: &str) -> Option<(String, String)> {
    let (run, task) = rest.split_once('/')?;
    (!run.is_empty() && !task.is_empty() && !task.contains('/'))
        .then(|| (run.to_owned(), task.to_owned()))
}

impl Workspace {
    /// What runs other than `except_run` left in this repository, in a
    /// stable order (worktrees, branches, salvage refs; by run, then task).
    pub fn leftovers(&self, except_run: Option<&str>) -> Result<Vec<Leftover>, GitError> {
        let repo = self.repo()?;
        let mut found = Vec::new();
        worktrees(&repo, self, &mut found)?;
        branches(&repo, &mut found)?;
        salvage_refs(&repo, &mut found)?;
        found.retain(|leftover| Some(leftover.run_id.as_str()) != except_run);
        Ok(found)
    }

    /// Removes what [`plan`] says goes: each worktree first, then the
    /// branches. Returns what was removed and what was kept.
    pub fn clean(
        &self,
        leftovers: &[Leftover],
        force: bool,
    ) -> Result<(Vec<Leftover>, Vec<Leftover>), GitError> {
        let repo = self.repo()?;
        let (remove, kept) = plan(leftovers, force);
        let mut removed = Vec::new();
        for leftover in remove {
            match &leftover.kind {
                LeftoverKind::Worktree { name, path } => {
                    super::worktree::prune_worktree(&repo, name, path)?;
                }
                LeftoverKind::Branch { name } => {
                    repo.find_branch(name, BranchType::Local)
                        .and_then(|mut branch| branch.delete())
                        .map_err(GitError::git(format!("cannot delete branch {name}")))?;
                }
                LeftoverKind::Salvage { .. } => {}
            }
            removed.push(leftover);
        }
        Ok((removed, kept))
    }
}

/// What `ybs clean` removes of `leftovers` and what it keeps: a worktree
/// or branch that holds no work (any, with `force`), but never the branch
/// of a worktree that stays (it is checked out there), nor a salvage ref.
pub fn plan(leftovers: &[Leftover], force: bool) -> (Vec<Leftover>, Vec<Leftover>) {
    let goes = |leftover: &Leftover| force || !leftover.holds_work;
    let kept_worktrees: Vec<(&str, &str)> = leftovers
        .iter()
        .filter(|l| matches!(l.kind, LeftoverKind::Worktree { .. }) && !goes(l))
        .map(|l| (l.run_id.as_str(), l.task_id.as_str()))
        .collect();
    leftovers
        .iter()
        .cloned()
        .partition(|leftover| match leftover.kind {
            LeftoverKind::Salvage { .. } => false,
            LeftoverKind::Worktree { .. } => goes(leftover),
            LeftoverKind::Branch { .. } => {
                goes(leftover)
                    && !kept_worktrees
                        .contains(&(leftover.run_id.as_str(), leftover.task_id.as_str()))
            }
        })
}

/// The worktrees under `.ybs-worktrees/<run-id>/<task-id>`; one with
/// uncommitted changes holds work.
fn worktrees(
    repo: &Repository,
    workspace: &Workspace,
    found: &mut Vec<Leftover>,
) -> Result<(), GitError> {
    let names = repo
        .worktrees()
        .map_err(GitError::git("cannot list the worktrees"))?;
    let base = workspace.root().join(WORKTREES_DIR);
    let mut entries = Vec::new();
    for index in 0..names.len() {
        let Ok(Some(name)) = names.get(index) else {
            continue;
        };
        let Ok(worktree) = repo.find_worktree(name) else {
            continue;
        };
        let path = worktree.path().to_path_buf();
        let Some((run_id, task_id)) = path
            .strip_prefix(&base)
            .ok()
            .and_then(|rest| rest.to_str())
            .and_then(run_and_task)
        else {
            continue;
        };
        let holds_work = match Workspace::open(&path) {
            Ok(Some(tree)) => !tree.dirty_paths()?.is_empty(),
            _ => false,
        };
        entries.push(Leftover {
            run_id,
            task_id,
            kind: LeftoverKind::Worktree {
                path,
                name: name.to_owned(),
            },
            holds_work,
        });
    }
    entries.sort_by(|a, b| (&a.run_id, &a.task_id).cmp(&(&b.run_id, &b.task_id)));
    found.extend(entries);
    Ok(())
}

/// The branches `ybs/<run-id>/<task-id>`; one whose tip no other local
/// branch (nor HEAD) reaches holds work: the task's commit, found nowhere
/// else.
fn branches(repo: &Repository, found: &mut Vec<Leftover>) -> Result<(), GitError> {
    let all = repo
        .branches(Some(BranchType::Local))
        .map_err(GitError::git("cannot list the branches"))?;
    let mut ours = Vec::new();
    let mut others = Vec::new();
    for (branch, _) in all.flatten() {
        let Ok(Some(name)) = branch.name().map(|name| name.map(str::to_owned)) else {
            continue;
        };
        let Some(target) = branch.get().target() else {
            continue;
        };
        match name.strip_prefix("ybs/").and_then(run_and_task) {
            Some((run_id, task_id)) => ours.push((name, run_id, task_id, target)),
            None => others.push(target),
        }
    }
    others.extend(repo.head().ok().and_then(|head| head.target()));
    ours.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, run_id, task_id, target) in ours {
        let elsewhere = others.iter().any(|other| {
            *other == target || repo.graph_descendant_of(*other, target).unwrap_or(false)
        });
        found.push(Leftover {
            run_id,
            task_id,
            kind: LeftoverKind::Branch { name },
            holds_work: !elsewhere,
        });
    }
    Ok(())
}

/// The salvage refs `refs/ybs/salvage/<run-id>/<task-id>`: saved work,
/// named and never removed by `ybs clean`.
fn salvage_refs(repo: &Repository, found: &mut Vec<Leftover>) -> Result<(), GitError> {
    let refs = repo
        .references_glob("refs/ybs/salvage/*")
        .map_err(GitError::git("cannot list the salvage refs"))?;
    let mut names: Vec<String> = refs
        .flatten()
        .filter_map(|reference| reference.name().ok().map(str::to_owned))
        .collect();
    names.sort();
    for name in names {
        if let Some((run_id, task_id)) = name
            .strip_prefix("refs/ybs/salvage/")
            .and_then(run_and_task)
        {
            found.push(Leftover {
                run_id,
                task_id,
                kind: LeftoverKind::Salvage { name },
                holds_work: true,
            });
        }
    }
    Ok(())
}

/// One line naming what earlier runs left, for the start of a run; `None`
/// when they left nothing.
pub fn leftover_note(leftovers: &[Leftover]) -> Option<String> {
    if leftovers.is_empty() {
        return None;
    }
    let count = |want: fn(&LeftoverKind) -> bool| {
        let all: Vec<&Leftover> = leftovers.iter().filter(|l| want(&l.kind)).collect();
        (all.len(), all.iter().filter(|l| l.holds_work).count())
    };
    let (worktrees, working) = count(|kind| matches!(kind, LeftoverKind::Worktree { .. }));
    let (branches, committed) = count(|kind| matches!(kind, LeftoverKind::Branch { .. }));
    let (salvaged, _) = count(|kind| matches!(kind, LeftoverKind::Salvage { .. }));
    let mut runs: Vec<&str> = leftovers.iter().map(|l| l.run_id.as_str()).collect();
    runs.sort_unstable();
    runs.dedup();
    Some(format!(
        "earlier runs ({}) left {worktrees} worktree{} ({working} with uncommitted work), {branches} branch{} ({committed} with commits no other branch has) and {salvaged} salvage ref{}; hint: `ybs clean --dry-run` lists them, `ybs clean` removes what holds no work",
        runs.join(", "),
        if worktrees == 1 { "" } else { "s" },
        if branches == 1 { "" } else { "es" },
        if salvaged == 1 { "" } else { "s" },
    ))
}
