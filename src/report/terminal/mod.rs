//! The terminal: what a run says to the person running it
//! (docs/progress.md). The runner talks to a [`Console`] and never prints
//! on its own; [`Printer`] is the console on stdout and stderr, the only
//! writer to them: the human lines of the event stream ([`lines`]), the
//! live view's per-task state ([`view`]), bars and `::group::` blocks
//! ([`bars`]).

mod bars;
mod lines;
mod printer;
mod view;

pub use lines::{HumanLine, human_line};
pub use printer::{Level, Printer};
pub use view::{LogView, TaskActivity};

use crate::core::event::EventSink;

/// The console: every event of a run, plus the runner's own lines.
pub trait Console: EventSink {
    /// A result line (stdout; kept under `--quiet`).
    fn result(&self, text: &str);
    /// The model's answer in a conversation (`ybs chat`): a result, less
    /// what a console that shows the text as it streams in has shown.
    fn answer(&mut self, text: &str) {
        self.result(text);
    }
    /// An error or must-see warning (stderr; kept under `--quiet`).
    fn error(&self, text: &str);
    /// A prompt (stderr), the answer typed on the same line.
    fn prompt(&self, text: &str);
    /// A warning (stderr; dropped under `--quiet`).
    fn warn(&self, text: &str);
    /// From now on, masks these secrets in everything printed.
    fn set_redactor(&mut self, redactor: crate::core::Redactor);
    /// The tasks about to run, in order, before the first starts: for a
    /// live view of the run (docs/progress.md). Ignored by default.
    fn planned(&mut self, _tasks: &[PlannedTask]) {}
    /// An error line with its hint, as every diagnostic is printed.
    fn error_with_hint(&self, text: &str, hint: Option<&str>) {
        self.error(text);
        if let Some(hint) = hint {
            self.error(&format!("  hint: {hint}"));
        }
    }
}

/// A task a run is about to start, as a live view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTask {
    pub id: String,
    /// The task's `limits.max_iterations`: the `k/max` of its steps.
    pub max_steps: u32,
}
