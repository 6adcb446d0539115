//! Finding the repository that holds a task's workdir, and mapping paths
//! between the workdir and the repository root.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use git2::{ErrorCode, Repository, RepositoryOpenFlags};

use super::{GitError, Snapshot};
use crate::core::event::GitOutcome;

/// The git repository a task's workdir lives in.
///
/// Holds paths only, no libgit2 handle: each operation reopens the
/// repository, so config, index and refs are always read fresh (a
/// workspace lives for a whole task, during which the agent and the user
/// may change them), and the type is `Send + Sync + Clone` for the runner.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Canonical root of the work tree.
    root: PathBuf,
    /// Canonical task workdir, inside `root`.
    workdir: PathBuf,
    /// `workdir` relative to `root`, `/`-separated with a trailing `/`,
    /// or empty when the workdir is the root.
    prefix: String,
    /// The repository's git directory (`.git`, or a linked worktree's
    /// private directory).
    git_dir: PathBuf,
    /// Repository-relative paths (files or directories, no trailing `/`)
    /// that are ybs's own outputs: never dirty, never committed.
    excluded: Vec<String>,
    /// Tests only: read the repository's own config file and nothing else
    /// (no `~/.gitconfig`), so identity tests do not depend on the machine.
    isolated_config: bool,
}

/// The checkouts of the submodules (the gitlinks of the index) of the
/// repository holding `workdir`, absolute; none when there is no
/// repository. Their `.git` names the git directory whose config (an
/// fsmonitor, hooks) a later `git status` of the superproject runs, so the
/// sandbox keeps them read-only (docs/sandbox.md). Only reads the index.
pub fn submodule_paths(workdir: &Path) -> Vec<PathBuf> {
    Found::open(workdir).submodule_paths()
}

/// The repository around a task's workdir, opened once for the task's
/// set-up: the run lock, the dirty check and the snapshot, the
/// submodules the sandbox keeps read-only, a `--jobs` worktree. The
/// handle is dropped once the task is set up; what runs later (the
/// commit, salvage) opens the repository afresh.
pub struct Found {
    /// The workdir as given.
    workdir: PathBuf,
    /// The repository, or why none opened (`NotFound`: there is none).
    repo: Result<Repository, git2::Error>,
}

impl Found {
    /// Searches from `workdir` upwards (as `git` does, not across file
    /// systems) and opens what it finds. Never fails: every use says
    /// what a missing or unusable repository means for it.
    pub fn open(workdir: &Path) -> Self {
        let repo = Repository::open_ext(
            workdir,
            RepositoryOpenFlags::empty(),
            std::iter::empty::<&OsStr>(),
        );
        Self {
            workdir: workdir.to_owned(),
            repo,
        }
    }

    /// See [`submodule_paths`].
    pub fn submodule_paths(&self) -> Vec<PathBuf> {
        let Ok(repo) = &self.repo else {
            return Vec::new();
        };
        let (Some(root), Ok(index)) = (repo.workdir(), repo.index()) else {
            return Vec::new();
        };
        let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
        index
            .iter()
            .filter(|entry| entry.mode == 0o160_000)
            .filter_map(|entry| {
                std::str::from_utf8(&entry.path)
                    .ok()
                    .map(|path| root.join(path))
            })
            .collect()
    }

    /// Takes the run lock of this repository (see
    /// [`super::lock_repository`]).
    pub fn lock(&self, exclusive: bool) -> Result<(), GitError> {
        match &self.repo {
            Ok(repo) => super::runlock::lock_git_dir(repo.commondir(), exclusive),
            Err(_) => Ok(()),
        }
    }

    /// The workspace, as [`Workspace::open`] finds it.
    pub fn workspace(&self) -> Result<Option<Workspace>, GitError> {
        let workdir = self
            .workdir
            .canonicalize()
            .map_err(GitError::io("cannot resolve the workdir", &self.workdir))?;
        let repo = match &self.repo {
            Ok(repo) => repo,
            Err(error) => return Workspace::open_failed(workdir, error),
        };
        Workspace::of_repo(workdir, repo).map(Some)
    }

