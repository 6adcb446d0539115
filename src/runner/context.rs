//! The run context: everything shared by the tasks of one run, built in
//! one piece from the loaded inputs, the options and the door's entry.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::agent::Approver;
use crate::config::Config;
use crate::core::{Redactor, Shard, ids};
use crate::llm::cassette::CassetteWriter;
use crate::llm::pricing::PriceTable;
use crate::llm::retry::RetrySettings;
use crate::policy::PolicySpec;
use crate::task::TaskFile;
use crate::tools::ChildEnv;

use super::error::RunError;
use super::load::Loaded;
use super::options::{Entry, RunOptions, redactor};
use super::{matrix, workspace};

/// Everything shared by the tasks of one run.
pub struct RunContext {
    pub config: Config,
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    pub run_id: String,
    pub dry_run: bool,
    /// `--cassette` (or config): replay every task from this file.
    pub cassette: Option<PathBuf>,
    /// `--policy FILE`, protected from writes.
    pub policy_file: Option<PathBuf>,
    /// The operator policy from `--policy FILE`: a ceiling task files may
    /// narrow, never widen (docs/security.md S5).
    pub operator_policy: Option<PolicySpec>,
    /// The allowlisted environment for every subprocess.
    pub child_env: ChildEnv,
    /// ybs's own environment, read once at the CLI's entry
    /// (`config::process_environ`) and carried in by [`super::Loaded`]:
    /// provider keys, `$PATH`, `$XDG_*`.
    pub environ: crate::core::Environ,
    pub pricing: PriceTable,
    pub retry: RetrySettings,
    /// `--no-commit`: no git writes at all.
    pub no_commit: bool,
    /// `--scratch`: the run works in a temporary copy of the directory
    /// ybs was started in.
    pub scratch: bool,
    /// `--allow-dirty`: run on a dirty tree; the user's changes stay out of commits.
    pub allow_dirty: bool,
    /// ybs's own outputs (absolute, or relative to `cwd`): never part of a
    /// dirty check or a commit. See [`report::OutputLayout::own_paths`].
    pub outputs: Vec<PathBuf>,
    /// Masks secrets in commit messages.
    pub redactor: Redactor,
    /// The run's local resume key, made at the start and masked by the
    /// redactor; written to the state directory only if a task pauses
    /// (`None`: `$YBS_RESUME_KEY` signs, docs/resume.md).
    pub resume_key: Option<String>,
    /// Every task file the run loaded: read-only in every task's sandbox.
    pub task_files: Vec<PathBuf>,
    /// `--record FILE`: every provider answer is written here.
    pub recorder: Option<Arc<CassetteWriter>>,
    /// `--shard K/N`: recorded in the reports and `OUT/shard.json`.
    pub shard: Option<Shard>,
    /// Where `--shard auto` found it: the engine and its variables.
    pub shard_source: Option<crate::core::shard::ShardSource>,
    /// `--shard-by durations`: the digest of the durations file.
    pub shard_split: Option<String>,
    /// `--jobs N`: tasks at once (at least 1). Above 1, a task that
    /// commits runs in its own git worktree.
    pub jobs: usize,
    /// `--max-cost-usd`: once the run has spent this much, no new task
    /// starts; the rest are skipped (docs/ci.md).
    pub max_cost_usd: Option<f64>,
    /// `--interactive` on a TTY: answers `ask` decisions (docs/interactive.md).
    pub approver: Option<Arc<dyn Approver>>,
    /// `ybs resume`: the work tree holds the paused task's changes,
    /// checked against its state instead of the dirty check.
    pub resuming: bool,
    /// `ybs resume`: the tasks that paused in their own `--jobs`
    /// worktree, by task id; they go on there (docs/resume.md).
    pub resume_worktrees: std::collections::HashMap<String, workspace::InWorktree>,
    /// `--models`, `--repeat`: each copy's model, and `--min-pass-rate`.
    pub copies: matrix::Copies,
    /// A task's note that the config replaced its pinned provider or
    /// model was shown on the console: the later ones go to the
    /// transcripts only.
    pub pins_noted: std::sync::atomic::AtomicBool,
    /// Task files given as text (`ybs run --prompt`), by path as loaded.
    pub unsaved: HashMap<PathBuf, String>,
}

/// Builds the run context, in one piece, from the loaded inputs, the
/// resolved options and the door's entry; and the redactor holding every
/// secret value; and gives back the task files as loaded.
pub fn run_context(
    loaded: Loaded,
    options: &RunOptions,
    entry: Entry,
) -> Result<(RunContext, Redactor, Vec<TaskFile>), RunError> {
    let Loaded {
        config,
        cwd,
        home,
        operator_policy,
        files,
        environ,
        unsaved,
    } = loaded;
    let flags = &options.flags;
    let task_files = files.iter().map(|file| cwd.join(&file.path)).collect();
    let child_env = ChildEnv::scrubbed(&environ, &config.safety.env_passthrough);
    let mut redactor = redactor(&child_env, &environ);
    // The secret-looking `env` values of the operator's MCP servers
    // (docs/mcp.md): a server could print them back.
    for server in &config.tools.mcp {
        for (name, value) in &server.env {
            if crate::tools::env::is_secret_name(name) {
                redactor.add(value.clone());
            }
        }
    }
    let (resuming, resume_worktrees) = match entry.resuming {
        Some(resume) => {
            for key in resume.keys {
                redactor.add(key);
            }
            (true, resume.worktrees)
        }
        None => (false, HashMap::new()),
    };
    // The run's resume key, masked like any secret (docs/security.md S7).
    let run_id = ids::new_run_id();
    let resume_key = super::state::fresh_key(&|name: &str| environ.var(name));
    if let Some(key) = &resume_key {
        redactor.add(key.clone());
    }
    let recorder = flags
        .record
        .as_ref()
        .map(|path| CassetteWriter::create(path, redactor.clone()))
        .transpose()
        .map_err(|error| RunError::usage(error.to_string(), None))?;
    let mut outputs = options
        .layout()
        .own_paths(entry.tasks.iter().map(String::as_str));
    outputs.extend(flags.record.iter().cloned());
    let context = RunContext {
        pricing: config.price_table(),
        retry: config.retry(),
        recorder,
        shard: flags.shard,
        shard_source: flags.shard_source.clone(),
        shard_split: flags.shard_split.as_ref().map(|split| split.digest.clone()),
        jobs: usize::from(flags.jobs).max(1),
        max_cost_usd: flags.max_cost_usd,
        approver: flags.approver.as_ref().map(|make| make(redactor.clone())),
        resuming,
        resume_worktrees,
        copies: entry.copies,
        pins_noted: std::sync::atomic::AtomicBool::new(false),
        unsaved,
        no_commit: flags.no_commit || flags.scratch,
        scratch: flags.scratch,
        allow_dirty: flags.allow_dirty,
        outputs,
        redactor: redactor.clone(),
        task_files,
        cassette: flags.cassette.clone().or_else(|| config.cassette.clone()),
        policy_file: flags.policy_file.as_ref().map(|p| cwd.join(p)),
        operator_policy,
        home,
        run_id,
        resume_key,
        dry_run: flags.dry_run,
        child_env,
        environ,
        config,
        cwd,
    };
    Ok((context, redactor, files))
}
