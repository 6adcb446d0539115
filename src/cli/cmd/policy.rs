//! `ybs policy explain [--task FILE#ID] 'CALL'`: the verdict for a call
//! and the rule that made it, with each part of a shell command.

use std::path::PathBuf;

use super::super::args::ExplainArgs;
use super::super::diagnostics;
use super::common;
use crate::core::exit;
use crate::report::{Level, Printer};
use crate::runner::inspect;

pub fn explain(args: &ExplainArgs) -> u8 {
    let printer = Printer::new(Level::Normal, false);
    let (task_file, task_id) = match args.task.as_deref().map(|spec| spec.split_once('#')) {
        Some(Some((file, id))) => (Some(PathBuf::from(file)), Some(id)),
        Some(None) => (args.task.as_ref().map(PathBuf::from), None),
        None => (None, None),
    };
    let overrides = common::config_overrides(&args.config, false);
    let policy_file = args.config.policy.as_deref();
    let paths: Vec<PathBuf> = task_file.into_iter().collect();
    let task_paths = (!paths.is_empty()).then_some(paths.as_slice());
    let loaded = match common::load(&printer, &overrides, policy_file, task_paths, &[]) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    match inspect::explain(&loaded, task_id, policy_file, &args.call) {
        Ok(explanation) => {
            printer.result(&explanation);
            exit::OK
        }
        Err(error) => diagnostics::fail(&printer, &error),
    }
}
