//! `ybs resume OUT`: flags → the paused tasks and their answers →
//! [`runner::resume::resume`] → exit code (docs/resume.md).

use std::path::Path;

use super::super::args::ResumeArgs;
use super::super::diagnostics;
use super::common;
use crate::core::{Environ, Redactor, exit};
use crate::report::Console;
use crate::runner::Resumed;
use crate::runner::resume::{self, ResultsInput, ResumeFlags};
use crate::runner::{self, RunFlags, RunOptions};

pub fn resume(args: &ResumeArgs, environ: &Environ) -> u8 {
    let level = common::level(&args.verbosity);
    let mut printer = common::printer(level, args.json, environ);
    runner::harden(&printer, environ, args.no_sandbox, true);
    let cwd = match crate::config::process_cwd() {
        Ok(cwd) => cwd,
        Err(error) => {
            printer.error(&format!(
                "error: cannot read the current directory: {error}"
            ));
            return exit::USAGE;
        }
    };
    let flags = resume_flags(args);
    let env = |name: &str| environ.var(name);
    let redactor = resume::env_redactor(environ);
    printer.set_redactor(redactor.clone());
    if args.list {
        // The pending calls, nothing resumed, nothing written.
        return match resume::find_paused(&cwd, &args.out, args.task.as_deref(), environ) {
            Ok(paused) => {
                list(&printer, &paused, &redactor);
                exit::OK
            }
            Err(error) => diagnostics::fail(&printer, &error),
        };
    }
    // Everything is checked before anything runs or is written.
    let prepared = resume::find_paused(&cwd, &args.out, args.task.as_deref(), environ)
        .and_then(|paused| Ok((resume::gather_answers(&paused, &flags, &env)?, paused)));
    let (resumed, paused) = match prepared {
        Ok(found) => found,
        Err(error) => return diagnostics::fail(&printer, &error),
    };
    announce(&printer, &resumed, &redactor);
    // The run's commit settings, carried by its states (docs/resume.md):
    // `--no-commit` holds at resume too, and a `--scratch` run goes on in
    // a new temporary copy, never in the checkout.
    let mut args = args.clone();
    args.no_commit |= paused
        .iter()
        .any(|task| task.state.no_commit || task.state.scratch);
    if paused.iter().any(|task| task.state.scratch) {
        args.out = cwd.join(&args.out);
        let scratch = match runner::scratch::Scratch::copy_of(
            &cwd,
            std::slice::from_ref(&args.out),
            &environ.temp_dir(),
        ) {
            Ok(scratch) => scratch,
            Err(message) => {
                let error = runner::RunError::usage(
                    format!(
                        "the run paused under --scratch, and its copy cannot be made again: {message}"
                    ),
                    Some("free space in the temp dir ($TMPDIR)"),
                );
                return diagnostics::fail(&printer, &error);
            }
        };
        if let Err(error) = std::env::set_current_dir(scratch.path()) {
            let error =
                runner::RunError::usage(format!("--scratch: cannot enter the copy: {error}"), None);
            return diagnostics::fail(&printer, &error);
        }
        let code = go_on(
            &args,
            (resumed, paused, true),
            &flags,
            (&mut printer, environ),
        );
        let _ = std::env::set_current_dir(&cwd);
        drop(scratch);
        return code;
    }
    go_on(
        &args,
        (resumed, paused, false),
        &flags,
        (&mut printer, environ),
    )
}

/// Loads the paused tasks' files and goes on with them, in the current
/// directory (a scratch copy when `scratch`).
fn go_on(
    args: &ResumeArgs,
    (resumed, paused, scratch): (Vec<Resumed>, Vec<resume::PausedTask>, bool),
    flags: &ResumeFlags,
    (printer, environ): (&mut crate::report::Printer, &Environ),
) -> u8 {
    let overrides = common::overrides(
        &args.config,
        &args.provider,
        args.no_sandbox,
        Some(args.out.clone()),
    );
    let files: Vec<_> = paused.iter().map(|task| task.file.clone()).collect();
    let loaded = match common::load(
        printer,
        environ,
        &overrides,
        args.config.policy.as_deref(),
        Some(&files),
        &args.vars,
    ) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let run_flags = RunFlags {
        scratch,
        ..run_flags(args)
    };
    let options = RunOptions::resume(run_flags, &loaded, args.out.clone());
    match resume::resume(loaded, resumed, options, flags, printer) {
        Ok(report) => report.exit_code(),
        Err(error) => diagnostics::fail(printer, &error),
    }
}

/// `ybs resume`'s own flags.
fn resume_flags(args: &ResumeArgs) -> ResumeFlags {
    ResumeFlags {
        task: args.task.clone(),
        results: args.results.as_ref().map(|path| {
            if path == Path::new("-") {
                ResultsInput::Stdin
            } else {
                ResultsInput::File(path.clone())
            }
        }),
        approve: args.approve.clone(),
        deny: args.deny.clone(),
        by: args.by.clone(),
        allow_changed: args.allow_changed,
    }
}

/// The flags of the run that goes on: one task at a time.
fn run_flags(args: &ResumeArgs) -> RunFlags {
    RunFlags {
        junit: args.junit.clone(),
        cassette: args.provider.cassette.clone(),
        policy_file: args.config.policy.clone(),
        no_sandbox: args.no_sandbox,
        no_commit: args.no_commit,
        jobs: 1,
        resume_args: common::resume_args(
            &args.config,
            &args.provider,
            &args.vars,
            (args.no_sandbox, args.no_commit),
        ),
        ..RunFlags::default()
    }
}

/// `--list`: each paused task and its pending calls (stdout).
fn list(printer: &dyn Console, paused: &[resume::PausedTask], redactor: &Redactor) {
    for task in paused {
        let count = task.state.pending.len();
        printer.result(&format!(
            "{}: {count} pending call{} ({})",
            task.state.task.id,
            if count == 1 { "" } else { "s" },
            task.file.display()
        ));
        for call in &task.state.pending {
            printer.result(&format!("  {}", resume::describe_pending(call, redactor)));
        }
    }
}

/// What is approved or denied is shown before it runs (stderr).
fn announce(printer: &dyn Console, resumed: &[Resumed], redactor: &Redactor) {
    for item in resumed {
        for answer in &item.summary {
            let Some(call) = item.state.pending.iter().find(|call| call.id == answer.id) else {
                continue;
            };
            if call.kind == crate::core::event::PendingKind::Approval {
                let verb = if answer.answer == "approved" {
                    "approving"
                } else {
                    "denying"
                };
                printer.error(&format!(
                    "{verb} (by {}) {}: {}",
                    item.approver,
                    item.state.task.id,
                    resume::describe_pending(call, redactor)
                ));
            }
        }
    }
}
