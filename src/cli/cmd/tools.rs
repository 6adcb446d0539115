//! `ybs tools list|schema|invoke|serve|status`: load config and `--policy`, then
//! [`runner::toolbox::tools`].

use super::super::args::{ToolsArgs, ToolsCommand};
use super::super::diagnostics;
use super::common;
use crate::core::{Environ, exit};
use crate::runner;
use crate::runner::toolbox::{ToolsAction, ToolsOutcome};

pub fn tools(args: &ToolsArgs, environ: &Environ) -> u8 {
    let (common_args, action) = match &args.command {
        ToolsCommand::List(args) => (&args.common, ToolsAction::List { json: args.json }),
        ToolsCommand::Schema(args) => (
            &args.common,
            ToolsAction::Schema {
                name: args.name.clone(),
            },
        ),
        ToolsCommand::Invoke(args) => (
            &args.common,
            ToolsAction::Invoke {
                name: args.name.clone(),
                input: args.input.clone(),
            },
        ),
        ToolsCommand::Serve(args) => (
            &args.common,
            ToolsAction::Serve(runner::toolbox::serve::ServeOptions {
                builtin: args.builtin,
                on_call: None,
                listen: args.listen,
            }),
        ),
        ToolsCommand::Status(args) => (&args.common, ToolsAction::Status { json: args.json }),
    };
    let printer = common::printer(common::level(&common_args.verbosity), false, environ);
    runner::harden(&printer, environ, common_args.no_sandbox, false);
    let overrides = common::config_overrides(&common_args.config, common_args.no_sandbox);
    let loaded = match common::load(
        &printer,
        environ,
        &overrides,
        common_args.config.policy.as_deref(),
        None,
        &[],
    ) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let level = common::level(&common_args.verbosity);
    match runner::toolbox::tools(loaded, &action, Box::new(printer)) {
        Ok(ToolsOutcome::Done) => exit::OK,
        Ok(ToolsOutcome::ToolFailed) => exit::TASK_FAILED,
        Err(error) => {
            // Masked as the session's own lines were.
            let mut printer = common::printer(level, false, environ);
            printer.set_redactor(runner::resume::env_redactor(environ));
            diagnostics::fail(&printer, &error)
        }
    }
}
