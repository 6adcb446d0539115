//! OpenTelemetry traces over OTLP/HTTP (docs/observability.md): when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! is set, [`OtelSink`] turns a run's (already redacted) event stream
//! into spans (one per task, one per provider request, tool call and
//! check) and an [`Exporter`] thread posts them to the collector. Unset,
//! nothing here runs: no thread, no client, no request.
//!
//! Spans carry names, counts, codes and durations only, never tool
//! arguments, tool output or model text. The GenAI semantic conventions
//! name what they cover (`gen_ai.operation.name`, `gen_ai.request.model`,
//! `gen_ai.usage.input_tokens`, `gen_ai.tool.name`, ...); the rest is
//! under `ybs.*`.
//!
//! The protocol is written by hand ([`wire`]): the request body is small
//! and fixed, and the OpenTelemetry SDK crates would add 28 crates (prost, a
//! second `syn`, `rand`) and a span processor with its own
//! runtime to what a run that does not export pays for.

mod export;
mod settings;
mod wire;

pub use export::{Exporter, ToolCallSpan};
pub use settings::{OtelError, Protocol, Settings, SettingsError};

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::core::Status;
use crate::core::event::{
    CheckCompleted, Event, EventRecord, EventSink, Git, LlmResponse, LlmRetry, Redactions,
    TaskFinished, TaskPaused, TaskResumed, TaskStarted, ToolCompleted, ToolDecided,
};

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
}

impl From<&str> for AttrValue {
    fn from(value: &str) -> Self {
        Self::Str(value.to_owned())
    }
}

impl From<String> for AttrValue {
    fn from(value: String) -> Self {
        Self::Str(value)
    }
}

impl From<bool> for AttrValue {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl From<u64> for AttrValue {
    fn from(value: u64) -> Self {
        Self::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl From<u32> for AttrValue {
    fn from(value: u32) -> Self {
        Self::Int(i64::from(value))
    }
}

impl From<i32> for AttrValue {
    fn from(value: i32) -> Self {
        Self::Int(i64::from(value))
    }
}

impl From<f64> for AttrValue {
    fn from(value: f64) -> Self {
        Self::Double(value)
    }
}

/// The OTLP span kinds ybs uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Client = 3,
}

/// How a span ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SpanStatus {
    #[default]
    Unset,
    Ok,
    /// With a short code-like description (`failed: checks_failed`).
    Error(String),
}

impl SpanStatus {
    fn code(&self) -> u8 {
        match self {
            Self::Unset => 0,
            Self::Ok => 1,
            Self::Error(_) => 2,
        }
    }

    fn message(&self) -> Option<&str> {
        match self {
            Self::Error(message) => Some(message),
            _ => None,
        }
    }
}

/// Something that happened at one point of a span (a retry).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub time_ns: u64,
    pub name: String,
    pub attributes: Vec<(String, AttrValue)>,
}

/// One finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<(String, AttrValue)>,
    pub events: Vec<SpanEvent>,
    pub status: SpanStatus,
}

impl Span {
    fn attr(&mut self, key: &str, value: impl Into<AttrValue>) {
        self.attributes.push((key.to_owned(), value.into()));
    }
}
/// Trace and span ids: SHA-256 of a per-process seed and a counter.
/// Unique, not secret.
#[derive(Debug)]
struct Ids {
    seed: [u8; 32],
    counter: AtomicU64,
}

impl Ids {
    fn new() -> Self {
        let mut seed = [0u8; 32];
        let read = std::fs::File::open("/dev/urandom")
            .and_then(|mut file| io::Read::read_exact(&mut file, &mut seed));
        if read.is_err() {
            let mut hasher = Sha256::new();
            hasher.update(now_ns().to_le_bytes());
            hasher.update(std::process::id().to_le_bytes());
            seed = hasher.finalize().into();
        }
        Self {
            seed,
            counter: AtomicU64::new(0),
        }
    }

    fn next(&self) -> [u8; 32] {
        let counter = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut hasher = Sha256::new();
        hasher.update(self.seed);
        hasher.update(counter.to_le_bytes());
        hasher.finalize().into()
    }

    fn trace(&self) -> [u8; 16] {
        let mut id = [0u8; 16];
        id.copy_from_slice(&self.next()[..16]);
        id
    }

    fn span(&self) -> [u8; 8] {
        let mut id = [0u8; 8];
        id.copy_from_slice(&self.next()[..8]);
        id
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        })
}

fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

