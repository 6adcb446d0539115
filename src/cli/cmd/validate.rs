//! `ybs validate`: every error of every task file and the config, no
//! model, no side effects. Exit 0 when clean, 2 otherwise.

use super::super::args::ValidateArgs;
use super::super::diagnostics;
use super::super::printer::Printer;
use super::common;
use crate::core::exit;
use crate::policy::Policy;

pub fn validate(args: &ValidateArgs) -> u8 {
    let printer = Printer::new(common::level(&args.verbosity), false);
    let overrides = common::Overrides {
        config_file: args.config.clone(),
        ..common::Overrides::default()
    };
    let loaded = match common::load(&printer, &overrides, &args.paths, &args.vars) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mut errors = 0;
    let mut tasks = 0;
    for file in &loaded.files {
        for task in &file.tasks {
            tasks += 1;
            if let Err(error) = Policy::new(&task.policy) {
                errors += 1;
                diagnostics::print_error(
                    &printer,
                    &format!("{}: task `{}`: {error}", file.path.display(), task.id),
                    None,
                );
            }
        }
    }
    if errors > 0 {
        return exit::USAGE;
    }
    printer.result(&format!(
        "ok: {} file{}, {tasks} task{} valid",
        loaded.files.len(),
        if loaded.files.len() == 1 { "" } else { "s" },
        if tasks == 1 { "" } else { "s" }
    ));
    exit::OK
}
