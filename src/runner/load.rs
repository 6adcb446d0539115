//! Loading a run's inputs: the config, `--policy FILE` and the task
//! files, every problem found in one pass.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::config::{self, Config, Overrides, Sources};
use crate::core::Environ;
use crate::core::named::NamedFiles;
use crate::policy::PolicySpec;
use crate::task::{self, TaskFile};

use super::error::LoadErrors;
use super::rule_tools;
use super::select::select;

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
    /// The process environment, read once at the CLI's entry and handed to
    /// the loader: every variable the run needs below `config` comes from
    /// here.
    pub environ: Environ,
    /// Task files given as text, not read from disk (`ybs run --prompt`):
    /// path (as loaded) and text. A task that pauses keeps a copy.
    pub unsaved: HashMap<PathBuf, String>,
}

/// Loads config, `--policy FILE` and the task files (`None`: no task
/// files, for commands that need none), with the environment the CLI read
/// at its entry; on error returns every problem.
pub fn load(
    environ: &Environ,
    overrides: &Overrides,
    policy_file: Option<&Path>,
    paths: Option<&[PathBuf]>,
    vars: &[(String, String)],
) -> Result<Loaded, Box<LoadErrors<Loaded>>> {
    load_selected(environ, overrides, policy_file, paths, vars, &[])
}

/// [`load`] for a run of the tasks `filter` selects (`--filter`; empty:
/// all): what the config refuses in a task (a limit above the operator's,
/// a cost limit with no known price) is an error only for those.
pub fn load_selected(
    environ: &Environ,
    overrides: &Overrides,
    policy_file: Option<&Path>,
    paths: Option<&[PathBuf]>,
    vars: &[(String, String)],
    filter: &[String],
) -> Result<Loaded, Box<LoadErrors<Loaded>>> {
    load_with(
        environ,
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
    environ: &Environ,
    overrides: &Overrides,
    policy_file: Option<&Path>,
    path: &Path,
    text: &str,
    vars: &[(String, String)],
) -> Result<Loaded, Box<LoadErrors<Loaded>>> {
    load_with(
        environ,
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
    environ: &Environ,
    overrides: &Overrides,
    policy_file: Option<&Path>,
    filter: &[String],
    task_files: impl FnOnce(&Path, u64, &NamedFiles) -> (Vec<TaskFile>, Vec<task::Diagnostic>),
) -> Result<Loaded, Box<LoadErrors<Loaded>>> {
    let cwd = config::process_cwd().map_err(|error| {
        Box::new(LoadErrors {
            cwd: Some(error),
            ..LoadErrors::default()
        })
    })?;
    let environ = environ.clone();
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
        let selected = select(loaded, filter).unwrap_or_else(|_| {
            loaded
                .iter()
                .flat_map(|file| file.tasks.iter().cloned())
                .collect()
        });
        // And a policy rule naming no tool the task can have matches
        // nothing (docs/policy.md).
        let known = rule_tools::KnownTools::find(config, &cwd, (home.as_deref(), &environ));
        let problems: Vec<task::Diagnostic> = selected
            .iter()
            .flat_map(|task| {
                let mut problems = config.check_task(task);
                problems.extend(rule_tools::unknown_rule_tools(&known, task));
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
