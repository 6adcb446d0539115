//! `ybs clean`: what earlier runs left in this repository.

use super::super::args::CleanArgs;
use super::super::diagnostics;
use super::common;
use crate::core::{Environ, exit};
use crate::runner::RunError;

/// Lists what is removed (or, `--dry-run`, would be) and what is kept,
/// one line each, then a line of totals. Exit 0, 2 on a usage error.
pub fn clean(args: &CleanArgs, environ: &Environ) -> u8 {
    let printer = common::printer(common::level(&args.verbosity), false, environ);
    let cwd = match crate::config::process_cwd() {
        Ok(cwd) => cwd,
        Err(error) => {
            let error =
                RunError::usage(format!("cannot read the current directory: {error}"), None);
            return diagnostics::fail(&printer, &error);
        }
    };
    let cleaned =
        match crate::runner::clean::clean(&cwd, args.run.as_deref(), args.dry_run, args.force) {
            Ok(cleaned) => cleaned,
            Err(error) => return diagnostics::fail(&printer, &error),
        };
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for leftover in &cleaned.removed {
        printer.line(&format!("{verb} {leftover}"));
    }
    for leftover in &cleaned.kept {
        printer.line(&format!("kept {leftover}"));
    }
    let hint = if cleaned.kept.iter().any(|kept| kept.holds_work) && !args.force {
        " (what holds work stays: look at it, then `ybs clean --force`)"
    } else {
        ""
    };
    printer.result(&format!(
        "ybs clean: {verb} {}, kept {}{hint}",
        cleaned.removed.len(),
        cleaned.kept.len()
    ));
    exit::OK
}