/// What a tool span says.
struct ToolFacts<'a> {
    name: &'a str,
    call_id: &'a str,
    verdict: Option<&'a str>,
    rule: Option<&'a str>,
    ok: bool,
    ran: bool,
    truncated: bool,
    exit_code: Option<i32>,
    duration_ms: u64,
}

fn tool_span(
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    facts: &ToolFacts<'_>,
    start_ns: u64,
    end_ns: u64,
) -> Span {
    let mut span = Span {
        trace_id,
        span_id,
        parent,
        name: format!("execute_tool {}", facts.name),
        kind: SpanKind::Internal,
        start_ns,
        end_ns: end_ns.max(start_ns),
        attributes: Vec::new(),
        events: Vec::new(),
        status: SpanStatus::Unset,
    };
    span.attr("gen_ai.operation.name", "execute_tool");
    span.attr("gen_ai.tool.name", facts.name);
    span.attr("gen_ai.tool.call.id", facts.call_id);
    span.attr("gen_ai.tool.type", "function");
    if let Some(verdict) = facts.verdict {
        span.attr("ybs.tool.verdict", verdict);
    }
    if let Some(rule) = facts.rule {
        span.attr("ybs.tool.rule", rule);
    }
    span.attr("ybs.tool.ran", facts.ran);
    span.attr("ybs.tool.ok", facts.ok);
    span.attr("ybs.tool.duration_ms", facts.duration_ms);
    if facts.truncated {
        span.attr("ybs.tool.output_truncated", true);
    }
    if let Some(code) = facts.exit_code {
        span.attr("process.exit.code", code);
    }
    if !facts.ok {
        let kind = if facts.ran { "tool_error" } else { "refused" };
        span.attr("error.type", kind);
        span.status = SpanStatus::Error(kind.to_owned());
    }
    span
}

/// A task in progress.
#[derive(Debug)]
struct TaskTrace {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    start_ms: u64,
    provider: String,
    model: String,
    attributes: Vec<(String, AttrValue)>,
    /// Span ids by tool call id (a `script` call parents its commands).
    call_spans: HashMap<String, [u8; 8]>,
    /// Decided, not yet completed tool calls.
    decided: HashMap<String, Decided>,
    /// Retries by provider request (iteration), until its response.
    retries: HashMap<u32, Vec<SpanEvent>>,
    redactions: u64,
}

#[derive(Debug)]
struct Decided {
    verdict: String,
    rule: String,
    parent: Option<String>,
    ts_ms: u64,
}

/// The `EventSink` that turns a run's events into spans: every child span
/// is queued as it ends, the task span at `task.finished`; `finish()`
/// delivers the rest within the timeout. A collector that cannot be
/// reached never fails the run: [`OtelSink::take_warning`] has the one
/// line to show.
#[derive(Debug)]
pub struct OtelSink {
    exporter: Option<Exporter>,
    ids: Ids,
    parent: Option<([u8; 16], [u8; 8])>,
    tasks: HashMap<String, TaskTrace>,
    warning: Option<String>,
}

impl OtelSink {
    /// A sink exporting with `settings` (its thread starts here).
    pub fn start(settings: Settings) -> io::Result<Self> {
        Exporter::start(settings).map(Self::new)
    }

    /// A sink exporting through `exporter`.
    pub fn new(exporter: Exporter) -> Self {
        Self {
            parent: exporter.parent(),
            exporter: Some(exporter),
            ids: Ids::new(),
            tasks: HashMap::new(),
            warning: None,
        }
    }

