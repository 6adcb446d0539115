//! Each event's fields, borrowed: one accessor per kind of event
//! (`record.event.tool_done()`), so that the outputs that read an event
//! (transcript, OpenTelemetry, the console) take its fields from one
//! place instead of each taking the event apart again.

use serde_json::Value;

use super::{CheckLocation, Event, SandboxInfo};
use crate::core::outcome::{Reason, Status};
use crate::core::usage::{Cost, Usage};

/// `task.started` ([`Event::TaskStarted`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskStart<'a> {
    pub file: &'a str,
    pub suite: &'a str,
    pub run_id: &'a str,
    pub ybs_version: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub temperature: Option<f64>,
    pub seed: Option<u64>,
    pub workdir: &'a str,
    pub policy_hash: &'a str,
    pub base_commit: Option<&'a str>,
    pub system_prompt: &'a str,
    pub tools: &'a [String],
    pub dry_run: bool,
    pub sandbox: Option<&'a SandboxInfo>,
    pub context_files: &'a [String],
    pub shard: Option<&'a crate::core::shard::ShardRecord>,
}

/// `llm.response` ([`Event::LlmResponse`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlmAnswer<'a> {
    pub iteration: u32,
    pub response_id: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub usage: Usage,
    pub cost: Cost,
    pub duration_ms: u64,
    pub tool_calls: usize,
    pub request_tokens_estimate: Option<u64>,
    pub request_tokens_method: Option<&'a str>,
    pub incomplete: Option<&'a str>,
    pub finish_reason: Option<&'a str>,
    pub usage_estimated: bool,
}

/// `llm.retry` ([`Event::LlmRetry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmRetried<'a> {
    pub iteration: u32,
    pub attempt: u32,
    pub delay_ms: u64,
    pub error: &'a str,
}

/// `tool.decided` ([`Event::ToolDecided`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolDecision<'a> {
    pub call_id: &'a str,
    pub name: &'a str,
    pub arguments: &'a Value,
    pub verdict: &'a str,
    pub rule: &'a str,
    pub detail: Option<&'a str>,
    pub resolved: Option<&'a Value>,
    pub parent: Option<&'a str>,
}

/// `tool.completed` ([`Event::ToolCompleted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolDone<'a> {
    pub call_id: &'a str,
    pub name: &'a str,
    pub ok: bool,
    pub ran: bool,
    pub duration_ms: u64,
    pub truncated: bool,
    pub output: &'a str,
}

/// `check.completed` ([`Event::CheckCompleted`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckDone<'a> {
    pub name: &'a str,
    pub command: &'a str,
    pub exit_code: Option<i32>,
    pub expected_exit: i32,
    pub passed: bool,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub output_tail: &'a str,
    pub attempt: u32,
    pub locations: &'a [CheckLocation],
}

/// `task.finished` ([`Event::TaskFinished`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskEnd<'a> {
    pub status: Status,
    pub reason: Reason,
    pub message: Option<&'a str>,
    pub expect: &'a str,
    pub iterations: u32,
    pub usage: Usage,
    pub cost: Cost,
    pub duration_ms: u64,
}

