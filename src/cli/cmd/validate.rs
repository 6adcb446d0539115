//! `ybs validate`: every error of every task file, the config and the
//! policies (including their `examples`), with no model and no side
//! effects. Exit 0 when clean, 2 otherwise.

use super::super::args::ValidateArgs;
use super::super::diagnostics;
use super::common;
use crate::core::exit;
use crate::report::Printer;
use crate::runner::inspect;

pub fn validate(args: &ValidateArgs) -> u8 {
    let printer = Printer::new(common::level(&args.verbosity), false);
    let overrides = common::overrides(&args.config, &args.provider, false, None);
    let policy_file = args.config.policy.as_deref();
    let loaded = common::load_selected(
        &printer,
        &overrides,
        policy_file,
        &args.paths,
        &args.vars,
        &args.filter,
    );
    let selection = inspect::Selection {
        filter: &args.filter,
        cassette: args.provider.cassette.as_deref(),
    };
    match loaded.map(|loaded| inspect::validate(&loaded, policy_file, &selection)) {
        Ok(Ok(validated)) => {
            printer.result(&validated.to_string());
            exit::OK
        }
        Ok(Err(error)) => diagnostics::fail(&printer, &error),
        Err(code) => code,
    }
}
