//! Acceptance 3 (docs/providers.md, docs/security.md S11): rate limits, overload, server
//! errors, cut and stalled streams, bad keys and exhausted retries, each
//! through the binary, each checked for what was retried, what ran and
//! what was written.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Keys, assert_no_secrets, event_types, run, scratch, task_yaml, transcript};
use crate::support::server::{Reply, Server};
use crate::support::wire;
use crate::support::{Run, Ybs};

/// Fast retries and a short idle deadline, from the repository's config.
const FAST: &str = r#"{"agent": {"retry_backoff_base_ms": 10},
  "llm": {"stream_idle_timeout_seconds": "300ms"}}"#;

fn fast_scratch() -> (Ybs, Keys) {
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", FAST);
    (ybs, keys)
}

fn write_hello() -> Value {
    json!({"path": "hello.txt", "content": "hi\n"})
}

fn openai_error(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

fn overloaded() -> Value {
    json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
}

/// The `llm.retry` events: (iteration, attempt, delay_ms, error).
fn retries(run: &Run) -> Vec<(u64, u64, u64, String)> {
    run.events("t")
        .iter()
        .filter(|event| event["type"] == "llm.retry")
        .map(|event| {
            (
                event["iteration"].as_u64().unwrap(),
                event["attempt"].as_u64().unwrap(),
                event["delay_ms"].as_u64().unwrap(),
                event["error"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A task that errored: exit 4, every output written, the reason in
/// the transcript, events, JUnit (as `<error`) and summary.
fn assert_errored(ybs: &Ybs, run: &Run, reason: &str) -> Value {
    run.expect_code(4);
    let transcript = transcript(run);
    assert_eq!(transcript["status"], "error");
    assert_eq!(transcript["reason"], reason);
    let last = run.events("t").pop().unwrap();
    assert_eq!(last["type"], "task.finished");
    assert_eq!(last["reason"], reason);
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains("<error"), "{junit}");
    assert!(junit.contains(reason), "{junit}");
    crate::suite::run::well_formed(&ybs.path().join("ybs-out/junit.xml"));
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains(reason), "{summary}");
    transcript
}

#[test]
fn rate_limit_with_retry_after_waits_then_succeeds() {
    let server = Server::start(vec![
        Reply::json(
            429,
            &openai_error(
                "Rate limit reached for requests",
                "requests",
                Some("rate_limit_exceeded"),
            ),
        )
        .header("retry-after", "1"),
        wire::openai_sse_call("call_1", "write_file", &write_hello()),
        wire::openai_sse_answer("done"),
    ]);
    // Default backoff (1 s base): the server's Retry-After decides the wait.
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "exactly one retry");
    let waited = requests[1].at - requests[0].at;
    assert!(
        waited >= Duration::from_millis(950) && waited < Duration::from_millis(2500),
        "waited {waited:?}"
    );
    assert_eq!(requests[0].body, requests[1].body, "the same request again");
    let retries = retries(&run);
    assert_eq!(retries.len(), 1, "{retries:?}");
    let (iteration, attempt, delay_ms, error) = &retries[0];
    assert_eq!((*iteration, *attempt, *delay_ms), (1, 1, 1000));
    assert!(error.contains("429"), "{error}");
    let transcript = transcript(&run);
    assert_eq!(transcript["retries"].as_array().unwrap().len(), 1);
    assert_eq!(transcript["retries"][0]["delay_ms"], 1000);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn anthropic_overloaded_529_and_overloaded_stream_event_are_retried() {
    let overloaded_event = wire::sse_events(&[
        json!({"type": "message_start", "message": {"id": "msg_x", "type": "message", "role": "assistant",
               "content": [], "model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let server = Server::start(vec![
        Reply::json(529, &overloaded()),
        Reply::sse(&overloaded_event),
        wire::anthropic_sse_call("toolu_1", "write_file", &write_hello(), 5),
        wire::anthropic_sse_answer("done"),
    ]);
    let (ybs, keys) = fast_scratch();
    let run = run(&ybs, "anthropic", &server.url, &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    assert_eq!(server.requests().len(), 4);
    let retries = retries(&run);
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert_eq!((retries[0].0, retries[0].1), (1, 1));
    assert_eq!((retries[1].0, retries[1].1), (1, 2));
    for (_, _, _, error) in &retries {
        assert!(
            error.contains("529") && error.contains("Overloaded"),
            "{error}"
        );
    }
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn server_errors_three_times_then_success() {
    let boom = || {
        Reply::json(
            500,
            &openai_error("The server had an error", "server_error", None),
        )
    };
    // The second arrives as an `error` object inside a 200 stream.
    let in_stream = wire::sse_done(&[
        json!({"choices": [{"index": 0, "delta": {"content": "Let me"}, "finish_reason": null}]}),
        openai_error("The server had an error", "server_error", None),
    ]);
    let server = Server::start(vec![
        boom(),
        Reply::sse(&in_stream),
        boom(),
        wire::openai_sse_call("call_1", "write_file", &write_hello()),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, keys) = fast_scratch();
    let ybs = ybs.env("YBS_RETRY_ATTEMPTS", "3");
    let started = Instant::now();
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    assert_eq!(server.requests().len(), 5);
    let attempts: Vec<u64> = retries(&run).iter().map(|r| r.1).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(retries(&run).iter().all(|r| r.3.contains("HTTP 500")));
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_stream_cut_mid_tool_call_is_retried_and_the_tool_runs_once() {
    let arguments = json!({"command": "echo x >> count.txt"}).to_string();
    let chunks = wire::openai_call_chunks(&[("call_sh", "run_shell", &arguments)], 3, false);
    // The opening chunks and half of the argument fragments, then the
    // connection closes mid-body.
    let half: String = chunks[..chunks.len() / 2]
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect();
    let server = Server::start(vec![
        Reply::sse(&half).cut(),
        Reply::sse(&wire::sse_done(&chunks)),
        wire::openai_sse_answer("appended"),
    ]);
    let (ybs, keys) = fast_scratch();
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("count.txt"), "x\n", "the tool ran exactly once");
    assert_eq!(server.requests().len(), 3);
    let retries = retries(&run);
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(retries[0].3.contains("stream"), "{}", retries[0].3);
    let transcript = transcript(&run);
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "run_shell");
    let completed = event_types(&run)
        .iter()
        .filter(|t| *t == "tool.completed")
        .count();
    assert_eq!(completed, 1);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_stream_stalled_past_the_idle_deadline_is_retried() {
    let chunks = wire::openai_call_chunks(
        &[("call_1", "write_file", &write_hello().to_string())],
        4,
        false,
    );
    let start: String = chunks[..3]
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect();
    let server = Server::start(vec![
        Reply::sse(&start).pause(Duration::from_secs(30)),
        wire::openai_sse_call("call_1", "write_file", &write_hello()),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, keys) = fast_scratch();
    let started = Instant::now();
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    let elapsed = started.elapsed();
    run.expect_code(0);
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let gap = requests[1].at - requests[0].at;
    assert!(
        gap >= Duration::from_millis(300) && gap < Duration::from_millis(1500),
        "{gap:?}"
    );
    let retries = retries(&run);
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(
        retries[0].3.contains("timed out") && retries[0].3.contains("idle"),
        "{}",
        retries[0].3
    );
    assert_eq!(transcript(&run)["tool_calls"].as_array().unwrap().len(), 1);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_trickling_stream_hits_the_total_deadline() {
    // Keep-alives every 100 ms keep the idle deadline (300 ms) happy; the
    // total deadline (600 ms) ends the request.
    let mut trickle = Reply::sse(": start\n\n");
    for _ in 0..300 {
        trickle = trickle
            .pause(Duration::from_millis(100))
            .send(": keep-alive\n\n");
    }
    let server = Server::start(vec![trickle]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(
        ".ybs.json",
        r#"{"agent": {"retry_attempts": 0},
            "llm": {"stream_idle_timeout_seconds": "300ms", "total_timeout_seconds": "600ms"}}"#,
    );
    let started = Instant::now();
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    assert!(started.elapsed() < Duration::from_secs(10));
    let transcript = assert_errored(&ybs, &run, "provider_error");
    let message = transcript["message"].as_str().unwrap();
    assert!(message.contains("total deadline"), "{message}");
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn unauthorized_is_not_retried_and_is_an_auth_error() {
    let (ybs, keys) = fast_scratch();
    // A careless server echoes the key it was given.
    let server = Server::start(vec![Reply::json(
        401,
        &openai_error(
            &format!("Incorrect API key provided: {}", keys.openai),
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
    )]);
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    let transcript = assert_errored(&ybs, &run, "auth_error");
    assert_eq!(server.requests().len(), 1, "no retry");
    assert!(retries(&run).is_empty());
    let message = transcript["message"].as_str().unwrap();
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn quota_exhausted_is_not_retried() {
    let server = Server::start(vec![
        Reply::json(
            429,
            &openai_error(
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                Some("insufficient_quota"),
            ),
        )
        .header("retry-after", "1"),
    ]);
    let (ybs, keys) = fast_scratch();
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    // Its own reason: waiting will not help, and the batch stops.
    let transcript = assert_errored(&ybs, &run, "quota_exhausted");
    assert_eq!(server.requests().len(), 1, "no retry");
    assert!(transcript["message"].as_str().unwrap().contains("quota"));
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn exhausted_retries_are_a_provider_error_with_every_output_written() {
    let boom = || {
        Reply::json(
            503,
            &openai_error("Service unavailable", "server_error", None),
        )
    };
    let server = Server::start(vec![boom(), boom(), boom(), boom()]);
    let (ybs, keys) = fast_scratch();
    let ybs = ybs.env("YBS_RETRY_ATTEMPTS", "2");
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    let transcript = assert_errored(&ybs, &run, "provider_error");
    assert_eq!(server.requests().len(), 3, "one attempt and two retries");
    assert_eq!(server.replies_left(), 1);
    assert_eq!(retries(&run).len(), 2);
    assert!(
        transcript["message"]
            .as_str()
            .unwrap()
            .contains("Service unavailable")
    );
    assert_eq!(transcript["retries"].as_array().unwrap().len(), 2);
    assert!(ybs.exists("ybs-out/t/events.jsonl"));
    assert_no_secrets(&ybs, &run, &keys);
}
