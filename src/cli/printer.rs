//! The only writer to stdout and stderr.
//!
//! Without `--json`, the human view goes to stdout and errors to stderr.
//! With `--json`, stdout carries one JSON event per line and nothing else;
//! the human view is silent and errors still go to stderr.
//!
//! Every human line is redacted, then neutralised ([`neutralize`]) on its
//! way out, whatever it holds (SECURITY S7, S8): text from the model, a
//! tool, a task file or a provider can then neither reveal a secret nor
//! forge a workflow command or a terminal escape, even when it reaches a
//! message no one thought of. ybs's own `::error` annotations are the one
//! exception, built by [`github_annotation`] and written as they are.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;

use crate::core::event::{Event, EventRecord, EventSink};
use crate::core::{Redactor, Status};
use crate::report::log::{AnnotationKind, github_annotation, neutralize};

/// How much to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Quiet,
    Normal,
    Verbose,
}

/// Console output.
pub struct Printer {
    level: Level,
    json: bool,
    github: bool,
    redactor: Redactor,
}

impl Printer {
    pub fn new(level: Level, json: bool) -> Self {
        let github = std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true");
        Self {
            level,
            json,
            github,
            redactor: Redactor::new(),
        }
    }

    /// Secrets to mask in anything printed (errors included).
    pub fn set_redactor(&mut self, redactor: Redactor) {
        self.redactor = redactor;
    }

    /// A line of the human view (stdout, unless `--json`).
    pub fn line(&self, text: &str) {
        if self.json || self.level == Level::Quiet {
            return;
        }
        self.out(text);
    }

    /// A line printed even with `-q` (final results).
    pub fn result(&self, text: &str) {
        if !self.json {
            self.out(text);
        }
    }

    fn out(&self, text: &str) {
        self.out_raw(&neutralize(&self.redactor.redact(text)));
    }

    /// Writes `text` without neutralising it: only for lines ybs built to
    /// be read by the CI runner (annotations), already escaped.
    fn out_raw(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", self.redactor.redact(text));
    }

    /// An error on stderr, always.
    pub fn error(&self, text: &str) {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{}", neutralize(&self.redactor.redact(text)));
    }

    /// A prompt on stderr, always, with no line break after it: the
    /// answer is typed on the same line (`--interactive`).
    pub fn prompt(&self, text: &str) {
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "{}", neutralize(&self.redactor.redact(text)));
        let _ = stderr.flush();
    }

    /// A warning on stderr unless `-q`.
    pub fn warn(&self, text: &str) {
        if self.level != Level::Quiet {
            self.error(&format!("warning: {text}"));
        }
    }

    fn human(&self, record: &EventRecord) {
        let task = &record.task;
        let verbose = self.level == Level::Verbose;
        match &record.event {
            Event::TaskStarted {
                provider, model, ..
            } if verbose => {
                self.line(&format!(
                    "RUN   {task}  ({}/{})",
                    inline(provider),
                    inline(model)
                ));
            }
            Event::ToolDecided {
                name,
                arguments,
                verdict,
                rule,
                ..
            } if verbose => {
                let name = inline(&clip(name, 80));
                let args = inline(&clip(&arguments.to_string(), 160));
                self.line(&format!("  → {name} {args}  [{verdict}: {}]", inline(rule)));
            }
            Event::ToolCompleted {
                ok,
                ran,
                duration_ms,
                truncated,
                output,
                ..
            } if verbose => {
                let mark = if *ok { "✓" } else { "✗" };
                let first = output.lines().next().unwrap_or_default();
                let first = neutralize(&clip(first, 120));
                let note = match (*ran, *truncated) {
                    (false, _) => " (not run)",
                    (true, true) => " (truncated)",
                    (true, false) => "",
                };
                self.line(&format!("    {mark} {duration_ms}ms{note}  {first}"));
            }
            Event::CheckCompleted {
                name,
                passed,
                exit_code,
                ..
            } if verbose => {
                let state = if *passed { "passed" } else { "FAILED" };
                let code = exit_code.map_or("none".to_owned(), |c| c.to_string());
                self.line(&format!(
                    "  check `{}`: {state} (exit {code})",
                    neutralize(name)
                ));
            }
            Event::Note { message } if verbose => {
                self.line(&format!("  note: {}", neutralize(message)))
            }
            Event::Git { outcome } if verbose => {
                self.line(&format!("  git: {}", neutralize(&outcome.note)))
            }
            Event::TaskFinished {
                status,
                reason,
                message,
                iterations,
                usage,
                cost,
                duration_ms,
                ..
            } => {
                let label = match status {
                    Status::Passed => "PASS ",
                    Status::Failed => "FAIL ",
                    Status::Error => "ERROR",
                    Status::Paused => "PAUSE",
                };
                let why = message
                    .as_deref()
                    .map(|m| format!("  {}", neutralize(&one_line(m))))
                    .unwrap_or_default();
                #[expect(clippy::cast_precision_loss, reason = "display only")]
                let seconds = *duration_ms as f64 / 1000.0;
                let line = format!(
                    "{label} {task}  {reason}  {iterations} iterations · {} tokens · cost {cost} · {seconds:.1}s{why}",
                    usage.total()
                );
                if *status == Status::Passed {
                    self.line(&line);
                } else {
                    self.result(&line);
                    if self.github && !self.json {
                        let detail = message.as_deref().unwrap_or_default();
                        // Redacted before escaping, which could split a secret.
                        self.out_raw(&github_annotation(
                            AnnotationKind::Error,
                            &self.redactor.redact(&format!("ybs {task}")),
                            &self.redactor.redact(&format!("{reason}: {detail}")),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
}

/// `text` neutralised and kept on one line: a line break in a name or an
/// argument would otherwise start a line of its own in the log.
fn inline(text: &str) -> String {
    neutralize(text).replace('\n', "\\n")
}

/// The first `max` characters of `text`, with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((index, _)) => format!("{}…", &text[..index]),
        None => text.to_owned(),
    }
}

fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    if text.lines().nth(1).is_some() {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}

impl EventSink for Printer {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
        if self.json {
            let line = serde_json::to_string(record).map_err(std::io::Error::other)?;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{line}")?;
            return stdout.flush();
        }
        self.human(record);
        Ok(())
    }
}

impl crate::runner::Console for Printer {
    fn set_redactor(&mut self, redactor: crate::core::Redactor) {
        Printer::set_redactor(self, redactor);
    }
    fn result(&self, text: &str) {
        Printer::result(self, text);
    }
    fn error(&self, text: &str) {
        Printer::error(self, text);
    }
    fn warn(&self, text: &str) {
        Printer::warn(self, text);
    }
    fn prompt(&self, text: &str) {
        Printer::prompt(self, text);
    }
}
