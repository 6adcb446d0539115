//! The state of a repository at task start: HEAD, base commit and the
//! user's dirty paths, each with a hash of its content so a later commit
//! can tell whether the task touched a file the user had changed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use git2::{ErrorCode, ObjectType, Oid, Repository, Status, StatusOptions};
use serde::{Deserialize, Serialize};

use super::beneath::{WorkEntry, WorkRoot};
use super::ignore::IgnoreRules;
use super::{GitError, Workspace};

/// Where HEAD was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Head {
    /// On a branch (short name, e.g. `main`).
    Branch { name: String },
    /// Detached at a commit, as CI checks out pull requests.
    Detached { sha: String },
    /// On a branch that has no commit yet (an empty repository).
    Unborn { branch: String },
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Branch { name } => write!(f, "branch {name}"),
            Self::Detached { sha } => write!(f, "detached HEAD at {}", short(sha)),
            Self::Unborn { branch } => write!(f, "unborn branch {branch}"),
        }
    }
}

/// What `git status` would say about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Modified,
    /// New and staged.
    Added,
    Deleted,
    /// New and not staged.
    Untracked,
    /// A file became a symlink or the reverse.
    TypeChanged,
    /// Unmerged.
    Conflicted,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Modified => "modified",
            Self::Added => "added",
            Self::Deleted => "deleted",
            Self::Untracked => "untracked",
            Self::TypeChanged => "type changed",
            Self::Conflicted => "conflicted",
        }
    }
}

/// The content of a path in the work tree, hashed as a git blob of its raw
/// bytes (no filters), so equal content means an untouched file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Content {
    /// Nothing at the path.
    Absent,
    File {
        blob: String,
        executable: bool,
    },
    /// The blob of the link target.
    Symlink {
        blob: String,
    },
    Directory,
    /// A FIFO, socket or device; a path whose name is not UTF-8; a file
    /// over [`MAX_FILE_BYTES`].
    Other,
}

/// A path with uncommitted changes (staged or not; ignored files are never
/// listed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirtyPath {
    /// Relative to the repository root, `/`-separated.
    pub path: String,
    pub change: Change,
    /// True if and only if the index differs from HEAD for this path.
    pub staged: bool,
    /// The work tree content when it was listed.
    pub content: Content,
}

impl fmt::Display for DirtyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.path, self.change.as_str())?;
        if self.staged && self.change != Change::Added {
            f.write_str(", staged")?;
        }
        f.write_str(")")
    }
}

/// The repository at task start. Serializable, so a paused run can commit
/// after `ybs resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub head: Head,
    /// The commit HEAD pointed at; `None` on an unborn branch.
    pub base: Option<String>,
    /// The user's uncommitted paths, sorted. Never committed by a task.
    pub dirty: Vec<DirtyPath>,
    /// The repository's ignore rules at the start: a path they ignored is
    /// never committed, even once the task changed them. `None` in the
    /// snapshot of an older version (the rules of the moment apply then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_rules: Option<IgnoreRules>,
}

impl Snapshot {
    /// True if and only if there was nothing uncommitted.
    pub fn is_clean(&self) -> bool {
        self.dirty.is_empty()
    }

    /// The dirty path named `path`, if any.
    pub(crate) fn dirty_path(&self, path: &str) -> Option<&DirtyPath> {
        self.dirty
            .binary_search_by(|dirty| dirty.path.as_str().cmp(path))
            .ok()
            .and_then(|index| self.dirty.get(index))
    }
}

/// One line naming dirty paths for an error message, e.g.
/// `src/a.rs (modified), notes.txt (untracked) and 3 more`.
pub fn describe_dirty(paths: &[DirtyPath]) -> String {
    const SHOWN: usize = 10;
    let mut text = paths
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        text.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    text
}

impl Workspace {
    /// Records the repository's state at task start. Read-only: works with
    /// a locked index, writes nothing.
    pub fn snapshot(&self) -> Result<Snapshot, GitError> {
        self.snapshot_of(&self.repo()?)
    }

