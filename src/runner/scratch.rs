//! `ybs run --scratch`: the run works in a temporary copy of the
//! directory ybs runs in, so the tasks leave the checkout as it was and
//! the same run can be made again (docs/cli.md).
//!
//! The copy holds the files git would see (tracked and untracked, not
//! ignored; `.git` itself is left out), so it is small for a repository
//! with a big `target/`. It is removed when the [`Scratch`] is dropped.

use std::path::{Path, PathBuf};

/// Why the copy could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    #[error("cannot create `{}`: {source}", .dir.display())]
    Create {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read `{}`: {source}", .dir.display())]
    Read { dir: PathBuf, source: ignore::Error },
    #[error("cannot copy `{}`: {source}", .path.display())]
    Copy {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A temporary copy of a directory, removed on drop.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Copies `source` (skipping its `.git`, what its ignore files
    /// exclude, and `skip`) into a new directory under `temp_dir` (the
    /// system's, `$TMPDIR` or `/tmp`).
    pub fn copy_of(source: &Path, skip: &[PathBuf], temp_dir: &Path) -> Result<Self, ScratchError> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or_default();
        let dir = temp_dir.join(format!("ybs-scratch-{}-{stamp:x}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|source| ScratchError::Create {
            dir: dir.clone(),
            source,
        })?;
        let scratch = Self { dir };
        scratch.fill(source, skip)?;
        Ok(scratch)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn fill(&self, source: &Path, skip: &[PathBuf]) -> Result<(), ScratchError> {
        let skip: Vec<PathBuf> = skip.iter().map(|path| source.join(path)).collect();
        let walk = ignore::WalkBuilder::new(source)
            .hidden(false)
            .require_git(false)
            .parents(false)
            .filter_entry(move |entry| {
                entry.file_name() != ".git" && !skip.iter().any(|path| entry.path() == path)
            })
            .build();
        for entry in walk {
            let entry = entry.map_err(|error| ScratchError::Read {
                dir: source.to_owned(),
                source: error,
            })?;
            let Ok(relative) = entry.path().strip_prefix(source) else {
                continue;
            };
            if relative.as_os_str().is_empty() {
                continue;
            }
            let target = self.dir.join(relative);
            let cannot = |source: std::io::Error| ScratchError::Copy {
                path: entry.path().to_owned(),
                source,
            };
            let kind = entry.file_type();
            if kind.is_some_and(|kind| kind.is_dir()) {
                std::fs::create_dir(&target).map_err(cannot)?;
            } else if kind.is_some_and(|kind| kind.is_symlink()) {
                let link = std::fs::read_link(entry.path()).map_err(cannot)?;
                std::os::unix::fs::symlink(link, &target).map_err(cannot)?;
            } else {
                std::fs::copy(entry.path(), &target).map_err(cannot)?;
            }
        }
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_holds_what_git_would_see_and_goes_away() {
        let source = tempfile::tempdir().unwrap();
        let root = source.path();
        std::fs::create_dir_all(root.join(".git/objects")).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join(".gitignore"), "/target\n").unwrap();
        std::fs::write(root.join("target/debug/big"), "x").unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn f() {}\n").unwrap();
        std::fs::write(root.join("out/old"), "x").unwrap();
        std::fs::write(root.join(".ybs.json"), "{}").unwrap();
        std::os::unix::fs::symlink("src/lib.rs", root.join("link")).unwrap();
        let scratch =
            Scratch::copy_of(root, &[PathBuf::from("out")], &std::env::temp_dir()).unwrap();
        let copy = scratch.path().to_owned();
        assert_eq!(
            std::fs::read_to_string(copy.join("src/lib.rs")).unwrap(),
            "fn f() {}\n"
        );
        assert!(copy.join(".ybs.json").is_file());
        assert!(copy.join(".gitignore").is_file());
        assert_eq!(
            std::fs::read_link(copy.join("link")).unwrap(),
            Path::new("src/lib.rs")
        );
        for absent in [".git", "target", "out"] {
            assert!(!copy.join(absent).exists(), "{absent}");
        }
        drop(scratch);
        assert!(!copy.exists());
    }
}
