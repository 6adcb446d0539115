//! Error rendering: every error of the CLI becomes an exit code here, as
//! one line naming `file:line:col` where there is one, its cause chain and
//! its `hint:` line.

use crate::core::exit::{self, Failure};
use crate::report::Printer;

/// The one place a failure becomes an exit code: prints its message
/// (`error: ` first unless it is a diagnostic), each `caused by:` of its
/// source chain and its hint.
pub fn fail(printer: &Printer, error: &dyn Failure) -> u8 {
    let mut message = if error.is_diagnostic() {
        error.to_string()
    } else {
        format!("error: {error}")
    };
    let mut cause = error.source();
    while let Some(inner) = cause {
        message.push_str(&format!("\n  caused by: {inner}"));
        cause = inner.source();
    }
    for line in message.lines() {
        printer.error(line);
    }
    if let Some(hint) = error.hint() {
        printer.error(&format!("  hint: {hint}"));
    }
    error.exit_code()
}

/// A usage error in a file the command line names (`--durations FILE`):
/// its message starts with the file (and `line:col` where there is one),
/// so it prints without `error: `.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FileError {
    pub message: String,
    pub hint: Option<String>,
}

impl Failure for FileError {
    fn exit_code(&self) -> u8 {
        exit::USAGE
    }

    fn hint(&self) -> Option<String> {
        self.hint.clone()
    }

    fn is_diagnostic(&self) -> bool {
        true
    }
}
