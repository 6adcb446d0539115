//! The index after a commit: it agrees with the commit for the committed
//! paths, written under git's lock, restored when a later step fails.

use std::path::Path;

use git2::ErrorCode;

use crate::git::GitError;
use crate::git::tree::{self, Staged};

/// Makes the index agree with the commit for the committed paths.
/// `add_path` records the stat data `git status` needs to stay fast; if it
/// yields other content than was committed (the file changed meanwhile),
/// the committed entry wins and git shows the file as modified.
pub(super) fn update_index(index: &mut git2::Index, staged: &[Staged]) -> Result<(), GitError> {
    for item in staged.iter().filter(|item| item.blob.is_none()) {
        index
            .remove_path(Path::new(&item.path))
            .map_err(GitError::git(format!(
                "cannot remove {} from the index",
                item.path
            )))?;
    }
    for item in staged {
        let Some((oid, mode)) = item.blob else {
            continue;
        };
        let path = Path::new(&item.path);
        let matches = index.add_path(path).is_ok()
            && index
                .get_path(path, 0)
                .is_some_and(|entry| entry.id == oid && entry.mode == mode);
        if !matches {
            index
                .add(&tree::entry(&item.path, oid, mode))
                .map_err(GitError::git(format!(
                    "cannot add {} to the index",
                    item.path
                )))?;
        }
    }
    Ok(())
}

/// The second the index file at `path` was last written, if it exists.
pub(super) fn written_at(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let seconds = modified
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    i64::try_from(seconds).ok()
}

/// Racy git, as git itself handles it: git (built, by default, without
/// nanosecond timestamps) trusts an index entry whose file has the same
/// size and the same mtime second, unless the entry is as new as the index
/// file, which it then rereads. libgit2 judges that to the nanosecond, so
/// an index it writes (newer than the entries) could make a file changed
/// in the second of its entry, to the same size, look unchanged to `git
/// status` and `git commit -a`: the user's work, or the task's, hidden.
/// Every entry as new as the index being replaced gets its size zeroed, as
/// git does: git rereads those files and refreshes them.
pub(super) fn smudge_racy_entries(index: &mut git2::Index, replaced: i64) {
    let racy: Vec<git2::IndexEntry> = index
        .iter()
        .filter(|entry| i64::from(entry.mtime.seconds()) >= replaced && entry.file_size != 0)
        .collect();
    for mut entry in racy {
        entry.file_size = 0;
        let _ = index.add(&entry);
    }
}

/// Writes the index, its racy entries smudged first (see
/// [`smudge_racy_entries`]).
pub(super) fn write_index(index: &mut git2::Index, lock: &Path) -> Result<(), GitError> {
    if let Some(replaced) = index.path().and_then(written_at) {
        smudge_racy_entries(index, replaced);
    }
    index.write().map_err(|cause| {
        if cause.code() == ErrorCode::Locked {
            GitError::IndexLocked {
                lock: lock.to_path_buf(),
            }
        } else {
            GitError::git("cannot write the index")(cause)
        }
    })
}

/// Best effort: puts the committed paths' index entries back after a ref
/// update failed, so the index matches HEAD again.
pub(super) fn restore_index(
    index: &mut git2::Index,
    previous: &[(String, Option<git2::IndexEntry>)],
    lock: &Path,
) {
    for (path, entry) in previous {
        let _ = match entry {
            Some(entry) => index.add(entry),
            None => index.remove_path(Path::new(path)),
        };
    }
    let _ = write_index(index, lock);
}
