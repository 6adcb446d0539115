//! The event stream: one `Event` type feeds every output (transcript,
//! `events.jsonl`, JUnit, summary, the human view, `--json` stdout).
//!
//! This is a wire format, published by `ybs schema events`. Changes are
//! additive only: new variants and new optional fields.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::message::Message;
use super::outcome::{Reason, Status};
use super::usage::{Cost, Usage};

/// The version of the `events.jsonl` and transcript formats.
pub const SCHEMA_VERSION: u32 = 1;

/// One line of `events.jsonl`: when, which task, and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventRecord {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u64,
    pub task: String,
    #[serde(flatten)]
    pub event: Event,
}

/// How a `task.note` that the console shows without `--verbose` begins:
/// a hint about the configuration the user should see.
pub const HINT: &str = "hint: ";

/// How a `task.note` begins that the console shows without `--verbose`
/// and the summary lists: something the task declared that it goes on
/// without (a tool or MCP server that could not start).
pub const WARNING: &str = "warning: ";

/// Everything that can happen during a task, in order. Each kind of
/// event is a struct of the same name, so code that handles one kind
/// takes that struct; on the wire the struct's fields follow `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum Event {
    /// The task began. Carries the manifest of the run.
    #[serde(rename = "task.started")]
    TaskStarted(TaskStarted),
    /// A message was appended to the conversation.
    #[serde(rename = "message")]
    MessageAppended(MessageAppended),
    /// The provider answered one request.
    #[serde(rename = "llm.response")]
    LlmResponse(LlmResponse),
    /// A request failed and will be retried.
    #[serde(rename = "llm.retry")]
    LlmRetry(LlmRetry),
    /// Policy decided a tool call, before it ran.
    #[serde(rename = "tool.decided")]
    ToolDecided(ToolDecided),
    /// A tool call finished (or was refused and never ran: `ran = false`).
    #[serde(rename = "tool.completed")]
    ToolCompleted(ToolCompleted),
    /// A note from ybs to the log (wrap-up warning, fix attempt, ...).
    #[serde(rename = "task.note")]
    Note(Note),
    /// Call metrics of the external tools the task called, once, before
    /// `task.finished`.
    #[serde(rename = "tool.metrics")]
    ToolMetricsReported(ToolMetricsReported),
    /// One check ran.
    #[serde(rename = "check.completed")]
    CheckCompleted(CheckCompleted),
    /// How many secrets were masked in the task's outputs and tool
    /// results, by kind (`github_token`, `secret_value`, …). Once, before
    /// `task.finished`, when anything was masked.
    #[serde(rename = "task.redactions")]
    Redactions(Redactions),
    /// What happened in git after the task.
    #[serde(rename = "git")]
    Git(Git),
    /// The task paused: these calls wait for the caller (results of
    /// caller tools, approvals under `on_ask: pause`); `task.finished`
    /// with status `paused` follows. See docs/resume.md.
    #[serde(rename = "task.paused")]
    TaskPaused(TaskPaused),
    /// `ybs resume` continued the task: who answered, and how each
    /// pending call was answered. The task's events go on from here.
    #[serde(rename = "task.resumed")]
    TaskResumed(TaskResumed),
    /// The model's final answer (its last message without a tool call),
    /// just before `task.finished`: `OUT/<task>/output.md`, and with an
    /// output contract (`output.schema`) the valid JSON value
    /// (`OUT/<task>/output.json`). See docs/outputs.md.
    #[serde(rename = "task.output")]
    TaskOutput(TaskOutput),
    /// The task ended. Always the last event of a task.
    #[serde(rename = "task.finished")]
    TaskFinished(TaskFinished),
}

/// `task.started`: the manifest of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskStarted {
    pub file: String,
    pub suite: String,
    pub run_id: String,
    pub ybs_version: String,
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub workdir: String,
    pub policy_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    pub system_prompt: String,
    pub tools: Vec<String>,
    pub dry_run: bool,
    /// How the task's shell commands and external tools are confined
    /// (docs/security.md S1). Absent in transcripts of older versions.
    // Boxed: the largest part of the largest event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Box<SandboxInfo>>,
    /// The `AGENTS.md` files read into the system prompt, relative to
    /// the repository root (docs/task-files.md, `context`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_files: Vec<String>,
    /// `--shard`: which shard of the run's tasks this run took, and
    /// how it was found (docs/ci.md, "Sharding").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::core::shard::ShardRecord>,
}

