//! Tests on real repositories made with the `git` CLI in temp dirs, and
//! checked afterwards with `git` itself.
//!
//! Every `git` subprocess gets a cleared environment with
//! `GIT_CONFIG_GLOBAL=/dev/null` and `GIT_CONFIG_NOSYSTEM=1` (tests run in
//! parallel threads, so the process environment is never changed), and
//! every `Workspace` reads only the repository's own config.

mod commit;
mod head;
mod safety;
mod salvage;
mod trust;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

use super::{CommitRequest, Snapshot, Workspace};

pub(super) const RUN: &str = "20261122T155213Z-3f9a1c";
pub(super) const MODEL: &str = "gpt-test";

/// A repository in a temp dir.
pub(super) struct Repo {
    _dir: TempDir,
    pub root: PathBuf,
}

impl Repo {
    /// An empty repository on unborn `main`, with a local identity.
    pub fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("repo");
        std::fs::create_dir(&root).unwrap();
        let repo = Self { _dir: dir, root };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Test User"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        repo
    }

    /// A repository on `main` with one commit holding `a.txt`, `b.txt`,
    /// `c.txt` and a `.gitignore` of `*.log` and `build/`.
    pub fn new() -> Self {
        let repo = Self::empty();
        repo.write("a.txt", "a\n");
        repo.write("b.txt", "b\n");
        repo.write("c.txt", "c\n");
        repo.write(".gitignore", "*.log\nbuild/\n");
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "initial"]);
        repo
    }

    /// Runs `git` in the root, isolated from the machine's config; panics
    /// on failure; returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let output = self.git_output(args);
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    pub fn git_output(&self, args: &[&str]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.parent().unwrap())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap()
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    pub fn write(&self, relative: &str, content: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    pub fn workspace(&self) -> Workspace {
        Self::open(&self.root)
    }

    pub fn open(workdir: &Path) -> Workspace {
        Workspace::open(workdir)
            .unwrap()
            .expect("a repository")
            .with_isolated_config()
    }

    pub fn porcelain(&self) -> String {
        self.git(&["status", "--porcelain", "--untracked-files=all"])
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// The paths a commit changed, with their status letter: `M\ta.txt`.
    pub fn changed(&self, commit: &str) -> Vec<String> {
        self.git(&["show", "--name-status", "--format=", "--no-renames", commit])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// `git fsck` passes and reports nothing dangling or broken.
    pub fn fsck(&self) {
        let output = self.git_output(&["fsck", "--strict", "--no-progress"]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "git fsck failed: {text}");
        assert!(
            !text.contains("dangling") && !text.contains("broken"),
            "git fsck: {text}"
        );
    }

    /// `git fsck` passes (dangling objects allowed).
    pub fn fsck_ok(&self) {
        let output = self.git_output(&["fsck", "--strict", "--no-progress", "--no-dangling"]);
        assert!(
            output.status.success(),
            "git fsck failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

pub(super) fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

/// A request for task `t1` of run `RUN`.
pub(super) fn request<'a>(snapshot: &'a Snapshot, paths: &'a [PathBuf]) -> CommitRequest<'a> {
    CommitRequest {
        snapshot,
        paths,
        task_id: "t1",
        run_id: RUN,
        model: MODEL,
        message: "edit the files",
        prefix: "[ybs]",
        author: None,
        branch: None,
        redactor: None,
        allow_secret_paths: &[],
    }
}
