//! Loading a run's inputs and deciding its options: the one place flags,
//! config and environment meet.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::Approver;
use crate::config::{self, Config, ConfigError, Overrides, Sources};
use crate::core::named::NamedFiles;
use crate::core::{Environ, Redactor, Shard, ids};
use crate::policy::PolicySpec;
use crate::task::{self, TaskFile};
use crate::tools::ChildEnv;

use super::workspace::InWorktree;
use super::{RunContext, RunError};
use crate::llm::cassette::CassetteWriter;

/// Config and task files, loaded and checked.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    pub files: Vec<TaskFile>,
    pub cwd: PathBuf,
    /// `$HOME` as the config was read with it: the one read of it for
    /// the whole run (`~/.ybs`, `~` in policies, the sandbox).
    pub home: Option<PathBuf>,
    /// `--policy FILE`, parsed.
    pub operator_policy: Option<PolicySpec>,
    /// The process environment, read once with the config: every variable
    /// the run needs below `config` comes from here.
    pub environ: Environ,
    /// Task files given as text, not read from disk (`ybs run --prompt`):
    /// path (as loaded) and text. A task that pauses keeps a copy.
    pub unsaved: HashMap<PathBuf, String>,
}

/// Everything wrong with the inputs, in the order it is printed: the
/// operator policy, the config, the task files.
#[derive(Debug, Default)]
pub struct LoadErrors {
    pub cwd: Option<std::io::Error>,
    pub policy: Option<ConfigError>,
    pub config: Option<ConfigError>,
    pub files: Option<task::Diagnostics>,
    /// With only task-file errors: the files that did load, with the
    /// config and policy (`ybs validate` checks their policies too).
    pub partial: Option<Box<Loaded>>,
}

/// Loads config, `--policy FILE` and the task files (`None`: no task
/// files, for commands that need none); on error returns every problem.
pub fn load(
    overrides: &Overrides,
    policy_file: Option<&Path>,
    paths: Option<&[PathBuf]>,
    vars: &[(String, String)],
) -> Result<Loaded, Box<LoadErrors>> {
    load_selected(overrides, policy_file, paths, vars, &[])
}

/// [`load`] for a run of the tasks `filter` selects (`--filter`; empty:
/// all): what the config refuses in a task (a limit above the operator's,
/// a cost limit with no known price) is an error only for those.
pub fn load_selected(
    overrides: &Overrides,
    policy_file: Option<&Path>,
    paths: Option<&[PathBuf]>,
    vars: &[(String, String)],
    filter: &[String],
) -> Result<Loaded, Box<LoadErrors>> {
    load_with(
        overrides,
        policy_file,
        filter,
        |cwd, max_bytes, named| match paths {
            Some(paths) => task::load_each(&default_paths(cwd, paths), vars, max_bytes, named),
            None => (Vec::new(), Vec::new()),
        },
    )
}

/// [`load`] with the one task file given as text (`ybs run --prompt`):
/// `path`, relative to the directory ybs runs in, is where the file is
/// considered to be (see [`super::adhoc`]).
pub fn load_text(
    overrides: &Overrides,
    policy_file: Option<&Path>,
    path: &Path,
    text: &str,
    vars: &[(String, String)],
) -> Result<Loaded, Box<LoadErrors>> {
    load_with(
        overrides,
        policy_file,
        &[],
        |_, _, named| match task::load_str_with(path, text, vars, named) {
            Ok(file) => (vec![file], Vec::new()),
            Err(diagnostics) => (Vec::new(), diagnostics.0),
        },
    )
    .map(|mut loaded| {
        loaded.unsaved.insert(path.to_owned(), text.to_owned());
        loaded
    })
}

