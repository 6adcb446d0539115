//! Issue 10, items 4, 9, 12 and 13 through the binary: where keys go,
//! waits that cannot be honoured, billing errors, `x-should-retry`,
//! duplicate tool-call ids, provider request ids, responses over the size
//! limit, and refusals.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Keys, assert_no_secrets, run as run_task, scratch, task_yaml, transcript};
use crate::support::server::{Reply, Request, Server, read_request};
use crate::support::wire;
use crate::support::{Run, Ybs};

/// Fast retries, from the operator's config file (`--config op.json`).
const FAST: &str = r#"{"agent": {"retry_backoff_base_ms": 10}}"#;

fn fast(task_extra: &str) -> (Ybs, Keys) {
    let (ybs, keys) = scratch(&task_yaml(task_extra));
    ybs.file("op.json", FAST);
    (ybs, keys)
}

fn base(provider: &str, server: &Server) -> String {
    match provider {
        "anthropic" => server.url.clone(),
        _ => format!("{}/v1", server.url),
    }
}

/// Routes ybs's plain-HTTP and HTTPS requests through `proxy` (the test
/// server), so a request to any host is seen without DNS or TLS.
fn proxied(ybs: Ybs, proxy: &Server) -> Ybs {
    [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .into_iter()
    .fold(ybs, |ybs, var| ybs.env(var, &proxy.url))
    .env("NO_PROXY", "")
    .env("no_proxy", "")
}

fn carries_a_key(request: &Request, keys: &Keys) -> bool {
    let mut text: String = request
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\n"))
        .collect();
    text.push_str(&String::from_utf8_lossy(&request.body));
    keys.all().iter().any(|key| text.contains(key))
}

fn answer(provider: &str) -> Reply {
    match provider {
        "anthropic" => wire::anthropic_sse_answer("ok"),
        _ => wire::openai_sse_answer("ok"),
    }
}

/// Exit 4, status error, `reason` in transcript, JUnit and summary; the
/// transcript's message.
fn errored(ybs: &Ybs, run: &Run, reason: &str) -> String {
    run.expect_code(4);
    let transcript = transcript(run);
    assert_eq!(transcript["status"], "error", "{transcript}");
    assert_eq!(transcript["reason"], reason, "{transcript}");
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(
        junit.contains("<error") && junit.contains(reason),
        "{junit}"
    );
    assert!(ybs.read("ybs-out/summary.md").contains(reason));
    transcript["message"].as_str().unwrap().to_owned()
}

/// Exit 1, status failed with `reason` everywhere; the transcript's message.
fn failed(ybs: &Ybs, run: &Run, reason: &str) -> String {
    run.expect_code(1);
    let transcript = transcript(run);
    assert_eq!(transcript["status"], "failed", "{transcript}");
    assert_eq!(transcript["reason"], reason, "{transcript}");
    let last = run.events("t").pop().unwrap();
    assert_eq!(last["type"], "task.finished");
    assert_eq!(last["reason"], reason);
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(
        junit.contains("<failure") && junit.contains(reason),
        "{junit}"
    );
    assert!(ybs.read("ybs-out/summary.md").contains(reason));
    transcript["message"].as_str().unwrap().to_owned()
}

// ---- Item 4: keys travel only where the operator sends them. ----

#[test]
fn a_repository_endpoint_on_a_vendor_host_over_plain_http_gets_no_key() {
    for (provider, endpoint) in [
        ("openai", "http://api.openai.com:18080/v1"),
        ("anthropic", "http://api.anthropic.com:18080"),
    ] {
        // From ./.ybs.json, then from the task file.
        for in_task_file in [false, true] {
            let proxy = Server::start(vec![answer(provider)]);
            let task = if in_task_file {
                format!(
                    "provider: {provider}\nmodel: m\nendpoint: {endpoint}\n{}",
                    task_yaml("")
                )
            } else {
                task_yaml("")
            };
            let (ybs, keys) = scratch(&task);
            if !in_task_file {
                ybs.file(
                    ".ybs.json",
                    &format!(
                        r#"{{"llm": {{"provider": "{provider}", "model": "m", "endpoint": "{endpoint}"}}}}"#
                    ),
                );
            }
            let ybs = proxied(ybs, &proxy);
            let run = ybs.run(["run", "t.yaml", "--no-commit"]);
            run.expect_code(0);
            let requests = proxy.requests();
            assert_eq!(requests.len(), 1, "{requests:?}");
            assert!(
                requests[0].path.contains(&endpoint[7..]),
                "the request went to the named host: {}",
                requests[0].path
            );
            assert_eq!(requests[0].header("authorization"), None);
            assert_eq!(requests[0].header("x-api-key"), None);
            assert!(!carries_a_key(&requests[0], &keys));
            assert_no_secrets(&ybs, &run, &keys);
        }
    }
}

#[test]
fn a_repository_named_vendor_endpoint_gets_no_key_and_says_why() {
    for (provider, endpoint, var) in [
        ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        (
            "anthropic",
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
        ),
    ] {
        let proxy = Server::start(vec![]);
        let task = format!(
            "provider: {provider}\nmodel: m\nendpoint: {endpoint}\n{}",
            task_yaml("")
        );
        let (ybs, keys) = scratch(&task);
        let ybs = proxied(ybs, &proxy);
        let run = ybs.run(["run", "t.yaml", "--no-commit"]);
        let message = errored(&ybs, &run, "auth_error");
        assert!(
            message.contains(var) && message.contains("repository named"),
            "{message}"
        );
        assert!(proxy.requests().is_empty(), "no request at all");
        assert_no_secrets(&ybs, &run, &keys);
    }
}

#[test]
fn an_operator_named_endpoint_gets_the_key_whatever_its_scheme() {
    // The operator sent it there: `--endpoint http://api.openai.com:18080/v1`.
    let proxy = Server::start(vec![answer("openai")]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let ybs = proxied(ybs, &proxy);
    let run = run_task(&ybs, "openai", "http://api.openai.com:18080/v1", &[]);
    run.expect_code(0);
    let requests = proxy.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some(&*format!("Bearer {}", keys.openai))
    );
    assert_no_secrets(&ybs, &run, &keys);
}

// ---- Item 9: provider edges. ----

#[test]
fn a_retry_after_past_the_task_timeout_fails_at_once_naming_the_wait() {
    // 3600 s: longer than any retry wait; 30 s: within the cap but past
    // the task's 5 s.
    for (wait, expected) in [
        ("3600", "Retry-After asks to wait 3600 s"),
        (
            "30",
            "Retry-After asks to wait 30 s, past the task's remaining time",
        ),
    ] {
        let server = Server::start(vec![
            Reply::json(
                429,
                &json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
            )
            .header("retry-after", wait)
            .header("x-request-id", "req_wait_7"),
            answer("openai"),
        ]);
        let (ybs, keys) = scratch(&task_yaml("limits: { timeout: 5s }\n"));
        let started = Instant::now();
        let run = run_task(&ybs, "openai", &base("openai", &server), &[]);
        let elapsed = started.elapsed();
        let message = errored(&ybs, &run, "provider_error");
        assert!(message.contains(expected), "{message}");
        assert!(message.contains("req_wait_7"), "{message}");
        assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
        assert_eq!(server.requests().len(), 1, "not retried");
        assert_no_secrets(&ybs, &run, &keys);
    }
}

#[test]
fn billing_and_quota_errors_are_never_retried() {
    let cases: Vec<(&str, Reply, &str)> = vec![
        (
            "openai",
            Reply::json(
                429,
                &json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                                   "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}),
            ),
            "exceeded your current quota",
        ),
        (
            "openai",
            // The code alone says it.
            Reply::json(
                429,
                &json!({"error": {"message": "Request denied.", "type": "requests", "code": "insufficient_quota"}}),
            ),
            "Request denied",
        ),
        (
            "anthropic",
            Reply::json(
                400,
                &json!({"type": "error", "error": {"type": "invalid_request_error",
                        "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}),
            ),
            "credit balance is too low",
        ),
        (
            "anthropic",
            // A spend limit said in a 429 (issue 21 item 10).
            Reply::json(
                429,
                &json!({"type": "error", "error": {"type": "rate_limit_error",
                        "message": "You have reached your specified workspace API usage limits. You will regain access on 2026-12-01 at 00:00 UTC."}}),
            ),
            "workspace API usage limits",
        ),
        (
            "anthropic",
            Reply::json(
                402,
                &json!({"type": "error", "error": {"type": "billing_error", "message": "Billing problem."}}),
            ),
            "Billing problem",
        ),
        (
            "anthropic",
            Reply::json(
                403,
                &json!({"type": "error", "error": {"type": "permission_error", "message": "Your API key does not have permission to use the specified resource."}}),
            ),
            "permission",
        ),
    ];
    for (provider, reply, expected) in cases {
        // Every header that could invite a retry.
        let reply = reply
            .header("x-should-retry", "true")
            .header("retry-after", "0");
        let server = Server::start(vec![reply, answer(provider)]);
        let (ybs, keys) = fast("");
        let run = run_task(
            &ybs,
            provider,
            &base(provider, &server),
            &["--config", "op.json"],
        );
        run.expect_code(4);
        let message = transcript(&run)["message"].as_str().unwrap().to_owned();
        assert!(message.contains(expected), "{provider}: {message}");
        assert_eq!(server.requests().len(), 1, "{provider}: {message}");
        // Both stop the batch (docs/ci.md#when-the-batch-stops).
        let reason = if expected == "permission" {
            "auth_error"
        } else {
            "quota_exhausted"
        };
        assert_eq!(transcript(&run)["reason"], reason, "{message}");
        assert!(
            !run.events("t")
                .iter()
                .any(|event| event["type"] == "llm.retry"),
            "{message}"
        );
        assert_no_secrets(&ybs, &run, &keys);
    }
}

#[test]
fn x_should_retry_false_stops_and_true_retries() {
    let server = Server::start(vec![
        Reply::json(
            500,
            &json!({"error": {"message": "boom", "type": "server_error"}}),
        )
        .header("x-should-retry", "false"),
        answer("openai"),
    ]);
    let (ybs, _) = fast("");
    let run = run_task(
        &ybs,
        "openai",
        &base("openai", &server),
        &["--config", "op.json"],
    );
    let message = errored(&ybs, &run, "provider_error");
    assert!(message.contains("HTTP 500: boom"), "{message}");
    assert_eq!(server.requests().len(), 1);

    let server = Server::start(vec![
        Reply::json(
            409,
            &json!({"type": "error", "error": {"type": "invalid_request_error", "message": "try again"}}),
        )
        .header("x-should-retry", "true"),
        answer("anthropic"),
    ]);
    let (ybs, _) = fast("");
    let run = run_task(
        &ybs,
        "anthropic",
        &base("anthropic", &server),
        &["--config", "op.json"],
    );
    run.expect_code(0);
    assert_eq!(server.requests().len(), 2);
}

/// The ids of the assistant calls and of the tool results in an OpenAI
/// request body.
fn openai_ids(body: &Value) -> (Vec<String>, Vec<String>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            calls.push(call["id"].as_str().unwrap().to_owned());
        }
        if let Some(id) = message["tool_call_id"].as_str() {
            results.push(id.to_owned());
        }
    }
    (calls, results)
}

/// The same for an Anthropic request body.
fn anthropic_ids(body: &Value) -> (Vec<String>, Vec<String>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => calls.push(block["id"].as_str().unwrap().to_owned()),
                Some("tool_result") => {
                    results.push(block["tool_use_id"].as_str().unwrap().to_owned());
                }
                _ => {}
            }
        }
    }
    (calls, results)
}

