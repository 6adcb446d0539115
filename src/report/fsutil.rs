//! File helpers shared by the sinks: per-task directories, atomic writes,
//! errors that name their path.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `OUT/<task>`, refusing a task name that is not one plain path component
/// (task ids are validated long before, but a sink must never write
/// outside `OUT` whatever it is fed).
pub(crate) fn task_dir(out_dir: &Path, task: &str) -> io::Result<PathBuf> {
    let plain = !task.is_empty()
        && !task.starts_with('.')
        && !task.contains(['/', '\\', '\0'])
        && Path::new(task).components().count() == 1;
    if plain {
        Ok(out_dir.join(task))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to write outputs for task {task:?}: not a plain file name"),
        ))
    }
}

/// Writes `contents` to `path` through a temporary file in the same
/// directory and a rename, so readers see the old file or the new one,
/// never half of one. Creates the parent directories.
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = parent.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        std::fs::create_dir_all(parent)?;
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(|err| with_path(err, path))
}

/// Adds the path to an I/O error, so the one line the runner reports says
/// which output failed.
pub(crate) fn with_path(err: io::Error, path: &Path) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_dirs_stay_inside_out() {
        let out = Path::new("/out");
        assert_eq!(
            task_dir(out, "rename-helper").unwrap(),
            out.join("rename-helper")
        );
        for bad in ["", ".", "..", "../x", "a/b", ".hidden", "/abs", "a\\b"] {
            assert!(task_dir(out, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn atomic_write_creates_parents_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/file.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    }
}
