//! L2 report: `EventSink`s that turn the event stream into outputs
//! (docs/outputs.md). The runner builds them as one [`RunSinks`], feeds it every
//! (already redacted) `EventRecord` of every task, and calls `finish()`
//! once at the end of the run; [`OutputLayout`] names every output file. Records of parallel tasks may interleave;
//! every sink routes them by `record.task`.
//!
//! - [`EventsSink`]: `OUT/<task>/events.jsonl`, one line per event, flushed.
//! - [`TranscriptSink`]: `OUT/<task>/transcript.json` at `task.finished`.
//! - [`JunitSink`]: the JUnit XML at `finish()`.
//! - [`SummarySink`]: `OUT/summary.md` (and `$GITHUB_STEP_SUMMARY`) at `finish()`.
//! - [`html::HtmlSink`]: `OUT/report.html`, one self-contained page, at `finish()`.
//! - [`schema`]: the JSON Schemas of the transcript and of `events.jsonl`.
//! - [`OtelSink`]: OpenTelemetry spans over OTLP/HTTP, when an endpoint is set.
//! - [`log`]: neutralizing model and tool text for CI logs, `::error` lines.
//! - [`annotations`]: the `file:line[:col]` locations in a failing check's
//!   output, and their `::error file=…` lines.
//! - [`terminal`]: the [`Console`] a run talks to, and [`Printer`], the
//!   only writer to stdout and stderr (human lines, the live view).
//!
//! [`merge`] (`ybs report merge`) feeds the same JUnit and summary sinks
//! from the transcripts of several output directories.

pub mod annotations;
pub mod durations;
mod events;
pub mod fixture;
mod fsutil;
mod github_output;
pub mod html;
mod junit;
pub mod log;
pub mod merge;
pub mod otel;
mod outdir;
pub mod rates;
mod results;
pub mod schema;
mod scope;
mod sinks;
mod summary;
pub mod terminal;
#[cfg(test)]
mod testdata;
mod transcript;

pub use events::{EVENTS_FILE, EventsSink};
pub use github_output::{append_github_output, github_output_text};
pub use junit::{JunitSink, junit_report, junit_xml};
pub use merge::{MergeError, Merged, SHARD_FILE, ShardFile};
pub use otel::OtelSink;
pub use outdir::{DIGESTS_FILE, Digests, OpenError, OutDir};
pub use results::{FailedCheck, ResultCollector, RunTotals, TaskResult};
pub use scope::RunScope;
pub use sinks::{
    CASSETTE_FILE, COMMIT_PATCH_FILE, JUNIT_FILE, OpenOutputs, OutputLayout, RunSinks, SUMMARY_FILE,
};
pub use summary::{SummarySink, summary_markdown};
pub use terminal::{Console, Level, PlannedTask, Printer};
pub use transcript::{
    CheckEntry, Decision, LlmCall, Manifest, OUTPUT_FILE, OUTPUT_JSON_FILE, Pause, Retry,
    TRANSCRIPT_FILE, TaskInfo, Timings, ToolCallEntry, ToolResult, Transcript, TranscriptBuilder,
    TranscriptSink, build_transcript,
};
