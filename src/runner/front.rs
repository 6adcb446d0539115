//! `ybs run` behind the CLI: select, prepare, open the outputs, execute,
//! and say how it went.

use super::options::{Loaded, RunOptions, run_context};
use super::{PreparedTask, RunError, RunReport};
use crate::core::Status;
use crate::llm::cassette::CassetteWriter;
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
        Err(message) => return Err(RunError::usage(message, None)),
    };
    let (mut context, redactor) = run_context(
        loaded,
        flags.dry_run,
        flags.cassette.clone(),
        flags.policy_file.clone(),
    );
    context.no_commit = flags.no_commit;
    context.shard = flags.shard;
    context.jobs = usize::from(flags.jobs);
    context.allow_dirty = flags.allow_dirty;
    if let Some(path) = &flags.record {
        context.recorder = Some(
            CassetteWriter::create(path, redactor.clone())
                .map_err(|message| RunError::usage(message, None))?,
        );
    }
    console.set_redactor(redactor.clone());
    context.approver = flags.approver.as_ref().map(|make| make(redactor.clone()));
    let layout = options.layout();
    context.outputs = layout.own_paths(tasks.iter().map(|task| task.id.as_str()));
    context.outputs.extend(flags.record.iter().cloned());
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
    warn_unconfined(console, &prepared);
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
        &context, prepared, &layout, &outputs, redactor, console,
    ));
    if let Some(error) = &report.output_error {
        console.error(&format!("error: could not write all outputs: {error}"));
    }
    for finding in &report.tampering {
        console.error(&format!("warning: output tampering: {finding}"));
    }
    for warning in &report.warnings {
        console.error(warning);
    }
    let total = report.results.len();
    console.result(&format!(
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
    ));
    if let Some(path) = &options.github_output {
        let outputs = report.github_outputs(report.exit_code(), &layout);
        let text = crate::report::github_output_text(&outputs, &context.run_id);
        if let Err(error) = crate::report::append_github_output(path, &text) {
            console.error(&format!("error: could not write the step outputs: {error}"));
        }
    }
    Ok(report)
}

/// One warning line on stderr when children run unconfined (docs/security.md S1).
fn warn_unconfined(console: &dyn Console, prepared: &[PreparedTask]) {
    let mut reasons: Vec<&str> = prepared
        .iter()
        .filter(|task| !task.sandbox.confined())
        .map(|task| task.sandbox.reason.as_deref().unwrap_or("unknown reason"))
        .collect();
    reasons.dedup();
    if !reasons.is_empty() {
        // Not `warn`: shown even with --quiet.
        console.error(&format!(
            "warning: no sandbox: shell commands and external tools run UNCONFINED ({})",
            reasons.join("; ")
        ));
    }
    let mut missing: Vec<String> = prepared
        .iter()
        .filter(|task| task.sandbox.confined())
        .flat_map(|task| task.sandbox.missing.iter().cloned())
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        console.error(&format!(
            "warning: reduced sandbox (safety.sandbox_require: landlock): missing layer: {}",
            missing.join("; ")
        ));
    }
    let mut unbounded: Vec<String> = prepared
        .iter()
        .filter(|task| task.sandbox.confined())
        .flat_map(|task| task.sandbox.missing_bounds.iter().cloned())
        .collect();
    unbounded.dedup();
    if !unbounded.is_empty() {
        console.error(&format!(
            "warning: sandbox without a bound: {}",
            unbounded.join("; ")
        ));
    }
}
