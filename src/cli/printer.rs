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

use crate::core::Redactor;
use crate::core::event::{EventRecord, EventSink};
use crate::report::human_line;
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
        let Some(view) = human_line(record, self.level == Level::Verbose) else {
            return;
        };
        if !view.failed {
            self.line(&view.text);
            return;
        }
        self.result(&view.text);
        if self.github
            && !self.json
            && let Some((title, message)) = &view.annotation
        {
            // Redacted before escaping, which could split a secret.
            self.out_raw(&github_annotation(
                AnnotationKind::Error,
                &self.redactor.redact(title),
                &self.redactor.redact(message),
            ));
        }
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
