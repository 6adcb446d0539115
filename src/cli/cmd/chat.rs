//! `ybs chat`: an empty conversation with the same tools and policy as a
//! task (SPEC §10), on a terminal only. `ask` decisions prompt as under
//! `run --interactive`; nothing is committed.

use std::sync::Arc;

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use super::super::args::ChatArgs;
use super::super::diagnostics;
use super::super::printer::{Level, Printer};
use super::super::repl::{self, TerminalApprover};
use super::common;
use crate::agent::{Agent, AgentSetup, Emitter, Stop, prompt};
use crate::core::{Message, exit};
use crate::llm::Provider;
use crate::runner::{self, Cassettes, PreparedTask, RunContext};
use crate::tools::process;

/// The task a chat runs as: no prompt of its own, never committed. The
/// read-only tools run; every other call asks the human (the built-in
/// guards and an operator `--policy` still apply first).
const CHAT_TASK: &str = "id: chat\nprompt: chat\ncommit: false\npolicy:\n  \
    allow: [read_file, list_files, search_files]\n  default: ask\n";

const HELP: &str = "\
/help                   this list
/provider NAME [MODEL]  switch provider (and model); the conversation stays
/model NAME             switch model
/tools                  the tools the model is offered
/policy                 the policy deciding every call
/config                 provider, model, endpoint, working directory
/retry                  ask again for the last answer
/exit                   leave (so do Ctrl-D and an empty /exit)
Anything else is sent to the model.";

pub fn chat(args: &ChatArgs) -> u8 {
    // Tool calls are shown as they happen unless -q.
    let level = match common::level(&args.verbosity) {
        Level::Quiet => Level::Quiet,
        _ => Level::Verbose,
    };
    let mut printer = Printer::new(level, false);
    if let Err((message, hint)) = repl::require_chat_terminal() {
        diagnostics::print_error(&printer, &message, Some(hint));
        return exit::USAGE;
    }
    if let Err(error) = process::harden_self() {
        printer.warn(&format!("cannot harden the ybs process: {error}"));
    }
    let overrides = common::Overrides {
        config_file: args.config.clone(),
        provider: args.provider.clone(),
        model: args.model.clone(),
        endpoint: args.endpoint.clone(),
        cassette: args.cassette.clone(),
        no_sandbox: args.no_sandbox,
        ..common::Overrides::default()
    };
    let loaded = match common::load(&printer, &overrides, args.policy.as_deref(), None, &[]) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let (mut context, redactor) =
        common::run_context(loaded, false, args.cassette.clone(), args.policy.clone());
    context.no_commit = true;
    printer.set_redactor(redactor.clone());
    let mut prompts = Printer::new(level, false);
    prompts.set_redactor(redactor);
    context.approver = Some(Arc::new(TerminalApprover::new(prompts)));
    let task = match crate::task::load_str(&context.cwd.join("chat"), CHAT_TASK, &[]) {
        Ok(mut file) if !file.tasks.is_empty() => file.tasks.remove(0),
        _ => {
            printer.error("error: internal: the chat task does not load");
            return exit::INFRA;
        }
    };
    let mut cassettes = Cassettes::default();
    let prepared = match runner::prepare(&context, &mut cassettes, &task) {
        Ok(prepared) => prepared,
        Err(error) => {
            diagnostics::print_error(&printer, &error.to_string(), error.hint.as_deref());
            return exit::USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            printer.error(&format!("error: cannot start the async runtime: {error}"));
            return exit::INFRA;
        }
    };
    let mut editor = match DefaultEditor::new() {
        Ok(editor) => editor,
        Err(error) => {
            printer.error(&format!("error: cannot start the line editor: {error}"));
            return exit::INFRA;
        }
    };
    let mut session = Session {
        context: &context,
        cassettes,
        prepared,
        messages: Vec::new(),
    };
    let tools = runtime.block_on(runner::tools::task_tools(&context, &session.prepared));
    printer.result("ybs chat: /help lists the commands, /exit leaves");
    loop {
        let line = match editor.readline("ybs> ") {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                printer.error(&format!("error: cannot read the terminal: {error}"));
                return exit::INFRA;
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line);
        let Some(command) = line.strip_prefix('/') else {
            session.messages.push(Message::user(line));
            runtime.block_on(session.turn(&tools.registry, &mut printer));
            continue;
        };
        let mut words = command.split_whitespace();
        match (words.next().unwrap_or_default(), words.next(), words.next()) {
            ("exit" | "quit", None, None) => break,
            ("help", None, None) => printer.result(HELP),
            ("tools", None, None) => printer.result(&tools.registry.names().join(", ")),
            ("policy", None, None) => printer.result(&session.prepared.policy.summary()),
            ("config", None, None) => printer.result(&session.config()),
            ("retry", None, None) => {
                if session.retry() {
                    runtime.block_on(session.turn(&tools.registry, &mut printer));
                } else {
                    printer.error("ybs: nothing to retry");
                }
            }
            ("model", Some(model), None) => {
                let provider = session.prepared.settings.provider.clone();
                session.switch(&printer, &provider, model);
            }
            ("provider", Some(name), model) if words.next().is_none() => {
                let model = model
                    .map(str::to_owned)
                    .unwrap_or_else(|| session.prepared.settings.model.clone());
                session.switch(&printer, name, &model);
            }
            _ => printer.error(&format!(
                "ybs: unknown command or wrong arguments: /{command}; /help lists the commands"
            )),
        }
    }
    exit::OK
}

