//! Empty directories ybs makes at missing read-only paths of the workdir
//! (`.ybs.json/`, `.github/workflows/`, `.github/actions/` and their
//! missing parents), so a confined program can neither create them nor
//! put anything there; removed when the task ends, if still empty.
//!
//! Never through a link: every directory is made and removed relative to
//! a handle on its parent, each component opened with `O_NOFOLLOW`
//! (`mkdirat`, `unlinkat(AT_REMOVEDIR)`). A path with a symlink (or a
//! file) on the way, a repository whose `.github` links outside, gets no
//! placeholder: ybs makes and removes nothing outside the workdir.
//!
//! Nothing left behind: before making any, ybs records the directories it
//! is about to make in `$XDG_STATE_HOME/ybs/placeholders/*.json` (else
//! `~/.local/state/...`), a file it holds locked (`flock`) while the task
//! runs and deletes after removing them. A run of ybs killed before that
//! (`kill -9`) leaves the record unlocked; the next run that builds a
//! sandbox removes the directories it lists and the record. Only those
//! paths, only when they are still empty directories (`rmdir` fails on
//! anything else): an empty directory holds no user content, and git
//! tracks no directory.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;
use serde::{Deserialize, Serialize};

/// The directories made for one task, removed on drop when still empty.
#[derive(Debug, Default)]
pub(super) struct Placeholders {
    workdir: PathBuf,
    /// Workdir-relative, in the order they were made.
    made: Vec<String>,
    /// The record listing them, held locked while they exist.
    record: Option<(PathBuf, File)>,
}

/// What a record holds.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    workdir: PathBuf,
    made: Vec<String>,
}

/// Where records are kept: `$XDG_STATE_HOME/ybs/placeholders`, else
/// `~/.local/state/ybs/placeholders`.
pub(super) fn record_dir() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    let base = absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state")))?;
    Some(base.join("ybs").join("placeholders"))
}

impl Placeholders {
    /// Makes the placeholders of `paths` (the missing ones inside
    /// `workdir`), recorded in [`record_dir`], after removing what a run
    /// killed earlier left.
    pub(super) fn create(workdir: &Path, paths: &[PathBuf]) -> Self {
        Self::create_recorded(workdir, paths, record_dir().as_deref())
    }

    /// [`Placeholders::create`] with its records in `records`.
    pub(super) fn create_recorded(
        workdir: &Path,
        paths: &[PathBuf],
        records: Option<&Path>,
    ) -> Self {
        if let Some(records) = records {
            sweep(records);
        }
        let mut placeholders = Self {
            workdir: workdir.to_owned(),
            made: Vec::new(),
            record: None,
        };
        let Ok(root) = open_dir(AT_FDCWD, workdir) else {
            return placeholders;
        };
        let mut planned: Vec<String> = Vec::new();
        for path in paths {
            let Some(components) = relative_components(workdir, path) else {
                continue;
            };
            for dir in missing(root.as_fd(), &components) {
                if !planned.contains(&dir) {
                    planned.push(dir);
                }
            }
        }
        if planned.is_empty() {
            return placeholders;
        }
        // Recorded before the first one is made: a kill at any point
        // after leaves a record.
        placeholders.record = records.and_then(|dir| write_record(dir, workdir, &planned));
        for dir in planned {
            let (parent, name) = split(&dir);
            let Ok(parent) = walk(root.as_fd(), &parent) else {
                continue;
            };
            if nix::sys::stat::mkdirat(parent.as_fd(), name, Mode::from_bits_truncate(0o755))
                .is_ok()
            {
                placeholders.made.push(dir);
            }
        }
        placeholders
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        remove(&self.workdir, &self.made);
        if let Some((path, file)) = self.record.take() {
            let _ = std::fs::remove_file(path);
            drop(file);
            // The state directories this process made for records go too
            // once empty (another task's record keeps them).
            let mut made = made_state_dirs();
            for index in (0..made.len()).rev() {
                if std::fs::remove_dir(&made[index]).is_ok() || !made[index].exists() {
                    made.remove(index);
                }
            }
        }
    }
}

/// The directories this process made to hold records, deepest last.
fn made_state_dirs() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    static MADE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    MADE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes, deepest first, those of `made` that are still empty
/// directories below `workdir` with no link on the way.
fn remove(workdir: &Path, made: &[String]) {
    if made.is_empty() {
        return;
    }
    let Ok(root) = open_dir(AT_FDCWD, workdir) else {
        return;
    };
    for dir in made.iter().rev() {
        if !plain(dir) {
            continue;
        }
        let (parent, name) = split(dir);
        if let Ok(parent) = walk(root.as_fd(), &parent) {
            // Fails, as it should, when something was put inside.
            let _ = nix::unistd::unlinkat(parent.as_fd(), name, UnlinkatFlags::RemoveDir);
        }
    }
}

/// Removes what the records in `dir` of runs no longer alive list.
/// Removes what earlier runs killed before their end left (see
/// [`sweep`]), from the standard record directory.
pub(super) fn sweep_stale() {
    if let Some(dir) = record_dir() {
        sweep(&dir);
    }
}

fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        // Locked: its run is alive (this process's own tasks included).
        if file.try_lock().is_err() {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(record) = serde_json::from_str::<Record>(&text)
        {
            remove(&record.workdir, &record.made);
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// Writes the record under a temporary name, locks it, then gives it its
/// final name: a sweeper never sees a record half written or unlocked.
fn write_record(dir: &Path, workdir: &Path, made: &[String]) -> Option<(PathBuf, File)> {
    use std::os::unix::fs::DirBuilderExt as _;
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|ancestor| ancestor.symlink_metadata().is_err())
        .collect();
    // Held until the record exists: another task's drop removes empty
    // state directories under the same lock.
    let mut made_dirs = made_state_dirs();
    for ancestor in missing.iter().rev() {
        if std::fs::DirBuilder::new()
            .mode(0o700)
            .create(ancestor)
            .is_ok()
        {
            made_dirs.push(ancestor.to_path_buf());
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let name = format!("{}-{nanos}", std::process::id());
    let temp = dir.join(format!("{name}.tmp"));
    let path = dir.join(format!("{name}.json"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .ok()?;
    drop(made_dirs);
    let written = file.lock().is_ok()
        && serde_json::to_vec(&Record {
            workdir: workdir.to_owned(),
            made: made.to_vec(),
        })
        .is_ok_and(|bytes| file.write_all(&bytes).is_ok())
        && std::fs::rename(&temp, &path).is_ok();
    if written {
        Some((path, file))
    } else {
        let _ = std::fs::remove_file(&temp);
        None
    }
}

/// `path`'s components below `workdir`, when it is inside and plain.
fn relative_components(workdir: &Path, path: &Path) -> Option<Vec<String>> {
    let relative = path.strip_prefix(workdir).ok()?;
    let joined = relative.to_str()?;
    plain(joined).then(|| joined.split('/').map(str::to_owned).collect())
}

/// A relative `/`-separated path with no empty, `.` or `..` component.
fn plain(relative: &str) -> bool {
    !relative.is_empty()
        && relative
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// The directories to make for `components`: from the first missing one
/// down. None when one on the way is a symlink, a file, or unreadable.
fn missing(root: BorrowedFd<'_>, components: &[String]) -> Vec<String> {
    let mut current: Option<OwnedFd> = None;
    for (index, part) in components.iter().enumerate() {
        let dir = current.as_ref().map_or(root, AsFd::as_fd);
        match open_dir(dir, part.as_str()) {
            Ok(fd) => current = Some(fd),
            Err(Errno::ENOENT) => {
                return (index..components.len())
                    .map(|end| components[..=end].join("/"))
                    .collect();
            }
            // A link (ELOOP, or ENOTDIR with O_DIRECTORY), a file, ...:
            // no placeholder through it.
            Err(_) => return Vec::new(),
        }
    }
    Vec::new()
}

/// `a/b/c` as (`["a", "b"]`, `c`).
fn split(relative: &str) -> (Vec<String>, &str) {
    match relative.rsplit_once('/') {
        Some((parent, name)) => (parent.split('/').map(str::to_owned).collect(), name),
        None => (Vec::new(), relative),
    }
}

/// The directory `components` below `root`, no link followed.
fn walk(root: BorrowedFd<'_>, components: &[String]) -> Result<OwnedFd, Errno> {
    let mut current = open_dir(root, ".")?;
    for part in components {
        current = open_dir(current.as_fd(), part.as_str())?;
    }
    Ok(current)
}

fn open_dir<Fd: AsFd, P: ?Sized + nix::NixPath>(dir: Fd, name: &P) -> Result<OwnedFd, Errno> {
    nix::fcntl::openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_made_through_a_link_out_of_the_workdir() {
        let temp = tempfile::tempdir().unwrap();
        let work = temp.path().join("work");
        let outside = temp.path().join("outside");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, work.join(".github")).unwrap();
        let records = temp.path().join("records");
        let paths = [
            work.join(".github/workflows"),
            work.join(".github/actions"),
            work.join(".ybs.json"),
        ];
        let placeholders = Placeholders::create_recorded(&work, &paths, Some(&records));
        assert_eq!(placeholders.made, [".ybs.json"]);
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        drop(placeholders);
        assert!(!work.join(".ybs.json").exists());
        // The record went, and so did the directory made for it.
        assert!(!records.exists());
    }

    #[test]
    fn a_dead_runs_record_is_swept_and_only_its_empty_directories_go() {
        let temp = tempfile::tempdir().unwrap();
        let work = temp.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let records = temp.path().join("records");
        let paths = [
            work.join(".github/workflows"),
            work.join(".github/actions"),
            work.join(".ybs.json"),
        ];
        let first = Placeholders::create_recorded(&work, &paths, Some(&records));
        assert_eq!(
            first.made,
            [
                ".github",
                ".github/workflows",
                ".github/actions",
                ".ybs.json"
            ]
        );
        // While its run lives, a second run leaves its record alone.
        let second = Placeholders::create_recorded(&work, &[], Some(&records));
        assert!(work.join(".ybs.json").is_dir());
        drop(second);
        // Killed: the record stays, unlocked, and so do the directories.
        let mut first = first;
        let (record, file) = first.record.take().unwrap();
        drop(file);
        first.made.clear();
        drop(first);
        assert!(record.exists() && work.join(".ybs.json").is_dir());
        // The user put a file into one meanwhile.
        std::fs::write(work.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
        let third = Placeholders::create_recorded(&work, &[], Some(&records));
        assert!(!record.exists());
        assert!(!work.join(".ybs.json").exists());
        assert!(!work.join(".github/actions").exists());
        assert_eq!(
            std::fs::read_to_string(work.join(".github/workflows/ci.yml")).unwrap(),
            "on: push\n"
        );
        drop(third);
    }
}
