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
    let overrides = common::config_overrides(&args.config, false);
    let policy_file = args.config.policy.as_deref();
    let loaded = common::load(
        &printer,
        &overrides,
        policy_file,
        Some(&args.paths),
        &args.vars,
    );
    match loaded.map(|loaded| inspect::validate(&loaded, policy_file)) {
        Ok(Ok(validated)) => {
            printer.result(&validated.to_string());
            exit::OK
        }
        Ok(Err(error)) => diagnostics::fail(&printer, &error),
        Err(code) => code,
    }
}
