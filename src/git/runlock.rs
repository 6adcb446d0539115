//! One committing `ybs run` per repository at a time (docs/git.md). A
//! task's commit takes the files that changed in the workdir during the
//! task; a second `ybs run` writing in the same work tree at the same
//! time would have its files taken into the first run's commit (and report
//! "nothing to commit" itself). So a run that commits holds an exclusive
//! `flock` on the git common directory itself from before its first task
//! until it exits, and a run that only writes (`--no-commit`, `commit:
//! false`) a shared one: two writers without commits may share the tree,
//! a committing run never shares it. Locking the directory writes nothing
//! into `.git`, and the kernel drops the lock when the process ends, even
//! by `kill -9`: no stale lock is ever left.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::GitError;

/// The locks this process holds: (git common directory, exclusive, lock).
static HELD: Mutex<Vec<(PathBuf, bool, Flock<File>)>> = Mutex::new(Vec::new());

/// Takes the run lock of the repository holding `workdir` for the rest of
/// the process: exclusive when this run commits there. No repository, or
/// a git directory ybs cannot write (the commit reports that later): no
/// lock, `Ok`; so on a file system without `flock`. Another ybs process
/// holding it in a conflicting mode:
/// [`GitError::RunLocked`], at once (never a wait).
pub fn lock_repository(workdir: &Path, exclusive: bool) -> Result<(), GitError> {
    let Ok(repo) = git2::Repository::discover(workdir) else {
        return Ok(());
    };
    lock_git_dir(repo.commondir(), exclusive)
}

/// [`lock_repository`] of the repository whose common git directory is
/// `common` (already found).
pub(crate) fn lock_git_dir(common: &Path, exclusive: bool) -> Result<(), GitError> {
    let path = common.to_path_buf();
    let mut held = HELD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mode = if exclusive {
        FlockArg::LockExclusiveNonblock
    } else {
        FlockArg::LockSharedNonblock
    };
    if let Some(entry) = held.iter_mut().find(|(held, _, _)| *held == path) {
        if entry.1 || !exclusive {
            return Ok(());
        }
        return match entry.2.relock(mode) {
            Ok(()) => {
                entry.1 = true;
                Ok(())
            }
            Err(Errno::EWOULDBLOCK) => Err(busy(&path)),
            Err(_) => Ok(()),
        };
    }
    let Ok(file) = File::open(&path) else {
        return Ok(());
    };
    // A file system without locks: no lock, as without a repository.
    let lock = match Flock::lock(file, mode) {
        Ok(lock) => lock,
        Err((_, Errno::EWOULDBLOCK)) => return Err(busy(&path)),
        Err(_) => return Ok(()),
    };
    held.push((path, exclusive, lock));
    Ok(())
}

fn busy(path: &Path) -> GitError {
    GitError::RunLocked {
        git_dir: path.to_owned(),
    }
}
