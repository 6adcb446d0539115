//! `ybs report merge`: one report from the outputs of several shards.

use std::path::PathBuf;

use super::super::args::MergeArgs;
use super::super::diagnostics;
use super::common;
use crate::core::exit;
use crate::report::{self, OutputLayout, RunTotals};
use crate::runner::session::{self, Ending};
use crate::runner::{RunReport, TaskResult};

/// Merges, prints one line of totals, and exits as `run` would have over
/// all the merged tasks; at least `4` when a shard or a task is missing.
pub fn merge(args: &MergeArgs) -> u8 {
    let printer = common::printer(common::level(&args.verbosity), false);
    let outputs = OutputLayout::new(
        args.out.clone(),
        None,
        std::env::var_os("GITHUB_STEP_SUMMARY").map(PathBuf::from),
    );
    let cwd = match crate::config::process_cwd() {
        Ok(cwd) => cwd,
        Err(source) => {
            return diagnostics::fail(&printer, &report::merge::MergeError::Write { source });
        }
    };
    let merged = match report::merge::merge(&args.dirs, &outputs, &cwd) {
        Ok(merged) => merged,
        Err(error) => return diagnostics::fail(&printer, &error),
    };
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
        warnings: merged
            .scope
            .warnings
            .iter()
            .map(|warning| format!("warning: {warning}"))
            .collect(),
        ..RunReport::default()
    };
    let code = report.exit_code();
    let code = if merged.incomplete() && code == exit::OK {
        exit::INFRA
    } else {
        code
    };
    // The merged run ends as `run` does, its step outputs too (docs/progress.md).
    let github_output = std::env::var_os("GITHUB_OUTPUT")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from);
    session::finish(
        &printer,
        &report,
        &Ending {
            totals: format!(
                "ybs: merged {} director{}: {} — outputs in {}",
                args.dirs.len(),
                if args.dirs.len() == 1 { "y" } else { "ies" },
                RunTotals::of(&merged.results),
                args.out.display()
            ),
            code,
            layout: &outputs,
            github_output: github_output.as_deref(),
            seed: &crate::core::ids::new_run_id(),
        },
    );
    code
}
