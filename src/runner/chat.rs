//! `ybs chat` (docs/interactive.md): an empty conversation with the same tools and
//! policy as a task. [`Chat`] holds the run's [`Session`], the prepared
//! "task" and the conversation; the CLI reads lines and hands them over.

use super::RunError;
use super::prepare::provider::{Cassettes, build_provider};
use super::prepare::{PreparedTask, prepare};
use super::session::Session;
use super::tools::{TaskTools, task_tools};
use crate::agent::{Agent, Emitter, Stop, prompt};
use crate::core::Message;
use crate::llm::Provider;
use crate::report::Console;

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

/// What the CLI does after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Exit,
}

/// One chat: the session, the prepared "task", its tools and the
/// conversation so far.
pub struct Chat {
    session: Session,
    cassettes: Cassettes,
    prepared: PreparedTask,
    tools: TaskTools,
    messages: Vec<Message>,
}

impl Chat {
    /// Prepares the chat task in `session`, which never commits (the
    /// CLI opens it with `no_commit`).
    pub fn start(session: Session) -> Result<Self, RunError> {
        let context = &session.context;
        if !context.no_commit {
            return Err(RunError::Infra(
                "internal: a chat's context must not commit".to_owned(),
            ));
        }
        let task = match crate::task::load_str(&context.cwd.join("chat"), CHAT_TASK, &[]) {
            Ok(mut file) if !file.tasks.is_empty() => file.tasks.remove(0),
            _ => {
                return Err(RunError::Infra(
                    "internal: the chat task does not load".to_owned(),
                ));
            }
        };
        let mut cassettes = Cassettes::default();
        let prepared = prepare(context, &mut cassettes, &task)?;
        let tools = session.runtime()?.block_on(task_tools(context, &prepared));
        Ok(Self {
            session,
            cassettes,
            prepared,
            tools,
            messages: Vec::new(),
        })
    }

    /// Handles one line: a `/command` or a message to the model.
    pub fn line(&mut self, line: &str, console: &mut dyn Console) -> Flow {
        let Some(command) = line.strip_prefix('/') else {
            self.messages.push(Message::user(line));
            self.turn(console);
            return Flow::Continue;
        };
        let mut words = command.split_whitespace();
        match (words.next().unwrap_or_default(), words.next(), words.next()) {
            ("exit" | "quit", None, None) => return Flow::Exit,
            ("help", None, None) => console.result(HELP),
            ("tools", None, None) => console.result(&self.tools.registry.names().join(", ")),
            ("policy", None, None) => console.result(&self.prepared.policy.summary()),
            ("config", None, None) => console.result(&self.config()),
            ("retry", None, None) => {
                if self.retry() {
                    self.turn(console);
                } else {
                    console.error("ybs: nothing to retry");
                }
            }
            ("model", Some(model), None) => {
                let provider = self.prepared.settings.provider.clone();
                self.switch(console, &provider, model);
            }
            ("provider", Some(name), model) if words.next().is_none() => {
                let model = model
                    .map(str::to_owned)
                    .unwrap_or_else(|| self.prepared.settings.model.clone());
                self.switch(console, name, &model);
            }
            _ => console.error(&format!(
                "ybs: unknown command or wrong arguments: /{command}; /help lists the commands"
            )),
        }
        Flow::Continue
    }

    /// Runs the agent on the conversation until it answers or stops.
    fn turn(&mut self, console: &mut dyn Console) {
        // Started when the chat did: this only says so, should it not be.
        let runtime = match self.session.runtime() {
            Ok(runtime) => runtime,
            Err(error) => return console.error(&format!("ybs: stopped: {error}")),
        };
        let prepared = &self.prepared;
        let registry = &self.tools.registry;
        let system_prompt = prompt::system_prompt(
            &prepared.tool_ctx.workdir,
            &registry.names(),
            &prepared.policy.summary(),
            None,
            prepared.agents_md.text.as_deref(),
            prompt::Contract::default(),
        );
        let setup = prepared.agent_setup(&self.session.context, registry, system_prompt);
        let mut agent = Agent::resume(setup, std::mem::take(&mut self.messages));
        let stop = {
            let mut emitter = Emitter::new("chat", console);
            runtime.block_on(agent.run(&mut emitter))
        };
        self.messages = agent.into_messages();
        match stop {
            Stop::Answered { content } => console.answer(&content),
            Stop::Limit { message, .. }
            | Stop::Failed { message, .. }
            | Stop::Error { message, .. } => console.error(&format!("ybs: stopped: {message}")),
            // The chat task has no caller tools and asks a human.
            Stop::Paused { pending } => console.error(&format!(
                "ybs: stopped: {} call(s) wait for a caller, which a chat has not",
                pending.len()
            )),
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
    fn switch(&mut self, console: &dyn Console, provider: &str, model: &str) {
        let mut settings = self.prepared.settings.clone();
        if settings.provider != provider {
            settings.endpoint = None;
            settings.endpoint_origin = crate::config::Origin::Default;
        }
        settings.provider = provider.to_owned();
        settings.model = model.to_owned();
        match build_provider(
            &self.session.context,
            &mut self.cassettes,
            &self.prepared.task,
            &settings,
        ) {
            Ok(built) => {
                self.prepared.provider = built;
                self.prepared.settings = settings;
                console.result(&format!("ybs: now {provider}/{model}"));
            }
            Err(error) => console.error_with_hint(
                &format!("ybs: cannot switch to {provider}/{model}: {error}"),
                error.hint_text(),
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