    /// The workspace [`Workspace::excluding`] `outputs` with its
    /// snapshot, as [`Workspace::open`] then [`Workspace::snapshot`] take
    /// them, from the handle already open.
    pub fn snapshot(&self, outputs: &[PathBuf]) -> Result<Option<(Workspace, Snapshot)>, GitError> {
        let Some(workspace) = self.workspace()? else {
            return Ok(None);
        };
        let workspace = workspace.excluding(outputs);
        let snapshot = match &self.repo {
            Ok(repo) => workspace.snapshot_of(repo)?,
            Err(_) => workspace.snapshot()?,
        };
        Ok(Some((workspace, snapshot)))
    }

    /// [`Workspace::ready_to_commit`] with the handle already open.
    pub fn ready_to_commit(&self, workspace: &Workspace) -> Result<(), GitError> {
        match &self.repo {
            Ok(repo) => workspace.ready(repo),
            Err(_) => workspace.ready_to_commit(),
        }
    }
}

impl Workspace {
    /// Finds the repository containing `workdir` (which may be any
    /// directory inside the work tree). `Ok(None)` when there is none.
    ///
    /// A bare repository, a workdir inside the git directory and a
    /// repository owned by another user are errors.
    pub fn open(workdir: &Path) -> Result<Option<Self>, GitError> {
        let workdir = workdir
            .canonicalize()
            .map_err(GitError::io("cannot resolve the workdir", workdir))?;
        match Repository::open_ext(
            &workdir,
            RepositoryOpenFlags::empty(),
            std::iter::empty::<&OsStr>(),
        ) {
            Ok(repo) => Self::of_repo(workdir, &repo).map(Some),
            Err(error) => Self::open_failed(workdir, &error),
        }
    }

    /// What a repository that did not open means: `Ok(None)` when there
    /// is none.
    fn open_failed(workdir: PathBuf, error: &git2::Error) -> Result<Option<Self>, GitError> {
        match error.code() {
            ErrorCode::NotFound => Ok(None),
            ErrorCode::Owner => Err(GitError::NotOwned { path: workdir }),
            _ => Err(GitError::git(format!(
                "cannot open the repository containing {}",
                workdir.display()
            ))(git2::Error::new(
                error.code(),
                error.class(),
                error.message(),
            ))),
        }
    }

    /// The workspace of `repo`, found from the canonical `workdir`.
    fn of_repo(workdir: PathBuf, repo: &Repository) -> Result<Self, GitError> {
        let git_dir = repo.path().to_path_buf();
        let Some(root) = repo.workdir() else {
            return Err(GitError::Bare { workdir, git_dir });
        };
        let root = root
            .canonicalize()
            .map_err(GitError::io("cannot resolve the work tree root", root))?;
        let outside = || GitError::OutsideWorkTree {
            workdir: workdir.clone(),
            git_dir: git_dir.clone(),
        };
        let relative = workdir.strip_prefix(&root).map_err(|_| outside())?;
        let prefix = slash_path(relative).ok_or_else(outside)?;
        if prefix == ".git" || prefix.starts_with(".git/") {
            return Err(outside());
        }
        let prefix = if prefix.is_empty() {
            prefix
        } else {
            format!("{prefix}/")
        };
        Ok(Self {
            root,
            workdir,
            prefix,
            git_dir,
            excluded: Vec::new(),
            isolated_config: false,
        })
    }

    /// Leaves `paths` (ybs's own outputs: the output directory, the JUnit
    /// file, a `--record` cassette; absolute, or relative to the workdir)
    /// out of everything: they are never dirty and never committed, so a
    /// run is not refused because of the previous run's outputs and never
    /// commits its own transcript.
    ///
    /// Paths outside the work tree are dropped, and so is a path that
    /// contains the workdir (`--out .`): excluding it would exclude the
    /// task's own changes.
    #[must_use]
    pub fn excluding(mut self, paths: &[PathBuf]) -> Self {
        for path in paths {
            let Some(relative) = self.resolve_relative(path) else {
                continue;
            };
            let covers_workdir = relative.is_empty()
                || self.prefix == format!("{relative}/")
                || self.prefix.starts_with(&format!("{relative}/"));
            if !covers_workdir && !self.excluded.contains(&relative) {
                self.excluded.push(relative);
            }
        }
        self
    }

