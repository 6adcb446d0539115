//! Error rendering: one line naming `file:line:col` where there is one,
//! then `hint:` lines.

use super::printer::Printer;
use crate::config::ConfigError;
use crate::core::exit::Failure;
use crate::task::Diagnostics;

/// Prints every task-file diagnostic.
pub fn print_diagnostics(printer: &Printer, diagnostics: &Diagnostics) {
    for diagnostic in &diagnostics.0 {
        print_error(printer, &diagnostic.to_string(), diagnostic.hint.as_deref());
    }
    let count = diagnostics.0.len();
    printer.error(&format!(
        "{count} error{} found",
        if count == 1 { "" } else { "s" }
    ));
}

/// Prints one error line and its hint.
pub fn print_error(printer: &Printer, message: &str, hint: Option<&str>) {
    printer.error(message);
    if let Some(hint) = hint {
        printer.error(&format!("  hint: {hint}"));
    }
}

/// Prints a configuration error: every file diagnostic, or the one bad
/// variable or flag.
pub fn print_config_error(printer: &Printer, error: &ConfigError) {
    match error {
        ConfigError::Files(diagnostics) => print_diagnostics(printer, diagnostics),
        other => print_error(printer, &format!("error: {other}"), other.hint()),
    }
}

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
