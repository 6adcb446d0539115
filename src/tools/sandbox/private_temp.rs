//! A task's private temp directory: only ybs's user can enter it, made at
//! the task's first confined program and removed with its content on drop;
//! and the sweep of the ones a killed ybs left behind.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A directory only ybs's user can enter, named when the task is set up,
/// made at its first confined program ([`Sandbox::ready`](super::Sandbox::ready)) and removed
/// (with its content) on drop if it was made.
#[derive(Debug)]
pub(super) struct PrivateTemp {
    pub(super) path: PathBuf,
    /// Whether it was made, or why it could not be.
    made: OnceLock<Result<(), String>>,
}

impl PrivateTemp {
    /// An unused name under the temp dir, canonical. Random: the name is
    /// in the outputs before the directory exists, and a directory of that
    /// name made by anyone else is never used ([`PrivateTemp::ensure`]).
    pub(super) fn name() -> io::Result<Self> {
        use std::hash::{BuildHasher as _, Hasher as _};
        let base = std::env::temp_dir().canonicalize()?;
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_private_temps(&base));
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let name = format!("ybs-sandbox-{}-{random:016x}", std::process::id());
        Ok(Self {
            path: base.join(name),
            made: OnceLock::new(),
        })
    }

    /// Makes it (mode 0700, with an empty `.home`), once. A directory of
    /// that name that exists already is not ours: an error, every time.
    pub(super) fn ensure(&self) -> io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        self.made
            .get_or_init(|| {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&self.path)
                    .map_err(|error| {
                        format!(
                            "cannot create the private temp dir {}: {error}",
                            self.path.display()
                        )
                    })?;
                let _ = std::fs::create_dir(self.path.join(".home"));
                Ok(())
            })
            .clone()
            .map_err(io::Error::other)
    }
}

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        if matches!(self.made.get(), Some(Ok(()))) {
            remove_tree(&self.path);
        }
    }
}

/// The private temp dirs (`ybs-sandbox-PID-RANDOM`) in `base` that runs
/// killed before their end left: those of this user whose process is
/// gone (once per process, at the first task's set-up).
pub(super) fn sweep_private_temps(base: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let uid = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("ybs-sandbox-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = entry
            .path()
            .symlink_metadata()
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == uid);
        if ours && !Path::new("/proc").join(pid.to_string()).exists() {
            remove_tree(&entry.path());
        }
    }
}

/// Removes the directory `path` with its content, links not followed,
/// even where a program (or overlayfs, whose work directory it leaves at
/// mode 000) took the owner's rights away.
pub(super) fn remove_tree(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if std::fs::remove_dir_all(path).is_ok() {
        return;
    }
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let is_dir = dir.symlink_metadata().is_ok_and(|meta| meta.is_dir());
        if !is_dir {
            continue;
        }
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            pending.extend(entries.flatten().map(|entry| entry.path()));
        }
    }
    let _ = std::fs::remove_dir_all(path);
}
