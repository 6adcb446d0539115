//! Loading a run's inputs and deciding its options: the one place flags,
//! config and environment meet.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::agent::Approver;
use crate::config::Config;
use crate::core::{Environ, Redactor, Shard};
use crate::tools::ChildEnv;

use super::load::Loaded;
use super::workspace::InWorktree;

/// Builds an approver that masks the run's secrets.
pub type MakeApprover = Box<dyn Fn(Redactor) -> Arc<dyn Approver>>;

/// `--shard-by durations --durations FILE`: what was read, and the
/// file's digest (recorded in `shard.json`; `report merge` refuses shards
/// split from different files).
#[derive(Debug, Clone)]
pub struct ShardSplit {
    pub durations: crate::report::durations::Durations,
    pub digest: String,
}

/// What `ybs run` (and `chat`) was asked, beyond loading: flags only.
#[derive(Default)]
pub struct RunFlags {
    pub filter: Vec<String>,
    pub shard: Option<Shard>,
    /// Where `--shard auto` found the shard.
    pub shard_source: Option<crate::core::shard::ShardSource>,
    /// `--shard-by durations`: the past durations the shards balance.
    pub shard_split: Option<ShardSplit>,
    pub jobs: u16,
    /// `--max-cost-usd`: the run's budget (docs/ci.md).
    pub max_cost_usd: Option<f64>,
    pub dry_run: bool,
    pub no_commit: bool,
    /// `--scratch`: the run works in a temporary copy (it implies
    /// `no_commit`); a paused state carries it to `ybs resume`.
    pub scratch: bool,
    pub allow_dirty: bool,
    pub cassette: Option<PathBuf>,
    pub record: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub policy_file: Option<PathBuf>,
    pub no_sandbox: bool,
    /// `--repeat`, `--models`, `--min-pass-rate`.
    pub matrix: super::matrix::Matrix,
    /// `--interactive`: makes the approver answering `ask` decisions,
    /// given the run's redactor.
    pub approver: Option<MakeApprover>,
    /// The flags of this run that `ybs resume` needs again (`--config`,
    /// `--policy`, the provider flags, `--var`, `--no-sandbox`), one
    /// argument an item: shown in the resume command of a paused run.
    pub resume_args: Vec<String>,
}

/// A run's options, decided.
pub struct RunOptions {
    pub flags: RunFlags,
    pub out_dir: PathBuf,
    pub junit: Option<PathBuf>,
    pub github_step_summary: Option<PathBuf>,
    /// `$GITHUB_OUTPUT`: the run's results are appended there as step
    /// outputs (docs/progress.md).
    pub github_output: Option<PathBuf>,
}

/// Where a run's results go besides `OUT`, from ybs's environment:
/// `$GITHUB_STEP_SUMMARY` and `$GITHUB_OUTPUT` (docs/progress.md). One
/// resolver for `ybs run`, `chat`, `resume` and `report merge`.
#[derive(Debug, Clone, Default)]
pub struct StepOutputs {
    pub github_step_summary: Option<PathBuf>,
    pub github_output: Option<PathBuf>,
}

impl StepOutputs {
    pub fn from_environ(environ: &Environ) -> Self {
        Self {
            github_step_summary: environ.var_os("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            github_output: environ
                .var_os("GITHUB_OUTPUT")
                .filter(|path| !path.is_empty())
                .map(PathBuf::from),
        }
    }
}

impl RunOptions {
    /// The one place run options are decided: flags over config over
    /// defaults; the step outputs from the environment `loaded` was read
    /// with.
    pub fn resolve(flags: RunFlags, loaded: &Loaded) -> Self {
        Self::with_steps(
            flags,
            &loaded.config,
            StepOutputs::from_environ(&loaded.environ),
        )
    }

    /// [`Self::resolve`] without step outputs: for the commands that
    /// report no run (`validate`, `policy explain`, `tools`).
    pub fn local(flags: RunFlags, loaded: &Loaded) -> Self {
        Self::with_steps(flags, &loaded.config, StepOutputs::default())
    }

    /// `ybs resume OUT`: as [`Self::resolve`], the outputs going on in
    /// `out_dir`, the output directory of the run that paused.
    pub fn resume(flags: RunFlags, loaded: &Loaded, out_dir: PathBuf) -> Self {
        Self {
            out_dir,
            ..Self::resolve(flags, loaded)
        }
    }

    fn with_steps(flags: RunFlags, config: &Config, steps: StepOutputs) -> Self {
        Self {
            out_dir: config.out.clone(),
            junit: flags.junit.clone(),
            github_step_summary: steps.github_step_summary,
            github_output: steps.github_output,
            flags,
        }
    }

    /// Where the outputs go.
    pub fn layout(&self) -> crate::report::OutputLayout {
        crate::report::OutputLayout::new(
            self.out_dir.clone(),
            self.junit.clone(),
            self.github_step_summary.clone(),
        )
    }
}

/// What a door knows of its run beyond the options, once its tasks are
/// picked: their ids (their outputs are ybs's own) and, for `ybs resume`,
/// what the paused states bring.
#[derive(Default)]
pub struct Entry {
    pub tasks: Vec<String>,
    /// `--models`, `--repeat`: what the copies among `tasks` need.
    pub copies: super::matrix::Copies,
    pub resuming: Option<ResumeEntry>,
}

/// What `ybs resume` adds to a run's context.
#[derive(Default)]
pub struct ResumeEntry {
    /// The tasks that paused in their own `--jobs` worktree, by task id.
    pub worktrees: HashMap<String, InWorktree>,
    /// The keys that signed the states: secrets of the run as well.
    pub keys: Vec<String>,
}

/// Every secret value ybs holds: the variables scrubbed from children's
/// environment and the provider API keys (docs/security.md S7), `environ`
/// being the environment ybs read at the start.
pub fn redactor(env: &ChildEnv, environ: &Environ) -> Redactor {
    let mut redactor = Redactor::new();
    for value in &env.secret_values {
        redactor.add(value.clone());
    }
    for value in crate::llm::api_key_values(&|name: &str| environ.var(name)) {
        redactor.add(value);
    }
    redactor
}

/// Before any child exists: children cannot read our environment (API
/// keys) through /proc, and escapees are re-parented to us. With the
/// sandbox on and `probe`, its probe starts in the background, overlapping
/// loading; its cache directory is found in `environ`, the environment the
/// CLI read at its entry.
pub fn harden(
    console: &dyn crate::report::Console,
    environ: &Environ,
    no_sandbox: bool,
    probe: bool,
) {
    if let Err(error) = crate::tools::process::harden_self() {
        console.warn(&format!("cannot harden the ybs process: {error}"));
    }
    if probe && !no_sandbox {
        let home = environ.home();
        crate::tools::sandbox::probe_in_background(super::dirs::cache_dir(
            home.as_deref(),
            environ,
        ));
    }
}