    /// From ybs's environment ([`Exporter::from_env`]).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>, OtelError> {
        Exporter::from_env(env).map(|exporter| exporter.map(Self::new))
    }

    /// The warning of the last `finish()`, if spans were not delivered.
    pub fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }

    fn export(&self, span: Span) {
        if let Some(exporter) = &self.exporter {
            exporter.export(vec![span]);
        }
    }

    fn started(&mut self, record: &EventRecord, start: &TaskStarted) {
        let (trace_id, parent) = match self.parent {
            Some((trace, span)) => (trace, Some(span)),
            None => (self.ids.trace(), None),
        };
        let mut attributes: Vec<(String, AttrValue)> = vec![
            ("ybs.run_id".into(), start.run_id.as_str().into()),
            ("ybs.task.file".into(), start.file.as_str().into()),
            ("ybs.task.suite".into(), start.suite.as_str().into()),
            ("ybs.dry_run".into(), start.dry_run.into()),
        ];
        if let Some(sandbox) = &start.sandbox {
            attributes.push(("ybs.sandbox.mode".into(), sandbox.mode.as_str().into()));
        }
        self.tasks.insert(
            record.task.clone(),
            TaskTrace {
                trace_id,
                span_id: self.ids.span(),
                parent,
                start_ms: record.ts_ms,
                provider: start.provider.clone(),
                model: start.model.clone(),
                attributes,
                call_spans: HashMap::new(),
                decided: HashMap::new(),
                retries: HashMap::new(),
                redactions: 0,
            },
        );
    }

    fn child(
        &mut self,
        task: &str,
        name: String,
        kind: SpanKind,
        start_ms: u64,
        end_ms: u64,
    ) -> Option<Span> {
        let span_id = self.ids.span();
        let trace = self.tasks.get(task)?;
        Some(Span {
            trace_id: trace.trace_id,
            span_id,
            parent: Some(trace.span_id),
            name,
            kind,
            start_ns: ms_to_ns(start_ms.min(end_ms)),
            end_ns: ms_to_ns(end_ms),
            attributes: Vec::new(),
            events: Vec::new(),
            status: SpanStatus::Unset,
        })
    }

    fn event_inner(&mut self, record: &EventRecord) {
        match &record.event {
            Event::TaskStarted(start) => self.started(record, start),
            Event::TaskPaused(TaskPaused { pending }) => self.attribute(
                &record.task,
                "ybs.task.pending_calls",
                (pending.len() as u64).into(),
            ),
            Event::TaskResumed(resumed) => self.resumed(record, resumed),
            Event::LlmRetry(retry) => self.retry(record, retry),
            Event::LlmResponse(answer) => self.llm_response(record, answer),
            Event::ToolDecided(decided) => self.tool_decided(record, decided),
            Event::ToolCompleted(done) => self.tool_completed(record, done),
            Event::CheckCompleted(check) => self.check_completed(record, check),
            Event::Redactions(Redactions { counts }) => {
                if let Some(trace) = self.tasks.get_mut(&record.task) {
                    trace.redactions += counts.values().sum::<u64>();
                }
            }
            Event::Git(Git { outcome }) => {
                if let Some(commit) = &outcome.commit {
                    self.attribute(&record.task, "ybs.git.commit", commit.as_str().into());
                }
                if let Some(branch) = &outcome.branch {
                    self.attribute(&record.task, "ybs.git.branch", branch.as_str().into());
                }
                self.attribute(
                    &record.task,
                    "ybs.git.files",
                    (outcome.files.len() as u64).into(),
                );
            }
            Event::TaskFinished(end) => self.finished(record, end),
            Event::MessageAppended(_)
            | Event::Note(_)
            | Event::ToolMetricsReported(_)
            | Event::TaskOutput(_) => {}
        }
    }

    /// One more attribute of `task`'s span.
    fn attribute(&mut self, task: &str, key: &str, value: AttrValue) {
        if let Some(trace) = self.tasks.get_mut(task) {
            trace.attributes.push((key.into(), value));
        }
    }

    /// `ybs resume` goes on in a new process: its half of the task is a
    /// span of its own (the first half's ended at the pause).
    fn resumed(&mut self, record: &EventRecord, resumed: &TaskResumed) {
        if self.tasks.contains_key(&record.task) {
            return;
        }
        let (trace_id, parent) = match self.parent {
            Some((trace, span)) => (trace, Some(span)),
            None => (self.ids.trace(), None),
        };
        self.tasks.insert(
            record.task.clone(),
            TaskTrace {
                trace_id,
                span_id: self.ids.span(),
                parent,
                start_ms: record.ts_ms,
                provider: resumed.provider.clone().unwrap_or_default(),
                model: resumed.model.clone().unwrap_or_default(),
                attributes: vec![("ybs.resumed_by".into(), resumed.resumed_by.as_str().into())],
                call_spans: HashMap::new(),
                decided: HashMap::new(),
                retries: HashMap::new(),
                redactions: 0,
            },
        );
    }

    /// A retry is an event of the model call's span, which ends later.
    fn retry(&mut self, record: &EventRecord, retry: &LlmRetry) {
        // The error text stays out: a provider's message may quote the
        // request.
        if let Some(trace) = self.tasks.get_mut(&record.task) {
            trace
                .retries
                .entry(retry.iteration)
                .or_default()
                .push(SpanEvent {
                    time_ns: ms_to_ns(record.ts_ms),
                    name: "ybs.llm.retry".into(),
                    attributes: vec![
                        ("ybs.llm.attempt".into(), retry.attempt.into()),
                        ("ybs.llm.retry_delay_ms".into(), retry.delay_ms.into()),
                    ],
                });
        }
    }

    /// The `chat MODEL` span of one model call, its retries as events.
    fn llm_response(&mut self, record: &EventRecord, answer: &LlmResponse) {
        let (task, ts) = (record.task.as_str(), record.ts_ms);
        let Some(trace) = self.tasks.get_mut(task) else {
            return;
        };
        let retries = trace.retries.remove(&answer.iteration).unwrap_or_default();
        let (provider, model) = (trace.provider.clone(), trace.model.clone());
        let first_retry_ms = retries.first().map(|event| event.time_ns / 1_000_000);
        let start = ts
            .saturating_sub(answer.duration_ms)
            .min(first_retry_ms.unwrap_or(u64::MAX));
        let Some(mut span) = self.child(task, format!("chat {model}"), SpanKind::Client, start, ts)
        else {
            return;
        };
        span.attr("gen_ai.operation.name", "chat");
        span.attr("gen_ai.provider.name", provider.as_str());
        span.attr("gen_ai.system", provider.as_str());
        span.attr("gen_ai.request.model", model.as_str());
        span.attr("gen_ai.usage.input_tokens", answer.usage.input_tokens);
        span.attr("gen_ai.usage.output_tokens", answer.usage.output_tokens);
        cache_usage(&mut span, &answer.usage);
        if let Some(id) = &answer.response_id {
            span.attr("gen_ai.response.id", id.as_str());
        }
        if let Some(id) = &answer.request_id {
            span.attr("ybs.llm.request_id", id.as_str());
        }
        span.attr("ybs.llm.iteration", answer.iteration);
        span.attr("ybs.llm.retries", retries.len() as u64);
        span.attr("ybs.llm.tool_calls", answer.tool_calls as u64);
        if let crate::core::Cost::Usd(usd) = answer.cost {
            span.attr("ybs.llm.cost_usd", usd);
        }
        span.events = retries;
        self.export(span);
    }

    /// A decided call gets its span id now (a script's calls are its
    /// children) and its decision is kept for its span.
    fn tool_decided(&mut self, record: &EventRecord, decision: &ToolDecided) {
        let span_id = self.ids.span();
        if let Some(trace) = self.tasks.get_mut(&record.task) {
            trace.call_spans.insert(decision.call_id.clone(), span_id);
            trace.decided.insert(
                decision.call_id.clone(),
                Decided {
                    verdict: decision.verdict.clone(),
                    rule: decision.rule.clone(),
                    parent: decision.parent.clone(),
                    ts_ms: record.ts_ms,
                },
            );
        }
    }

    /// The `execute_tool` span of one call, from its decision to its end.
    fn tool_completed(&mut self, record: &EventRecord, done: &ToolCompleted) {
        let ts = record.ts_ms;
        let fresh = self.ids.span();
        let Some(trace) = self.tasks.get_mut(&record.task) else {
            return;
        };
        let decided = trace.decided.remove(&done.call_id);
        let span_id = *trace
            .call_spans
            .entry(done.call_id.clone())
            .or_insert(fresh);
        let parent = decided
            .as_ref()
            .and_then(|decided| decided.parent.as_ref())
            .and_then(|parent| trace.call_spans.get(parent).copied())
            .unwrap_or(trace.span_id);
        let start_ms = ts
            .saturating_sub(done.duration_ms)
            .min(decided.as_ref().map_or(u64::MAX, |decided| decided.ts_ms));
        let span = tool_span(
            trace.trace_id,
            span_id,
            Some(parent),
            &ToolFacts {
                name: &done.name,
                call_id: &done.call_id,
                verdict: decided.as_ref().map(|decided| decided.verdict.as_str()),
                rule: decided.as_ref().map(|decided| decided.rule.as_str()),
                ok: done.ok,
                ran: done.ran,
                truncated: done.truncated,
                exit_code: shell_exit_code(&done.name, &done.output),
                duration_ms: done.duration_ms,
            },
            ms_to_ns(start_ms),
            ms_to_ns(ts),
        );
        self.export(span);
    }

    /// The `check NAME` span of one check run.
    fn check_completed(&mut self, record: &EventRecord, check: &CheckCompleted) {
        let ts = record.ts_ms;
        let Some(mut span) = self.child(
            &record.task,
            format!("check {}", check.name),
            SpanKind::Internal,
            ts.saturating_sub(check.duration_ms),
            ts,
        ) else {
            return;
        };
        span.attr("ybs.check.name", check.name.as_str());
        span.attr("ybs.check.passed", check.passed);
        span.attr("ybs.check.attempt", check.attempt);
        if let Some(code) = check.exit_code {
            span.attr("process.exit.code", code);
        }
        if check.timed_out {
            span.attr("ybs.check.timed_out", true);
        }
        if !check.passed {
            span.status = SpanStatus::Error("check_failed".into());
        }
        self.export(span);
    }

    /// The task's `invoke_agent` span, ended with the task.
    fn finished(&mut self, record: &EventRecord, end: &TaskFinished) {
        let (status, reason) = (end.status, end.reason);
        let task = record.task.as_str();
        let Some(trace) = self.tasks.remove(task) else {
            return;
        };
        let start_ms = trace.start_ms;
        let mut span = Span {
            trace_id: trace.trace_id,
            span_id: trace.span_id,
            parent: trace.parent,
            name: format!("invoke_agent {task}"),
            kind: SpanKind::Internal,
            start_ns: ms_to_ns(start_ms),
            end_ns: ms_to_ns(record.ts_ms.max(start_ms)),
            attributes: Vec::new(),
            events: Vec::new(),
            status: if status == Status::Passed {
                SpanStatus::Ok
            } else {
                SpanStatus::Error(format!("{}: {}", status.as_str(), reason.as_str()))
            },
        };
        span.attr("gen_ai.operation.name", "invoke_agent");
        span.attr("gen_ai.agent.name", task);
        span.attr("gen_ai.provider.name", trace.provider.as_str());
        span.attr("gen_ai.system", trace.provider.as_str());
        span.attr("gen_ai.request.model", trace.model.as_str());
        span.attr("gen_ai.usage.input_tokens", end.usage.input_tokens);
        span.attr("gen_ai.usage.output_tokens", end.usage.output_tokens);
        cache_usage(&mut span, &end.usage);
        span.attr("ybs.task.id", task);
        span.attributes.extend(trace.attributes);
        span.attr("ybs.task.status", status.as_str());
        span.attr("ybs.task.reason", reason.as_str());
        span.attr("ybs.task.expect", end.expect.as_str());
        span.attr("ybs.task.iterations", end.iterations);
        if let crate::core::Cost::Usd(usd) = end.cost {
            span.attr("ybs.task.cost_usd", usd);
        }
        if trace.redactions > 0 {
            span.attr("ybs.task.redactions", trace.redactions);
        }
        if status != Status::Passed {
            span.attr("error.type", reason.as_str());
        }
        self.export(span);
    }
}

