//! The only writer to stdout and stderr.
//!
//! Without `--json`, the human view goes to stdout and errors to stderr.
//! With `--json`, stdout carries one JSON event per line and nothing else;
//! the human view is silent and errors still go to stderr.
//!
//! Every human line is redacted, then neutralised ([`neutralize`]) on its
//! way out, whatever it holds (docs/security.md S7, S8): text from the model, a
//! tool, a task file or a provider can then neither reveal a secret nor
//! forge a workflow command or a terminal escape, even when it reaches a
//! message no one thought of. ybs's own `::error` annotations and
//! `::group::` lines are the one exception, built here and written as
//! they are.
//!
//! `ybs run` turns on the live view ([`Printer::live`], docs/progress.md):
//! progress bars on stderr when it is a terminal, else plain lines (in
//! `::group::` blocks under GitHub Actions).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;

use super::bars::{Bars, Groups, Terminal};
use super::lines::human_line;
use super::view::LogView;
use crate::core::Environ;
use crate::core::Redactor;
use crate::core::event::{CheckCompleted, Event, EventRecord, EventSink, TaskOutput};
use crate::core::redact::{LineMasker, MASK};
use crate::report::annotations;
use crate::report::log::{AnnotationKind, github_annotation, neutralize, neutralize_chars};

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
    /// What the terminal is (ttys, `TERM`, colour settings).
    terminal: Terminal,
    redactor: Redactor,
    live: Option<Live>,
    /// `ybs chat`: the model's text is printed as it streams in.
    chat: Option<ChatStream>,
    /// `ybs run --print-output`: each task's answer (`task.output`, as
    /// masked by the run), printed to stdout after the run; the human
    /// view goes to stderr then, so stdout holds the answers alone.
    answers: Option<Vec<(String, String)>>,
}

/// What `ybs chat` printed of the model's streamed text, so that an
/// answer is not printed twice.
#[derive(Default)]
struct ChatStream {
    /// Lines printed during the model's current turn.
    turn: usize,
    /// Lines printed during its last complete turn.
    last_turn: usize,
    /// Masks the streamed lines (a private key spans several).
    masker: LineMasker,
}

/// The live view of a run.
struct Live {
    view: LogView,
    /// On a terminal: one bar per running task.
    bars: Option<Bars>,
    /// Under GitHub Actions: each task's lines in a group.
    groups: Option<Groups>,
    /// SGR colour on the PASS/FAIL labels of stdout lines.
    color: bool,
}

impl Printer {
    /// A printer for ybs's environment as read at the start (`environ`:
    /// `GITHUB_ACTIONS`, `TERM`, `NO_COLOR`, `CLICOLOR_FORCE`).
    pub fn new(level: Level, json: bool, environ: &Environ) -> Self {
        let terminal = Terminal::detect(environ);
        Self {
            level,
            json,
            github: terminal.github,
            terminal,
            redactor: Redactor::new(),
            live: None,
            chat: None,
            answers: None,
        }
    }

    /// `ybs run --print-output`: keep each task's answer for
    /// [`Self::print_answers`], and write the human view to stderr.
    pub fn collect_answers(&mut self) {
        self.answers = Some(Vec::new());
    }

    /// After the run: each task's answer on stdout, masked and made inert
    /// for CI logs like every line; with several, a `--- task ---` line
    /// before each. Nothing without [`Self::collect_answers`].
    pub fn print_answers(&self) {
        let Some(answers) = &self.answers else {
            return;
        };
        let mut stdout = std::io::stdout().lock();
        for (task, text) in answers {
            let text = neutralize(&self.redactor.redact(text.trim_end()));
            if answers.len() > 1 {
                let _ = writeln!(
                    stdout,
                    "--- {} ---",
                    neutralize_chars(task).replace('\n', " ")
                );
            }
            let _ = writeln!(stdout, "{text}");
        }
        let _ = stdout.flush();
    }

