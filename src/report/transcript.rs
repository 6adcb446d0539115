//! `OUT/<task>/transcript.json`: the whole run of one task (docs/outputs.md),
//! built from the task's events and written once, atomically, when the
//! task finishes.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::event::{
    CheckCompleted, CheckLocation, Event, EventRecord, EventSink, Git, GitOutcome, LlmResponse,
    LlmRetry, MessageAppended, Note, PendingAnswer, PendingCall, Redactions, SCHEMA_VERSION,
    SandboxInfo, TaskFinished, TaskOutput, TaskPaused, TaskResumed, TaskStarted, ToolCompleted,
    ToolDecided, ToolMetrics, ToolMetricsReported,
};
use crate::core::ids::{parse_rfc3339, rfc3339};
use crate::core::message::Message;
use crate::core::outcome::{Reason, Status};
use crate::core::usage::{Cost, Usage};

use super::outdir::OutDir;

/// The file name of a task's transcript inside `OUT/<task>/`.
pub const TRANSCRIPT_FILE: &str = "transcript.json";
/// `OUT/<task>/output.md`: the model's final answer, as text.
pub const OUTPUT_FILE: &str = "output.md";
/// `OUT/<task>/output.json`: the answer's JSON value, when the task has an
/// output contract and the answer met it.
pub const OUTPUT_JSON_FILE: &str = "output.json";

/// The whole run of one task. Fields are always present; what was not
/// known is `null` (never omitted), so consumers see one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transcript {
    pub schema_version: u32,
    pub manifest: Manifest,
    pub task: TaskInfo,
    /// `null` only when the task's events stop before `task.finished`.
    pub status: Option<Status>,
    pub reason: Option<Reason>,
    pub message: Option<String>,
    pub expect: Option<String>,
    pub timings: Timings,
    pub iterations: u32,
    pub usage: Usage,
    pub cost: Cost,
    pub system_prompt: String,
    pub messages: Vec<Message>,
    pub tool_calls: Vec<ToolCallEntry>,
    pub llm_calls: Vec<LlmCall>,
    pub retries: Vec<Retry>,
    pub checks: Vec<CheckEntry>,
    /// Per external tool: calls, successes, failures, timeouts, durations.
    #[serde(default)]
    pub tool_metrics: Vec<ToolMetrics>,
    /// How many secrets were masked, by kind (`github_token`,
    /// `secret_value`, `secret_value_base64`, …); empty when none.
    #[serde(default)]
    pub redactions: BTreeMap<String, u64>,
    pub notes: Vec<String>,
    pub git: Option<GitOutcome>,
    /// Each time the task paused for the caller (docs/resume.md), and who
    /// answered; empty when it never paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pauses: Vec<Pause>,
    /// The model's final answer (`OUT/<task>/output.md`); absent when it
    /// gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The answer's JSON value when the task has an output contract
    /// (`output.schema`) and the answer met it (`OUT/<task>/output.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_json: Option<Value>,
}

/// One pause of the task and its resumption.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Pause {
    /// RFC 3339, from `task.paused`.
    pub paused_at: String,
    pub pending: Vec<PendingCall>,
    /// RFC 3339, from `task.resumed`; `null` while still paused.
    pub resumed_at: Option<String>,
    /// The results file's digest and/or the approver; `null` while paused.
    pub resumed_by: Option<String>,
    pub answers: Vec<PendingAnswer>,
}

/// What a run used: enough to reproduce or audit it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Manifest {
    pub ybs_version: String,
    pub run_id: String,
    pub provider: String,
    pub model: String,
    pub temperature: Option<f64>,
    pub seed: Option<u64>,
    /// The provider's ids of its responses, in order.
    pub response_ids: Vec<String>,
    pub policy_hash: String,
    pub base_commit: Option<String>,
    pub workdir: String,
    pub dry_run: bool,
    pub tools: Vec<String>,
    /// How shell commands and external tools were confined (docs/security.md S1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// The `AGENTS.md` files read into the system prompt, relative to the
    /// repository root; absent when none was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_files: Vec<String>,
    /// `--shard`: the run's shard and how it was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::core::shard::ShardRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskInfo {
    pub id: String,
    pub file: String,
    pub suite: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Timings {
    /// RFC 3339, from `task.started`.
    pub started_at: Option<String>,
    /// RFC 3339, from `task.finished`.
    pub finished_at: Option<String>,
    /// The runner's measure when the task finished; otherwise the span of
    /// the events seen.
    pub duration_ms: u64,
}