/// `run_shell`'s exit code, from the start of its result
/// (`{"exit_code":N,...`), which ybs itself writes and a cut keeps.
fn shell_exit_code(name: &str, output: &str) -> Option<i32> {
    if name != "run_shell" {
        return None;
    }
    let rest = output.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest
        .strip_prefix("\"exit_code\"")?
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let end = rest
        .char_indices()
        .find(|&(index, c)| !(c.is_ascii_digit() || (index == 0 && c == '-')))
        .map_or(rest.len(), |(index, _)| index);
    rest[..end].parse().ok()
}

impl EventSink for OtelSink {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        self.event_inner(record);
        Ok(())
    }

    /// Tasks that never finished are closed now (status unset), then
    /// everything is delivered within the timeout. Never an error.
    fn finish(&mut self) -> io::Result<()> {
        let end = now_ns();
        let unfinished: Vec<(String, TaskTrace)> = self.tasks.drain().collect();
        for (task, trace) in unfinished {
            let mut span = Span {
                trace_id: trace.trace_id,
                span_id: trace.span_id,
                parent: trace.parent,
                name: format!("invoke_agent {task}"),
                kind: SpanKind::Internal,
                start_ns: ms_to_ns(trace.start_ms),
                end_ns: end.max(ms_to_ns(trace.start_ms)),
                attributes: trace.attributes,
                events: Vec::new(),
                status: SpanStatus::Unset,
            };
            span.attr("gen_ai.operation.name", "invoke_agent");
            span.attr("gen_ai.agent.name", task.as_str());
            span.attr("ybs.task.id", task.as_str());
            self.export(span);
        }
        if let Some(exporter) = self.exporter.take() {
            self.warning = exporter.shutdown();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// The prompt cache's reads and writes (OpenTelemetry's GenAI
/// conventions), when there were any.
fn cache_usage(span: &mut Span, usage: &crate::core::Usage) {
    if usage.cache_read_input_tokens > 0 {
        span.attr(
            "gen_ai.usage.cache_read.input_tokens",
            usage.cache_read_input_tokens,
        );
    }
    if usage.cache_creation_input_tokens > 0 {
        span.attr(
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_creation_input_tokens,
        );
    }
}
