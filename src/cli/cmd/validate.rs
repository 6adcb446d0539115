//! `ybs validate`: every error of every task file, the config and the
//! policies (including their `examples`), with no model and no side
//! effects. Exit 0 when clean, 2 otherwise.

use super::super::args::ValidateArgs;
use super::super::diagnostics;
use super::common;
use crate::core::exit;
use crate::runner::inspect;

pub fn validate(args: &ValidateArgs) -> u8 {
    let printer = common::printer(common::level(&args.verbosity), false);
    let overrides = common::overrides(&args.config, &args.provider, false, None);
    let policy_file = args.config.policy.as_deref();
    let loaded = crate::runner::load_selected(
        &overrides,
        policy_file,
        Some(&args.paths),
        &args.vars,
        &args.filter,
    );
    let selection = inspect::Selection {
        filter: &args.filter,
        cassette: args.provider.cassette.as_deref(),
    };
    match loaded {
        Ok(loaded) => match inspect::validate(&loaded, policy_file, &selection) {
            Ok(validated) => {
                printer.result(&validated.to_string());
                exit::OK
            }
            Err(error) => diagnostics::fail(&printer, &error),
        },
        Err(errors) => {
            let code = diagnostics::fail(&printer, &*errors);
            // The files that did load are checked all the same: one bad
            // file does not hide another's failing policy examples.
            if let Some(partial) = &errors.partial
                && let Err(error) = inspect::validate(partial, policy_file, &selection)
            {
                diagnostics::fail(&printer, &error);
            }
            code
        }
    }
}
