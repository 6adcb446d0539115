//! The run's output files and the sinks that write them: one
//! [`OutputLayout`] names every file, one [`RunSinks`] holds every sink,
//! for `ybs run` and `ybs report merge` alike.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::html::{HTML_FILE, HtmlSink};
use super::{
    DIGESTS_FILE, EVENTS_FILE, EventsSink, JunitSink, OUTPUT_FILE, OUTPUT_JSON_FILE, OpenError,
    OtelSink, OutDir, RunScope, SHARD_FILE, SummarySink, TRANSCRIPT_FILE, TranscriptSink,
};
use crate::core::event::{EventRecord, EventSink};

/// `OUT/summary.md`: the Markdown summary.
pub const SUMMARY_FILE: &str = "summary.md";
/// `OUT/<task>/cassette.json`: under `--record`, the task's own
/// interactions, for `ybs report fixture`.
pub const CASSETTE_FILE: &str = "cassette.json";
/// `OUT/<task>/commit.patch`: the task's commit (message, trailers,
/// diff), masked, when it committed.
pub const COMMIT_PATCH_FILE: &str = "commit.patch";
/// `OUT/junit.xml`: the JUnit XML, unless `--junit FILE`.
pub const JUNIT_FILE: &str = "junit.xml";

/// Where a run's outputs go, and the name of every file in them.
#[derive(Debug, Clone)]
pub struct OutputLayout {
    pub out_dir: PathBuf,
    /// The JUnit file: `OUT/junit.xml` unless `--junit FILE`.
    pub junit: PathBuf,
    /// `$GITHUB_STEP_SUMMARY`: the summary is appended there too.
    pub github_step_summary: Option<PathBuf>,
}

/// The output directories, held open for the run: every output file is
/// created relative to them, never through a symbolic link (docs/security.md S8).
#[derive(Debug, Clone)]
pub struct OpenOutputs {
    pub out: Arc<OutDir>,
    /// The directory of the JUnit file (the output directory itself when
    /// the file is there), and the file's name in it.
    pub junit_dir: Arc<OutDir>,
    pub junit_name: String,
}

impl OutputLayout {
    /// Per-task files, in `OUT/<task-id>/`.
    pub const TASK_FILES: &[&str] = &[
        EVENTS_FILE,
        TRANSCRIPT_FILE,
        OUTPUT_FILE,
        OUTPUT_JSON_FILE,
        CASSETTE_FILE,
        COMMIT_PATCH_FILE,
    ];
    /// Files of the run, in `OUT/` (the JUnit file by default).
    pub const RUN_FILES: &[&str] = &[
        SUMMARY_FILE,
        HTML_FILE,
        JUNIT_FILE,
        SHARD_FILE,
        DIGESTS_FILE,
        super::durations::DURATIONS_FILE,
    ];

    /// `junit`: `--junit FILE`, else `OUT/junit.xml`.
    pub fn new(
        out_dir: PathBuf,
        junit: Option<PathBuf>,
        github_step_summary: Option<PathBuf>,
    ) -> Self {
        Self {
            junit: junit.unwrap_or_else(|| out_dir.join(JUNIT_FILE)),
            out_dir,
            github_step_summary,
        }
    }

    /// Every path this run writes its outputs to, for git to leave alone:
    /// the output directory, and, in case that directory holds the workdir
    /// (`--out .`), each file and task directory in it; the JUnit file; the
    /// step summary.
    pub fn own_paths<'a>(&self, task_ids: impl IntoIterator<Item = &'a str>) -> Vec<PathBuf> {
        let mut paths = vec![
            self.out_dir.clone(),
            self.out_dir.join(SUMMARY_FILE),
            self.out_dir.join(HTML_FILE),
            self.out_dir.join(SHARD_FILE),
            self.out_dir.join(DIGESTS_FILE),
            self.out_dir.join(super::durations::DURATIONS_FILE),
            self.junit.clone(),
        ];
        paths.extend(task_ids.into_iter().map(|id| self.out_dir.join(id)));
        paths.extend(self.github_step_summary.iter().cloned());
        paths
    }

    /// Opens (creating them) the output directory and the JUnit file's
    /// directory, relative to `cwd`, before anything runs. A symbolic link
    /// where ybs would write is refused.
    pub fn open(&self, cwd: &Path) -> Result<OpenOutputs, OpenError> {
        let out = OutDir::open(&self.out_dir, cwd)?;
        let bad_junit = |message: &str| OpenError {
            path: self.junit.clone(),
            message: message.to_owned(),
        };
        let junit_name = self
            .junit
            .file_name()
            .and_then(|name| name.to_str())
            .ok_or_else(|| bad_junit("not a file name"))?
            .to_owned();
        let parent = self
            .junit
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let junit_dir = if parent == self.out_dir {
            Arc::clone(&out)
        } else {
            OutDir::open(parent, cwd)?
        };
        Ok(OpenOutputs {
            out,
            junit_dir,
            junit_name,
        })
    }
}

