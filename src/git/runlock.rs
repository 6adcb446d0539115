//! One committing `ybs run` per repository at a time (docs/git.md). A
//! task's commit takes the files that changed in the workdir during the
//! task; a second `ybs run` writing in the same work tree at the same
//! time would have its files taken into the first run's commit (and report
//! "nothing to commit" itself). So a run that commits holds an exclusive
//! `flock` on `<git common dir>/ybs-run.lock` from before its first task
//! until it exits, and a run that only writes (`--no-commit`, `commit:
//! false`) a shared one: two writers without commits may share the tree,
//! a committing run never shares it. The kernel drops the lock when the
//! process ends, even by `kill -9`: no stale lock is ever left.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::GitError;

/// The lock file's name in the git common directory.
pub const RUN_LOCK: &str = "ybs-run.lock";

/// The locks this process holds: (lock file, exclusive, lock).
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
    let path = repo.commondir().join(RUN_LOCK);
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
    let Ok(file) = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
    else {
        return Ok(());
    };
    // A file system without locks: no lock, as without a repository.
    let mut lock = match Flock::lock(file, mode) {
        Ok(lock) => lock,
        Err((_, Errno::EWOULDBLOCK)) => return Err(busy(&path)),
        Err(_) => return Ok(()),
    };
    if exclusive {
        // Who holds it, for the message another run prints.
        let _ = lock.set_len(0);
        let _ = writeln!(lock, "{}", std::process::id());
    }
    held.push((path, exclusive, lock));
    Ok(())
}

fn busy(path: &Path) -> GitError {
    let holder = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok());
    GitError::RunLocked {
        lock: path.to_owned(),
        holder,
    }
}
