//! The one place secrets are masked: every record passes through here on
//! its way to every sink (docs/security.md S7). It also keeps the count of what was
//! masked per task, and emits it (`task.redactions`) just before the
//! task's `task.finished`.

use std::collections::HashMap;

use crate::core::Redactor;
use crate::core::event::{Event, EventRecord, EventSink};
use crate::core::redact::Redactions;

/// Redacts each record, then hands it to the inner sinks.
pub struct RedactingSink<'a> {
    redactor: Redactor,
    sinks: Vec<&'a mut dyn EventSink>,
    error: Option<std::io::Error>,
    /// Per task: what was masked here, plus what the agent masked before
    /// the conversation saw it (its `task.redactions` reports).
    counts: HashMap<String, Redactions>,
}

impl<'a> RedactingSink<'a> {
    pub fn new(redactor: Redactor, sinks: Vec<&'a mut dyn EventSink>) -> Self {
        Self {
            redactor,
            sinks,
            error: None,
            counts: HashMap::new(),
        }
    }

    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }

    fn clean(&self, record: &EventRecord, counts: &mut Redactions) -> EventRecord {
        // Fails closed: a record that cannot be redacted is withheld, never
        // passed on as is.
        let withheld = || EventRecord {
            ts_ms: record.ts_ms,
            task: self.redactor.redact(&record.task),
            event: Event::Note {
                message: "[an event was withheld: it could not be redacted]".to_owned(),
            },
        };
        let Ok(mut value) = serde_json::to_value(record) else {
            return withheld();
        };
        self.redactor.redact_value_counting(&mut value, counts);
        serde_json::from_value(value).unwrap_or_else(|_| withheld())
    }

    fn forward(&mut self, record: &EventRecord) {
        for sink in &mut self.sinks {
            if let Err(error) = sink.event(record) {
                self.error.get_or_insert(error);
            }
        }
    }
}

impl EventSink for RedactingSink<'_> {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
        if let Event::Redactions { counts } = &record.event {
            let total = self.counts.entry(record.task.clone()).or_default();
            for (kind, count) in counts {
                *total.entry(kind.clone()).or_default() += count;
            }
            return Ok(());
        }
        let mut masked = Redactions::new();
        let clean = self.clean(record, &mut masked);
        if !masked.is_empty() {
            let total = self.counts.entry(record.task.clone()).or_default();
            for (kind, count) in masked {
                *total.entry(kind).or_default() += count;
            }
        }
        if matches!(clean.event, Event::TaskFinished { .. })
            && let Some(counts) = self.counts.remove(&record.task)
            && !counts.is_empty()
        {
            self.forward(&EventRecord {
                ts_ms: clean.ts_ms,
                task: clean.task.clone(),
                event: Event::Redactions { counts },
            });
        }
        self.forward(&clean);
        Ok(())
    }

    /// A streamed line, masked. A secret with a line break could come in
    /// pieces no line shows whole: with one known, nothing streams (the
    /// `message` event shows the text, masked whole).
    fn text(&mut self, task: &str, line: &str) {
        if self.redactor.has_multiline_secret() {
            return;
        }
        let line = self.redactor.redact(line);
        for sink in &mut self.sinks {
            sink.text(task, &line);
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        for sink in &mut self.sinks {
            if let Err(error) = sink.finish() {
                self.error.get_or_insert(error);
            }
        }
        match self.error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}