/// One chat: the prepared "task" and the conversation so far.
struct Session<'a> {
    context: &'a RunContext,
    cassettes: Cassettes,
    prepared: PreparedTask,
    messages: Vec<Message>,
}

impl Session<'_> {
    /// Runs the agent on the conversation until it answers or stops.
    async fn turn(&mut self, registry: &crate::tools::Registry, printer: &mut Printer) {
        let prepared = &self.prepared;
        let system_prompt = prompt::system_prompt(
            &prepared.tool_ctx.workdir,
            &registry.names(),
            &prepared.policy.summary(),
            None,
        );
        let setup = AgentSetup {
            provider: prepared.provider.as_ref(),
            tools: registry,
            ctx: &prepared.tool_ctx,
            policy: &prepared.policy,
            pricing: &self.context.pricing,
            model: prepared.settings.model.clone(),
            system_prompt,
            temperature: prepared.settings.temperature,
            max_tokens: prepared.settings.max_tokens,
            limits: prepared.limits.clone(),
            context: prepared.context,
            retry: self.context.retry,
            dry_run: false,
            redactor: &self.context.redactor,
            approver: self.context.approver.as_deref(),
        };
        let mut agent = Agent::resume(setup, std::mem::take(&mut self.messages));
        let stop = {
            let mut emitter = Emitter::new("chat", printer);
            agent.run(&mut emitter).await
        };
        self.messages = agent.into_messages();
        match stop {
            Stop::Answered { content } => printer.result(&content),
            Stop::Limit { message, .. }
            | Stop::Failed { message, .. }
            | Stop::Error { message, .. } => printer.error(&format!("ybs: stopped: {message}")),
        }
    }

    /// Drops the last answer so the next turn asks again; `false` when
    /// there is no question to ask again.
    fn retry(&mut self) -> bool {
        let answered = matches!(
            self.messages.last(),
            Some(Message::Assistant { tool_calls, .. }) if tool_calls.is_empty()
        );
        let asked = |message: Option<&Message>| {
            matches!(message, Some(Message::User { .. } | Message::Tool { .. }))
        };
        let before = self.messages.len().saturating_sub(usize::from(answered));
        if !asked(before.checked_sub(1).and_then(|i| self.messages.get(i))) {
            return false;
        }
        self.messages.truncate(before);
        true
    }

    /// Switches provider and model; the conversation stays.
    fn switch(&mut self, printer: &Printer, provider: &str, model: &str) {
        let mut settings = self.prepared.settings.clone();
        if settings.provider != provider {
            settings.endpoint = None;
            settings.endpoint_origin = crate::config::Origin::Default;
        }
        settings.provider = provider.to_owned();
        settings.model = model.to_owned();
        match runner::build_provider(
            self.context,
            &mut self.cassettes,
            &self.prepared.task,
            &settings,
        ) {
            Ok(built) => {
                self.prepared.provider = built;
                self.prepared.settings = settings;
                printer.result(&format!("ybs: now {provider}/{model}"));
            }
            Err((message, hint)) => diagnostics::print_error(
                printer,
                &format!("ybs: cannot switch to {provider}/{model}: {message}"),
                hint,
            ),
        }
    }

    fn config(&self) -> String {
        let settings = &self.prepared.settings;
        let provider: &dyn Provider = self.prepared.provider.as_ref();
        format!(
            "provider {} ({})\nmodel {}\nendpoint {}\nworkdir {}\nsandbox {}\nmax_iterations per message {}",
            settings.provider,
            provider.name(),
            settings.model,
            settings.endpoint.as_deref().unwrap_or("(default)"),
            self.prepared.tool_ctx.workdir.display(),
            if self.prepared.sandbox.confined() {
                "on"
            } else {
                "off (unconfined)"
            },
            settings.max_iterations,
        )
    }
}
