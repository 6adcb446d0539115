//! `ybs run`: flags → options → [`runner::run`] → exit code.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::args::RunArgs;
use super::super::diagnostics;
use super::super::repl;
use super::{adhoc, common};
use crate::core::{Environ, exit};
use crate::runner::approve::TerminalApprover;
use crate::runner::{self, RunError, RunFlags, RunOptions};

pub fn run(args: &RunArgs, environ: &Environ) -> u8 {
    if args.scratch {
        return in_scratch(args, environ);
    }
    run_in(args, None, environ)
}

/// `--scratch`: the same run in a temporary copy of the current
/// directory, with the paths of the flags (and the outputs) still where
/// the user meant them; nothing is committed.
fn in_scratch(args: &RunArgs, environ: &Environ) -> u8 {
    let printer = super::common::printer(common::level(&args.verbosity), args.json, environ);
    let original = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(error) => {
            let error =
                RunError::usage(format!("cannot read the current directory: {error}"), None);
            return diagnostics::fail(&printer, &error);
        }
    };
    let mut args = args.clone();
    let absolute = |path: &mut Option<PathBuf>| {
        if let Some(path) = path {
            *path = original.join(&*path);
        }
    };
    absolute(&mut args.config.config);
    absolute(&mut args.config.policy);
    absolute(&mut args.provider.cassette);
    absolute(&mut args.record);
    absolute(&mut args.junit);
    absolute(&mut args.adhoc.save);
    let mut skip = vec![PathBuf::from(crate::config::defaults::OUT)];
    skip.extend(args.out.iter().cloned());
    absolute(&mut args.out);
    args.no_commit = true;
    let scratch = match runner::scratch::Scratch::copy_of(&original, &skip, &environ.temp_dir()) {
        Ok(scratch) => scratch,
        Err(message) => {
            let error = RunError::usage(
                format!("--scratch: {message}"),
                Some("run without --scratch, or free space in the temp dir ($TMPDIR)"),
            );
            return diagnostics::fail(&printer, &error);
        }
    };
    if let Err(error) = std::env::set_current_dir(scratch.path()) {
        let error = RunError::usage(format!("--scratch: cannot enter the copy: {error}"), None);
        return diagnostics::fail(&printer, &error);
    }
    let code = run_in(&args, Some(&original), environ);
    let _ = std::env::set_current_dir(&original);
    drop(scratch);
    code
}

