//! The one place secrets are masked: every record passes through here on
//! its way to every sink (docs/security.md S7). It also keeps the count of what was
//! masked per task, and emits it (`task.redactions`) just before the
//! task's `task.finished`.

use std::collections::HashMap;

use crate::core::Redactor;
use crate::core::event::{self, Event, EventRecord, EventSink, Note};
use crate::core::redact::{LineMasker, Redactions};

/// Redacts each record, then hands it to the inner sinks.
pub struct RedactingSink<'a> {
    redactor: Redactor,
    sinks: Vec<&'a mut dyn EventSink>,
    error: Option<std::io::Error>,
    /// Per task: what was masked here, plus what the agent masked before
    /// the conversation saw it (its `task.redactions` reports).
    counts: HashMap<String, Redactions>,
    /// The tasks whose streamed text is inside a private key block: a
    /// line shows only part of it, so each line is masked whole up to the
    /// block's end marker.
    streams: HashMap<String, LineMasker>,
}

impl<'a> RedactingSink<'a> {
    pub fn new(redactor: Redactor, sinks: Vec<&'a mut dyn EventSink>) -> Self {
        Self {
            redactor,
            sinks,
            error: None,
            counts: HashMap::new(),
            streams: HashMap::new(),
        }
    }

    fn clean(&self, record: &EventRecord, counts: &mut Redactions) -> EventRecord {
        // Fails closed: a record that cannot be redacted is withheld, never
        // passed on as is.
        let withheld = || EventRecord {
            ts_ms: record.ts_ms,
            task: self.redactor.redact(&record.task),
            event: Event::Note(Note {
                message: "[an event was withheld: it could not be redacted]".to_owned(),
            }),
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
        if let Event::Redactions(event::Redactions { counts }) = &record.event {
            let total = self.counts.entry(record.task.clone()).or_default();
            for (kind, count) in counts {
                *total.entry(kind.clone()).or_default() += count;
            }
            return Ok(());
        }
        // A turn's text has ended (or streams again from its start).
        if matches!(record.event, Event::MessageAppended(_) | Event::LlmRetry(_)) {
            self.streams.remove(&record.task);
        }
        let mut masked = Redactions::new();
        let clean = self.clean(record, &mut masked);
        if !masked.is_empty() {
            let total = self.counts.entry(record.task.clone()).or_default();
            for (kind, count) in masked {
                *total.entry(kind).or_default() += count;
            }
        }
        if matches!(clean.event, Event::TaskFinished(_))
            && let Some(counts) = self.counts.remove(&record.task)
            && !counts.is_empty()
        {
            self.forward(&EventRecord {
                ts_ms: clean.ts_ms,
                task: clean.task.clone(),
                event: Event::Redactions(event::Redactions { counts }),
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
        let line = self
            .streams
            .entry(task.to_owned())
            .or_default()
            .line(&self.redactor, line);
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::core::event::{MessageAppended, ToolCompleted};
    use crate::core::message::Message;
    use crate::core::redact::testing::{assert_masked, credential, needles, place, position};

    /// What the sinks behind the redacting one receive.
    #[derive(Default)]
    struct Collect {
        records: Vec<EventRecord>,
        lines: Vec<String>,
    }

    impl EventSink for Collect {
        fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
            self.records.push(record.clone());
            Ok(())
        }

        fn text(&mut self, _task: &str, line: &str) {
            self.lines.push(line.to_owned());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Issue 21, item 1: a tool's result (JSON text holding the
        /// program's outputs), a tool message carrying it, a check's
        /// output and a streamed line, with a credential of every shape
        /// at every position, come out of the sink masked, as every
        /// output writes them (compact JSON lines, pretty JSON).
        #[test]
        fn every_record_comes_out_masked(
            credential in credential(),
            position in position(),
            cut in 1usize..200,
        ) {
            let (stdout, stderr) = place(&credential, position, cut);
            let needles = needles(&credential, position, cut);
            let result = json!({"exit_code": 1, "stdout": stdout, "stderr": stderr, "timed_out": false}).to_string();
            let mut collect = Collect::default();
            {
                let mut sink = RedactingSink::new(credential.redactor(), vec![&mut collect]);
                let record = |event| EventRecord { ts_ms: 1, task: "t".to_owned(), event };
                sink.event(&record(Event::ToolCompleted(ToolCompleted {
                    call_id: "c1".to_owned(),
                    name: "run_shell".to_owned(),
                    ok: true,
                    ran: true,
                    duration_ms: 1,
                    truncated: false,
                    output: result.clone(),
                })))?;
                sink.event(&record(Event::MessageAppended(MessageAppended {
                    message: Message::Tool {
                        call_id: "c1".to_owned(),
                        name: "run_shell".to_owned(),
                        content: result.clone(),
                        is_error: false,
                    },
                })))?;
                if !position.is_split() {
                    sink.event(&record(Event::Note(Note { message: stdout.clone() })))?;
                    for line in stdout.lines() {
                        sink.text("t", line);
                    }
                }
                sink.finish()?;
            }
            prop_assert!(collect.records.len() >= 2);
            for record in &collect.records {
                let line = serde_json::to_string(record).unwrap_or_default();
                assert_masked(&needles, "a record", &line);
                let pretty = serde_json::to_string_pretty(record).unwrap_or_default();
                assert_masked(&needles, "a pretty record", &pretty);
            }
            assert_masked(&needles, "the streamed lines", &collect.lines.join("\n"));
        }
    }
}