/// `message`: a message appended to the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageAppended {
    pub message: Message,
}

/// `llm.response`: the provider answered one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LlmResponse {
    pub iteration: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The provider's id of the HTTP request (`x-request-id`,
    /// `request-id`), what vendor support asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub usage: Usage,
    pub cost: Cost,
    pub duration_ms: u64,
    pub tool_calls: usize,
    /// The request's estimated size in tokens, as sent (after any
    /// compaction), system prompt and tool schemas included, as
    /// `request_tokens_method` says. Absent in events of older
    /// versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_tokens_estimate: Option<u64>,
    /// How the estimate was made: `o200k` (the tokenizer) or
    /// `bytes/4`, `+ server count` when corrected by the server's
    /// count of the previous request (docs/local-models.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_tokens_method: Option<String>,
    /// Set when the request gave no complete turn: why (the task's
    /// time ran out while the turn streamed, its text so far kept as
    /// the assistant message; or the request's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Why the model stopped this turn: `stop`, `tool_calls`, `length`
    /// (the output token limit), `refusal`, `content_filter`, `paused`,
    /// `interrupted` or `other`. Absent when no turn came back, and in
    /// events of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// `usage` is ybs's own estimate, not the server's count: the
    /// server reported zero tokens (`provider: apple`), or the task's
    /// time cut the stream before its usage came. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_estimated: bool,
}

/// `llm.retry`: a request failed and will be retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LlmRetry {
    pub iteration: u32,
    pub attempt: u32,
    pub delay_ms: u64,
    pub error: String,
}

/// `tool.decided`: policy decided a tool call, before it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDecided {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    pub verdict: String,
    pub rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<Value>,
    /// The `script` call this call was made from, when it is a tool
    /// command inside a script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// `tool.completed`: a tool call finished (or was refused and never ran:
/// `ran = false`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCompleted {
    pub call_id: String,
    pub name: String,
    pub ok: bool,
    pub ran: bool,
    pub duration_ms: u64,
    pub truncated: bool,
    pub output: String,
}

/// `task.note`: a note from ybs to the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Note {
    pub message: String,
}

/// `tool.metrics`: call metrics of the external tools the task called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolMetricsReported {
    pub tools: Vec<ToolMetrics>,
}

/// `check.completed`: one check ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckCompleted {
    pub name: String,
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub expected_exit: i32,
    pub passed: bool,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub output_tail: String,
    pub attempt: u32,
    /// A failing check: where its output points, inside the
    /// repository (docs/ci.md#annotations-on-the-failing-line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<CheckLocation>,
}

/// `task.redactions`: how many secrets were masked, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Redactions {
    pub counts: BTreeMap<String, u64>,
}

/// `git`: what happened in git after the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Git {
    pub outcome: GitOutcome,
}

/// `task.paused`: the calls that wait for the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskPaused {
    pub pending: Vec<PendingCall>,
}

/// `task.resumed`: `ybs resume` continued the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskResumed {
    /// `results:sha256:<hex>` of the results file, and/or the approver
    /// (`--by`, else `$GITHUB_ACTOR`, else `cli`).
    pub resumed_by: String,
    pub answers: Vec<PendingAnswer>,
    /// The provider and model this half runs with (the resume's
    /// config and flags may name others than the paused half's
    /// `task.started`). Absent in events of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `task.output`: the model's final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskOutput {
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
}

/// `task.finished`: the task ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskFinished {
    pub status: Status,
    pub reason: Reason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub expect: String,
    pub iterations: u32,
    pub usage: Usage,
    pub cost: Cost,
    pub duration_ms: u64,
}

/// A place a failing check's output points to: `file:line[:col]` as a
/// compiler, linter or test runner printed it, the file relative to the
/// repository's root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckLocation {
    /// Relative to the repository's root, `/`-separated.
    pub file: String,
    pub line: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The tool's message for it (masked like all check output).
    pub message: String,
}

/// A call the paused task waits on (`state.json` `pending`, `task.paused`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingCall {
    /// The model's call id: what a result or decision names.
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// `caller`: a caller tool, answered with an output or an error;
    /// `approval`: an `ask` under `on_ask: pause`, approved or denied.
    pub kind: PendingKind,
    /// The policy rule that allowed (caller) or asked about (approval) it.
    pub rule: String,
}