    /// [`Workspace::snapshot`] with the repository already open.
    pub(crate) fn snapshot_of(&self, repo: &Repository) -> Result<Snapshot, GitError> {
        let head = read_head(repo)?;
        let dirty = dirty(self, repo)?;
        let ignore_rules = IgnoreRules::read(self, repo, &dirty)?;
        Ok(Snapshot {
            head: head.head,
            base: head.oid.map(|oid| oid.to_string()),
            dirty: dirty.into_values().collect(),
            ignore_rules: Some(ignore_rules),
        })
    }

    /// The uncommitted paths of the whole repository (not only under the
    /// workdir), ignored files, submodules and ybs's own outputs excluded.
    /// Empty means clean: the runner stops a task on a non-empty list
    /// unless `--allow-dirty`.
    pub fn dirty_paths(&self) -> Result<Vec<DirtyPath>, GitError> {
        Ok(dirty(self, &self.repo()?)?.into_values().collect())
    }
}

/// HEAD as ybs needs it to commit.
pub(crate) struct HeadInfo {
    pub head: Head,
    /// The commit HEAD resolves to.
    pub oid: Option<Oid>,
    /// The full name of the branch HEAD is on (born or not).
    pub refname: Option<String>,
}

pub(crate) fn read_head(repo: &Repository) -> Result<HeadInfo, GitError> {
    let reference = repo
        .find_reference("HEAD")
        .map_err(GitError::git("cannot read HEAD"))?;
    let symbolic = reference
        .symbolic_target()
        .map_err(GitError::git("HEAD names a branch that is not UTF-8"))?;
    if let Some(target) = symbolic {
        let refname = target.to_owned();
        let name = refname
            .strip_prefix("refs/heads/")
            .unwrap_or(&refname)
            .to_owned();
        return match repo.refname_to_id(&refname) {
            Ok(oid) => {
                let oid = repo
                    .find_commit(oid)
                    .map_err(GitError::git(format!("{refname} is not a commit")))?
                    .id();
                Ok(HeadInfo {
                    head: Head::Branch { name },
                    oid: Some(oid),
                    refname: Some(refname),
                })
            }
            Err(error) if error.code() == ErrorCode::NotFound => Ok(HeadInfo {
                head: Head::Unborn { branch: name },
                oid: None,
                refname: Some(refname),
            }),
            Err(error) => Err(GitError::git(format!("cannot resolve {refname}"))(error)),
        };
    }
    let oid = reference.target().ok_or_else(|| GitError::Git {
        context: "cannot read HEAD".into(),
        cause: git2::Error::from_str("HEAD is neither a branch nor a commit"),
    })?;
    Ok(HeadInfo {
        head: Head::Detached {
            sha: oid.to_string(),
        },
        oid: Some(oid),
        refname: None,
    })
}

/// The status of every non-ignored changed path that is not one of ybs's
/// outputs, keyed by path.
///
/// No rename detection (a rename is a deletion plus an addition, each
/// committed or skipped on its own) and no index update (`git status`
/// may refresh the index; ybs never writes it here).
pub(crate) fn dirty(
    workspace: &Workspace,
    repo: &Repository,
) -> Result<BTreeMap<String, DirtyPath>, GitError> {
    let root = workspace.root();
    if let Some(path) = special_git_file(root) {
        let path = path.strip_prefix(root).unwrap_or(&path);
        return Err(GitError::SpecialFile {
            path: path.to_string_lossy().into_owned(),
        });
    }
    let work = WorkRoot::open(root)?;
    let mut options = StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .include_unmodified(false)
        .exclude_submodules(true)
        .renames_head_to_index(false)
        .renames_index_to_workdir(false)
        .update_index(false);
    let statuses = repo
        .statuses(Some(&mut options))
        .map_err(GitError::git("cannot read the status of the work tree"))?;
    let mut out = BTreeMap::new();
    for entry in statuses.iter() {
        let status = entry.status();
        if status.is_empty() || status.contains(Status::IGNORED) {
            continue;
        }
        let (path, content) = match std::str::from_utf8(entry.path_bytes()) {
            Ok(path) if workspace.is_excluded(path) => continue,
            Ok(path) => (path.to_owned(), content_of(&work, path)?),
            Err(_) => (
                String::from_utf8_lossy(entry.path_bytes()).into_owned(),
                Content::Other,
            ),
        };
        out.insert(
            path.clone(),
            DirtyPath {
                path,
                change: change_of(status),
                staged: status.intersects(
                    Status::INDEX_NEW
                        | Status::INDEX_MODIFIED
                        | Status::INDEX_DELETED
                        | Status::INDEX_RENAMED
                        | Status::INDEX_TYPECHANGE,
                ),
                content,
            },
        );
    }
    Ok(out)
}

