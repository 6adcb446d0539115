//! What the commands share: verbosity, the config overrides of the flag
//! groups, and loading with every problem printed.

use std::path::{Path, PathBuf};

use super::super::args::{ConfigArgs, ProviderArgs, Verbosity};
use super::super::diagnostics;
use crate::core::Environ;
use crate::report::{Level, Printer};

pub use crate::config::Overrides;
pub use crate::runner::Loaded;

/// The printer of a command, for ybs's environment `environ`. What it
/// prints passes the full redactor from the start (docs/security.md S7): a
/// diagnostic of loading may hold a withheld value read from a file,
/// before the run's own redactor exists.
pub fn printer(level: Level, json: bool, environ: &Environ) -> Printer {
    let mut printer = Printer::new(level, json, environ);
    printer.set_redactor(crate::runner::resume::env_redactor(environ));
    printer
}

pub fn level(verbosity: &Verbosity) -> Level {
    if verbosity.quiet {
        Level::Quiet
    } else if verbosity.verbose {
        Level::Verbose
    } else {
        Level::Normal
    }
}

/// The config overrides of the flag groups.
pub fn overrides(
    config: &ConfigArgs,
    provider: &ProviderArgs,
    no_sandbox: bool,
    out: Option<PathBuf>,
) -> Overrides {
    Overrides {
        config_file: config.config.clone(),
        provider: provider.provider.clone(),
        model: provider.model.clone(),
        endpoint: provider.endpoint.clone(),
        cassette: provider.cassette.clone(),
        out,
        no_sandbox,
        ..Overrides::default()
    }
}

/// `--config` alone.
pub fn config_overrides(config: &ConfigArgs, no_sandbox: bool) -> Overrides {
    Overrides {
        config_file: config.config.clone(),
        no_sandbox,
        ..Overrides::default()
    }
}

/// [`crate::runner::load`]; on error prints every problem and returns the
/// exit code.
pub fn load(
    printer: &Printer,
    environ: &Environ,
    overrides: &Overrides,
    policy_file: Option<&Path>,
    paths: Option<&[PathBuf]>,
    vars: &[(String, String)],
) -> Result<Loaded, u8> {
    crate::runner::load(environ, overrides, policy_file, paths, vars)
        .map_err(|errors| diagnostics::fail(printer, &*errors))
}

/// [`crate::runner::load_selected`]: [`load`] for the tasks `--filter`
/// selects.
pub fn load_selected(
    printer: &Printer,
    environ: &Environ,
    overrides: &Overrides,
    policy_file: Option<&Path>,
    paths: &[PathBuf],
    vars: &[(String, String)],
    filter: &[String],
) -> Result<Loaded, u8> {
    crate::runner::load_selected(environ, overrides, policy_file, Some(paths), vars, filter)
        .map_err(|errors| diagnostics::fail(printer, &*errors))
}

/// The flags that `ybs resume` must be given again to go on with a task
/// that paused under them: the same config, policy (its digest is in the
/// state), provider, variables, confinement and `--no-commit` (which the
/// state carries as well). One argument an item.
pub fn resume_args(
    config: &ConfigArgs,
    provider: &ProviderArgs,
    vars: &[(String, String)],
    (no_sandbox, no_commit): (bool, bool),
) -> Vec<String> {
    let mut out = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            out.push(name.to_owned());
            out.push(value);
        }
    };
    let path = |path: &Option<PathBuf>| path.as_ref().map(|path| path.display().to_string());
    flag("--config", path(&config.config));
    flag("--policy", path(&config.policy));
    flag("--provider", provider.provider.clone());
    flag("--model", provider.model.clone());
    flag("--endpoint", provider.endpoint.clone());
    for (key, value) in vars {
        flag("--var", Some(format!("{key}={value}")));
    }
    if no_sandbox {
        out.push("--no-sandbox".to_owned());
    }
    if no_commit {
        out.push("--no-commit".to_owned());
    }
    out
}