/// What a pending call waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    Caller,
    Approval,
}

impl PendingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Caller => "caller",
            Self::Approval => "approval",
        }
    }
}

/// How `ybs resume` answered one pending call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingAnswer {
    pub id: String,
    /// `output`, `error`, `approved` or `denied`.
    pub answer: String,
}

/// The kernel confinement of a task's children, as the manifest records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxInfo {
    /// `landlock+seccomp`, or `none` when children run unconfined.
    pub mode: String,
    /// The Landlock status: `fully_enforced` or `partially_enforced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<String>,
    /// True if children may open network sockets.
    pub network: bool,
    /// Where children may write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// Why children run unconfined (`--no-sandbox`, kernel support).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The layers in force: `namespaces`, `landlock`, `seccomp`, and
    /// `exec-guard` when `run_shell` runs under the exec guard.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
    /// Layers the kernel lacks that the operator did not require,
    /// `layer: reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The bound on the task's processes in force (`safety.max_processes`):
    /// `pids cgroup v1: 1024`, `RLIMIT_NPROC: 1024`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<String>,
    /// Bounds the operator set that ybs could not apply, with why:
    /// `max_processes: …`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_bounds: Vec<String>,
}

impl SandboxInfo {
    /// True if children run confined.
    pub fn confined(&self) -> bool {
        self.mode != "none"
    }

    /// True if children run confined by every layer.
    pub fn complete(&self) -> bool {
        self.confined() && self.missing.is_empty() && self.missing_bounds.is_empty()
    }

    /// One line for humans: `landlock+seccomp (no network)` or
    /// `none (--no-sandbox): UNCONFINED`.
    pub fn describe(&self) -> String {
        if self.confined() {
            let missing = if self.missing.is_empty() {
                String::new()
            } else {
                format!("; missing layer: {}", self.missing.join("; "))
            };
            let missing = if self.missing_bounds.is_empty() {
                missing
            } else {
                format!(
                    "{missing}; missing bound: {}",
                    self.missing_bounds.join("; ")
                )
            };
            format!(
                "{}{}{missing}",
                self.mode,
                if self.network {
                    " (network allowed)"
                } else {
                    " (no network)"
                }
            )
        } else {
            format!(
                "none: shell commands and external tools run UNCONFINED ({})",
                self.reason.as_deref().unwrap_or("no reason given")
            )
        }
    }
}

/// Calls of one external tool: counts and durations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolMetrics {
    pub name: String,
    /// Processes started.
    pub calls: u64,
    pub successes: u64,
    /// Failed calls, timeouts included.
    pub failures: u64,
    pub timeouts: u64,
    pub total_ms: u64,
    pub p50_ms: u64,
    pub p95_ms: u64,
}

/// The git result of a task, as reports show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GitOutcome {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salvage_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Human-readable account: "committed 2 files", "no repository", ...
    pub note: String,
}

/// A consumer of events. Sinks never fail the task: an I/O error is
/// returned so the caller can report it once.
pub trait EventSink: Send {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()>;
    /// One whole line of the model's text as it streams in, before its
    /// `message` event: for a live view only, not an event (no file
    /// records it). Ignored by default.
    fn text(&mut self, _task: &str, _line: &str) {}
    /// Called once after the last event of the run (or task).
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `record` serialized is `line`, byte for byte, and reads back as
    /// `record`.
    fn keeps_its_bytes(record: &EventRecord, line: &str) {
        assert_eq!(serde_json::to_string(record).unwrap(), line);
        let back: EventRecord = serde_json::from_str(line).unwrap();
        assert_eq!(&back, record);
    }

    fn record(event: Event) -> EventRecord {
        EventRecord {
            ts_ms: 7,
            task: "t".to_owned(),
            event,
        }
    }