/// One tool call: the policy decision joined with its result by call id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallEntry {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// `null` if no `tool.decided` was seen for the call.
    pub decision: Option<Decision>,
    /// `null` if the call never completed (the task stopped first).
    pub result: Option<ToolResult>,
    pub duration_ms: Option<u64>,
    /// True when the call was recovered from the model's text
    /// (`llm.text_tool_calls`), not a structured call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_text: bool,
    /// The id of the `script` call this call was a tool command of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Decision {
    pub verdict: String,
    pub rule: String,
    pub detail: Option<String>,
    /// The resolved path or parsed argv the decision was made on.
    pub resolved: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    pub ok: bool,
    pub ran: bool,
    pub output: String,
    pub truncated: bool,
}

/// One answered provider request (`llm.response`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LlmCall {
    pub iteration: u32,
    pub response_id: Option<String>,
    /// The provider's id of the HTTP request (`x-request-id`,
    /// `request-id`); absent when it sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub usage: Usage,
    pub cost: Cost,
    pub duration_ms: u64,
    pub tool_calls: usize,
    /// The request's estimated size in tokens, as sent (after any context
    /// compaction); `null` in transcripts of older versions. Compare
    /// `usage.input_tokens`, the server's count.
    #[serde(default)]
    pub request_tokens_estimate: Option<u64>,
    /// How the estimate was made: `o200k` or `bytes/4`, with
    /// `+ server count` when corrected by the server's count of the
    /// previous request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_tokens_method: Option<String>,
    /// Set when the request gave no complete turn: why (a stream the
    /// task's timeout cut, its text kept as the assistant message; or the
    /// request's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Why the model stopped this turn (`stop`, `tool_calls`, `length`
    /// for the output token limit, ...); absent when no turn came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// `usage` is ybs's own estimate (`request_tokens_method`'s count of
    /// the request, and of the answer), not the server's: it reported
    /// zero tokens (`provider: apple`), or the task's time cut the stream
    /// before its usage came. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_estimated: bool,
}

/// One retried provider request (`llm.retry`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Retry {
    pub iteration: u32,
    pub attempt: u32,
    pub delay_ms: u64,
    pub error: String,
}

/// One check run (`check.completed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckEntry {
    pub name: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub expected_exit: i32,
    pub passed: bool,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub output_tail: String,
    pub attempt: u32,
    /// A failing check: where its output points, inside the repository.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<CheckLocation>,
}

impl Transcript {
    /// The events a run-level report (JUnit, summary) needs to show this
    /// task as the run that wrote it did: `task.started`, each
    /// `llm.response`, `check.completed` and `git`, then `task.finished`
    /// (absent when the transcript has no status, as the run left it).
    /// This is how `ybs report merge` reuses the run's report sinks.
    pub fn result_records(&self) -> Vec<EventRecord> {
        let started_ms = self
            .timings
            .started_at
            .as_deref()
            .and_then(parse_rfc3339)
            .unwrap_or(0);
        let record = |ts_ms, event| EventRecord {
            ts_ms,
            task: self.task.id.clone(),
            event,
        };
        let mut records = vec![record(started_ms, self.started_event())];
        let last_ms = started_ms.saturating_add(self.timings.duration_ms);
        records.extend(
            self.llm_calls
                .iter()
                .map(|call| record(started_ms, call.event())),
        );
        records.extend(
            self.checks
                .iter()
                .map(|check| record(started_ms, check.event())),
        );
        if let Some(outcome) = &self.git {
            records.push(record(
                started_ms,
                Event::Git(Git {
                    outcome: outcome.clone(),
                }),
            ));
        }
        if let Some(text) = &self.output {
            records.push(record(
                last_ms,
                Event::TaskOutput(TaskOutput {
                    content: text.clone(),
                    json: self.output_json.clone(),
                }),
            ));
        }
        match self.status {
            Some(status) => records.push(record(
                self.timings
                    .finished_at
                    .as_deref()
                    .and_then(parse_rfc3339)
                    .unwrap_or(last_ms),
                Event::TaskFinished(TaskFinished {
                    status,
                    reason: self.reason.unwrap_or(Reason::InternalError),
                    message: self.message.clone(),
                    expect: self.expect.clone().unwrap_or_else(|| "pass".to_owned()),
                    iterations: self.iterations,
                    usage: self.usage,
                    cost: self.cost,
                    duration_ms: self.timings.duration_ms,
                }),
            )),
            // The run stopped mid-task: its span is all there is.
            None => records.push(record(
                last_ms,
                Event::Note(Note {
                    message: "the transcript ends before task.finished".to_owned(),
                }),
            )),
        }
        records
    }
}