fn load_with(
    overrides: &Overrides,
    policy_file: Option<&Path>,
    filter: &[String],
    task_files: impl FnOnce(&Path, u64, &NamedFiles) -> (Vec<TaskFile>, Vec<task::Diagnostic>),
) -> Result<Loaded, Box<LoadErrors>> {
    let cwd = config::process_cwd().map_err(|error| {
        Box::new(LoadErrors {
            cwd: Some(error),
            ..LoadErrors::default()
        })
    })?;
    let environ = config::process_environ();
    let home = environ.home();
    let env = |name: &str| environ.var(name);
    let sources = Sources {
        cwd: &cwd,
        home: home.as_deref(),
        system_config: Path::new(config::SYSTEM_CONFIG),
        env: &env,
    };
    let config = config::load(overrides, &sources);
    let max_bytes = config
        .as_ref()
        .map_or(config::defaults::MAX_TASK_FILE_BYTES, |config| {
            config.safety.max_task_file_bytes
        });
    // What a task file names is opened beneath its repository, never a
    // blocked path (docs/security.md S8); the defaults when the config
    // does not load.
    let blocked = config.as_ref().map_or_else(
        |_| {
            config::defaults::BLOCKED_PATHS
                .iter()
                .map(|s| (*s).to_owned())
                .collect()
        },
        |config| config.safety.blocked_paths.clone(),
    );
    let named = NamedFiles::new(&blocked, home.as_deref());
    let (loaded_files, mut diagnostics) = task_files(&cwd, max_bytes, &named);
    // docs/security.md S5: a task may narrow the operator's settings, never widen
    // them; and a cost limit needs a known price. Checked on the files
    // that loaded even when others did not: every independent error of
    // every file in one pass.
    if let Ok(config) = &config {
        let loaded = &loaded_files;
        // An invalid glob selects every task here; `select` says why later.
        let selected = super::select(loaded, filter).unwrap_or_else(|_| {
            loaded
                .iter()
                .flat_map(|file| file.tasks.iter().cloned())
                .collect()
        });
        // And a policy rule naming no tool the task can have matches
        // nothing (docs/policy.md).
        let known = super::rule_tools::KnownTools::find(config, &cwd, (home.as_deref(), &environ));
        let problems: Vec<task::Diagnostic> = selected
            .iter()
            .flat_map(|task| {
                let mut problems = config.check_task(task);
                problems.extend(super::rule_tools::unknown_rule_tools(&known, task));
                problems
            })
            .collect();
        diagnostics.extend(problems);
    }
    let mut partial_files = Vec::new();
    let files = if diagnostics.is_empty() {
        Ok(loaded_files)
    } else {
        partial_files = loaded_files;
        Err(task::Diagnostics(diagnostics))
    };
    let operator_policy = policy_file.map(config::load_policy_file).transpose();
    match (config, files, operator_policy) {
        (Ok(config), Ok(files), Ok(operator_policy)) => Ok(Loaded {
            config,
            files,
            cwd,
            home,
            operator_policy,
            environ,
            unsaved: HashMap::new(),
        }),
        (Ok(config), Err(files), Ok(operator_policy)) => {
            let partial = (!partial_files.is_empty()).then(|| {
                Box::new(Loaded {
                    config,
                    files: partial_files,
                    cwd,
                    home,
                    operator_policy,
                    environ,
                    unsaved: HashMap::new(),
                })
            });
            Err(Box::new(LoadErrors {
                files: Some(files),
                partial,
                ..LoadErrors::default()
            }))
        }
        (config, files, policy) => Err(Box::new(LoadErrors {
            cwd: None,
            policy: policy.err(),
            config: config.err(),
            files: files.err(),
            partial: None,
        })),
    }
}

/// No paths given: `tasks/` when it exists, else the current directory.
fn default_paths(cwd: &Path, paths: &[PathBuf]) -> Vec<PathBuf> {
    if !paths.is_empty() {
        return paths.to_vec();
    }
    if cwd.join("tasks").is_dir() {
        vec![PathBuf::from("tasks")]
    } else {
        vec![PathBuf::from(".")]
    }
}

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

impl RunOptions {
    /// The one place run options are decided: flags over config over
    /// defaults; `env` supplies `$GITHUB_STEP_SUMMARY` and `$GITHUB_OUTPUT`.
    pub fn resolve(flags: RunFlags, config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            out_dir: config.out.clone(),
            junit: flags.junit.clone(),
            github_step_summary: env("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            github_output: env("GITHUB_OUTPUT")
                .filter(|path| !path.is_empty())
                .map(PathBuf::from),
            flags,
        }
    }

    /// `ybs resume OUT`: as [`Self::resolve`], the outputs going on in
    /// `out_dir`, the output directory of the run that paused.
    pub fn resume(
        flags: RunFlags,
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
        out_dir: PathBuf,
    ) -> Self {
        Self {
            out_dir,
            ..Self::resolve(flags, config, env)
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
/// loading.
pub fn harden(console: &dyn crate::report::Console, no_sandbox: bool, probe: bool) {
    if let Err(error) = crate::tools::process::harden_self() {
        console.warn(&format!("cannot harden the ybs process: {error}"));
    }
    if probe && !no_sandbox {
        let environ = config::process_environ();
        let home = environ.home();
        crate::tools::sandbox::probe_in_background(super::tools::cache_dir(
            home.as_deref(),
            &environ,
        ));
    }
}