    /// The kinds the golden run (tests/suite/golden.rs) does not make:
    /// the struct's fields follow `type`, in the order of the Rust fields,
    /// optional ones left out when empty.
    #[test]
    fn each_kind_keeps_its_fields_after_its_type() {
        keeps_its_bytes(
            &record(Event::Note(Note {
                message: "hint: x".to_owned(),
            })),
            r#"{"ts_ms":7,"task":"t","type":"task.note","message":"hint: x"}"#,
        );
        keeps_its_bytes(
            &record(Event::ToolMetricsReported(ToolMetricsReported {
                tools: vec![ToolMetrics {
                    name: "lint".to_owned(),
                    calls: 2,
                    successes: 1,
                    failures: 1,
                    timeouts: 0,
                    total_ms: 30,
                    p50_ms: 10,
                    p95_ms: 20,
                }],
            })),
            r#"{"ts_ms":7,"task":"t","type":"tool.metrics","tools":[{"name":"lint","calls":2,"successes":1,"failures":1,"timeouts":0,"total_ms":30,"p50_ms":10,"p95_ms":20}]}"#,
        );
        keeps_its_bytes(
            &record(Event::TaskPaused(TaskPaused {
                pending: vec![PendingCall {
                    id: "c1".to_owned(),
                    name: "deploy".to_owned(),
                    arguments: json!({"env": "prod"}),
                    kind: PendingKind::Approval,
                    rule: "ask deploy".to_owned(),
                }],
            })),
            r#"{"ts_ms":7,"task":"t","type":"task.paused","pending":[{"id":"c1","name":"deploy","arguments":{"env":"prod"},"kind":"approval","rule":"ask deploy"}]}"#,
        );
        keeps_its_bytes(
            &record(Event::TaskResumed(TaskResumed {
                resumed_by: "cli".to_owned(),
                answers: vec![PendingAnswer {
                    id: "c1".to_owned(),
                    answer: "approved".to_owned(),
                }],
                provider: None,
                model: Some("m".to_owned()),
            })),
            r#"{"ts_ms":7,"task":"t","type":"task.resumed","resumed_by":"cli","answers":[{"id":"c1","answer":"approved"}],"model":"m"}"#,
        );
        keeps_its_bytes(
            &record(Event::CheckCompleted(CheckCompleted {
                name: "test".to_owned(),
                command: "cargo test".to_owned(),
                exit_code: None,
                expected_exit: 0,
                passed: false,
                timed_out: true,
                duration_ms: 5,
                output_tail: String::new(),
                attempt: 1,
                locations: vec![CheckLocation {
                    file: "src/a.rs".to_owned(),
                    line: 3,
                    column: None,
                    message: "boom".to_owned(),
                }],
            })),
            r#"{"ts_ms":7,"task":"t","type":"check.completed","name":"test","command":"cargo test","expected_exit":0,"passed":false,"timed_out":true,"duration_ms":5,"output_tail":"","attempt":1,"locations":[{"file":"src/a.rs","line":3,"message":"boom"}]}"#,
        );
        keeps_its_bytes(
            &record(Event::TaskStarted(TaskStarted {
                file: "t.yaml".to_owned(),
                suite: "t".to_owned(),
                run_id: "r".to_owned(),
                ybs_version: "0".to_owned(),
                provider: "openai".to_owned(),
                model: "m".to_owned(),
                temperature: Some(0.5),
                seed: Some(3),
                workdir: "/w".to_owned(),
                policy_hash: "h".to_owned(),
                base_commit: None,
                system_prompt: "s".to_owned(),
                tools: vec!["read_file".to_owned()],
                dry_run: true,
                sandbox: None,
                context_files: vec!["AGENTS.md".to_owned()],
                shard: Some(crate::core::shard::ShardRecord {
                    shard: "1/2".to_owned(),
                    engine: None,
                    variables: BTreeMap::new(),
                    durations: None,
                }),
            })),
            r#"{"ts_ms":7,"task":"t","type":"task.started","file":"t.yaml","suite":"t","run_id":"r","ybs_version":"0","provider":"openai","model":"m","temperature":0.5,"seed":3,"workdir":"/w","policy_hash":"h","system_prompt":"s","tools":["read_file"],"dry_run":true,"context_files":["AGENTS.md"],"shard":{"shard":"1/2"}}"#,
        );
    }

    /// A line of an unknown type, or of a known type without a field its
    /// struct requires, is an error, not a default.
    #[test]
    fn a_line_missing_a_required_field_is_refused() {
        for line in [
            r#"{"ts_ms":7,"task":"t","type":"task.note"}"#,
            r#"{"ts_ms":7,"task":"t","type":"tool.completed","call_id":"c","name":"n","ok":true,"ran":true,"duration_ms":1,"truncated":false}"#,
            r#"{"ts_ms":7,"task":"t","type":"no.such.event"}"#,
        ] {
            assert!(serde_json::from_str::<EventRecord>(line).is_err(), "{line}");
        }
    }
}
