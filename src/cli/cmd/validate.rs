//! `ybs validate`: every error of every task file, the config and the
//! policies (including their `examples`), with no model and no side
//! effects. Exit 0 when clean, 2 otherwise.

use super::super::args::ValidateArgs;
use super::super::diagnostics;
use super::common;
use crate::core::exit;
use crate::report::Printer;
use crate::runner::{Loaded, RunFlags, inspect};

pub fn validate(args: &ValidateArgs) -> u8 {
    let mut printer = common::printer(common::level(&args.verbosity), false);
    let overrides = common::overrides(&args.config, &args.provider, false, None);
    let policy_file = args.config.policy.as_deref();
    let loaded = crate::runner::load_selected(
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
            Err(code) => code,
        },
        Err(mut errors) => {
            let code = diagnostics::fail(&printer, &*errors);
            // The files that did load are checked all the same: one bad
            // file does not hide another's failing policy examples.
            if let Some(partial) = errors.partial.take() {
                let _ = check(*partial, args, &mut printer);
            }
            code
        }
    }
}

/// The files of `loaded` checked on their session: the line to print, or
/// the exit code once every error is printed.
fn check(loaded: Loaded, args: &ValidateArgs, printer: &mut Printer) -> Result<String, u8> {
    let flags = RunFlags {
        filter: args.filter.clone(),
        cassette: args.provider.cassette.clone(),
        policy_file: args.config.policy.clone(),
        ..RunFlags::default()
    };
    inspect::open(loaded, flags, printer)
        .and_then(|session| session.validate())
        .map(|validated| validated.to_string())
        .map_err(|error| diagnostics::fail(printer, &error))
}
