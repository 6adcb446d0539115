//! File helpers shared by the sinks: per-task directory names, errors
//! that name their path. Writing goes through [`super::outdir::OutDir`].

use std::io;
use std::path::{Path, PathBuf};

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
}