/// The files libgit2 opens as it walks a directory of the work tree or
/// looks up attributes.
const GIT_READS: &[&str] = &[".gitignore", ".gitattributes", ".gitmodules"];

/// The first of [`GIT_READS`] in the work tree at `root` that is there
/// but, symlinks followed, neither a file nor a directory: a FIFO a task made
/// (`mkfifo .gitignore`) would block libgit2's `open` for good. The walk
/// skips `.git` and what `.gitignore` ignores (git does not enter it
/// either), and never opens an ignore file it has not checked first.
fn special_git_file(root: &Path) -> Option<PathBuf> {
    let special = |dir: &Path| {
        GIT_READS.iter().map(|name| dir.join(name)).find(|path| {
            std::fs::metadata(path).is_ok_and(|meta| !meta.is_file() && !meta.is_dir())
        })
    };
    if let Some(path) = special(root) {
        return Some(path);
    }
    let found: Arc<Mutex<Option<PathBuf>>> = Arc::default();
    let seen = Arc::clone(&found);
    let walker = ::ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .ignore(false)
        .git_global(false)
        .parents(false)
        .filter_entry(move |entry| {
            let mut found = seen.lock().unwrap_or_else(PoisonError::into_inner);
            if found.is_some() || entry.file_name() == ".git" {
                return false;
            }
            if entry.depth() > 0 && entry.file_type().is_some_and(|kind| kind.is_dir()) {
                *found = special(entry.path());
                return found.is_none();
            }
            true
        })
        .build();
    for _ in walker {
        if found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
        {
            break;
        }
    }
    found.lock().unwrap_or_else(PoisonError::into_inner).take()
}

fn change_of(status: Status) -> Change {
    if status.contains(Status::CONFLICTED) {
        Change::Conflicted
    } else if status.intersects(Status::WT_DELETED | Status::INDEX_DELETED) {
        Change::Deleted
    } else if status.contains(Status::INDEX_NEW) {
        Change::Added
    } else if status.contains(Status::WT_NEW) {
        Change::Untracked
    } else if status.intersects(Status::WT_TYPECHANGE | Status::INDEX_TYPECHANGE) {
        Change::TypeChanged
    } else {
        Change::Modified
    }
}

/// The largest file ybs hashes or commits (GitHub refuses larger ones).
/// A bigger one, which a task can make in an instant (`truncate -s 1T`),
/// would take hours to read: it counts as [`Content::Other`], is never
/// read, and is skipped as `too_large`.
pub(crate) const MAX_FILE_BYTES: u64 = 100 << 20;

/// Hashes what is at `path` now, read beneath the work tree and never
/// through a symlink ([`WorkRoot::read`]).
pub(crate) fn content_of(work: &WorkRoot, path: &str) -> Result<Content, GitError> {
    let hash = |bytes: &[u8], what: &str| {
        Oid::hash_object(ObjectType::Blob, bytes)
            .map(|blob| blob.to_string())
            .map_err(GitError::git(format!("cannot hash {what}")))
    };
    Ok(match work.read(path, MAX_FILE_BYTES)? {
        WorkEntry::Absent => Content::Absent,
        WorkEntry::Symlink(target) => Content::Symlink {
            blob: hash(&target, "a symlink target")?,
        },
        WorkEntry::File { bytes, executable } => Content::File {
            blob: hash(&bytes, path)?,
            executable,
        },
        WorkEntry::Directory => Content::Directory,
        WorkEntry::TooLarge { .. } | WorkEntry::Special => Content::Other,
    })
}

/// The 7-character abbreviation of a SHA, as `git log --oneline` shows it.
pub(crate) fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}
