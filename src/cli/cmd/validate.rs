//! `ybs validate`: every error of every task file, the config and the
//! policies (including their `examples`), with no model and no side
//! effects. Exit 0 when clean, 2 otherwise.

use super::super::args::ValidateArgs;
use super::super::diagnostics;
use super::common;
use crate::config::ConfigError;
use crate::core::{Environ, exit};
use crate::report::Printer;
use crate::runner::{LoadErrors, Loaded, RunError, RunFlags, inspect};

pub fn validate(args: &ValidateArgs, environ: &Environ) -> u8 {
    let mut printer = common::printer(common::level(&args.verbosity), false, environ);
    let overrides = common::overrides(&args.config, &args.provider, false, None);
    let policy_file = args.config.policy.as_deref();
    let loaded = crate::runner::load_selected(
        environ,
        &overrides,
        policy_file,
        Some(&args.paths),
        &args.vars,
        &args.filter,
    );
    match loaded {
        Ok(loaded) => match check(loaded, args, &mut printer) {
            Ok(validated) => {
                printer.result(&validated);
                exit::OK
            }
            Err((code, count)) => {
                found(&printer, count);
                code
            }
        },
        Err(mut errors) => {
            // The load's errors without their own count: the one count
            // comes last, of every error printed (issue 40).
            let text = errors.to_string();
            for line in text.lines().filter(|line| !is_count(line)) {
                printer.error(line);
            }
            let mut count = load_count(&errors);
            // The files that did load are checked all the same: one bad
            // file does not hide another's failing policy examples, or a
            // good file's preflight errors.
            if let Some(partial) = errors.partial.take()
                && let Err((_, more)) = check(*partial, args, &mut printer)
            {
                count += more;
            }
            found(&printer, count);
            exit::USAGE
        }
    }
}

/// The last line of a failed validate: how many errors it printed.
fn found(printer: &Printer, count: usize) {
    printer.error(&format!(
        "{count} error{} found",
        if count == 1 { "" } else { "s" }
    ));
}

/// A load's own `N errors found` line.
fn is_count(line: &str) -> bool {
    line.strip_suffix(" found")
        .and_then(|rest| {
            rest.strip_suffix(" errors")
                .or_else(|| rest.strip_suffix(" error"))
        })
        .is_some_and(|number| number.parse::<usize>().is_ok())
}

/// The errors of a load, one per line it prints (hints aside).
fn load_count<L>(errors: &LoadErrors<L>) -> usize {
    let config = |error: &Option<ConfigError>| match error {
        Some(ConfigError::Files(diagnostics)) => diagnostics.len(),
        Some(_) => 1,
        None => 0,
    };
    usize::from(errors.cwd.is_some())
        + config(&errors.policy)
        + config(&errors.config)
        + errors.files.as_ref().map_or(0, |files| files.len())
}

/// The files of `loaded` checked on their session: the line to print, or
/// the exit code and how many errors were printed.
fn check(
    loaded: Loaded,
    args: &ValidateArgs,
    printer: &mut Printer,
) -> Result<String, (u8, usize)> {
    let flags = RunFlags {
        filter: args.filter.clone(),
        cassette: args.provider.cassette.clone(),
        policy_file: args.config.policy.clone(),
        ..RunFlags::default()
    };
    inspect::open(loaded, flags, printer)
        .and_then(|session| session.validate())
        .map(|validated| validated.to_string())
        .map_err(|error| {
            let count = match &error {
                RunError::Prepare(errors) => errors.len(),
                _ => 1,
            };
            (diagnostics::fail(printer, &error), count)
        })
}