fn assert_valid_ids(calls: &[String], results: &[String]) {
    assert_eq!(calls, results, "each result answers its call, in order");
    let unique: BTreeSet<&String> = calls.iter().collect();
    assert_eq!(unique.len(), calls.len(), "unique: {calls:?}");
    for id in calls {
        assert!(
            !id.is_empty()
                && id.len() <= 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{id}"
        );
    }
}

#[test]
fn duplicate_and_empty_tool_call_ids_become_unique_on_the_wire() {
    // OpenAI: two calls with the same id in one turn, then a turn reusing
    // it again with an empty id beside it.
    let write = |path: &str| json!({"path": path, "content": "x\n"}).to_string();
    let turn = |calls: &[(&str, &str, &str)]| {
        Reply::sse(&wire::sse_done(&wire::openai_call_chunks(calls, 8, false)))
    };
    let server = Server::start(vec![
        turn(&[
            ("call_1", "write_file", &write("a.txt")),
            ("call_1", "write_file", &write("b.txt")),
        ]),
        turn(&[
            ("call_1", "write_file", &write("c.txt")),
            ("", "write_file", &write("d.txt")),
        ]),
        answer("openai"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "openai", &base("openai", &server), &[]);
    run.expect_code(0);
    for file in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        assert_eq!(ybs.read(file), "x\n");
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let (calls, results) = openai_ids(&requests[2].json());
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0], "call_1", "a provider's own id is kept");
    assert_valid_ids(&calls, &results);
    // The transcript's calls are unique too.
    let decided: Vec<String> = run
        .events("t")
        .iter()
        .filter(|event| event["type"] == "tool.decided")
        .map(|event| event["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(decided, calls);
    assert_no_secrets(&ybs, &run, &keys);

    // Anthropic: duplicate tool_use ids in one non-streamed turn.
    let server = Server::start(vec![
        Reply::json(
            200,
            &json!({"id": "msg_d", "type": "message", "role": "assistant", "model": "m",
                    "content": [
                        {"type": "tool_use", "id": "toolu_same", "name": "write_file", "input": {"path": "a.txt", "content": "x\n"}},
                        {"type": "tool_use", "id": "toolu_same", "name": "write_file", "input": {"path": "b.txt", "content": "x\n"}}],
                    "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 10}}),
        ),
        wire::anthropic_json_answer("ok"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file("op.json", r#"{"llm": {"stream": false}}"#);
    let run = run_task(
        &ybs,
        "anthropic",
        &base("anthropic", &server),
        &["--config", "op.json"],
    );
    run.expect_code(0);
    let (calls, results) = anthropic_ids(&server.requests()[1].json());
    assert_eq!(calls.len(), 2);
    assert_valid_ids(&calls, &results);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn the_providers_request_id_is_in_the_message_transcript_retries_and_junit() {
    for (provider, header, reply) in [
        (
            "openai",
            "x-request-id",
            Reply::json(
                400,
                &json!({"error": {"message": "Invalid schema", "type": "invalid_request_error"}}),
            ),
        ),
        (
            "anthropic",
            "request-id",
            Reply::json(
                400,
                &json!({"type": "error", "error": {"type": "invalid_request_error", "message": "Invalid schema"}}),
            ),
        ),
    ] {
        let id = format!("req_{provider}_0123abc");
        let server = Server::start(vec![
            Reply::json(
                500,
                &json!({"error": {"message": "boom", "type": "server_error"}}),
            )
            .header(header, &format!("{id}_first")),
            reply.header(header, &id),
        ]);
        let (ybs, keys) = fast("");
        let run = run_task(
            &ybs,
            provider,
            &base(provider, &server),
            &["--config", "op.json"],
        );
        let message = errored(&ybs, &run, "provider_error");
        assert!(
            message.contains(&format!("Invalid schema (request id {id})")),
            "{message}"
        );
        let retry = run
            .events("t")
            .into_iter()
            .find(|event| event["type"] == "llm.retry")
            .unwrap();
        assert!(
            retry["error"]
                .as_str()
                .unwrap()
                .contains(&format!("{id}_first")),
            "{retry}"
        );
        assert!(ybs.read("ybs-out/junit.xml").contains(&id));
        assert!(run.stdout.contains(&id) || run.stderr.contains(&id));
        assert_no_secrets(&ybs, &run, &keys);
    }
}

#[test]
fn the_request_id_of_each_answered_call_is_in_the_transcript_and_events() {
    for (provider, header) in [("openai", "x-request-id"), ("anthropic", "request-id")] {
        let server = Server::start(vec![answer(provider).header(header, "req_ok_42")]);
        let (ybs, keys) = scratch(&task_yaml(""));
        let run = run_task(&ybs, provider, &base(provider, &server), &[]);
        run.expect_code(0);
        let transcript = transcript(&run);
        assert_eq!(transcript["llm_calls"][0]["request_id"], "req_ok_42");
        let response = run
            .events("t")
            .into_iter()
            .find(|event| event["type"] == "llm.response")
            .unwrap();
        assert_eq!(response["request_id"], "req_ok_42", "{response}");
        assert_no_secrets(&ybs, &run, &keys);
    }
}

// ---- Item 12: responses cut at the size limit while they arrive. ----

#[test]
fn a_response_over_the_size_limit_ends_the_task_with_response_too_large() {
    let big = "x".repeat(64 * 1024);
    for streaming in [true, false] {
        let server = Server::start(vec![if streaming {
            // A stream that would go on far past the limit.
            let mut reply = Reply::new(200, "text/event-stream");
            for _ in 0..64 {
                let chunk = json!({"id": "c", "choices": [{"index": 0, "delta": {"content": big}, "finish_reason": null}]});
                reply = reply.send(format!("data: {chunk}\n\n"));
            }
            reply.send("data: [DONE]\n\n")
        } else {
            wire::openai_json_answer(&big)
        }]);
        let (ybs, keys) = scratch(&task_yaml(""));
        ybs.file(
            "op.json",
            &format!(r#"{{"llm": {{"max_response_bytes": 16000, "stream": {streaming}}}}}"#),
        );
        let run = run_task(
            &ybs,
            "openai",
            &base("openai", &server),
            &["--config", "op.json"],
        );
        let message = failed(&ybs, &run, "response_too_large");
        assert!(message.contains("16000 bytes"), "{message}");
        assert!(message.contains("llm.max_response_bytes"), "{message}");
        assert_eq!(server.requests().len(), 1, "not retried");
        assert_no_secrets(&ybs, &run, &keys);
    }
    // A limit of 0 is a config error with its position.
    let (ybs, _) = scratch(&task_yaml(""));
    ybs.file("op.json", "{\n  \"llm\": {\"max_response_bytes\": 0}\n}\n");
    let run = ybs.run(["validate", "t.yaml", "--config", "op.json"]);
    run.expect_code(2);
    let shown = format!("{}{}", run.stdout, run.stderr);
    assert!(
        shown.contains("op.json:2:") && shown.contains("`max_response_bytes`: must be at least 1"),
        "{shown}"
    );
}

#[test]
fn walks_over_a_huge_tree_stop_at_the_entry_limit_and_say_so() {
    let ybs = Ybs::new();
    let big = ybs.path().join("big");
    std::fs::create_dir(&big).unwrap();
    for n in 0..100_050 {
        std::fs::File::create(big.join(format!("f{n:06}.txt"))).unwrap();
    }
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { allow: [list_files, search_files] }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            crate::support::cassette::calls(&[
                ("list_files", json!({"pattern": "*.txt", "max_results": 10})),
                ("search_files", json!({"pattern": "needle", "path": "big"})),
            ]),
            crate::support::cassette::answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    for index in 0..2 {
        let output = transcript["tool_calls"][index]["result"]["output"]
            .as_str()
            .unwrap();
        let result: Value = serde_json::from_str(output).unwrap();
        assert_eq!(result["truncated"], true, "{output}");
        let note = result["note"].as_str().unwrap();
        assert!(note.contains("after 100000 entries"), "{note}");
    }
}

// ---- Item 13: refusals and content filters fail the task. ----

#[test]
fn refusals_and_content_filters_fail_the_task() {
    let openai_filter_stream = Reply::sse(&wire::sse_done(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "Here is"}, "finish_reason": null}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}),
    ]));
    let openai_filter_json = Reply::json(
        200,
        &json!({"id": "c", "choices": [{"index": 0, "finish_reason": "content_filter",
                 "message": {"role": "assistant", "content": null}}]}),
    );
    let openai_refusal_stream = Reply::sse(&wire::sse_done(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"refusal": "I can't help "}, "finish_reason": null}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {"refusal": "with that."}, "finish_reason": null}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]));
    let openai_refusal_json = Reply::json(
        200,
        &json!({"id": "c", "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}]}),
    );
    let anthropic_refusal_stream = Reply::sse(&wire::sse_events(&[
        json!({"type": "message_start", "message": {"id": "msg_r", "type": "message", "role": "assistant",
               "content": [], "model": "m", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "I can't help with that."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ]));
    let anthropic_refusal_json = Reply::json(
        200,
        &json!({"id": "msg_r", "type": "message", "role": "assistant", "model": "m",
                "content": [], "stop_reason": "refusal",
                "usage": {"input_tokens": 5, "output_tokens": 1}}),
    );
    let cases = [
        ("openai", true, openai_filter_stream, "content_filter", ""),
        ("openai", false, openai_filter_json, "content_filter", ""),
        (
            "openai",
            true,
            openai_refusal_stream,
            "refusal",
            "I can't help with that.",
        ),
        (
            "openai",
            false,
            openai_refusal_json,
            "refusal",
            "I can't help with that.",
        ),
        (
            "anthropic",
            true,
            anthropic_refusal_stream,
            "refusal",
            "I can't help with that.",
        ),
        ("anthropic", false, anthropic_refusal_json, "refusal", ""),
    ];
    for (provider, streaming, reply, reason, said) in cases {
        let server = Server::start(vec![reply, answer(provider)]);
        let (ybs, keys) = scratch(&task_yaml(""));
        ybs.file(
            "op.json",
            &format!(r#"{{"llm": {{"stream": {streaming}}}}}"#),
        );
        let run = run_task(
            &ybs,
            provider,
            &base(provider, &server),
            &["--config", "op.json"],
        );
        let message = failed(&ybs, &run, reason);
        assert!(message.contains(said), "{message}");
        assert_eq!(server.requests().len(), 1, "{provider} {reason}");
        assert!(!ybs.exists("hello.txt"));
        assert_no_secrets(&ybs, &run, &keys);
    }
}

// ---- Issue 21 item 10: pause_turn, Retry-After: 0. ----

/// Anthropic: a streamed turn the API paused (`stop_reason: pause_turn`).
fn anthropic_paused(text: &str) -> Reply {
    Reply::sse(&wire::sse_events(&[
        json!({"type": "message_start", "message": {"id": "msg_p", "type": "message", "role": "assistant",
               "content": [], "model": "m", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "pause_turn"}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ]))
}

/// A paused turn is no answer: ybs sends its content back as the last
/// assistant message and asks again; out of iterations, it is a limit,
/// never a pass.
#[test]
fn an_anthropic_pause_turn_goes_on_and_is_never_the_answer() {
    let server = Server::start(vec![
        anthropic_paused("Looking it up. "),
        wire::anthropic_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "anthropic", &server.url, &[]);
    run.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the paused turn goes on");
    let second = requests[1].json();
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant", "{second}");
    assert_eq!(
        last["content"],
        json!([{"type": "text", "text": "Looking it up."}]),
        "{second}"
    );
    let transcript = transcript(&run);
    assert_eq!(transcript["status"], "passed", "{transcript}");
    assert_no_secrets(&ybs, &run, &keys);

    // Paused at the last iteration: a limit, not a pass.
    let server = Server::start(vec![
        anthropic_paused("Looking it up."),
        wire::anthropic_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml("limits: { max_iterations: 1 }\n"));
    let run = run_task(&ybs, "anthropic", &server.url, &[]);
    failed(&ybs, &run, "max_iterations");
    assert_eq!(server.requests().len(), 1);
    assert_no_secrets(&ybs, &run, &keys);
}

/// `Retry-After: 0` waits the backoff's first delay, as the SDKs do.
#[test]
fn a_retry_after_of_zero_keeps_the_backoff_floor() {
    let server = Server::start(vec![
        Reply::json(
            429,
            &json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
        )
        .header("retry-after", "0"),
        answer("openai"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file("op.json", r#"{"agent": {"retry_backoff_base_ms": 200}}"#);
    let run = run_task(
        &ybs,
        "openai",
        &base("openai", &server),
        &["--config", "op.json"],
    );
    run.expect_code(0);
    let delays: Vec<u64> = run
        .events("t")
        .iter()
        .filter(|event| event["type"] == "llm.retry")
        .map(|event| event["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, [200], "{delays:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].at - requests[0].at >= Duration::from_millis(200));
    assert_no_secrets(&ybs, &run, &keys);
}

/// Issue 23 item 8: a 404 for an unknown model names the model and the
/// endpoint, with a hint; a 404 from a base URL without the API says to
/// check the endpoint.
#[test]
fn a_404_names_the_model_and_the_endpoint() {
    let cases = [
        (
            Reply::json(
                404,
                &json!({"error": {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error", "code": "model_not_found"}}),
            ),
            vec!["model `", "not found at http://127.0.0.1:", "--model"],
        ),
        (
            Reply::json(404, &json!({"error": "Not Found"})),
            vec!["has no such API", "--endpoint"],
        ),
    ];
    for (reply, expected) in cases {
        let server = Server::start(vec![reply]);
        let (ybs, _) = fast("");
        let run = run_task(
            &ybs,
            "openai",
            &base("openai", &server),
            &["--config", "op.json"],
        );
        run.expect_code(4);
        let message = transcript(&run)["message"].as_str().unwrap().to_owned();
        for part in expected {
            assert!(message.contains(part), "{part}: {message}");
        }
        assert_eq!(server.requests().len(), 1, "{message}");
    }
}

/// A personal config that replaces the provider and model a task file
/// pins says so: a `task.note` in each such task's transcript, shown on
/// the console once for the run. A flag of the command is the user's
/// own choice in that command: no note.
#[test]
fn a_config_replacing_a_tasks_pinned_model_says_so_once() {
    let server = Server::start(vec![
        wire::openai_sse_answer("done"),
        wire::openai_sse_answer("done"),
        wire::openai_sse_answer("done"),
    ]);
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        concat!(
            "defaults:\n  provider: anthropic\n  model: claude-pinned\n",
            "tasks:\n  - id: one\n    prompt: say done\n  - id: two\n    prompt: say done\n",
        ),
    );
    let home_config = ybs.home().join(".config/ybs/config.json");
    std::fs::create_dir_all(home_config.parent().unwrap()).unwrap();
    std::fs::write(
        &home_config,
        json!({"llm": {"provider": "openai", "endpoint": format!("{}/v1", server.url), "model": "m"}})
            .to_string(),
    )
    .unwrap();
    let run = ybs.run(["run", "t.yaml", "--no-commit"]);
    run.expect_code(0);
    let expected = format!(
        "the config replaces the task file's provider `anthropic` with `openai` (from {0}) and its model `claude-pinned` with `m` (from {0})",
        home_config.display()
    );
    for task in ["one", "two"] {
        let notes: Vec<String> = run.json(&format!("ybs-out/{task}/transcript.json"))["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|note| note.as_str().unwrap().to_owned())
            .collect();
        assert!(
            notes.iter().any(|note| note.ends_with(&expected)),
            "{task}: {notes:#?}"
        );
    }
    let console = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(console.matches(&expected).count(), 1, "{console}");
    // The same provider and model named by flags: nothing to say.
    let run = ybs.run([
        "run",
        "t.yaml",
        "--no-commit",
        "--filter",
        "one",
        "--provider",
        "openai",
        "--model",
        "m",
    ]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/one/transcript.json");
    assert!(
        !transcript["notes"].to_string().contains("replaces"),
        "{transcript:#}"
    );
}

// ---- Start-up (issue 24, item 1): no root certificates for plain HTTP. ----

/// `SSL_CERT_FILE` naming an empty file and `SSL_CERT_DIR` an empty
/// directory: loading the system roots finds none, and a client that
/// loads them cannot be built.
fn no_system_roots(ybs: Ybs) -> Ybs {
    ybs.file("certs/empty.pem", "");
    let file = ybs.path().join("certs/empty.pem");
    only_roots(ybs, &file)
}

#[test]
fn a_plain_http_loopback_endpoint_reads_no_root_certificates() {
    let server = Server::start(vec![answer("openai")]);
    let (ybs, _) = scratch(&task_yaml(""));
    let ybs = no_system_roots(ybs);
    let run = run_task(&ybs, "openai", &base("openai", &server), &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn an_https_endpoint_still_needs_the_system_roots() {
    let (ybs, _) = scratch(&task_yaml(""));
    let ybs = no_system_roots(ybs);
    let run = run_task(&ybs, "openai", "https://127.0.0.1:9/v1", &[]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("cannot build HTTP client")
            && run.stderr.contains("No CA certificates"),
        "{}",
        run.stderr
    );
}

/// A file of `tests/fixtures/tls`: a test CA (`ca.pem`) and a server
/// certificate for `127.0.0.1` signed by it (`server.pem`, `server.key`).
fn tls_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// A TLS server on loopback for one request, with the fixtures'
/// certificate and the same `ring` provider ybs is built with. Answers
/// `body` as an event stream and returns the request, or why none came.
fn tls_server(body: String) -> (u16, std::thread::JoinHandle<Result<Request, String>>) {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::Write as _;
    let certs = vec![CertificateDer::from_pem_file(tls_fixture("server.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(tls_fixture("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let connection = rustls::ServerConnection::new(std::sync::Arc::new(config)).unwrap();
        let mut stream = rustls::StreamOwned::new(connection, tcp);
        let request = read_request(&mut stream)
            .map_err(|error| error.to_string())?
            .ok_or("the connection closed before the request")?;
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        );
        stream.write_all(response.as_bytes()).unwrap();
        stream.conn.send_close_notify();
        let _ = stream.flush();
        Ok(request)
    });
    (port, handle)
}

/// The root certificates are `file` alone.
fn only_roots(ybs: Ybs, file: &std::path::Path) -> Ybs {
    let dir = ybs.home().join("no-certs");
    std::fs::create_dir_all(&dir).unwrap();
    ybs.env("SSL_CERT_FILE", &file.display().to_string())
        .env("SSL_CERT_DIR", &dir.display().to_string())
}

#[test]
fn an_https_endpoint_is_reached_over_tls_verified_against_the_roots_named() {
    let chunks = [
        json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": "stop"}]}),
        json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}),
    ];
    let (port, server) = tls_server(wire::sse_done(&chunks));
    let (ybs, _) = scratch(&task_yaml(""));
    let ybs = only_roots(ybs, &tls_fixture("ca.pem"));
    let run = run_task(&ybs, "openai", &format!("https://127.0.0.1:{port}/v1"), &[]);
    let request = server.join().unwrap().unwrap();
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    run.expect_code(0);
}

#[test]
fn an_https_endpoint_whose_certificate_no_root_signs_is_refused() {
    let (port, server) = tls_server(String::new());
    let (ybs, _) = fast("");
    // A root there is, but not the one that signed the server's.
    let ybs = only_roots(ybs, &tls_fixture("server.pem"));
    let run = run_task(
        &ybs,
        "openai",
        &format!("https://127.0.0.1:{port}/v1"),
        &["--config", "op.json"],
    );
    run.expect_code(4);
    assert_eq!(transcript(&run)["reason"], "provider_error");
    // ybs ended the handshake: no root it has signed that certificate.
    let refused = server.join().unwrap().unwrap_err();
    assert!(refused.contains("UnknownCA"), "{refused}");
}