impl Transcript {
    /// The `task.started` this transcript was built from.
    fn started_event(&self) -> Event {
        let manifest = &self.manifest;
        Event::TaskStarted(TaskStarted {
            file: self.task.file.clone(),
            suite: self.task.suite.clone(),
            run_id: manifest.run_id.clone(),
            ybs_version: manifest.ybs_version.clone(),
            provider: manifest.provider.clone(),
            model: manifest.model.clone(),
            temperature: manifest.temperature,
            seed: manifest.seed,
            workdir: manifest.workdir.clone(),
            policy_hash: manifest.policy_hash.clone(),
            base_commit: manifest.base_commit.clone(),
            system_prompt: self.system_prompt.clone(),
            tools: manifest.tools.clone(),
            dry_run: manifest.dry_run,
            sandbox: manifest.sandbox.clone().map(Box::new),
            context_files: manifest.context_files.clone(),
            shard: manifest.shard.clone(),
        })
    }
}

impl LlmCall {
    /// The `llm.response` this call was built from.
    fn event(&self) -> Event {
        Event::LlmResponse(LlmResponse {
            iteration: self.iteration,
            response_id: self.response_id.clone(),
            request_id: self.request_id.clone(),
            usage: self.usage,
            cost: self.cost,
            duration_ms: self.duration_ms,
            tool_calls: self.tool_calls,
            request_tokens_estimate: self.request_tokens_estimate,
            request_tokens_method: self.request_tokens_method.clone(),
            incomplete: self.incomplete.clone(),
            finish_reason: self.finish_reason.clone(),
            usage_estimated: self.usage_estimated,
        })
    }
}

impl CheckEntry {
    /// The `check.completed` this entry was built from.
    fn event(&self) -> Event {
        Event::CheckCompleted(CheckCompleted {
            name: self.name.clone(),
            command: self.command.clone(),
            exit_code: self.exit_code,
            expected_exit: self.expected_exit,
            passed: self.passed,
            timed_out: self.timed_out,
            duration_ms: self.duration_ms,
            output_tail: self.output_tail.clone(),
            attempt: self.attempt,
            locations: self.locations.clone(),
        })
    }
}

/// Builds the transcript of one task from its events.
pub fn build_transcript(records: &[EventRecord]) -> Transcript {
    let mut builder = TranscriptBuilder::default();
    for record in records {
        builder.push(record);
    }
    builder.build()
}

/// Builds a transcript incrementally, one event at a time, without keeping
/// the events themselves.
#[derive(Debug, Clone, Default)]
pub struct TranscriptBuilder {
    task: TaskInfo,
    manifest: Manifest,
    system_prompt: String,
    started_ms: Option<u64>,
    first_ms: Option<u64>,
    last_ms: u64,
    finished: Option<Finished>,
    messages: Vec<Message>,
    tool_calls: Vec<ToolCallEntry>,
    /// The latest entry of each call id (ids may repeat across turns).
    call_index: HashMap<String, usize>,
    llm_calls: Vec<LlmCall>,
    retries: Vec<Retry>,
    checks: Vec<CheckEntry>,
    tool_metrics: Vec<ToolMetrics>,
    redactions: BTreeMap<String, u64>,
    notes: Vec<String>,
    git: Option<GitOutcome>,
    pauses: Vec<Pause>,
    output: Option<(String, Option<Value>)>,
}

