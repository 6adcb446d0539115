//! What `run` and `validate` share: loading config and task files, and
//! building the run context (scrubbed env, redactor).

use std::path::{Path, PathBuf};

use super::super::args::Verbosity;
use super::super::diagnostics;
use super::super::printer::{Level, Printer};
use crate::config::{self, Config, Sources};
use crate::core::{Redactor, exit, ids};
use crate::policy::PolicySpec;
use crate::runner::RunContext;
use crate::task::{self, TaskFile};
use crate::tools::ChildEnv;

pub use crate::config::Overrides;

pub fn level(verbosity: &Verbosity) -> Level {
    if verbosity.quiet {
        Level::Quiet
    } else if verbosity.verbose {
        Level::Verbose
    } else {
        Level::Normal
    }
}

/// Config and task files, loaded and checked.
pub struct Loaded {
    pub config: Config,
    pub files: Vec<TaskFile>,
    pub cwd: PathBuf,
    /// `--policy FILE`, parsed.
    pub operator_policy: Option<PolicySpec>,
}

/// Loads config, `--policy FILE` and the task files (`None`: no task
/// files, for commands that need none); on error prints every problem and
/// returns the exit code.
pub fn load(
    printer: &Printer,
    overrides: &Overrides,
    policy_file: Option<&Path>,
    paths: Option<&[PathBuf]>,
    vars: &[(String, String)],
) -> Result<Loaded, u8> {
    let cwd = std::env::current_dir().map_err(|error| {
        printer.error(&format!(
            "error: cannot read the current directory: {error}"
        ));
        exit::USAGE
    })?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let env = |name: &str| std::env::var(name).ok();
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
    let mut files = match paths {
        Some(paths) => task::load(&default_paths(&cwd, paths), vars, max_bytes),
        None => Ok(Vec::new()),
    };
    // SECURITY S5: a task may narrow the operator's settings, never widen
    // them; and a cost limit needs a known price.
    if let (Ok(config), Ok(loaded)) = (&config, &files) {
        let problems: Vec<task::Diagnostic> = loaded
            .iter()
            .flat_map(|file| &file.tasks)
            .flat_map(|task| config.check_task(task))
            .collect();
        if !problems.is_empty() {
            files = Err(task::Diagnostics(problems));
        }
    }
    let operator_policy = policy_file.map(config::load_policy_file).transpose();
    let mut failed = false;
    if let Err(error) = &operator_policy {
        diagnostics::print_config_error(printer, error);
        failed = true;
    }
    if let Err(error) = &config {
        diagnostics::print_config_error(printer, error);
        failed = true;
    }
    if let Err(diagnostics) = &files {
        diagnostics::print_diagnostics(printer, diagnostics);
        failed = true;
    }
    match (config, files, operator_policy) {
        (Ok(config), Ok(files), Ok(operator_policy)) if !failed => Ok(Loaded {
            config,
            files,
            cwd,
            operator_policy,
        }),
        _ => Err(exit::USAGE),
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

/// Builds the run context and the redactor holding every secret value.
pub fn run_context(
    loaded: Loaded,
    dry_run: bool,
    cassette: Option<PathBuf>,
    policy_file: Option<PathBuf>,
) -> (RunContext, Redactor) {
    let Loaded {
        config,
        cwd,
        operator_policy,
        files,
    } = loaded;
    let task_files = files.iter().map(|file| cwd.join(&file.path)).collect();
    let child_env = ChildEnv::scrubbed(&config.safety.env_passthrough);
    let redactor = redactor(&child_env);
    let context = RunContext {
        pricing: config.price_table(),
        retry: config.retry(),
        recorder: None,
        shard: None,
        jobs: 1,
        approver: None,
        no_commit: false,
        allow_dirty: false,
        outputs: Vec::new(),
        redactor: redactor.clone(),
        task_files,
        cassette: cassette.or_else(|| config.cassette.clone()),
        policy_file: policy_file.map(|p| cwd.join(p)),
        operator_policy,
        home: std::env::var_os("HOME").map(PathBuf::from),
        run_id: ids::new_run_id(),
        dry_run,
        child_env,
        config,
        cwd,
    };
    (context, redactor)
}

/// Every secret value ybs holds: the variables scrubbed from children's
/// environment and the provider API keys (SECURITY S7).
pub fn redactor(env: &ChildEnv) -> Redactor {
    let mut redactor = Redactor::new();
    for value in &env.secret_values {
        redactor.add(value.clone());
    }
    for value in crate::llm::api_key_values(&|name: &str| std::env::var(name).ok()) {
        redactor.add(value);
    }
    redactor
}