impl Event {
    /// The fields of `task.started`; `None` for any other event.
    pub fn task_start(&self) -> Option<TaskStart<'_>> {
        let Self::TaskStarted {
            file,
            suite,
            run_id,
            ybs_version,
            provider,
            model,
            temperature,
            seed,
            workdir,
            policy_hash,
            base_commit,
            system_prompt,
            tools,
            dry_run,
            sandbox,
            context_files,
            shard,
        } = self
        else {
            return None;
        };
        Some(TaskStart {
            file,
            suite,
            run_id,
            ybs_version,
            provider,
            model,
            temperature: *temperature,
            seed: *seed,
            workdir,
            policy_hash,
            base_commit: base_commit.as_deref(),
            system_prompt,
            tools,
            dry_run: *dry_run,
            sandbox: sandbox.as_deref(),
            context_files,
            shard: shard.as_ref(),
        })
    }

    /// The fields of `llm.response`; `None` for any other event.
    pub fn llm_answer(&self) -> Option<LlmAnswer<'_>> {
        let Self::LlmResponse {
            iteration,
            response_id,
            request_id,
            usage,
            cost,
            duration_ms,
            tool_calls,
            request_tokens_estimate,
            request_tokens_method,
            incomplete,
            finish_reason,
            usage_estimated,
        } = self
        else {
            return None;
        };
        Some(LlmAnswer {
            iteration: *iteration,
            response_id: response_id.as_deref(),
            request_id: request_id.as_deref(),
            usage: *usage,
            cost: *cost,
            duration_ms: *duration_ms,
            tool_calls: *tool_calls,
            request_tokens_estimate: *request_tokens_estimate,
            request_tokens_method: request_tokens_method.as_deref(),
            incomplete: incomplete.as_deref(),
            finish_reason: finish_reason.as_deref(),
            usage_estimated: *usage_estimated,
        })
    }

    /// The fields of `llm.retry`; `None` for any other event.
    pub fn llm_retried(&self) -> Option<LlmRetried<'_>> {
        let Self::LlmRetry {
            iteration,
            attempt,
            delay_ms,
            error,
        } = self
        else {
            return None;
        };
        Some(LlmRetried {
            iteration: *iteration,
            attempt: *attempt,
            delay_ms: *delay_ms,
            error,
        })
    }

    /// The fields of `tool.decided`; `None` for any other event.
    pub fn tool_decision(&self) -> Option<ToolDecision<'_>> {
        let Self::ToolDecided {
            call_id,
            name,
            arguments,
            verdict,
            rule,
            detail,
            resolved,
            parent,
        } = self
        else {
            return None;
        };
        Some(ToolDecision {
            call_id,
            name,
            arguments,
            verdict,
            rule,
            detail: detail.as_deref(),
            resolved: resolved.as_ref(),
            parent: parent.as_deref(),
        })
    }

    /// The fields of `tool.completed`; `None` for any other event.
    pub fn tool_done(&self) -> Option<ToolDone<'_>> {
        let Self::ToolCompleted {
            call_id,
            name,
            ok,
            ran,
            duration_ms,
            truncated,
            output,
        } = self
        else {
            return None;
        };
        Some(ToolDone {
            call_id,
            name,
            ok: *ok,
            ran: *ran,
            duration_ms: *duration_ms,
            truncated: *truncated,
            output,
        })
    }

    /// The fields of `check.completed`; `None` for any other event.
    pub fn check_done(&self) -> Option<CheckDone<'_>> {
        let Self::CheckCompleted {
            name,
            command,
            exit_code,
            expected_exit,
            passed,
            timed_out,
            duration_ms,
            output_tail,
            attempt,
            locations,
        } = self
        else {
            return None;
        };
        Some(CheckDone {
            name,
            command,
            exit_code: *exit_code,
            expected_exit: *expected_exit,
            passed: *passed,
            timed_out: *timed_out,
            duration_ms: *duration_ms,
            output_tail,
            attempt: *attempt,
            locations,
        })
    }

    /// The fields of `task.finished`; `None` for any other event.
    pub fn task_end(&self) -> Option<TaskEnd<'_>> {
        let Self::TaskFinished {
            status,
            reason,
            message,
            expect,
            iterations,
            usage,
            cost,
            duration_ms,
        } = self
        else {
            return None;
        };
        Some(TaskEnd {
            status: *status,
            reason: *reason,
            message: message.as_deref(),
            expect,
            iterations: *iterations,
            usage: *usage,
            cost: *cost,
            duration_ms: *duration_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accessor_gives_its_own_event_and_nothing_else() {
        let done = Event::ToolCompleted {
            call_id: "c1".to_owned(),
            name: "run_shell".to_owned(),
            ok: false,
            ran: true,
            duration_ms: 12,
            truncated: true,
            output: "{\"exit_code\":2}".to_owned(),
        };
        assert_eq!(
            done.tool_done(),
            Some(ToolDone {
                call_id: "c1",
                name: "run_shell",
                ok: false,
                ran: true,
                duration_ms: 12,
                truncated: true,
                output: "{\"exit_code\":2}",
            })
        );
        assert_eq!(done.tool_decision(), None);
        assert_eq!(done.task_end(), None);
        let note = Event::Note {
            message: "x".to_owned(),
        };
        assert!(note.tool_done().is_none() && note.check_done().is_none());
    }

    #[test]
    fn optional_fields_are_borrowed_as_options() {
        let decided = Event::ToolDecided {
            call_id: "c2".to_owned(),
            name: "write_file".to_owned(),
            arguments: serde_json::json!({"path": "a"}),
            verdict: "allow".to_owned(),
            rule: "allow write_file".to_owned(),
            detail: None,
            resolved: Some(serde_json::json!("/w/a")),
            parent: Some("s1".to_owned()),
        };
        let view = decided.tool_decision().unwrap();
        assert_eq!(view.detail, None);
        assert_eq!(view.resolved, Some(&serde_json::json!("/w/a")));
        assert_eq!(view.parent, Some("s1"));
        assert_eq!(view.arguments["path"], "a");
    }
}
