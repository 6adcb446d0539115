//! `ybs run --prompt TEXT`: the flags become a task file's text
//! ([`crate::runner::adhoc`]), loaded like a file, or written by `--save`.

use std::io::Read;
use std::path::Path;

use super::super::args::RunArgs;
use super::super::diagnostics;
use super::common::{self, Overrides};
use crate::core::Environ;
use crate::report::Printer;
use crate::runner::adhoc::{AdHoc, DEFAULT_ID, missing_model};
use crate::runner::{self, RunError};

/// What the flags came to.
pub enum Loaded {
    /// Run this.
    Run(Box<common::Loaded>),
    /// `--save`: the file is written, nothing runs.
    Saved,
}

/// Reads the prompt (`-` is stdin), builds the task file and loads it:
/// from `--save FILE` it is checked, then written; otherwise it is the
/// run's one task, refused (exit 2) when it has no model to run with.
pub fn load(
    args: &RunArgs,
    prompt: &str,
    overrides: &Overrides,
    (printer, environ): (&Printer, &Environ),
) -> Result<Loaded, u8> {
    let prompt = match read_prompt(prompt) {
        Ok(prompt) => prompt,
        Err(error) => return Err(diagnostics::fail(printer, &error)),
    };
    let flags = &args.adhoc;
    let adhoc = AdHoc {
        prompt,
        id: flags.id.clone().unwrap_or_else(|| DEFAULT_ID.to_owned()),
        provider: args.provider.provider.clone(),
        model: args.provider.model.clone(),
        allow: flags.allow.clone(),
        deny: flags.deny.clone(),
        checks: flags.checks.clone(),
    };
    let text = adhoc.task_file();
    let path = flags.save.clone().unwrap_or_else(|| adhoc.path());
    let loaded = runner::load_text(
        environ,
        overrides,
        args.config.policy.as_deref(),
        &path,
        &text,
        &args.vars,
    )
    .map_err(|errors| {
        let code = diagnostics::fail(printer, &*errors);
        printer.error(&format!(
            "  note: `{}` is the task file made of the --prompt flags (--save FILE writes it)",
            path.display()
        ));
        code
    })?;
    if let Some(file) = &flags.save {
        return save(file, &text, &adhoc.id, printer).map(|()| Loaded::Saved);
    }
    let task = loaded.files.iter().flat_map(|file| &file.tasks).next();
    if let Some(task) = task
        && let Some((message, hint)) = missing_model(
            &loaded.config,
            &loaded.cwd,
            task,
            args.provider.cassette.as_deref(),
        )
    {
        let error = RunError::usage(format!("--prompt: {message}"), Some(&hint));
        return Err(diagnostics::fail(printer, &error));
    }
    Ok(Loaded::Run(Box::new(loaded)))
}

/// `TEXT`, or stdin's text for `-`; an empty prompt is refused.
fn read_prompt(prompt: &str) -> Result<String, RunError> {
    let text = if prompt == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|error| {
                RunError::usage(
                    format!("--prompt -: cannot read the prompt from stdin: {error}"),
                    Some("pipe UTF-8 text in, or pass the prompt itself: --prompt 'TEXT'"),
                )
            })?;
        text
    } else {
        prompt.to_owned()
    };
    if text.trim().is_empty() {
        return Err(RunError::usage(
            "--prompt: the prompt is empty",
            Some("say what the agent should do: ybs run -p 'fix the failing test'"),
        ));
    }
    Ok(text)
}

/// Writes the task file, never over an existing file.
fn save(file: &Path, text: &str, id: &str, printer: &Printer) -> Result<(), u8> {
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
        .and_then(|mut handle| std::io::Write::write_all(&mut handle, text.as_bytes()));
    if let Err(error) = written {
        let hint = if error.kind() == std::io::ErrorKind::AlreadyExists {
            "--save never overwrites a file: choose another path, or remove the file first"
        } else {
            "choose a path in an existing, writable directory"
        };
        let error = RunError::usage(
            format!(
                "--save {}: cannot write the task file: {error}",
                file.display()
            ),
            Some(hint),
        );
        return Err(diagnostics::fail(printer, &error));
    }
    printer.result(&format!(
        "wrote {} (task `{id}`); run it with `ybs run {}`",
        file.display(),
        file.display()
    ));
    Ok(())
}