    /// Writes a line of the human view: stdout, or stderr when stdout
    /// is kept for the answers (`--print-output`).
    fn write_human(&self, line: &str) {
        if self.answers.is_some() {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        } else {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
    }

    /// `ybs chat` (docs/interactive.md): the model's text shows line by
    /// line as it streams in, and [`super::Console::answer`] prints only
    /// what did not show yet.
    pub fn stream_answers(&mut self) {
        self.chat = Some(ChatStream::default());
    }

    /// Turns on the live view of `ybs run` (docs/progress.md): bars on a
    /// terminal unless `--quiet`, `TERM=dumb` or `bars` is false (an
    /// `--interactive` run, whose prompts share the terminal); else, with
    /// no `--json`, plain lines, grouped under GitHub Actions.
    pub fn live(&mut self, bars: bool) {
        let terminal = self.terminal;
        let bars = (bars && self.level != Level::Quiet && terminal.bars())
            .then(|| Bars::new(terminal.color_stderr()));
        self.live = Some(Live {
            view: LogView::new(self.level == Level::Verbose),
            bars,
            groups: (self.github && !self.json).then(Groups::default),
            color: terminal.color_stdout(),
        });
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
        let write = || self.write_human(&self.redactor.redact(text));
        match self.live.as_ref().and_then(|live| live.bars.as_ref()) {
            Some(bars) => bars.suspend(write),
            None => write(),
        }
    }

    /// An error on stderr, always.
    pub fn error(&self, text: &str) {
        let write = || {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{}", neutralize(&self.redactor.redact(text)));
        };
        match self.live.as_ref().and_then(|live| live.bars.as_ref()) {
            Some(bars) => bars.suspend(write),
            None => write(),
        }
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
        if let Event::CheckCompleted(check) = &record.event
            && !self.json
        {
            for line in self.check_annotations(&record.task, check) {
                self.out_raw(&line);
            }
        }
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

impl Printer {
    /// One event through the live view: the bar of its task follows it,
    /// and its log lines are printed (plain), above the bars (`-v` on a
    /// terminal), or in the task's group (GitHub Actions).
    fn live_event(&mut self, mut live: Live, record: &EventRecord) {
        let task = record.task.as_str();
        let finished = matches!(record.event, Event::TaskFinished(_));
        if let Some(bars) = &mut live.bars {
            if matches!(record.event, Event::TaskStarted(_)) {
                bars.start(task);
            } else if !finished {
                let clean = |text: &str| neutralize(&self.redactor.redact(text));
                bars.update(task, &record.event, &clean);
            }
        }
        // The lines to print: stdout belongs to `--json`.
        let mut printed: Vec<String> = Vec::new();
        for line in live.view.lines(record) {
            let shown = !self.json
                && (line.failed
                    || (self.level != Level::Quiet
                        && (finished || self.level == Level::Verbose || live.bars.is_none())));
            if !shown {
                continue;
            }
            printed.push(paint(
                &neutralize(&self.redactor.redact(&line.text)),
                live.color,
            ));
            if self.github
                && let Some((title, message)) = &line.annotation
            {
                // Redacted before escaping, which could split a secret.
                printed.push(github_annotation(
                    AnnotationKind::Error,
                    &self.redactor.redact(title),
                    &self.redactor.redact(message),
                ));
            }
        }
        if let Event::CheckCompleted(check) = &record.event
            && !self.json
        {
            printed.extend(self.check_annotations(task, check));
        }
        self.write_live(&mut live, task, printed, finished);
        self.live = Some(live);
    }

    /// Under GitHub Actions, a failing check's locations
    /// (docs/ci.md#annotations-on-the-failing-line): one
    /// `::error file=…,line=…,col=…,title=<task>/<check>::<message>` each,
    /// redacted before it is escaped.
    fn check_annotations(&self, task: &str, check: &CheckCompleted) -> Vec<String> {
        if check.passed || !self.github {
            return Vec::new();
        }
        let redact = |text: &str| self.redactor.redact(text);
        let title = redact(&format!("{task}/{}", check.name));
        check
            .locations
            .iter()
            .map(|location| {
                annotations::workflow_command(
                    &redact(&location.file),
                    location.line,
                    location.column,
                    &title,
                    &redact(&location.message),
                )
            })
            .collect()
    }

    /// Writes a task's lines where the live view puts them.
    fn write_live(&self, live: &mut Live, task: &str, printed: Vec<String>, finished: bool) {
        let write = |line: &str| self.write_human(line);
        if let Some(groups) = &mut live.groups {
            // The group's title: the task id on one line, inert.
            let title = neutralize_chars(task).replace('\n', " ");
            let mut out = |line: &str| write(line);
            if finished {
                groups.finished(&title, printed, &mut out);
            } else {
                for line in printed {
                    groups.line(&title, line, &mut out);
                }
            }
        } else if let Some(bars) = &mut live.bars {
            let print = || {
                for line in &printed {
                    write(line);
                }
            };
            if finished {
                bars.finish(task, print);
            } else if !printed.is_empty() {
                bars.suspend(print);
            }
        } else {
            for line in &printed {
                write(line);
            }
        }
        let _ = std::io::stdout().flush();
    }
}

/// The PASS/FAIL/ERROR/PAUSE/SKIP/RUN label of a line in colour.
fn paint(text: &str, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    let code = match text.get(..5) {
        Some("PASS ") => "32",
        Some("FAIL " | "ERROR") => "31",
        Some("PAUSE" | "SKIP ") => "33",
        Some("RUN  ") => "36",
        _ => return text.to_owned(),
    };
    let label = text[..5].trim_end();
    format!("\x1b[1;{code}m{label}\x1b[0m{}", &text[label.len()..])
}

impl EventSink for Printer {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
        if let (Some(answers), Event::TaskOutput(TaskOutput { content: text, .. })) =
            (&mut self.answers, &record.event)
        {
            answers.push((record.task.clone(), text.clone()));
        }
        if let Some(chat) = &mut self.chat {
            match record.event {
                // A retried turn streams again from its start.
                Event::LlmRetry(_) => {
                    chat.turn = 0;
                    chat.masker = LineMasker::default();
                }
                Event::LlmResponse(_) => chat.last_turn = std::mem::take(&mut chat.turn),
                _ => {}
            }
        }
        if let Some(live) = self.live.take() {
            self.live_event(live, record);
        }
        if self.json {
            let line = serde_json::to_string(record).map_err(std::io::Error::other)?;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{line}")?;
            return stdout.flush();
        }
        if self.live.is_none() {
            self.human(record);
        }
        Ok(())
    }

    fn text(&mut self, task: &str, line: &str) {
        if self.json {
            return;
        }
        if let Some(chat) = &mut self.chat {
            let line = chat.masker.line(&self.redactor, line);
            if self.level != Level::Quiet {
                chat.turn += 1;
                self.out(&line);
            }
            return;
        }
        let Some(mut live) = self.live.take() else {
            return;
        };
        if let Some(line) = live.view.streamed_line(task, line) {
            let text = neutralize(&self.redactor.redact(&line.text));
            self.write_live(&mut live, task, vec![text], false);
        }
        self.live = Some(live);
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if let Some(live) = &mut self.live {
            if let Some(bars) = &mut live.bars {
                bars.clear();
            }
            if let Some(groups) = &mut live.groups {
                let to_stderr = self.answers.is_some();
                groups.flush(&mut |line: &str| {
                    if to_stderr {
                        let _ = writeln!(std::io::stderr().lock(), "{line}");
                    } else {
                        let _ = writeln!(std::io::stdout().lock(), "{line}");
                    }
                });
            }
        }
        Ok(())
    }
}

impl super::Console for Printer {
    fn planned(&mut self, tasks: &[super::PlannedTask]) {
        if let Some(bars) = self.live.as_mut().and_then(|live| live.bars.as_mut()) {
            for task in tasks {
                bars.plan(&task.id, task.max_steps);
            }
        }
    }
    fn set_redactor(&mut self, redactor: crate::core::Redactor) {
        Printer::set_redactor(self, redactor);
    }
    fn result(&self, text: &str) {
        Printer::result(self, text);
    }
    fn answer(&mut self, text: &str) {
        let (shown, in_key) = self.chat.as_mut().map_or((0, false), |chat| {
            let in_key = std::mem::take(&mut chat.masker).in_key();
            (std::mem::take(&mut chat.last_turn), in_key)
        });
        if shown == 0 {
            return Printer::result(self, text);
        }
        // The lines that streamed in were printed as they came (`-q`
        // printed none); the rest of the last line was not. Inside a
        // private key block, the rest is the key.
        let rest: Vec<&str> = text.lines().skip(shown).collect();
        if !rest.is_empty() {
            let rest = if in_key {
                MASK.to_owned()
            } else {
                rest.join("\n")
            };
            Printer::result(self, &rest);
        }
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
