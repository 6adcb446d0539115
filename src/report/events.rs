//! `OUT/<task>/events.jsonl`: every record of a task as one JSON line,
//! written as it happens (SPEC §7). Each line goes to the kernel in one
//! write before the next event is taken, so the file is valid JSONL up to
//! the last complete event even if ybs crashes (SECURITY S8).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use crate::core::event::{Event, EventRecord, EventSink};

use super::fsutil::{task_dir, with_path};

/// The file name of a task's event log inside `OUT/<task>/`.
pub const EVENTS_FILE: &str = "events.jsonl";

/// Writes `OUT/<task>/events.jsonl` for every task it is fed.
#[derive(Debug)]
pub struct EventsSink {
    out_dir: PathBuf,
    /// Open logs, by task; closed at `task.finished`.
    open: HashMap<String, OpenLog>,
    /// Truncate at `task.started` (a fresh run) or append (a resumed one).
    truncate: bool,
}

#[derive(Debug)]
struct OpenLog {
    path: PathBuf,
    file: File,
}

impl EventsSink {
    /// A sink for a fresh run: each `task.started` creates or truncates the
    /// task's file.
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        Self {
            out_dir: out_dir.into(),
            open: HashMap::new(),
            truncate: true,
        }
    }

    /// A sink for `ybs resume`: records are appended to the files the
    /// paused run left, `task.started` included.
    pub fn appending(out_dir: impl Into<PathBuf>) -> Self {
        Self {
            truncate: false,
            ..Self::new(out_dir)
        }
    }

    /// The path of `task`'s event log under `out_dir`.
    pub fn path_for(out_dir: &Path, task: &str) -> io::Result<PathBuf> {
        Ok(task_dir(out_dir, task)?.join(EVENTS_FILE))
    }

    fn open(&self, task: &str, truncate: bool) -> io::Result<OpenLog> {
        let path = Self::path_for(&self.out_dir, task)?;
        let result = (|| {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut options = OpenOptions::new();
            options.create(true);
            if truncate {
                options.write(true).truncate(true);
            } else {
                options.append(true);
            }
            options.open(&path)
        })();
        match result {
            Ok(file) => Ok(OpenLog { path, file }),
            Err(err) => Err(with_path(err, &path)),
        }
    }
}

impl EventSink for EventsSink {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        let started = matches!(record.event, Event::TaskStarted { .. });
        if started || !self.open.contains_key(&record.task) {
            // Events of a task whose start we never saw (a sink created
            // mid-run) are appended rather than lost.
            let log = self.open(&record.task, started && self.truncate)?;
            self.open.insert(record.task.clone(), log);
        }
        let Some(log) = self.open.get_mut(&record.task) else {
            return Ok(());
        };
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        let written = log
            .file
            .write_all(&line)
            .and_then(|()| log.file.flush())
            .map_err(|err| with_path(err, &log.path));
        if matches!(record.event, Event::TaskFinished { .. }) {
            self.open.remove(&record.task);
        }
        written
    }

    fn finish(&mut self) -> io::Result<()> {
        let mut first_error = None;
        for (_, log) in self.open.drain() {
            if let Err(err) = log.file.sync_all() {
                first_error.get_or_insert(with_path(err, &log.path));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata::{self, records_two_files};

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
        let mut sink = EventsSink::new(dir.path());
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
        let mut sink = EventsSink::new(dir.path());
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
            let mut sink = EventsSink::new(dir.path());
            sink.event(&started).unwrap();
            sink.event(&finished).unwrap();
        }
        assert_eq!(lines(&path).len(), 2);
        let mut sink = EventsSink::appending(dir.path());
        sink.event(&started).unwrap();
        assert_eq!(lines(&path).len(), 3);
    }

    #[test]
    fn refuses_a_task_name_that_escapes_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = EventsSink::new(dir.path().join("out"));
        let record = testdata::started("../evil", "a.yaml", 1);
        assert!(sink.event(&record).is_err());
        assert!(!dir.path().join("evil").exists());
    }
}
