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

mod views;
pub use views::{CheckDone, LlmAnswer, LlmRetried, TaskEnd, TaskStart, ToolDecision, ToolDone};

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

/// Everything that can happen during a task, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum Event {
    /// The task began. Carries the manifest of the run.
    #[serde(rename = "task.started")]
    TaskStarted {
        file: String,
        suite: String,
        run_id: String,
        ybs_version: String,
        provider: String,
        model: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seed: Option<u64>,
        workdir: String,
        policy_hash: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_commit: Option<String>,
        system_prompt: String,
        tools: Vec<String>,
        dry_run: bool,
        /// How the task's shell commands and external tools are confined
        /// (docs/security.md S1). Absent in transcripts of older versions.
        // Boxed: the largest part of the largest event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<Box<SandboxInfo>>,
        /// The `AGENTS.md` files read into the system prompt, relative to
        /// the repository root (docs/task-files.md, `context`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        context_files: Vec<String>,
        /// `--shard`: which shard of the run's tasks this run took, and
        /// how it was found (docs/ci.md, "Sharding").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shard: Option<crate::core::shard::ShardRecord>,
    },
    /// A message was appended to the conversation.
    #[serde(rename = "message")]
    Message { message: Message },
    /// The provider answered one request.
    #[serde(rename = "llm.response")]
    LlmResponse {
        iteration: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
        /// The provider's id of the HTTP request (`x-request-id`,
        /// `request-id`), what vendor support asks for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        usage: Usage,
        cost: Cost,
        duration_ms: u64,
        tool_calls: usize,
        /// The request's estimated size in tokens, as sent (after any
        /// compaction), system prompt and tool schemas included, as
        /// `request_tokens_method` says. Absent in events of older
        /// versions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_tokens_estimate: Option<u64>,
        /// How the estimate was made: `o200k` (the tokenizer) or
        /// `bytes/4`, `+ server count` when corrected by the server's
        /// count of the previous request (docs/local-models.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_tokens_method: Option<String>,
        /// Set when the request gave no complete turn: why (the task's
        /// time ran out while the turn streamed, its text so far kept as
        /// the assistant message; or the request's error).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incomplete: Option<String>,
        /// Why the model stopped this turn: `stop`, `tool_calls`, `length`
        /// (the output token limit), `refusal`, `content_filter`, `paused`,
        /// `interrupted` or `other`. Absent when no turn came back, and in
        /// events of older versions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<String>,
        /// `usage` is ybs's own estimate, not the server's count: the
        /// server reported zero tokens (`provider: apple`), or the task's
        /// time cut the stream before its usage came. Absent when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        usage_estimated: bool,
    },
    /// A request failed and will be retried.
    #[serde(rename = "llm.retry")]
    LlmRetry {
        iteration: u32,
        attempt: u32,
        delay_ms: u64,
        error: String,
    },
    /// Policy decided a tool call, before it ran.
    #[serde(rename = "tool.decided")]
    ToolDecided {
        call_id: String,
        name: String,
        arguments: Value,
        verdict: String,
        rule: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolved: Option<Value>,
        /// The `script` call this call was made from, when it is a tool
        /// command inside a script.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
    },
    /// A tool call finished (or was refused and never ran: `ran = false`).
    #[serde(rename = "tool.completed")]
    ToolCompleted {
        call_id: String,
        name: String,
        ok: bool,
        ran: bool,
        duration_ms: u64,
        truncated: bool,
        output: String,
    },
    /// A note from ybs to the log (wrap-up warning, fix attempt, ...).
    #[serde(rename = "task.note")]
    Note { message: String },
    /// Call metrics of the external tools the task called, once, before
    /// `task.finished`.
    #[serde(rename = "tool.metrics")]
    ToolMetrics { tools: Vec<ToolMetrics> },
    /// One check ran.
    #[serde(rename = "check.completed")]
    CheckCompleted {
        name: String,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        expected_exit: i32,
        passed: bool,
        timed_out: bool,
        duration_ms: u64,
        output_tail: String,
        attempt: u32,
        /// A failing check: where its output points, inside the
        /// repository (docs/ci.md#annotations-on-the-failing-line).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<CheckLocation>,
    },
    /// How many secrets were masked in the task's outputs and tool
    /// results, by kind (`github_token`, `secret_value`, …). Once, before
    /// `task.finished`, when anything was masked.
    #[serde(rename = "task.redactions")]
    Redactions { counts: BTreeMap<String, u64> },
    /// What happened in git after the task.
    #[serde(rename = "git")]
    Git { outcome: GitOutcome },
    /// The task paused: these calls wait for the caller (results of
    /// caller tools, approvals under `on_ask: pause`); `task.finished`
    /// with status `paused` follows. See docs/resume.md.
    #[serde(rename = "task.paused")]
    TaskPaused { pending: Vec<PendingCall> },
    /// `ybs resume` continued the task: who answered, and how each
    /// pending call was answered. The task's events go on from here.
    #[serde(rename = "task.resumed")]
    TaskResumed {
        /// `results:sha256:<hex>` of the results file, and/or the approver
        /// (`--by`, else `$GITHUB_ACTOR`, else `cli`).
        resumed_by: String,
        answers: Vec<PendingAnswer>,
        /// The provider and model this half runs with (the resume's
        /// config and flags may name others than the paused half's
        /// `task.started`). Absent in events of older versions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// The model's final answer (its last message without a tool call),
    /// just before `task.finished`: `OUT/<task>/output.md`, and with an
    /// output contract (`output.schema`) the valid JSON value
    /// (`OUT/<task>/output.json`). See docs/outputs.md.
    #[serde(rename = "task.output")]
    TaskOutput {
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        json: Option<Value>,
    },
    /// The task ended. Always the last event of a task.
    #[serde(rename = "task.finished")]
    TaskFinished {
        status: Status,
        reason: Reason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        expect: String,
        iterations: u32,
        usage: Usage,
        cost: Cost,
        duration_ms: u64,
    },
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
    /// The layers in force: `namespaces`, `landlock`, `seccomp`.
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
