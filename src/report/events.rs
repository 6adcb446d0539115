//! `OUT/<task>/events.jsonl`: every record of a task as one JSON line,
//! written as it happens (docs/outputs.md). Each line goes to the kernel in one
//! write before the next event is taken, so the file is valid JSONL up to
//! the last complete event even if ybs crashes (docs/security.md S8).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write as _};
use std::sync::Arc;

use crate::core::event::{Event, EventRecord, EventSink};

use super::outdir::OutDir;

/// The file name of a task's event log inside `OUT/<task>/`.
pub const EVENTS_FILE: &str = "events.jsonl";

/// Writes `OUT/<task>/events.jsonl` for every task it is fed, through
/// the held output directory (never through a link planted there).
#[derive(Debug)]
pub struct EventsSink {
    out: Arc<OutDir>,
    /// Open logs, by task; closed at `task.finished`.
    open: HashMap<String, File>,
    /// Truncate at `task.started` (a fresh run) or append (a resumed one).
    truncate: bool,
}

impl EventsSink {
    /// A sink for a fresh run: each `task.started` replaces the task's
    /// file with a new one.
    pub fn new(out: Arc<OutDir>) -> Self {
        Self {
            out,
            open: HashMap::new(),
            truncate: true,
        }
    }

    /// A sink for `ybs resume`: records are appended to the files the
    /// paused run left, `task.started` included.
    pub fn appending(out: Arc<OutDir>) -> Self {
        Self {
            truncate: false,
            ..Self::new(out)
        }
    }
}

impl EventSink for EventsSink {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        let started = matches!(record.event, Event::TaskStarted(_));
        if started || !self.open.contains_key(&record.task) {
            // Events of a task whose start we never saw (a sink created
            // mid-run) are appended rather than lost.
            let file =
                self.out
                    .create(Some(&record.task), EVENTS_FILE, !(started && self.truncate))?;
            self.open.insert(record.task.clone(), file);
        }
        let Some(file) = self.open.get_mut(&record.task) else {
            return Ok(());
        };
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        let written = file.write_all(&line).and_then(|()| file.flush());
        if written.is_ok() {
            self.out.wrote(Some(&record.task), EVENTS_FILE, line.len());
        }
        if matches!(record.event, Event::TaskFinished(_))
            && let Some(file) = self.open.remove(&record.task)
        {
            // Replaced under ybs (renamed over, or a link): the events
            // written go back to their path rather than being lost.
            self.out.restore(Some(&record.task), EVENTS_FILE, &file)?;
        }
        written.map_err(|err| {
            io::Error::new(
                err.kind(),
                format!(
                    "{}/{}/{EVENTS_FILE}: {err}",
                    self.out.path().display(),
                    record.task
                ),
            )
        })
    }

    fn finish(&mut self) -> io::Result<()> {
        let mut first_error = None;
        for (task, file) in self.open.drain() {
            if let Err(err) = file
                .sync_all()
                .and_then(|()| self.out.restore(Some(&task), EVENTS_FILE, &file).map(drop))
            {
                first_error.get_or_insert(io::Error::new(
                    err.kind(),
                    format!("{}/{task}/{EVENTS_FILE}: {err}", self.out.path().display()),
                ));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata::{self, records_two_files};
    use std::path::Path;

    fn out(dir: &Path) -> Arc<OutDir> {
        OutDir::open(dir, dir).unwrap()
    }

    fn lines(path: &Path) -> Vec<EventRecord> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn writes_one_valid_line_per_event_per_task() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = EventsSink::new(out(dir.path()));
        let records = records_two_files();
        for record in &records {
            sink.event(record).unwrap();
        }
        sink.finish().unwrap();
        for task in ["alpha", "beta", "gamma"] {
            let expected: Vec<_> = records.iter().filter(|r| r.task == task).cloned().collect();
            let got = lines(&dir.path().join(task).join(EVENTS_FILE));
            assert_eq!(got, expected, "{task}");
        }
    }

    #[test]
    fn each_line_is_on_disk_before_the_next_event() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = EventsSink::new(out(dir.path()));
        let records = records_two_files();
        let path = dir.path().join("alpha").join(EVENTS_FILE);
        let mut seen = 0;
        for record in &records {
            sink.event(record).unwrap();
            if record.task == "alpha" {
                seen += 1;
                // No finish(), no drop: as if ybs died here.
                assert_eq!(lines(&path).len(), seen);
            }
        }
    }

    #[test]
    fn truncates_at_task_started_or_appends_when_resuming() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alpha").join(EVENTS_FILE);
        let started = testdata::started("alpha", "a.yaml", 1_000);
        let finished = testdata::passed("alpha", 2_000);
        for _ in 0..2 {
            let mut sink = EventsSink::new(out(dir.path()));
            sink.event(&started).unwrap();
            sink.event(&finished).unwrap();
        }
        assert_eq!(lines(&path).len(), 2);
        let mut sink = EventsSink::appending(out(dir.path()));
        sink.event(&started).unwrap();
        assert_eq!(lines(&path).len(), 3);
    }

    #[test]
    fn refuses_a_task_name_that_escapes_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = EventsSink::new(out(dir.path()));
        let record = testdata::started("../evil", "a.yaml", 1);
        assert!(sink.event(&record).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
