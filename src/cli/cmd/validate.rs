//! `ybs validate`: every error of every task file, the config and the
//! policies (including their `examples`), with no model and no side
//! effects. Exit 0 when clean, 2 otherwise.

use super::super::args::ValidateArgs;
use super::super::diagnostics;
use super::super::printer::Printer;
use super::common;
use crate::core::exit;
use crate::runner::{self, PolicyInputs, PrepareError, RunError};

pub fn validate(args: &ValidateArgs) -> u8 {
    let printer = Printer::new(common::level(&args.verbosity), false);
    let overrides = common::config_overrides(&args.config, false);
    let loaded = match common::load(
        &printer,
        &overrides,
        args.config.policy.as_deref(),
        Some(&args.paths),
        &args.vars,
    ) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let mut errors: Vec<PrepareError> = Vec::new();
    let mut tasks = 0;
    for file in &loaded.files {
        for task in &file.tasks {
            tasks += 1;
            let workdir = loaded
                .cwd
                .join(task.workdir.as_deref().unwrap_or(std::path::Path::new(".")));
            // A workdir that does not exist yet is found by `ybs run`; one
            // outside the task file's repository is an error here too.
            if let Ok(canonical) = workdir.canonicalize()
                && let Err(error) = runner::check_workdir_root(
                    &loaded.config,
                    &loaded.cwd,
                    home.as_deref(),
                    task,
                    &canonical,
                )
            {
                errors.push(error);
                continue;
            }
            let inputs = PolicyInputs {
                config: &loaded.config,
                home: home.as_deref(),
                operator: loaded.operator_policy.as_ref(),
                workdir: &workdir,
                protected: runner::protected_files(
                    &loaded.cwd,
                    &task.file,
                    args.config.policy.as_deref(),
                ),
                layers: &task.policy,
            };
            if let Err(error) = runner::task_policy(&inputs) {
                errors.push(PrepareError {
                    file: file.path.clone(),
                    span: None,
                    task: task.id.clone(),
                    message: error.to_string(),
                    hint: error.hint_text().map(str::to_owned),
                });
            }
        }
    }
    if !errors.is_empty() {
        return diagnostics::fail(&printer, &RunError::Prepare(errors));
    }
    printer.result(&format!(
        "ok: {} file{}, {tasks} task{} valid",
        loaded.files.len(),
        if loaded.files.len() == 1 { "" } else { "s" },
        if tasks == 1 { "" } else { "s" }
    ));
    exit::OK
}
