//! `ybs report merge`: one report from the outputs of several shards;
//! `ybs report fixture`: a recorded task as a regression fixture;
//! `ybs report html`: the HTML page of an output directory.

use std::path::PathBuf;

use super::super::args::{FixtureArgs, HtmlArgs, MergeArgs};
use super::super::diagnostics;
use super::common;
use crate::core::{Environ, exit};
use crate::report::{self, OutputLayout, RunTotals};
use crate::runner::{Ending, RunReport, StepOutputs, TaskResult, finish};

/// Merges, prints one line of totals, and exits as `run` would have over
/// all the merged tasks; at least `4` when a shard or a task is missing.
pub fn merge(args: &MergeArgs, environ: &Environ) -> u8 {
    let printer = common::printer(common::level(&args.verbosity), false, environ);
    // The step outputs as `ybs run` resolves them (docs/progress.md).
    let steps = StepOutputs::from_environ(environ);
    let outputs = OutputLayout::new(args.out.clone(), None, steps.github_step_summary);
    let cwd = match crate::config::process_cwd() {
        Ok(cwd) => cwd,
        Err(source) => {
            return diagnostics::fail(&printer, &report::merge::MergeError::Write { source });
        }
    };
    let merged =
        match report::merge::merge_with_rate(&args.dirs, &outputs, args.min_pass_rate, &cwd) {
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
        min_pass_rate: args.min_pass_rate,
        ..RunReport::default()
    };
    let code = report.exit_code();
    let code = if merged.incomplete() && code == exit::OK {
        exit::INFRA
    } else {
        code
    };
    // The merged run ends as `run` does, its step outputs too (docs/progress.md).
    finish(
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
            github_output: steps.github_output.as_deref(),
            seed: &crate::core::ids::new_run_id(),
        },
    );
    code
}

/// Writes the fixture of one recorded task and says what it replays.
pub fn fixture(args: &FixtureArgs, environ: &Environ) -> u8 {
    let printer = common::printer(common::level(&args.verbosity), false, environ);
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => {
            printer.error(&format!(
                "error: cannot read the current directory: {error}"
            ));
            return exit::INFRA;
        }
    };
    match report::fixture::make(&args.dir, &args.to, &cwd) {
        Ok(fixture) => {
            let ended = match (fixture.status, fixture.reason) {
                (Some(status), Some(reason)) => format!("{status} ({reason})"),
                (Some(status), None) => status.to_string(),
                _ => "unfinished".to_owned(),
            };
            printer.result(&format!(
                "ybs: fixture of task `{}`: {} and {}; the recorded run ended {ended} after {} tool call{}. `ybs run {}` replays it offline",
                fixture.task,
                fixture.task_file.display(),
                fixture.cassette.display(),
                fixture.tool_calls,
                if fixture.tool_calls == 1 { "" } else { "s" },
                fixture.task_file.display(),
            ));
            exit::OK
        }
        Err(error) => diagnostics::fail(&printer, &error),
    }
}

/// Writes the page; exit 0, or 2 when there is nothing to show or it
/// cannot be written.
pub fn html(args: &HtmlArgs, environ: &Environ) -> u8 {
    let printer = common::printer(common::level(&args.verbosity), false, environ);
    let cwd = match crate::config::process_cwd() {
        Ok(cwd) => cwd,
        Err(source) => {
            return diagnostics::fail(
                &printer,
                &report::html::HtmlError::Read {
                    path: PathBuf::from("."),
                    source,
                },
            );
        }
    };
    match report::html::report_dir(&args.dir, args.to.as_deref(), &cwd) {
        Ok((path, tasks)) => {
            printer.result(&format!(
                "ybs: report of {tasks} task{} in {}",
                if tasks == 1 { "" } else { "s" },
                path.display()
            ));
            exit::OK
        }
        Err(error) => diagnostics::fail(&printer, &error),
    }
}
