//! `ybs chat`: an empty conversation with the same tools and policy as a
//! task (docs/interactive.md), on a terminal only. `ask` decisions prompt as under
//! `run --interactive`; nothing is committed. The session is
//! [`runner::chat::Chat`] on a [`runner::Session`]; this reads the lines.

use std::sync::Arc;

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use super::super::args::ChatArgs;
use super::super::diagnostics;
use super::super::repl;
use super::common;
use crate::core::{Environ, exit};
use crate::report::Level;
use crate::runner::approve::TerminalApprover;
use crate::runner::chat::{Chat, Flow};
use crate::runner::{self, RunError, RunFlags, RunOptions, Session, Threads};

pub fn chat(args: &ChatArgs, environ: &Environ) -> u8 {
    // Tool calls are shown as they happen unless -q.
    let level = match common::level(&args.verbosity) {
        Level::Quiet => Level::Quiet,
        _ => Level::Verbose,
    };
    let mut printer = common::printer(level, false, environ);
    printer.stream_answers();
    if let Err(error) = repl::require_chat_terminal() {
        return diagnostics::fail(&printer, &error);
    }
    runner::harden(&printer, environ, args.no_sandbox, false);
    let overrides = common::overrides(&args.config, &args.provider, args.no_sandbox, None);
    let loaded = match common::load(
        &printer,
        environ,
        &overrides,
        args.config.policy.as_deref(),
        None,
        &[],
    ) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    // A chat never commits; `ask` decisions are answered on the terminal.
    let prompts_environ = environ.clone();
    let flags = RunFlags {
        no_commit: true,
        cassette: args.provider.cassette.clone(),
        policy_file: args.config.policy.clone(),
        no_sandbox: args.no_sandbox,
        jobs: 1,
        approver: Some(Box::new(move |redactor| {
            let mut prompts = common::printer(level, false, &prompts_environ);
            prompts.set_redactor(redactor);
            Arc::new(TerminalApprover::new(Box::new(prompts)))
        })),
        ..RunFlags::default()
    };
    let options = RunOptions::resolve(flags, &loaded);
    let entry = runner::Entry::default();
    let mut chat = match Session::open(loaded, options, entry, Threads::Two, &mut printer)
        .and_then(Chat::start)
    {
        Ok(chat) => chat,
        Err(error) => return diagnostics::fail(&printer, &error),
    };
    let mut editor = match DefaultEditor::new() {
        Ok(editor) => editor,
        Err(error) => {
            let error = RunError::Infra(format!("cannot start the line editor: {error}"));
            return diagnostics::fail(&printer, &error);
        }
    };
    printer.result("ybs chat: /help lists the commands, /exit leaves");
    loop {
        let line = match editor.readline("ybs> ") {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                let error = RunError::Infra(format!("cannot read the terminal: {error}"));
                return diagnostics::fail(&printer, &error);
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line);
        if chat.line(line, &mut printer) == Flow::Exit {
            break;
        }
    }
    exit::OK
}