#[derive(Debug, Clone)]
struct Finished {
    ts_ms: u64,
    status: Status,
    reason: Reason,
    message: Option<String>,
    expect: String,
    iterations: u32,
    usage: Usage,
    cost: Cost,
    duration_ms: u64,
}

impl TranscriptBuilder {
    /// Whether the latest assistant message's call `call_id` was
    /// recovered from text.
    fn called_from_text(&self, call_id: &str) -> bool {
        self.messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .find(|call| call.id == call_id)
                    .map(|call| call.from_text),
                _ => None,
            })
            .unwrap_or(false)
    }

    pub fn push(&mut self, record: &EventRecord) {
        if self.task.id.is_empty() {
            self.task.id.clone_from(&record.task);
        }
        self.first_ms.get_or_insert(record.ts_ms);
        self.last_ms = self.last_ms.max(record.ts_ms);
        match &record.event {
            Event::TaskStarted(start) => self.started(record, start),
            Event::MessageAppended(MessageAppended { message }) => {
                self.messages.push(message.clone())
            }
            Event::LlmResponse(answer) => self.llm_response(answer),
            Event::LlmRetry(retry) => self.retry(retry),
            Event::ToolDecided(decided) => self.tool_decided(decided),
            Event::ToolCompleted(done) => self.tool_completed(done),
            Event::Note(Note { message }) => self.notes.push(message.clone()),
            Event::ToolMetricsReported(ToolMetricsReported { tools }) => {
                self.tool_metrics.clone_from(tools)
            }
            Event::Redactions(Redactions { counts }) => {
                for (kind, count) in counts {
                    *self.redactions.entry(kind.clone()).or_default() += count;
                }
            }
            Event::CheckCompleted(check) => self.check_completed(check),
            Event::Git(Git { outcome }) => self.git = Some(outcome.clone()),
            Event::TaskOutput(TaskOutput {
                content: text,
                json,
            }) => self.output = Some((text.clone(), json.clone())),
            Event::TaskPaused(TaskPaused { pending }) => self.pauses.push(Pause {
                paused_at: rfc3339(record.ts_ms),
                pending: pending.clone(),
                resumed_at: None,
                resumed_by: None,
                answers: Vec::new(),
            }),
            Event::TaskResumed(TaskResumed {
                resumed_by,
                answers,
                ..
            }) => {
                // The paused half's `task.finished` was not the end.
                self.finished = None;
                if let Some(pause) = self.pauses.last_mut() {
                    pause.resumed_at = Some(rfc3339(record.ts_ms));
                    pause.resumed_by = Some(resumed_by.clone());
                    pause.answers.clone_from(answers);
                }
            }
            Event::TaskFinished(end) => self.finished(record, end),
        }
    }

    /// `task.started`: the task, its manifest and system prompt.
    fn started(&mut self, record: &EventRecord, start: &TaskStarted) {
        self.started_ms = Some(record.ts_ms);
        self.task = TaskInfo {
            id: record.task.clone(),
            file: start.file.clone(),
            suite: start.suite.clone(),
        };
        self.manifest = Manifest {
            ybs_version: start.ybs_version.clone(),
            run_id: start.run_id.clone(),
            provider: start.provider.clone(),
            model: start.model.clone(),
            temperature: start.temperature,
            seed: start.seed,
            response_ids: std::mem::take(&mut self.manifest.response_ids),
            policy_hash: start.policy_hash.clone(),
            base_commit: start.base_commit.clone(),
            workdir: start.workdir.clone(),
            dry_run: start.dry_run,
            tools: start.tools.clone(),
            sandbox: start.sandbox.as_deref().cloned(),
            context_files: start.context_files.clone(),
            shard: start.shard.clone(),
        };
        self.system_prompt.clone_from(&start.system_prompt);
    }

    /// A retry of a model call.
    fn retry(&mut self, retry: &LlmRetry) {
        self.retries.push(Retry {
            iteration: retry.iteration,
            attempt: retry.attempt,
            delay_ms: retry.delay_ms,
            error: retry.error.clone(),
        });
    }

    /// One model call, its response id kept for the manifest.
    fn llm_response(&mut self, answer: &LlmResponse) {
        if let Some(id) = &answer.response_id {
            self.manifest.response_ids.push(id.clone());
        }
        self.llm_calls.push(LlmCall {
            iteration: answer.iteration,
            response_id: answer.response_id.clone(),
            request_id: answer.request_id.clone(),
            usage: answer.usage,
            cost: answer.cost,
            duration_ms: answer.duration_ms,
            tool_calls: answer.tool_calls,
            request_tokens_estimate: answer.request_tokens_estimate,
            request_tokens_method: answer.request_tokens_method.clone(),
            incomplete: answer.incomplete.clone(),
            finish_reason: answer.finish_reason.clone(),
            usage_estimated: answer.usage_estimated,
        });
    }

    /// A call decided: a new entry, or (decided again at `ybs resume`, an
    /// approval) the open entry takes the decision that let it run or not.
    fn tool_decided(&mut self, decided: &ToolDecided) {
        let (call_id, parent) = (decided.call_id.as_str(), decided.parent.clone());
        let decision = Decision {
            verdict: decided.verdict.clone(),
            rule: decided.rule.clone(),
            detail: decided.detail.clone(),
            resolved: decided.resolved.clone(),
        };
        // Decided again at `ybs resume` (an approval): the call's
        // one entry takes the decision that let it run or not.
        let open = self
            .call_index
            .get(call_id)
            .and_then(|&index| self.tool_calls.get_mut(index))
            .filter(|entry| entry.result.is_none() && entry.parent == parent);
        if let Some(entry) = open {
            entry.decision = Some(decision);
            return;
        }
        self.call_index
            .insert(call_id.to_owned(), self.tool_calls.len());
        let from_text = self.called_from_text(call_id);
        self.tool_calls.push(ToolCallEntry {
            from_text,
            id: call_id.to_owned(),
            name: decided.name.clone(),
            arguments: decided.arguments.clone(),
            decision: Some(decision),
            result: None,
            duration_ms: None,
            parent,
        });
    }

    /// A call completed: its entry gets the result (one made when the
    /// decision was not seen).
    fn tool_completed(&mut self, done: &ToolCompleted) {
        let result = ToolResult {
            ok: done.ok,
            ran: done.ran,
            output: done.output.clone(),
            truncated: done.truncated,
        };
        let open = self
            .call_index
            .get(&done.call_id)
            .and_then(|&index| self.tool_calls.get_mut(index))
            .filter(|entry| entry.result.is_none());
        if let Some(entry) = open {
            entry.result = Some(result);
            entry.duration_ms = Some(done.duration_ms);
        } else {
            self.call_index
                .insert(done.call_id.clone(), self.tool_calls.len());
            self.tool_calls.push(ToolCallEntry {
                from_text: self.called_from_text(&done.call_id),
                id: done.call_id.clone(),
                name: done.name.clone(),
                arguments: Value::Null,
                decision: None,
                result: Some(result),
                duration_ms: Some(done.duration_ms),
                parent: None,
            });
        }
    }

    /// One check run.
    fn check_completed(&mut self, check: &CheckCompleted) {
        self.checks.push(CheckEntry {
            name: check.name.clone(),
            command: check.command.clone(),
            exit_code: check.exit_code,
            expected_exit: check.expected_exit,
            passed: check.passed,
            timed_out: check.timed_out,
            duration_ms: check.duration_ms,
            output_tail: check.output_tail.clone(),
            attempt: check.attempt,
            locations: check.locations.clone(),
        });
    }

    /// `task.finished`, with the totals.
    fn finished(&mut self, record: &EventRecord, end: &TaskFinished) {
        self.finished = Some(Finished {
            ts_ms: record.ts_ms,
            status: end.status,
            reason: end.reason,
            message: end.message.clone(),
            expect: end.expect.clone(),
            iterations: end.iterations,
            usage: end.usage,
            cost: end.cost,
            duration_ms: end.duration_ms,
        });
    }

    /// True if and only if `task.finished` was seen.
    pub fn is_finished(&self) -> bool {
        self.finished.is_some()
    }

    /// The transcript so far. Without `task.finished`, the totals are
    /// summed from the `llm.response` events.
    pub fn build(&self) -> Transcript {
        let started_ms = self.started_ms.or(self.first_ms);
        let (iterations, usage, cost) = match &self.finished {
            Some(finished) => (finished.iterations, finished.usage, finished.cost),
            None => self.llm_totals(),
        };
        let duration_ms = self.finished.as_ref().map_or_else(
            || {
                self.last_ms
                    .saturating_sub(started_ms.unwrap_or(self.last_ms))
            },
            |finished| finished.duration_ms,
        );
        Transcript {
            schema_version: SCHEMA_VERSION,
            manifest: self.manifest.clone(),
            task: self.task.clone(),
            status: self.finished.as_ref().map(|finished| finished.status),
            reason: self.finished.as_ref().map(|finished| finished.reason),
            message: self
                .finished
                .as_ref()
                .and_then(|finished| finished.message.clone()),
            expect: self
                .finished
                .as_ref()
                .map(|finished| finished.expect.clone()),
            timings: Timings {
                started_at: self.started_ms.map(rfc3339),
                finished_at: self
                    .finished
                    .as_ref()
                    .map(|finished| rfc3339(finished.ts_ms)),
                duration_ms,
            },
            iterations,
            usage,
            cost,
            system_prompt: self.system_prompt.clone(),
            messages: self.messages.clone(),
            tool_calls: self.tool_calls.clone(),
            llm_calls: self.llm_calls.clone(),
            retries: self.retries.clone(),
            checks: self.checks.clone(),
            tool_metrics: self.tool_metrics.clone(),
            redactions: self.redactions.clone(),
            notes: self.notes.clone(),
            git: self.git.clone(),
            pauses: self.pauses.clone(),
            output: self.output.as_ref().map(|(text, _)| text.clone()),
            output_json: self.output.as_ref().and_then(|(_, json)| json.clone()),
        }
    }

    fn llm_totals(&self) -> (u32, Usage, Cost) {
        let mut usage = Usage::default();
        // No response yet means nothing was spent.
        let mut cost = Cost::Usd(0.0);
        let mut iterations = 0;
        for call in &self.llm_calls {
            usage.add(call.usage);
            cost = cost.plus(call.cost);
            iterations = iterations.max(call.iteration);
        }
        (iterations, usage, cost)
    }
}

