//! The one place secrets are masked: every record passes through here on
//! its way to every sink (SECURITY S7).

use crate::core::Redactor;
use crate::core::event::{Event, EventRecord, EventSink};

/// Redacts each record, then hands it to the inner sinks.
pub struct RedactingSink<'a> {
    redactor: Redactor,
    sinks: Vec<&'a mut dyn EventSink>,
    error: Option<std::io::Error>,
}

impl<'a> RedactingSink<'a> {
    pub fn new(redactor: Redactor, sinks: Vec<&'a mut dyn EventSink>) -> Self {
        Self {
            redactor,
            sinks,
            error: None,
        }
    }

    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }

    fn clean(&self, record: &EventRecord) -> EventRecord {
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
        self.redactor.redact_value(&mut value);
        serde_json::from_value(value).unwrap_or_else(|_| withheld())
    }
}

impl EventSink for RedactingSink<'_> {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
        let clean = self.clean(record);
        for sink in &mut self.sinks {
            if let Err(error) = sink.event(&clean) {
                self.error.get_or_insert(error);
            }
        }
        Ok(())
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
