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
    let cli = match args::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
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
