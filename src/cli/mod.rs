//! L5 cli: argv, stdout/stderr, exit codes.
//!
//! `main` parses, reads the process environment once, dispatches and turns
//! the outcome into an exit code in one place. `--version` and `--help`
//! answer before any I/O.

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
            // clap prints help/version to stdout; a usage error goes to
            // stderr in ybs's error form.
            if !error.use_stderr() {
                let _ = error.print();
                return ExitCode::from(exit::OK);
            }
            let text = usage_error(&error.render().to_string(), first);
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
            return ExitCode::from(exit::USAGE);
        }
    };
    // The one read of the process environment: every command and the
    // runner below it get their variables from this value
    // (docs/architecture.md; tests/suite/architecture.rs checks it).
    let environ = crate::config::process_environ();
    ExitCode::from(cmd::dispatch(cli, &environ))
}

/// A clap usage error in ybs's error form: its `error:` lines, its
/// `tip:` lines as `hint:` lines, and a `hint:` naming the help of the
/// command when clap gives none (for its "For more information" line).
fn usage_error(rendered: &str, first: Option<&str>) -> String {
    use clap::CommandFactory;
    let mut lines: Vec<String> = Vec::new();
    let mut hints: Vec<String> = Vec::new();
    for line in rendered.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with("For more information, try") {
            continue;
        }
        match trimmed.strip_prefix("tip: ") {
            Some(tip) => hints.push(format!("  hint: {tip}")),
            None => lines.push(line.to_owned()),
        }
    }
    let hinted = !hints.is_empty();
    lines.extend(hints);
    if !hinted {
        let command = args::Cli::command();
        let sub = first.filter(|name| command.get_subcommands().any(|sub| sub.get_name() == *name));
        let help = match sub {
            Some(name) => format!("ybs {name} --help"),
            None => "ybs --help".to_owned(),
        };
        lines.push(format!(
            "  hint: `{help}` lists every flag and what it takes"
        ));
    }
    lines.join("\n") + "\n"
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
