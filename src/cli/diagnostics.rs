//! Error rendering: every error of the CLI becomes an exit code here, as
//! one line naming `file:line:col` where there is one, its cause chain and
//! its `hint:` line.

use crate::core::exit::Failure;
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
