//! `ybs policy explain [--task FILE#ID] 'CALL'`: the verdict for a call
//! and the rule that made it, with each part of a shell command.

use std::path::PathBuf;

use super::super::args::ExplainArgs;
use super::super::diagnostics;
use super::common;
use crate::core::{Environ, exit};
use crate::report::Level;
use crate::runner::{RunFlags, inspect};

pub fn explain(args: &ExplainArgs, environ: &Environ) -> u8 {
    let mut printer = common::printer(Level::Normal, false, environ);
    let (task_file, task_id) = match args.task.as_deref().map(|spec| spec.split_once('#')) {
        Some(Some((file, id))) => (Some(PathBuf::from(file)), Some(id)),
        Some(None) => (args.task.as_ref().map(PathBuf::from), None),
        None => (None, None),
    };
    let overrides = common::config_overrides(&args.config, false);
    let policy_file = args.config.policy.as_deref();
    let paths: Vec<PathBuf> = task_file.into_iter().collect();
    let task_paths = (!paths.is_empty()).then_some(paths.as_slice());
    let loaded = match common::load(&printer, environ, &overrides, policy_file, task_paths, &[]) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let calls = if args.call == "-" {
        let mut calls = Vec::new();
        for (number, line) in std::io::stdin().lines().enumerate() {
            let parsed = line
                .map_err(|error| error.to_string())
                .and_then(|line| serde_json::from_str::<String>(&line).map_err(|e| e.to_string()));
            match parsed {
                Ok(call) => calls.push(call),
                Err(error) => {
                    printer.error(&format!(
                        "error: <stdin>:{}: {error}\n  hint: give one call a line as a JSON string, e.g. \"run_shell(cargo test)\"",
                        number + 1
                    ));
                    return exit::USAGE;
                }
            }
        }
        calls
    } else {
        vec![args.call.clone()]
    };
    let flags = RunFlags {
        policy_file: policy_file.map(PathBuf::from),
        ..RunFlags::default()
    };
    let sandbox = match (&args.sandbox, args.no_sandbox) {
        (_, true) => Some(("none".to_owned(), "--no-sandbox".to_owned())),
        (Some(mode), false) => Some((mode.clone(), format!("--sandbox {mode}"))),
        (None, false) => None,
    };
    let explained = inspect::open(loaded, flags, &mut printer)
        .and_then(|session| session.explain(task_id, &calls, args.json, sandbox));
    match explained {
        Ok(explanation) => {
            printer.result(&explanation);
            exit::OK
        }
        Err(error) => diagnostics::fail(&printer, &error),
    }
}
