//! `ybs run`: load, prepare, execute, report, exit.

use std::path::PathBuf;
use std::sync::Arc;

use super::super::args::RunArgs;
use super::super::diagnostics;
use super::super::printer::Printer;
use super::super::repl::{self, TerminalApprover};
use super::common;
use crate::core::Status;
use crate::core::exit;
use crate::llm::cassette::CassetteWriter;
use crate::report::OutputLayout;
use crate::runner;
use crate::tools::process;

pub fn run(args: &RunArgs) -> u8 {
    let mut printer = Printer::new(common::level(&args.verbosity), args.json);
    if args.interactive && args.jobs > 1 {
        diagnostics::print_error(
            &printer,
            "error: --interactive answers one task at a time and cannot be combined with --jobs above 1",
            Some("drop --jobs (or YBS_JOBS) to debug interactively"),
        );
        return exit::USAGE;
    }
    // Before anything else: without a terminal there is no one to ask,
    // and stdin is never read (SECURITY S3).
    if args.interactive
        && let Err((message, hint)) = repl::require_terminal()
    {
        diagnostics::print_error(&printer, &message, Some(hint));
        return exit::USAGE;
    }
    // Before any child exists: children cannot read our environment
    // (API keys) through /proc, and escapees are re-parented to us.
    if let Err(error) = process::harden_self() {
        printer.warn(&format!("cannot harden the ybs process: {error}"));
    }
    if !args.no_sandbox {
        // Overlaps the sandbox probe (a few milliseconds) with loading.
        crate::tools::sandbox::probe_in_background();
    }
    let overrides = common::Overrides {
        config_file: args.config.clone(),
        provider: args.provider.clone(),
        model: args.model.clone(),
        endpoint: args.endpoint.clone(),
        cassette: args.cassette.clone(),
        out: args.out.clone(),
        no_sandbox: args.no_sandbox,
        ..common::Overrides::default()
    };
    let loaded = match common::load(
        &printer,
        &overrides,
        args.policy.as_deref(),
        Some(&args.paths),
        &args.vars,
    ) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let tasks = match runner::select(&loaded.files, &args.filter) {
        Ok(tasks) if tasks.is_empty() => {
            printer.error("error: no task matches the given paths and --filter");
            return exit::USAGE;
        }
        Ok(tasks) => match args.shard {
            Some(shard) => runner::shard(tasks, shard, &loaded.cwd),
            None => tasks,
        },
        Err(message) => {
            printer.error(&format!("error: {message}"));
            return exit::USAGE;
        }
    };
    let (mut context, redactor) = common::run_context(
        loaded,
        args.dry_run,
        args.cassette.clone(),
        args.policy.clone(),
    );
    context.no_commit = args.no_commit;
    context.shard = args.shard;
    context.jobs = usize::from(args.jobs);
    context.allow_dirty = args.allow_dirty;
    if let Some(path) = &args.record {
        match CassetteWriter::create(path, redactor.clone()) {
            Ok(writer) => context.recorder = Some(writer),
            Err(message) => {
                printer.error(&format!("error: {message}"));
                return exit::USAGE;
            }
        }
    }
    printer.set_redactor(redactor.clone());
    if args.interactive {
        let mut prompts = Printer::new(common::level(&args.verbosity), args.json);
        prompts.set_redactor(redactor.clone());
        context.approver = Some(Arc::new(TerminalApprover::new(prompts)));
    }
    let out_dir = context.config.out.clone();
    let paths = OutputLayout::new(
        out_dir.clone(),
        args.junit.clone(),
        std::env::var_os("GITHUB_STEP_SUMMARY").map(PathBuf::from),
    );
    context.outputs = paths.own_paths(tasks.iter().map(|task| task.id.as_str()));
    context.outputs.extend(args.record.iter().cloned());
    let prepared = match runner::prepare_all(&context, &tasks) {
        Ok(prepared) => prepared,
        Err(errors) => {
            for error in &errors {
                diagnostics::print_error(&printer, &error.to_string(), error.hint.as_deref());
            }
            return exit::USAGE;
        }
    };
    // Held for the run; a symbolic link where outputs would go is refused
    // before anything runs.
    let outputs = match paths.open(&context.cwd) {
        Ok(outputs) => outputs,
        Err(error) => {
            runner::discard(&prepared);
            diagnostics::print_error(
                &printer,
                &format!("error: {error}"),
                Some("remove the link, or pass --out (or --junit) a path without symbolic links"),
            );
            return exit::USAGE;
        }
    };
    warn_unconfined(&printer, &prepared);
    for note in runner::saved_work_notes(&context, &prepared) {
        printer.error(&format!("ybs: {note}"));
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            printer.error(&format!("error: cannot start the async runtime: {error}"));
            return exit::INFRA;
        }
    };
    let report = runtime.block_on(runner::execute(
        &context,
        prepared,
        &paths,
        &outputs,
        redactor,
        &mut printer,
    ));
    if let Some(error) = &report.output_error {
        printer.error(&format!("error: could not write all outputs: {error}"));
    }
    for finding in &report.tampering {
        printer.error(&format!("warning: output tampering: {finding}"));
    }
    let total = report.results.len();
    printer.result(&format!(
        "ybs: {}{total} task{}: {} passed, {} failed, {} errors{}{} — outputs in {}",
        args.shard
            .map(|shard| format!("shard {shard}: "))
            .unwrap_or_default(),
        if total == 1 { "" } else { "s" },
        report.count(Status::Passed),
        report.count(Status::Failed),
        report.count(Status::Error),
        if report.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        if args.dry_run {
            " (dry run: nothing was executed or committed)"
        } else {
            ""
        },
        out_dir.display()
    ));
    match (&report.output_error, report.exit_code()) {
        (Some(_), exit::OK) => exit::INFRA,
        (_, code) => code,
    }
}

/// One warning line on stderr when children run unconfined (SECURITY S1).
fn warn_unconfined(printer: &Printer, prepared: &[runner::PreparedTask]) {
    let mut reasons: Vec<&str> = prepared
        .iter()
        .filter(|task| !task.sandbox.confined())
        .map(|task| task.sandbox.reason.as_deref().unwrap_or("unknown reason"))
        .collect();
    reasons.dedup();
    if !reasons.is_empty() {
        // Not `warn`: shown even with --quiet.
        printer.error(&format!(
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
        printer.error(&format!(
            "warning: reduced sandbox (safety.sandbox_require: landlock): missing layer: {}",
            missing.join("; ")
        ));
    }
}