/// Every output sink of a run, fed as one: a failing sink never starves
/// the others; all are fed, and the first error of the call is returned.
pub struct RunSinks {
    events: Option<EventsSink>,
    transcripts: Option<TranscriptSink>,
    junit: JunitSink,
    summary: SummarySink,
    html: HtmlSink,
    /// OpenTelemetry spans, when an endpoint is set (docs/observability.md).
    otel: Option<OtelSink>,
}

impl RunSinks {
    /// `ybs run`: events, transcripts, JUnit, summary and the HTML page.
    pub fn run(layout: &OutputLayout, outputs: &OpenOutputs, scope: RunScope) -> Self {
        Self {
            events: Some(EventsSink::new(Arc::clone(&outputs.out))),
            transcripts: Some(TranscriptSink::new(Arc::clone(&outputs.out))),
            ..Self::reports(layout, outputs, scope)
        }
    }

    /// `ybs report merge`: JUnit, summary and the page (the task directories are
    /// copied, not written again).
    pub fn reports(layout: &OutputLayout, outputs: &OpenOutputs, scope: RunScope) -> Self {
        Self {
            events: None,
            transcripts: None,
            junit: JunitSink::new(Arc::clone(&outputs.junit_dir), outputs.junit_name.clone())
                .with_scope(scope.clone()),
            summary: SummarySink::new(
                Arc::clone(&outputs.out),
                SUMMARY_FILE,
                layout.github_step_summary.clone(),
            )
            .with_scope(scope.clone()),
            html: HtmlSink::new(Arc::clone(&outputs.out), scope),
            otel: None,
        }
    }

    /// Also exports spans through `otel`.
    pub fn with_otel(mut self, otel: Option<OtelSink>) -> Self {
        self.otel = otel;
        self
    }

    /// After `finish()`: the line to show when spans were not delivered.
    pub fn take_otel_warning(&mut self) -> Option<String> {
        self.otel.as_mut().and_then(OtelSink::take_warning)
    }

    fn each(
        &mut self,
        mut call: impl FnMut(&mut dyn EventSink) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut sinks: Vec<&mut dyn EventSink> = Vec::with_capacity(6);
        if let Some(events) = &mut self.events {
            sinks.push(events);
        }
        if let Some(transcripts) = &mut self.transcripts {
            sinks.push(transcripts);
        }
        sinks.push(&mut self.junit);
        sinks.push(&mut self.summary);
        // After the transcripts: the page reads them at `finish()`.
        sinks.push(&mut self.html);
        if let Some(otel) = &mut self.otel {
            sinks.push(otel);
        }
        let mut first_error = None;
        for sink in sinks {
            if let Err(error) = call(sink) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl RunSinks {
    /// `ybs resume`: a record of a paused task's earlier halves, for its
    /// transcript, the JUnit file and the summary to go on from (its
    /// `events.jsonl` holds it already).
    pub fn replay(&mut self, record: &EventRecord) -> io::Result<()> {
        self.replay_to(record, true)
    }

    /// `ybs resume`: a record of a task of the run that is not resumed
    /// (from its transcript), so the JUnit file and the summary still
    /// list it as the run left it.
    pub fn replay_report(&mut self, record: &EventRecord) -> io::Result<()> {
        self.replay_to(record, false)
    }

    fn replay_to(&mut self, record: &EventRecord, transcript: bool) -> io::Result<()> {
        let mut first_error = None;
        let mut sinks: Vec<&mut dyn EventSink> =
            vec![&mut self.junit, &mut self.summary, &mut self.html];
        if let Some(transcripts) = self.transcripts.as_mut().filter(|_| transcript) {
            sinks.push(transcripts);
        }
        for sink in sinks {
            if let Err(error) = sink.event(record) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl EventSink for RunSinks {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        self.each(|sink| sink.event(record))
    }

    fn finish(&mut self) -> io::Result<()> {
        self.each(|sink| sink.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_output_file_is_named_once_and_owned() {
        let layout = OutputLayout::new(PathBuf::from("out"), None, None);
        assert_eq!(layout.junit, Path::new("out").join(JUNIT_FILE));
        let own = layout.own_paths(["t"]);
        for name in OutputLayout::RUN_FILES {
            assert!(own.contains(&layout.out_dir.join(name)), "{name}");
        }
        assert!(own.contains(&layout.out_dir.join("t")));
        let mut all: Vec<&str> = OutputLayout::RUN_FILES
            .iter()
            .chain(OutputLayout::TASK_FILES)
            .copied()
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 12);
    }

    #[test]
    fn a_junit_file_elsewhere_is_owned_and_opened_in_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let layout = OutputLayout::new(
            PathBuf::from("out"),
            Some(PathBuf::from("reports/j.xml")),
            None,
        );
        let open = layout.open(dir.path()).unwrap();
        assert_eq!(open.junit_name, "j.xml");
        assert!(dir.path().join("reports").is_dir());
        assert!(
            layout
                .own_paths([])
                .contains(&PathBuf::from("reports/j.xml"))
        );
    }
}
