//! A small place to prepare tasks in, for the unit tests of the stages:
//! a repository directory with a task file, a fake home, and the run
//! context around them, as `ybs run` would build it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::core::{Environ, Redactor};
use crate::task::{TaskSpec, load_str};
use crate::tools::ChildEnv;

use super::super::RunContext;

/// The task file every [`Site`] holds, relative to the repository.
pub(super) const TASK_FILE: &str = "tasks/t.yaml";

pub(super) struct Site {
    /// Holds `repo/` and `home/`; removed with the site.
    _dir: tempfile::TempDir,
    /// The directory ybs runs in: a git work tree (`.git` is enough to
    /// mark one), canonical.
    pub repo: PathBuf,
    /// The fake home, canonical.
    pub home: PathBuf,
    pub run: RunContext,
}

impl Site {
    /// A site with the default config, `$PATH` `/usr/bin:/bin`.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let home = root.join("home");
        for made in [repo.join(".git"), repo.join("tasks"), home.clone()] {
            std::fs::create_dir_all(made).unwrap();
        }
        let environ =
            Environ::from_pairs([("HOME", home.to_str().unwrap()), ("PATH", "/usr/bin:/bin")]);
        let run = context(Config::default(), &repo, &home, environ);
        Self {
            _dir: dir,
            repo,
            home,
            run,
        }
    }

    /// The task `yaml` describes, written to [`TASK_FILE`] and loaded as
    /// a run loads it (its file relative to the repository).
    pub fn task(&self, yaml: &str) -> TaskSpec {
        std::fs::write(self.repo.join(TASK_FILE), yaml).unwrap();
        let file = load_str(Path::new(TASK_FILE), yaml, &[]).unwrap();
        file.tasks.into_iter().next().unwrap()
    }

    /// A directory `path` (relative to the site's root) made, canonical.
    pub fn dir(&self, path: &str) -> PathBuf {
        let dir = self.repo.parent().unwrap().join(path);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }
}

/// The run context of a run in `cwd` with `config`.
fn context(config: Config, cwd: &Path, home: &Path, environ: Environ) -> RunContext {
    RunContext {
        pricing: config.price_table(),
        retry: config.retry(),
        child_env: ChildEnv::scrubbed(&environ, &config.safety.env_passthrough),
        cwd: cwd.to_owned(),
        home: Some(home.to_owned()),
        run_id: "run-1".to_owned(),
        dry_run: false,
        cassette: None,
        policy_file: None,
        operator_policy: None,
        environ,
        no_commit: false,
        scratch: false,
        allow_dirty: false,
        outputs: vec![PathBuf::from("ybs-out")],
        redactor: Redactor::new(),
        resume_key: None,
        task_files: vec![cwd.join(TASK_FILE)],
        recorder: None,
        shard: None,
        shard_source: None,
        shard_split: None,
        jobs: 1,
        max_cost_usd: None,
        approver: None,
        resuming: false,
        resume_worktrees: HashMap::new(),
        copies: super::super::matrix::Copies::default(),
        pins_noted: std::sync::atomic::AtomicBool::new(false),
        unsaved: HashMap::new(),
        config,
    }
}
