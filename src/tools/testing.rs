//! Test fixtures for the tools: a temp tree with a workdir inside it and a
//! sibling directory outside it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{ChildEnv, ToolCtx};

/// A temp directory holding `work/` (the workdir) and `outside/`.
pub(crate) struct Fixture {
    _temp: tempfile::TempDir,
    pub root: PathBuf,
    pub ctx: ToolCtx,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let workdir = root.join("work");
        std::fs::create_dir_all(&workdir).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/secret.txt"), "outside secret\n").unwrap();
        let ctx = ToolCtx {
            workdir: workdir.clone(),
            allowed_roots: vec![workdir.clone()],
            blocked_paths: vec![
                "**/.env".to_owned(),
                root.join("blocked").display().to_string(),
            ],
            protected_paths: vec![workdir.join("task.yaml")],
            env: ChildEnv::scrubbed_from(
                [("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())].into_iter(),
                &[],
            ),
            shell_timeout: Duration::from_secs(30),
            max_shell_timeout: Duration::from_secs(60),
            output_cap_bytes: 64 * 1024,
            sandbox: None,
            shell_sandbox: None,
        };
        Self {
            _temp: temp,
            root,
            ctx,
        }
    }

    pub(crate) fn work(&self) -> &Path {
        &self.ctx.workdir
    }

    /// Writes `content` at `relative` inside the workdir, creating parents.
    pub(crate) fn file(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.work().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub(crate) fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.work().join(relative)).unwrap()
    }

    pub(crate) fn symlink(&self, target: impl AsRef<Path>, link: &str) {
        std::os::unix::fs::symlink(target, self.work().join(link)).unwrap();
    }
}

/// The message of a [`super::ToolError::Model`]; panics on anything else.
pub(crate) fn model_error(result: Result<impl std::fmt::Debug, super::ToolError>) -> String {
    match result {
        Err(super::ToolError::Model(message)) => message,
        other => panic!("expected a model error, got {other:?}"),
    }
}