/// The run, in the current directory; `origin`: the directory the
/// outputs belong in when that is not it (`--scratch`).
fn run_in(args: &RunArgs, origin: Option<&Path>, environ: &Environ) -> u8 {
    let level = common::level(&args.verbosity);
    let mut printer = super::common::printer(level, args.json, environ);
    // Progress bars would fight `--interactive`'s prompts for the terminal.
    printer.live(!args.interactive);
    // `--print-output`: stdout holds the answers, printed after the run.
    if args.print_output {
        printer.collect_answers();
    }
    if args.interactive && args.jobs > 1 {
        let error = RunError::usage(
            "--interactive answers one task at a time and cannot be combined with --jobs above 1",
            Some("drop --jobs (or YBS_JOBS) to debug interactively"),
        );
        return diagnostics::fail(&printer, &error);
    }
    // Before anything else: without a terminal there is no one to ask,
    // and stdin is never read (docs/security.md S3).
    if args.interactive
        && let Err(error) = repl::require_terminal()
    {
        return diagnostics::fail(&printer, &error);
    }
    runner::harden(&printer, environ, args.no_sandbox, true);
    let overrides = common::overrides(
        &args.config,
        &args.provider,
        args.no_sandbox,
        args.out.clone(),
    );
    let loaded = match &args.adhoc.prompt {
        Some(prompt) => match adhoc::load(args, prompt, &overrides, (&printer, environ)) {
            Ok(adhoc::Loaded::Run(loaded)) => *loaded,
            Ok(adhoc::Loaded::Saved) => return exit::OK,
            Err(code) => return code,
        },
        None => match common::load_selected(
            &printer,
            environ,
            &overrides,
            args.config.policy.as_deref(),
            &args.paths,
            &args.vars,
            &args.filter,
        ) {
            Ok(loaded) => loaded,
            Err(code) => return code,
        },
    };
    let mut loaded = loaded;
    if let Some(origin) = origin {
        loaded.config.out = origin.join(&loaded.config.out);
    }
    let json = args.json;
    let (shard, shard_source) = match shard(args.shard, environ) {
        Ok(found) => found,
        Err(error) => return diagnostics::fail(&printer, &error),
    };
    let shard_split = match split(args) {
        Ok(split) => split,
        Err(error) => return diagnostics::fail(&printer, &*error),
    };
    let flags = RunFlags {
        filter: args.filter.clone(),
        shard,
        shard_source,
        shard_split,
        jobs: args.jobs,
        max_cost_usd: args.max_cost_usd,
        dry_run: args.dry_run,
        no_commit: args.no_commit,
        scratch: origin.is_some(),
        allow_dirty: args.allow_dirty,
        cassette: args.provider.cassette.clone(),
        record: args.record.clone(),
        junit: args.junit.clone(),
        policy_file: args.config.policy.clone(),
        no_sandbox: args.no_sandbox,
        matrix: runner::Matrix {
            models: args.models.clone(),
            repeat: args.repeat,
            min_pass_rate: args.min_pass_rate,
        },
        resume_args: common::resume_args(
            &args.config,
            &args.provider,
            &args.vars,
            (args.no_sandbox, args.no_commit),
        ),
        approver: args.interactive.then(|| -> runner::MakeApprover {
            let environ = environ.clone();
            Box::new(move |redactor| {
                let mut prompts = super::common::printer(level, json, &environ);
                prompts.set_redactor(redactor);
                Arc::new(TerminalApprover::new(Box::new(prompts)))
            })
        }),
    };
    let options = RunOptions::resolve(flags, &loaded);
    match runner::run(loaded, options, &mut printer) {
        Ok(report) => {
            printer.print_answers();
            report.exit_code()
        }
        Err(error) => diagnostics::fail(&printer, &error),
    }
}

/// `--shard`: a fixed `K/N`, or `auto` resolved from the CI engine's
/// variables (docs/ci.md, "Sharding"), with where it came from.
fn shard(
    arg: Option<crate::core::shard::ShardArg>,
    environ: &Environ,
) -> Result<
    (
        Option<crate::core::Shard>,
        Option<crate::core::shard::ShardSource>,
    ),
    RunError,
> {
    use crate::core::shard::{ShardArg, from_engines};
    match arg {
        None => Ok((None, None)),
        Some(ShardArg::Fixed(shard)) => Ok((Some(shard), None)),
        Some(ShardArg::Auto { total }) => {
            from_engines(&|name| environ.var(name), total)
                .map(|(shard, source)| (Some(shard), Some(source)))
                .map_err(|error| {
                    RunError::usage(
                        error.to_string(),
                        Some("run it as a parallel job of the CI engine (docs/ci.md, \"Sharding\"), set YBS_SHARD_INDEX (from 0) and YBS_SHARD_TOTAL, or pass --shard K/N"),
                    )
                })
        }
    }
}

/// `--shard-by durations --durations FILE`: the file read (a foreign or
/// unreadable one is an error, never a silent fallback to hashing).
fn split(
    args: &RunArgs,
) -> Result<Option<runner::ShardSplit>, Box<dyn crate::core::exit::Failure>> {
    match (args.shard_by.as_deref(), &args.durations) {
        (Some("durations"), Some(file)) => {
            let (durations, digest) = crate::report::durations::Durations::read(file)
                .map_err(|error| -> Box<dyn crate::core::exit::Failure> {
                    Box::new(diagnostics::FileError {
                        message: error.to_string(),
                        hint: Some("pass an earlier run's or merge's durations.json (or junit.xml) as --durations".to_owned()),
                    })
                })?;
            Ok(Some(runner::ShardSplit { durations, digest }))
        }
        (Some("durations"), None) => Err(Box::new(RunError::usage(
            "--shard-by durations needs --durations FILE",
            Some("pass an earlier run's or merge's durations.json (or junit.xml)"),
        ))),
        (_, Some(_)) => Err(Box::new(RunError::usage(
            "--durations is only read with --shard-by durations",
            Some("add --shard-by durations (and --shard K/N), or drop --durations"),
        ))),
        _ => Ok(None),
    }
}
