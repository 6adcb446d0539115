//! L5 cli: argv, stdout/stderr, exit codes.
//!
//! `main` parses, dispatches and turns the outcome into an exit code in
//! one place. `--version` and `--help` answer before any I/O.

pub mod args;
pub mod cmd;
pub mod diagnostics;
pub mod repl;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::core::exit;

pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match args::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            let first = args.get(1).and_then(|arg| arg.to_str());
            let error = suggest_subcommand(error, first);
            // clap prints help/version to stdout and usage errors to stderr.
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    ExitCode::from(cmd::dispatch(cli))
}

/// `ybs rn`: clap suggests only what is very close (`rn` is not, by its
/// measure, close to `run`); a typo of a command ybs knows gets the same
/// `tip:` line as clap's own suggestions.
/// `first` is the first argument: only a top-level command is suggested.
fn suggest_subcommand(mut error: clap::Error, first: Option<&str>) -> clap::Error {
    use clap::CommandFactory;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::InvalidSubcommand
        || error.get(ContextKind::SuggestedSubcommand).is_some()
    {
        return error;
    }
    let Some(ContextValue::String(found)) = error.get(ContextKind::InvalidSubcommand) else {
        return error;
    };
    if first != Some(found.as_str()) {
        return error;
    }
    let command = args::Cli::command();
    let names: Vec<&str> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .map(clap::Command::get_name)
        .collect();
    if let Some(name) = crate::core::text::closest(found, names.iter().copied()) {
        let name = name.to_owned();
        error.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(vec![name]),
        );
    }
    error
}
