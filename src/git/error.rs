//! What can go wrong in ybs's git operations. Every variant says what
//! happened, that nothing was half-made, and where it helps, what to do.

use std::path::PathBuf;

use super::secrets::SecretFile;

/// An error from a git operation. The runner reports it with reason
/// `git_error` (docs/cli.md: exit 4 when no task failed).
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The workdir belongs to a repository without a work tree.
    #[error(
        "{} is in a bare git repository ({}); ybs needs a work tree to run tasks in",
        workdir.display(),
        git_dir.display()
    )]
    Bare { workdir: PathBuf, git_dir: PathBuf },

    /// The workdir is inside the git directory, or outside the work tree of
    /// the repository that claims it.
    #[error(
        "{} is not inside the work tree of the repository at {}; run ybs in the work tree, not in its git directory",
        workdir.display(),
        git_dir.display()
    )]
    OutsideWorkTree { workdir: PathBuf, git_dir: PathBuf },

    /// libgit2 refuses a repository owned by another user (git's
    /// `safe.directory` rule; common in CI containers).
    #[error(
        "git refuses to open the repository at {0}: it is owned by another user (hint: `git config --global --add safe.directory {0}`)",
        path.display()
    )]
    NotOwned { path: PathBuf },

    /// `index.lock` exists: another git process is running or one crashed.
    #[error(
        "the git index is locked: {} exists, so another git process is running or one crashed; nothing was committed (hint: remove that file once no git process is running)",
        lock.display()
    )]
    IndexLocked { lock: PathBuf },

    /// Another `ybs run` is writing in this repository and one of the two
    /// commits (see `runlock.rs`).
    #[error(
        "another ybs run is writing in the repository at {} and a task commits: the commit would take the other run's files",
        git_dir.display()
    )]
    RunLocked { git_dir: PathBuf },

    /// A merge, rebase, cherry-pick, revert, bisect or `git am` is under way.
    #[error(
        "the repository is in the middle of a {state}; ybs commits only when it is finished or aborted, so nothing was committed"
    )]
    InProgress { state: &'static str },

    /// `YBS_GIT_AUTHOR` (or the requested author) does not parse.
    #[error("YBS_GIT_AUTHOR must look like `Name <email>`, got `{value}`")]
    InvalidAuthor { value: String },

    /// A branch name ybs was asked to use (or derived from the run id) is
    /// not a valid git branch name.
    #[error("`{name}` is not a valid git branch name; nothing was committed")]
    InvalidBranch { name: String },

    /// A file git reads while it walks the work tree (`.gitignore`,
    /// `.gitattributes`, `.gitmodules`) is there but not a regular file:
    /// opening a FIFO would wait for a writer forever.
    #[error(
        "`{path}` is not a regular file (a FIFO, socket or device, or a link to one); git would read it and wait forever, so ybs reads no status: remove it"
    )]
    SpecialFile { path: String },

    /// A branch ybs would create or advance already exists somewhere else.
    /// ybs never moves a branch it did not build on, so nothing was done.
    #[error(
        "branch `{branch}` already exists at {at}, not at HEAD ({head}); ybs never checks out or moves an unrelated branch, so nothing was committed"
    )]
    BranchConflict {
        branch: String,
        at: String,
        head: String,
    },

    /// Files the commit would take hold what looks like credentials: the
    /// commit is not made (reason `secret_in_commit`).
    #[error(
        "not committed: {} looks like it holds a credential; the task's changes stay uncommitted (hint: remove the credential from the file; if the file is meant to be committed, the operator can allow its path with git.allow_secret_paths)",
        describe_secrets(found)
    )]
    SecretInCommit { found: Vec<SecretFile> },

    /// A libgit2 call failed.
    #[error("git: {context}: {}", cause.message())]
    Git { context: String, cause: git2::Error },

    /// Reading the work tree failed.
    #[error("git: {context} {}: {cause}", path.display())]
    Io {
        context: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
}

impl GitError {
    /// A closure for `map_err` that wraps a libgit2 error with what ybs was
    /// doing.
    pub(crate) fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> Self {
        let context = context.into();
        move |cause| Self::Git { context, cause }
    }

    /// A closure for `map_err` that wraps an I/O error with its path.
    pub(crate) fn io(
        context: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |cause| Self::Io {
            context,
            path,
            cause,
        }
    }
}

/// `a.txt (github_token), b.pem (private_key)`.
fn describe_secrets(found: &[SecretFile]) -> String {
    found
        .iter()
        .map(|file| format!("{} ({})", file.path, file.kind))
        .collect::<Vec<_>>()
        .join(", ")
}