    /// True if and only if the repository-relative `path` is one of ybs's
    /// outputs (see [`Workspace::excluding`]).
    pub(crate) fn is_excluded(&self, path: &str) -> bool {
        self.excluded.iter().any(|excluded| {
            path.strip_prefix(excluded.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// Like [`Workspace::repo_relative`], for a path that may not exist
    /// yet, nor its parent (`ybs-out/junit.xml` before the first run): the
    /// longest existing ancestor is resolved, symlinks included.
    fn resolve_relative(&self, path: &Path) -> Option<String> {
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.workdir.join(path)
        };
        let normal = normalize(&joined)?;
        let mut existing = normal.as_path();
        let mut rest = Vec::new();
        let resolved = loop {
            if let Ok(canonical) = existing.canonicalize() {
                break canonical;
            }
            rest.push(existing.file_name()?);
            existing = existing.parent()?;
        };
        let full = rest
            .iter()
            .rev()
            .fold(resolved, |path, part| path.join(part));
        let relative = slash_path(full.strip_prefix(&self.root).ok()?)?;
        if relative == ".git" || relative.starts_with(".git/") {
            return None;
        }
        Some(relative)
    }

    /// The root of the work tree (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The task's workdir (canonical).
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The git directory.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The workdir relative to the root: `""` or `"a/b/"`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Tests only: see `isolated_config`.
    #[cfg(test)]
    pub(crate) fn with_isolated_config(mut self) -> Self {
        self.isolated_config = true;
        self
    }

    /// Opens the repository afresh.
    pub(crate) fn repo(&self) -> Result<Repository, GitError> {
        let repo = Repository::open_ext(
            &self.git_dir,
            RepositoryOpenFlags::NO_SEARCH,
            std::iter::empty::<&OsStr>(),
        )
        .map_err(GitError::git(format!(
            "cannot reopen the repository at {}",
            self.git_dir.display()
        )))?;
        if self.isolated_config {
            let config = git2::Config::open(&repo.commondir().join("config"))
                .map_err(GitError::git("cannot read the repository config"))?;
            repo.set_config(&config)
                .map_err(GitError::git("cannot set the repository config"))?;
        }
        Ok(repo)
    }

    /// The path of the index lock file.
    pub(crate) fn index_lock(&self) -> PathBuf {
        self.git_dir.join("index.lock")
    }

    /// Maps a path as a tool reported it (relative to the workdir, or
    /// absolute) to a repository-relative `/`-separated path. `None` when
    /// it lies outside the work tree, inside `.git`, or is not UTF-8.
    /// `Some("")` is the root itself.
    pub(crate) fn repo_relative(&self, reported: &Path) -> Option<String> {
        let joined = if reported.is_absolute() {
            reported.to_path_buf()
        } else {
            self.workdir.join(reported)
        };
        let normal = normalize(&joined)?;
        let relative = match normal.strip_prefix(&self.root) {
            Ok(relative) => relative.to_path_buf(),
            // An absolute path spelled through a symlinked ancestor
            // (e.g. `/tmp` -> `/private/tmp`): resolve the parent, which
            // exists even when the file was deleted.
            Err(_) => {
                let parent = normal.parent()?.canonicalize().ok()?;
                let joined = match normal.file_name() {
                    Some(name) => parent.join(name),
                    None => parent,
                };
                joined.strip_prefix(&self.root).ok()?.to_path_buf()
            }
        };
        let relative = slash_path(&relative)?;
        if relative == ".git" || relative.starts_with(".git/") {
            return None;
        }
        Some(relative)
    }
}

/// The report for a task whose workdir is in no git repository.
pub fn no_repository(workdir: &Path) -> GitOutcome {
    GitOutcome {
        note: format!(
            "{} is not in a git repository: nothing committed",
            workdir.display()
        ),
        ..GitOutcome::default()
    }
}

/// Resolves `.` and `..` lexically. `None` if `..` climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(part) => out.push(part),
        }
    }
    Some(out)
}

/// A relative path as git spells it: UTF-8, `/`-separated, no `.` parts.
fn slash_path(relative: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}