/// Writes `OUT/<task>/transcript.json` when each task finishes; at
/// `finish()`, also for tasks whose events stopped early (status `null`).
#[derive(Debug)]
pub struct TranscriptSink {
    out: Arc<OutDir>,
    tasks: HashMap<String, TranscriptBuilder>,
}

impl TranscriptSink {
    /// Writes through the held output directory, recording each
    /// transcript's digest in `OUT/digests.json`.
    pub fn new(out: Arc<OutDir>) -> Self {
        Self {
            out,
            tasks: HashMap::new(),
        }
    }

    fn write(&self, task: &str, builder: &TranscriptBuilder) -> io::Result<()> {
        let mut json = serde_json::to_vec_pretty(&builder.build()).map_err(io::Error::other)?;
        json.push(b'\n');
        self.out.write_transcript(task, TRANSCRIPT_FILE, &json)
    }

    /// `OUT/<task>/output.md` (and `output.json`) from the task's
    /// `task.output`, masked like every record the sink is fed.
    fn write_output(&self, task: &str, text: &str, json: Option<&Value>) -> io::Result<()> {
        let mut markdown = text.trim_end().to_owned();
        markdown.push('\n');
        self.out
            .write_atomic(Some(task), OUTPUT_FILE, markdown.as_bytes())?;
        if let Some(value) = json {
            let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
            bytes.push(b'\n');
            self.out
                .write_atomic(Some(task), OUTPUT_JSON_FILE, &bytes)?;
        }
        Ok(())
    }
}

