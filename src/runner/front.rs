//! `ybs run` behind the CLI: select, prepare, open the outputs, execute,
//! and say how it went.

use super::options::{Entry, Loaded, RunOptions, run_context};
use super::session::{self, Ending};
use super::{RunError, RunReport};
use crate::core::Status;
use crate::report::{Console, PlannedTask};

/// Runs the selected tasks of `loaded` with `options`; every line for
/// the person running it goes to `console`.
pub fn run(
    loaded: Loaded,
    options: RunOptions,
    console: &mut dyn Console,
) -> Result<RunReport, RunError> {
    let flags = &options.flags;
    let tasks = match super::select(&loaded.files, &flags.filter) {
        Ok(tasks) if tasks.is_empty() => {
            return Err(RunError::usage(
                "no task matches the given paths and --filter",
                None,
            ));
        }
        Ok(tasks) => match flags.shard {
            Some(shard) => super::shard(tasks, shard, &loaded.cwd),
            None => tasks,
        },
        Err(error) => return Err(error),
    };
    let entry = Entry {
        tasks: tasks.iter().map(|task| task.id.clone()).collect(),
        resuming: None,
    };
    let (context, redactor) = run_context(loaded, &options, entry)?;
    console.set_redactor(redactor.clone());
    let layout = options.layout();
    let prepared = super::prepare_all(&context, &tasks).map_err(RunError::Prepare)?;
    // Held for the run; a symbolic link where outputs would go is refused
    // before anything runs.
    let outputs = match layout.open(&context.cwd) {
        Ok(outputs) => outputs,
        Err(error) => {
            super::discard(&prepared);
            return Err(RunError::usage(
                error.to_string(),
                Some("remove the link, or pass --out (or --junit) a path without symbolic links"),
            ));
        }
    };
    session::warn_unconfined(console, &prepared);
    for note in super::saved_work_notes(&context, &prepared) {
        console.error(&format!("ybs: {note}"));
    }
    let runtime = super::runtime()?;
    console.planned(
        &prepared
            .iter()
            .map(|task| PlannedTask {
                id: task.task.id.clone(),
                max_steps: task.limits.max_iterations,
            })
            .collect::<Vec<_>>(),
    );
    let report = runtime.block_on(super::execute(
        &context, prepared, None, &layout, &outputs, redactor, console,
    ));
    let total = report.results.len();
    let totals = format!(
        "ybs: {}{total} task{}: {} passed, {} failed, {} errors{}{}{} — outputs in {}",
        flags
            .shard
            .map(|shard| format!("shard {shard}: "))
            .unwrap_or_default(),
        if total == 1 { "" } else { "s" },
        report.count(Status::Passed),
        report.count(Status::Failed),
        report.count(Status::Error),
        match report.count(Status::Paused) {
            0 => String::new(),
            paused => format!(
                ", {paused} paused (`ybs resume {}`)",
                options.out_dir.display()
            ),
        },
        if report.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        if flags.dry_run {
            " (dry run: nothing was executed or committed)"
        } else {
            ""
        },
        options.out_dir.display()
    );
    session::finish(
        console,
        &report,
        &Ending {
            totals,
            code: report.exit_code(),
            layout: &layout,
            github_output: options.github_output.as_deref(),
            seed: &context.run_id,
        },
    );
    Ok(report)
}
