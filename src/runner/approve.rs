//! `--interactive`: `ask` decisions answered at a prompt (docs/policy.md, docs/interactive.md).
//!
//! Only here is stdin read for approval, and only on a terminal
//! (docs/security.md S3): the CLI turns a missing TTY into a usage error before
//! anything runs, so nothing ever waits on a pipe.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;

use crate::agent::{Approval, Approver};
use crate::core::ToolCall;
use crate::policy::{CallView, Decision};
use crate::report::Console;

/// Asks on the terminal: `[y]es / [n]o / [a]lways`.
pub struct TerminalApprover {
    printer: Box<dyn Console + Send + Sync>,
    /// Rules answered `always`: approved for the rest of the run.
    always: Mutex<BTreeSet<String>>,
    /// End of input seen: every later `ask` is declined without a prompt.
    closed: AtomicBool,
}

impl TerminalApprover {
    /// `printer` writes the prompts (on stderr).
    pub fn new(printer: Box<dyn Console + Send + Sync>) -> Self {
        Self {
            printer,
            always: Mutex::new(BTreeSet::new()),
            closed: AtomicBool::new(false),
        }
    }

    fn remembered(&self, rule: &str) -> bool {
        self.always.lock().is_ok_and(|always| always.contains(rule))
    }

    fn remember(&self, rule: String) {
        if let Ok(mut always) = self.always.lock() {
            always.insert(rule);
        }
    }
}

impl Approver for TerminalApprover {
    fn approve<'a>(
        &'a self,
        call: &'a ToolCall,
        view: &'a CallView<'a>,
        decision: &'a Decision,
    ) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let rule = decision.rule.to_string();
            if self.remembered(&rule) {
                return Approval::Always;
            }
            let form = call_form(call, view, decision);
            if self.closed.load(Ordering::Relaxed) {
                self.printer
                    .error(&format!("ybs: declined (no more input): {form}"));
                return Approval::No;
            }
            self.printer.error(&format!("ybs: approval needed: {form}"));
            let why = decision
                .detail
                .as_deref()
                .map(|detail| format!(": {detail}"))
                .unwrap_or_default();
            self.printer.error(&format!("  rule `{rule}`{why}"));
            loop {
                self.printer.prompt("[y]es / [n]o / [a]lways? ");
                let Some(line) = read_line().await else {
                    self.closed.store(true, Ordering::Relaxed);
                    self.printer.error("");
                    self.printer
                        .error("ybs: no answer (end of input): the call is declined");
                    return Approval::No;
                };
                match parse_answer(&line) {
                    Some(Approval::Always) => {
                        self.remember(rule);
                        return Approval::Always;
                    }
                    Some(answer) => return answer,
                    None => self.printer.error("  answer y, n or a"),
                }
            }
        })
    }

    fn follow_up<'a>(&'a self, outcome: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            self.printer.error("ybs: the task stopped:");
            for line in outcome.lines() {
                self.printer.error(&format!("  {line}"));
            }
            if self.closed.load(Ordering::Relaxed) {
                return None;
            }
            self.printer.error(
                "ybs: continue the conversation? (an empty line or /exit finishes the task; /help lists the commands)",
            );
            loop {
                self.printer.prompt("> ");
                let Some(line) = read_line().await else {
                    self.closed.store(true, Ordering::Relaxed);
                    self.printer.error("");
                    return None;
                };
                match follow_up_input(&line) {
                    FollowUp::Finish => return None,
                    FollowUp::Message(text) => return Some(text),
                    FollowUp::Reply(lines) => {
                        for line in lines {
                            self.printer.error(&line);
                        }
                    }
                }
            }
        })
    }
}

/// What a line typed at the follow-up prompt is.
#[derive(Debug, PartialEq, Eq)]
enum FollowUp {
    /// Finish the task: an empty line, `/exit`.
    Finish,
    /// The next message to the model.
    Message(String),
    /// A command answered here (`/help`, `/model`, an unknown one): these
    /// lines are printed and the prompt comes again.
    Reply(Vec<String>),
}

