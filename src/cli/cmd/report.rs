//! `ybs report merge`: one report from the outputs of several shards.

use std::path::PathBuf;

use super::super::args::MergeArgs;
use super::super::diagnostics;
use super::common;
use crate::core::exit;
use crate::report::Printer;
use crate::report::{self, OutputLayout, RunTotals};
use crate::runner::{RunReport, TaskResult};

/// Merges, prints one line of totals, and exits as `run` would have over
/// all the merged tasks; at least `4` when a shard or a task is missing.
pub fn merge(args: &MergeArgs) -> u8 {
    let printer = Printer::new(common::level(&args.verbosity), false);
    let outputs = OutputLayout::new(
        args.out.clone(),
        None,
        std::env::var_os("GITHUB_STEP_SUMMARY").map(PathBuf::from),
    );
    let merged = match report::merge::merge(&args.dirs, &outputs) {
        Ok(merged) => merged,
        Err(error) => return diagnostics::fail(&printer, &error),
    };
    for warning in &merged.scope.warnings {
        printer.error(&format!("warning: {warning}"));
    }
    printer.result(&format!(
        "ybs: merged {} director{}: {} — outputs in {}",
        args.dirs.len(),
        if args.dirs.len() == 1 { "y" } else { "ies" },
        RunTotals::of(&merged.results),
        args.out.display()
    ));
    let report = RunReport {
        results: merged
            .results
            .iter()
            .map(|result| TaskResult {
                id: result.task.clone(),
                status: result.status,
                reason: result.reason,
                message: result.message.clone(),
            })
            .collect(),
        ..RunReport::default()
    };
    let code = report.exit_code();
    let code = if merged.incomplete() && code == exit::OK {
        exit::INFRA
    } else {
        code
    };
    // The merged run's step outputs, as `run` writes them (docs/progress.md).
    if let Some(path) = std::env::var_os("GITHUB_OUTPUT").filter(|path| !path.is_empty()) {
        let outputs = report.github_outputs(code, &outputs);
        let text = report::github_output_text(&outputs, &crate::core::ids::new_run_id());
        if let Err(error) = report::append_github_output(std::path::Path::new(&path), &text) {
            printer.error(&format!("error: could not write the step outputs: {error}"));
        }
    }
    code
}
