//! Stamps events with the task id and time and hands them to a sink.

use crate::core::event::{Event, EventRecord, EventSink, Note, now_ms};

/// The agent's and runner's way to emit events for one task.
pub struct Emitter<'a> {
    task: String,
    sink: &'a mut dyn EventSink,
    /// The first sink error, reported once by the runner.
    pub error: Option<std::io::Error>,
}

impl<'a> Emitter<'a> {
    pub fn new(task: impl Into<String>, sink: &'a mut dyn EventSink) -> Self {
        Self {
            task: task.into(),
            sink,
            error: None,
        }
    }

    pub fn task(&self) -> &str {
        &self.task
    }

    pub fn emit(&mut self, event: Event) {
        let record = EventRecord {
            ts_ms: now_ms(),
            task: self.task.clone(),
            event,
        };
        if let Err(error) = self.sink.event(&record) {
            self.error.get_or_insert(error);
        }
    }

    /// A whole line of the model's text, as it streams in.
    pub fn text(&mut self, line: &str) {
        self.sink.text(&self.task, line);
    }

    pub fn note(&mut self, message: impl Into<String>) {
        self.emit(Event::Note(Note {
            message: message.into(),
        }));
    }
}