/// Commands are a `/` and a word (`/help`, `/model gpt-4.1`); a line like
/// `/src/lib.rs fails` is a message.
fn follow_up_input(line: &str) -> FollowUp {
    let text = line.trim();
    if text.is_empty() {
        return FollowUp::Finish;
    }
    let first = text.split_whitespace().next().unwrap_or_default();
    let Some(command) = first.strip_prefix('/') else {
        return FollowUp::Message(text.to_owned());
    };
    if command.is_empty() || !command.chars().all(|c| c.is_ascii_alphabetic()) {
        return FollowUp::Message(text.to_owned());
    }
    match command {
        "exit" | "quit" => FollowUp::Finish,
        "help" => FollowUp::Reply(vec![
            "  TEXT        send TEXT to the model; the task goes on".to_owned(),
            "  /exit       finish the task (so does an empty line)".to_owned(),
            "  /help       this list".to_owned(),
            "  /model      a task keeps its model (`ybs chat` switches with /model NAME)"
                .to_owned(),
            "  a message starting with `/` and a word is a command; write `./path` for a path"
                .to_owned(),
        ]),
        "model" => FollowUp::Reply(vec![
            "ybs: a task keeps the model it started with; run it again with --model NAME, \
             or use `ybs chat`, where /model NAME switches"
                .to_owned(),
        ]),
        _ => FollowUp::Reply(vec![format!(
            "ybs: unknown command /{command}; /help lists the commands"
        )]),
    }
}

/// `y`/`yes`, `n`/`no`, `a`/`always`, any case; anything else is no answer.
fn parse_answer(line: &str) -> Option<Approval> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Approval::Yes),
        "n" | "no" => Some(Approval::No),
        "a" | "always" => Some(Approval::Always),
        _ => None,
    }
}

/// The call in `ybs policy explain`'s string form: `run_shell(COMMAND)`,
/// `write_file(PATH)`, or the tool and its arguments.
fn call_form(call: &ToolCall, view: &CallView<'_>, decision: &Decision) -> String {
    let subject = view
        .command
        .map(str::to_owned)
        .or_else(|| decision.path.clone())
        .or_else(|| view.path.map(str::to_owned))
        .unwrap_or_else(|| call.arguments.to_string());
    format!("{}({subject})", call.name).replace('\n', "\\n")
}

/// One line from stdin, read on a thread of its own so the run's interrupt
/// handling stays live while the human thinks. `None` at end of input.
async fn read_line() -> Option<String> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("ybs-prompt".to_owned())
        .spawn(move || {
            let mut line = String::new();
            let answer = match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line),
            };
            let _ = sender.send(answer);
        });
    match spawned {
        Ok(_) => receiver.await.ok().flatten(),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_up_commands_are_a_slash_and_a_word() {
        assert_eq!(follow_up_input("\n"), FollowUp::Finish);
        assert_eq!(follow_up_input("/exit\n"), FollowUp::Finish);
        assert!(matches!(follow_up_input("/help"), FollowUp::Reply(_)));
        assert!(matches!(
            follow_up_input("/model gpt-4.1"),
            FollowUp::Reply(_)
        ));
        assert!(matches!(follow_up_input("/tools"), FollowUp::Reply(_)));
        assert_eq!(
            follow_up_input("/src/lib.rs fails\n"),
            FollowUp::Message("/src/lib.rs fails".to_owned())
        );
        assert_eq!(
            follow_up_input("now write c"),
            FollowUp::Message("now write c".to_owned())
        );
    }

    #[test]
    fn answers_parse_in_any_case_and_nothing_else_counts() {
        assert_eq!(parse_answer("y\n"), Some(Approval::Yes));
        assert_eq!(parse_answer(" YES "), Some(Approval::Yes));
        assert_eq!(parse_answer("n"), Some(Approval::No));
        assert_eq!(parse_answer("Always\n"), Some(Approval::Always));
        assert_eq!(parse_answer(""), None);
        assert_eq!(parse_answer("yep"), None);
    }
}