impl EventSink for TranscriptSink {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        if matches!(record.event, Event::TaskStarted(_)) {
            self.tasks.remove(&record.task);
            // An answer an earlier run left here is not this run's.
            self.out.remove(&record.task, OUTPUT_FILE)?;
            self.out.remove(&record.task, OUTPUT_JSON_FILE)?;
            // Nor a commit of an earlier run.
            self.out
                .remove(&record.task, super::sinks::COMMIT_PATCH_FILE)?;
        }
        if let Event::TaskOutput(TaskOutput {
            content: text,
            json,
        }) = &record.event
        {
            self.write_output(&record.task, text, json.as_ref())?;
        }
        let builder = self.tasks.entry(record.task.clone()).or_default();
        builder.push(record);
        if !builder.is_finished() {
            return Ok(());
        }
        // A paused task may go on (`ybs resume` primes the sink with its
        // first half): its builder stays until the run ends.
        if matches!(
            record.event,
            Event::TaskFinished(TaskFinished {
                status: Status::Paused,
                ..
            })
        ) {
            let builder = builder.clone();
            return self.write(&record.task, &builder);
        }
        match self.tasks.remove(&record.task) {
            Some(builder) => self.write(&record.task, &builder),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        let mut first_error = None;
        // Paused tasks were written at their `task.finished`.
        self.tasks.retain(|_, builder| !builder.is_finished());
        let mut unfinished: Vec<_> = self.tasks.drain().collect();
        unfinished.sort_by(|a, b| a.0.cmp(&b.0));
        for (task, builder) in &unfinished {
            if let Err(err) = self.write(task, builder) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::report::testdata::{self, records_two_files};

    fn of(task: &str) -> Vec<EventRecord> {
        records_two_files()
            .into_iter()
            .filter(|record| record.task == task)
            .collect()
    }

    #[test]
    fn joins_decisions_and_results_and_keeps_everything() {
        let transcript = build_transcript(&of("alpha"));
        assert_eq!(transcript.schema_version, SCHEMA_VERSION);
        assert_eq!(transcript.task.id, "alpha");
        assert_eq!(transcript.task.file, "tasks/a.yaml");
        assert_eq!(transcript.status, Some(Status::Passed));
        assert_eq!(
            transcript.manifest.response_ids,
            ["resp-alpha-1", "resp-alpha-2"]
        );
        assert_eq!(transcript.messages.len(), 3);
        assert_eq!(transcript.llm_calls.len(), 2);
        assert_eq!(transcript.tool_calls.len(), 1);
        let call = &transcript.tool_calls[0];
        assert_eq!(call.arguments, json!({"path": "src/lib.rs"}));
        assert_eq!(call.decision.as_ref().unwrap().rule, "allow: read_file");
        assert!(call.result.as_ref().unwrap().ok);
        assert_eq!(call.duration_ms, Some(2));
        assert_eq!(
            transcript.timings.started_at.as_deref(),
            Some("1970-01-01T00:00:01.000Z")
        );
        assert_eq!(transcript.timings.duration_ms, 61_500);
        assert_eq!(transcript.git.as_ref().unwrap().note, "committed 1 file");
    }

    #[test]
    fn serializes_every_field_with_unknown_cost_and_nulls() {
        let value = serde_json::to_value(build_transcript(&of("beta"))).unwrap();
        for key in [
            "schema_version",
            "manifest",
            "task",
            "status",
            "reason",
            "message",
            "expect",
            "timings",
            "iterations",
            "usage",
            "cost",
            "system_prompt",
            "messages",
            "tool_calls",
            "llm_calls",
            "retries",
            "checks",
            "notes",
            "git",
        ] {
            assert!(value.get(key).is_some(), "missing {key}");
        }
        assert_eq!(value["cost"], "unknown");
        assert_eq!(value["status"], "failed");
        assert_eq!(value["reason"], "checks_failed");
        assert_eq!(value["retries"][0]["error"], "HTTP 529 overloaded");
        assert_eq!(value["checks"][0]["exit_code"], 1);
        assert_eq!(value["notes"][0], "fix attempt 1 of 1");
        assert_eq!(value["manifest"]["temperature"], 0.0);
        assert_eq!(value["git"]["note"], "changes left uncommitted in /repo");
        let gamma = serde_json::to_value(build_transcript(&of("gamma"))).unwrap();
        assert_eq!(gamma["git"], json!(null));
        assert_eq!(gamma["tool_calls"], json!([]));
        // And it reads back.
        let back: Transcript = serde_json::from_value(value).unwrap();
        assert_eq!(back.cost, Cost::Unknown);
    }

    #[test]
    fn repeated_call_ids_and_orphan_results_get_their_own_entries() {
        let decided = |ts| {
            testdata::record(
                "t",
                ts,
                Event::ToolDecided(ToolDecided {
                    call_id: "call_0".to_owned(),
                    name: "run_shell".to_owned(),
                    arguments: json!({"command": "ls"}),
                    verdict: "deny".to_owned(),
                    rule: "default".to_owned(),
                    detail: Some("not allowed".to_owned()),
                    resolved: None,
                    parent: None,
                }),
            )
        };
        let completed = |ts, id: &str| {
            testdata::record(
                "t",
                ts,
                Event::ToolCompleted(ToolCompleted {
                    call_id: id.to_owned(),
                    name: "run_shell".to_owned(),
                    ok: false,
                    ran: false,
                    duration_ms: 0,
                    truncated: false,
                    output: "denied".to_owned(),
                }),
            )
        };
        let transcript = build_transcript(&[
            testdata::started("t", "t.yaml", 10),
            decided(11),
            completed(12, "call_0"),
            decided(13),
            completed(14, "call_0"),
            completed(15, "stray"),
            decided(16),
        ]);
        let calls = &transcript.tool_calls;
        assert_eq!(calls.len(), 4);
        assert!(calls[0].result.is_some() && calls[1].result.is_some());
        assert!(calls[2].decision.is_none() && calls[2].id == "stray");
        assert!(calls[3].result.is_none());
        // No task.finished: status null, span of events as duration.
        assert_eq!(transcript.status, None);
        assert_eq!(transcript.timings.duration_ms, 6);
    }

    #[test]
    fn sink_writes_each_transcript_at_task_finished() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = TranscriptSink::new(OutDir::open(dir.path(), dir.path()).unwrap());
        let records = records_two_files();
        let alpha_done = records
            .iter()
            .position(|r| r.task == "alpha" && matches!(r.event, Event::TaskFinished(_)))
            .unwrap();
        for record in &records[..alpha_done] {
            sink.event(record).unwrap();
        }
        assert!(!dir.path().join("alpha").join(TRANSCRIPT_FILE).exists());
        for record in &records[alpha_done..] {
            sink.event(record).unwrap();
        }
        sink.finish().unwrap();
        for task in ["alpha", "beta", "gamma"] {
            let text =
                std::fs::read_to_string(dir.path().join(task).join(TRANSCRIPT_FILE)).unwrap();
            let written: Transcript = serde_json::from_str(&text).unwrap();
            assert_eq!(written, build_transcript(&of(task)), "{task}");
        }
    }

    #[test]
    fn result_records_report_the_task_as_its_run_did() {
        use crate::report::results::ResultCollector;
        let collect = |records: &[EventRecord]| {
            let mut collector = ResultCollector::new();
            for record in records {
                collector.push(record);
            }
            collector.results()
        };
        for task in ["alpha", "beta", "gamma"] {
            let original = of(task);
            let transcript = build_transcript(&original);
            let back: Transcript =
                serde_json::from_value(serde_json::to_value(&transcript).unwrap()).unwrap();
            assert_eq!(
                collect(&back.result_records()),
                collect(&original),
                "{task}"
            );
        }
        // Unfinished: an internal error spanning the events seen.
        let unfinished = build_transcript(&[
            testdata::started("late", "l.yaml", 5_000),
            testdata::check("late", 7_000, "b", 1, "x"),
        ]);
        let results = collect(&unfinished.result_records());
        assert_eq!(results[0].status, Status::Error);
        assert_eq!(results[0].reason, Reason::InternalError);
        assert_eq!(results[0].duration_ms, 2_000);
    }

    #[test]
    fn sink_writes_unfinished_tasks_at_finish() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = TranscriptSink::new(OutDir::open(dir.path(), dir.path()).unwrap());
        sink.event(&testdata::started("late", "l.yaml", 5)).unwrap();
        sink.finish().unwrap();
        let text = std::fs::read_to_string(dir.path().join("late").join(TRANSCRIPT_FILE)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["status"], json!(null));
        assert_eq!(value["cost"], json!(0.0));
    }
}
