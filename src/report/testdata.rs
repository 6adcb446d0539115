//! Synthetic event streams for the sinks' tests.

use serde_json::json;

use crate::core::event::{
    CheckCompleted, Event, EventRecord, Git, GitOutcome, LlmResponse, LlmRetry, MessageAppended,
    Note, TaskFinished, TaskStarted, ToolCompleted, ToolDecided,
};
use crate::core::message::{Message, ToolCall};
use crate::core::outcome::{Reason, Status};
use crate::core::usage::{Cost, Usage};

pub(crate) fn record(task: &str, ts_ms: u64, event: Event) -> EventRecord {
    EventRecord {
        ts_ms,
        task: task.to_owned(),
        event,
    }
}

fn suite_of(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub(crate) fn started(task: &str, file: &str, ts_ms: u64) -> EventRecord {
    record(
        task,
        ts_ms,
        Event::TaskStarted(TaskStarted {
            file: file.to_owned(),
            suite: suite_of(file),
            run_id: "20261122T155213Z-3f9a1c".to_owned(),
            ybs_version: "0.1.0".to_owned(),
            provider: "replay".to_owned(),
            model: "gpt-4.1-mini".to_owned(),
            temperature: Some(0.0),
            seed: Some(7),
            workdir: "/repo".to_owned(),
            policy_hash: "sha256:abc".to_owned(),
            base_commit: Some("0123456789abcdef".to_owned()),
            system_prompt: "You are ybs.".to_owned(),
            tools: vec!["read_file".to_owned(), "run_shell".to_owned()],
            dry_run: false,
            sandbox: None,
            context_files: Vec::new(),
            shard: None,
        }),
    )
}

pub(crate) fn finished(
    task: &str,
    ts_ms: u64,
    status: Status,
    reason: Reason,
    message: Option<&str>,
    cost: Cost,
) -> EventRecord {
    record(
        task,
        ts_ms,
        Event::TaskFinished(TaskFinished {
            status,
            reason,
            message: message.map(str::to_owned),
            expect: "pass".to_owned(),
            iterations: 2,
            usage: Usage::new(1200, 34),
            cost,
            duration_ms: 61_500,
        }),
    )
}

pub(crate) fn passed(task: &str, ts_ms: u64) -> EventRecord {
    finished(
        task,
        ts_ms,
        Status::Passed,
        Reason::Completed,
        None,
        Cost::Usd(0.0123),
    )
}

pub(crate) fn check(task: &str, ts_ms: u64, name: &str, exit_code: i32, tail: &str) -> EventRecord {
    record(
        task,
        ts_ms,
        Event::CheckCompleted(CheckCompleted {
            name: name.to_owned(),
            command: "cargo build".to_owned(),
            exit_code: Some(exit_code),
            expected_exit: 0,
            passed: exit_code == 0,
            timed_out: false,
            duration_ms: 900,
            output_tail: tail.to_owned(),
            attempt: 1,
            locations: Vec::new(),
        }),
    )
}

fn response(task: &str, ts_ms: u64, iteration: u32, cost: Cost) -> EventRecord {
    record(
        task,
        ts_ms,
        Event::LlmResponse(LlmResponse {
            iteration,
            response_id: Some(format!("resp-{task}-{iteration}")),
            request_id: Some(format!("req-{task}-{iteration}")),
            usage: Usage::new(600, 17),
            cost,
            duration_ms: 300,
            tool_calls: usize::from(iteration == 1),
            request_tokens_estimate: Some(700),
            request_tokens_method: Some("o200k".into()),
            incomplete: None,
            finish_reason: None,
            usage_estimated: false,
        }),
    )
}

/// The nasty output of a failing check: ANSI, NUL, a CDATA terminator,
/// markup, a forged workflow command, a pipe.
pub(crate) const NASTY_TAIL: &str =
    "\x1b[31merror\x1b[0m: nul\0 bel\x07 ]]> <b>&amp;</b> | pipe\n::set-output name=x::y\n";

/// Three tasks in two files, interleaved as `--jobs 2` would produce them:
/// `alpha` (a.yaml) passes with a commit; `beta` (b.yaml) fails a check
/// with an unknown cost; `gamma` (a.yaml) errors at the provider.
pub(crate) fn records_two_files() -> Vec<EventRecord> {
    let call = ToolCall::new("call-1", "read_file", json!({"path": "src/lib.rs"}));
    vec![
        started("alpha", "tasks/a.yaml", 1_000),
        started("beta", "tasks/b.yaml", 1_010),
        record(
            "alpha",
            1_020,
            Event::MessageAppended(MessageAppended {
                message: Message::user("rename it"),
            }),
        ),
        record(
            "beta",
            1_030,
            Event::MessageAppended(MessageAppended {
                message: Message::user("build it"),
            }),
        ),
        response("alpha", 1_100, 1, Cost::Usd(0.006)),
        record(
            "alpha",
            1_101,
            Event::MessageAppended(MessageAppended {
                message: Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call],
                },
            }),
        ),
        record(
            "alpha",
            1_102,
            Event::ToolDecided(ToolDecided {
                call_id: "call-1".to_owned(),
                name: "read_file".to_owned(),
                arguments: json!({"path": "src/lib.rs"}),
                verdict: "allow".to_owned(),
                rule: "allow: read_file".to_owned(),
                detail: None,
                resolved: Some(json!("/repo/src/lib.rs")),
                parent: None,
            }),
        ),
        record(
            "beta",
            1_103,
            Event::LlmRetry(LlmRetry {
                iteration: 1,
                attempt: 1,
                delay_ms: 500,
                error: "HTTP 529 overloaded".to_owned(),
            }),
        ),
        record(
            "alpha",
            1_110,
            Event::ToolCompleted(ToolCompleted {
                call_id: "call-1".to_owned(),
                name: "read_file".to_owned(),
                ok: true,
                ran: true,
                duration_ms: 2,
                truncated: false,
                output: "1\tfn main() {}".to_owned(),
            }),
        ),
        record(
            "alpha",
            1_111,
            Event::MessageAppended(MessageAppended {
                message: Message::Tool {
                    call_id: "call-1".to_owned(),
                    name: "read_file".to_owned(),
                    content: "1\tfn main() {}".to_owned(),
                    is_error: false,
                },
            }),
        ),
        response("beta", 1_200, 1, Cost::Unknown),
        started("gamma", "tasks/a.yaml", 1_250),
        response("alpha", 1_300, 2, Cost::Usd(0.0063)),
        record(
            "beta",
            1_310,
            Event::Note(Note {
                message: "fix attempt 1 of 1".to_owned(),
            }),
        ),
        check("alpha", 1_400, "builds", 0, "Finished"),
        check("beta", 1_410, "builds", 1, NASTY_TAIL),
        record(
            "alpha",
            1_500,
            Event::Git(Git {
                outcome: GitOutcome {
                    commit: Some("89abcdef0123456789".to_owned()),
                    branch: Some("main".to_owned()),
                    salvage_ref: None,
                    files: vec!["src/lib.rs".to_owned()],
                    note: "committed 1 file".to_owned(),
                },
            }),
        ),
        passed("alpha", 62_500),
        record(
            "beta",
            1_600,
            Event::Git(Git {
                outcome: GitOutcome {
                    note: "changes left uncommitted in /repo".to_owned(),
                    ..GitOutcome::default()
                },
            }),
        ),
        finished(
            "gamma",
            1_700,
            Status::Error,
            Reason::ProviderError,
            Some("HTTP 500 <html>| bad gateway\nretry later"),
            Cost::Unknown,
        ),
        finished(
            "beta",
            62_510,
            Status::Failed,
            Reason::ChecksFailed,
            Some("1 check failed"),
            Cost::Unknown,
        ),
    ]
}
