//! `ybs policy explain [--task FILE#ID] 'CALL'`: the verdict for a call
//! and the rule that made it, with each part of a shell command.

use std::path::{Path, PathBuf};

use super::super::args::ExplainArgs;
use super::super::diagnostics;
use super::super::printer::Printer;
use super::common;
use crate::core::exit;
use crate::policy::{self, PolicySpec};
use crate::runner::{self, PolicyInputs, RunError};

pub fn explain(args: &ExplainArgs) -> u8 {
    let printer = Printer::new(super::super::printer::Level::Normal, false);
    let (task_file, task_id) = match &args.task {
        Some(spec) => match spec.split_once('#') {
            Some((file, id)) => (Some(PathBuf::from(file)), Some(id.to_owned())),
            None => (Some(PathBuf::from(spec)), None),
        },
        None => (None, None),
    };
    let overrides = common::config_overrides(&args.config, false);
    let paths: Vec<PathBuf> = task_file.iter().cloned().collect();
    let task_paths = (!paths.is_empty()).then_some(paths.as_slice());
    let loaded = common::load(
        &printer,
        &overrides,
        args.config.policy.as_deref(),
        task_paths,
        &[],
    );
    let loaded = match loaded {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let tasks: Vec<_> = loaded.files.iter().flat_map(|f| f.tasks.iter()).collect();
    let task = match (&task_id, tasks.as_slice()) {
        (None, []) => None,
        (None, [only]) => Some(*only),
        (None, _) => {
            let error = RunError::usage(
                "the task file holds several tasks",
                Some("name one: --task FILE#TASK-ID"),
            );
            return diagnostics::fail(&printer, &error);
        }
        (Some(id), tasks) => match tasks.iter().find(|t| &t.id == id) {
            Some(task) => Some(*task),
            None => {
                let known: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
                let error = RunError::usage(
                    format!("no task `{id}` in the file"),
                    Some(&format!("tasks: {}", known.join(", "))),
                );
                return diagnostics::fail(&printer, &error);
            }
        },
    };
    let empty: Vec<PolicySpec> = Vec::new();
    let workdir = loaded.cwd.join(
        task.and_then(|t| t.workdir.as_deref())
            .unwrap_or(Path::new(".")),
    );
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let inputs = PolicyInputs {
        config: &loaded.config,
        home: home.as_deref(),
        operator: loaded.operator_policy.as_ref(),
        workdir: &workdir,
        protected: task.map_or_else(Vec::new, |t| {
            runner::protected_files(&loaded.cwd, &t.file, args.config.policy.as_deref())
        }),
        layers: task.map_or(&empty, |t| &t.policy),
    };
    let policy = match runner::task_policy(&inputs) {
        Ok(policy) => policy,
        Err(error) => {
            return diagnostics::fail(
                &printer,
                &RunError::usage(error.to_string(), error.hint_text()),
            );
        }
    };
    match policy::explain(&policy, &args.call) {
        Ok(explanation) => {
            printer.result(explanation.to_string().trim_end());
            exit::OK
        }
        Err(error) => {
            let error = RunError::usage(
                error.to_string(),
                Some(
                    "write the call as tool(argument), e.g. 'run_shell(cargo test)' or 'edit_file(src/lib.rs)'",
                ),
            );
            diagnostics::fail(&printer, &error)
        }
    }
}
