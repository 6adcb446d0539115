// The one scripted HTTP server of the tests, as the collector. The llm
// module compiles it too, but report may not use llm (docs/architecture.md).
#[allow(clippy::duplicate_mod)]
#[path = "../../llm/test_server.rs"]
mod test_server;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::core::event::{
    CheckCompleted, LlmResponse, LlmRetry, SandboxInfo, TaskFinished, TaskPaused, TaskResumed,
    TaskStarted, ToolCompleted, ToolDecided,
};
use crate::core::{Cost, Reason, Usage};
use test_server::{Reply, Server};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    Settings::from_env(env(pairs)).unwrap().unwrap()
}

#[test]
fn nothing_without_an_endpoint_or_when_disabled() {
    assert_eq!(Settings::from_env(env(&[])), Ok(None));
    assert_eq!(
        Settings::from_env(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])),
        Ok(None)
    );
    for off in [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ] {
        assert_eq!(
            Settings::from_env(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                off
            ])),
            Ok(None)
        );
    }
}

#[test]
fn the_base_endpoint_gets_v1_traces_and_the_traces_endpoint_is_used_as_is() {
    let base = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]);
    assert_eq!(base.endpoint.as_str(), "http://c:4318/v1/traces");
    assert_eq!(base.protocol, Protocol::Protobuf);
    assert_eq!(base.timeout, Duration::from_secs(10));
    let prefixed = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c/otlp/")]);
    assert_eq!(prefixed.endpoint.as_str(), "https://c/otlp/v1/traces");
    let exact = settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:9/custom"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
    ]);
    assert_eq!(exact.endpoint.as_str(), "http://c:9/custom");
    assert_eq!(exact.protocol, Protocol::Json);
    assert_eq!(exact.timeout, Duration::from_millis(250));
}

#[test]
fn headers_resource_and_traceparent_are_read() {
    let read = settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer%20abc, x-team=a",
        ),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "X-Team=b"),
        ("OTEL_SERVICE_NAME", "ci-agents"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=ci,service.name=other",
        ),
        (
            "TRACEPARENT",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ),
    ]);
    assert_eq!(
        read.headers,
        vec![
            ("authorization".to_owned(), "Bearer abc".to_owned()),
            ("X-Team".to_owned(), "b".to_owned()),
        ]
    );
    assert_eq!(
        read.resource[0],
        ("service.name".into(), "ci-agents".into())
    );
    assert!(
        read.resource
            .contains(&("deployment.environment".into(), "ci".into()))
    );
    assert!(
        !read
            .resource
            .iter()
            .any(|(key, value)| key == "service.name" && *value == "other".into())
    );
    let (trace, span) = read.parent.unwrap();
    assert_eq!(wire::hex(&trace), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(wire::hex(&span), "b7ad6b7169203331");
    // The credential never shows in the settings' Debug output.
    assert!(!format!("{read:?}").contains("abc"));
}

#[test]
fn unusable_values_are_one_line_errors_that_never_echo_a_header() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    for (pairs, expected) in [
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")],
            "not an http(s) URL",
        ),
        (
            vec![endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            "`grpc` is not supported",
        ),
        (
            vec![endpoint, ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")],
            "milliseconds",
        ),
        (
            vec![endpoint, ("OTEL_EXPORTER_OTLP_HEADERS", "secret-token")],
            "key=value",
        ),
    ] {
        let error = Settings::from_env(env(&pairs)).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
        assert!(
            !error.contains("secret-token") && !error.contains('\n'),
            "{error}"
        );
    }
}

#[test]
fn the_shell_exit_code_is_read_from_the_start_of_its_result() {
    assert_eq!(
        shell_exit_code("run_shell", r#"{"exit_code":3,"stdout":"x"}"#),
        Some(3)
    );
    assert_eq!(
        shell_exit_code("run_shell", r#"{"exit_code": -1, "#),
        Some(-1)
    );
    assert_eq!(
        shell_exit_code("run_shell", "could not start the shell"),
        None
    );
    // Another tool's output proves nothing.
    assert_eq!(shell_exit_code("my_tool", r#"{"exit_code":3}"#), None);
}

fn record(task: &str, ts_ms: u64, event: Event) -> EventRecord {
    EventRecord {
        ts_ms,
        task: task.to_owned(),
        event,
    }
}

fn started(task: &str, ts_ms: u64) -> EventRecord {
    record(
        task,
        ts_ms,
        Event::TaskStarted(TaskStarted {
            file: "t.yaml".into(),
            suite: "t".into(),
            run_id: "run-1".into(),
            ybs_version: "0".into(),
            provider: "openai".into(),
            model: "gpt-x".into(),
            temperature: None,
            seed: None,
            workdir: "/w".into(),
            policy_hash: "h".into(),
            base_commit: None,
            system_prompt: "SYSTEM PROMPT TEXT".into(),
            tools: vec![],
            dry_run: false,
            sandbox: Some(Box::new(SandboxInfo {
                mode: "none".into(),
                ..SandboxInfo::default()
            })),
            context_files: vec![],
            shard: None,
        }),
    )
}

/// A task with a retried request, a shell call, a refused call and a
/// check, as the agent would emit it.
fn task_events(task: &str) -> Vec<EventRecord> {
    vec![
        started(task, 1_000),
        record(
            task,
            1_100,
            Event::LlmRetry(LlmRetry {
                iteration: 1,
                attempt: 1,
                delay_ms: 50,
                error: "HTTP 429 quoting the prompt".into(),
            }),
        ),
        record(
            task,
            1_300,
            Event::LlmResponse(LlmResponse {
                iteration: 1,
                response_id: Some("resp-1".into()),
                request_id: None,
                usage: Usage::new(100, 20),
                cost: Cost::Usd(0.5),
                duration_ms: 150,
                tool_calls: 2,
                request_tokens_estimate: None,
                request_tokens_method: None,
                incomplete: None,
                finish_reason: None,
                usage_estimated: false,
            }),
        ),
        record(
            task,
            1_310,
            Event::ToolDecided(ToolDecided {
                call_id: "c1".into(),
                name: "run_shell".into(),
                arguments: json!({"command": "echo ARGUMENT-TEXT"}),
                verdict: "allow".into(),
                rule: "default: allow".into(),
                detail: None,
                resolved: None,
                parent: None,
            }),
        ),
        record(
            task,
            1_400,
            Event::ToolCompleted(ToolCompleted {
                call_id: "c1".into(),
                name: "run_shell".into(),
                ok: true,
                ran: true,
                duration_ms: 80,
                truncated: false,
                output: r#"{"exit_code":2,"stdout":"OUTPUT-TEXT"}"#.into(),
            }),
        ),
        record(
            task,
            1_410,
            Event::ToolDecided(ToolDecided {
                call_id: "c2".into(),
                name: "write_file".into(),
                arguments: json!({"path": "x"}),
                verdict: "deny".into(),
                rule: "deny: write_file".into(),
                detail: None,
                resolved: None,
                parent: None,
            }),
        ),
        record(
            task,
            1_410,
            Event::ToolCompleted(ToolCompleted {
                call_id: "c2".into(),
                name: "write_file".into(),
                ok: false,
                ran: false,
                duration_ms: 0,
                truncated: false,
                output: "refused".into(),
            }),
        ),
        record(
            task,
            1_500,
            Event::CheckCompleted(CheckCompleted {
                name: "tests".into(),
                command: "make test SECRET-CHECK".into(),
                exit_code: Some(1),
                expected_exit: 0,
                passed: false,
                timed_out: false,
                duration_ms: 40,
                output_tail: "CHECK-OUTPUT".into(),
                attempt: 1,
                locations: Vec::new(),
            }),
        ),
        record(
            task,
            1_600,
            Event::TaskFinished(TaskFinished {
                status: Status::Failed,
                reason: Reason::ChecksFailed,
                message: Some("MESSAGE-TEXT".into()),
                expect: "pass".into(),
                iterations: 1,
                usage: Usage::new(100, 20),
                cost: Cost::Usd(0.5),
                duration_ms: 600,
            }),
        ),
    ]
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|attribute| attribute["key"] == key)
        .map(|attribute| &attribute["value"])
}

fn spans_of(server: &Server) -> Vec<Value> {
    server
        .requests()
        .iter()
        .flat_map(|request| {
            let body = request.json();
            body["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn a_task_becomes_one_span_with_its_requests_calls_and_checks_as_children() {
    let server = Server::start((0..20).map(|_| Reply::json(200, &json!({}))).collect());
    let mut sink = OtelSink::start(settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k1"),
    ]))
    .unwrap();
    for event in task_events("t") {
        sink.event(&event).unwrap();
    }
    sink.finish().unwrap();
    assert_eq!(sink.take_warning(), None);
    let requests = server.requests();
    // Everything ended within the batching window: one request.
    assert_eq!(requests.len(), 1);
    assert!(requests.iter().all(|request| request.path == "/v1/traces"
        && request.header("content-type") == Some("application/json")
        && request.header("x-api-key") == Some("k1")));
    let body = requests[0].json();
    let resource = &body["resourceSpans"][0]["resource"];
    assert_eq!(
        attribute(resource, "service.name").unwrap()["stringValue"],
        "ybs"
    );
    let spans = spans_of(&server);
    assert_eq!(spans.len(), 5, "{spans:#?}");
    let named = |prefix: &str| {
        spans
            .iter()
            .find(|span| span["name"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} span in {spans:#?}"))
    };
    let task = named("invoke_agent t");
    assert!(task.get("parentSpanId").is_none());
    assert_eq!(
        task["status"],
        json!({"code": 2, "message": "failed: checks_failed"})
    );
    assert_eq!(task["startTimeUnixNano"], "1000000000");
    assert_eq!(task["endTimeUnixNano"], "1600000000");
    assert_eq!(
        attribute(task, "gen_ai.usage.input_tokens").unwrap()["intValue"],
        "100"
    );
    assert_eq!(
        attribute(task, "ybs.task.reason").unwrap()["stringValue"],
        "checks_failed"
    );
    let chat = named("chat gpt-x");
    assert_eq!(chat["kind"], 3);
    assert_eq!(
        attribute(chat, "gen_ai.operation.name").unwrap()["stringValue"],
        "chat"
    );
    assert_eq!(
        attribute(chat, "gen_ai.request.model").unwrap()["stringValue"],
        "gpt-x"
    );
    assert_eq!(
        attribute(chat, "gen_ai.provider.name").unwrap()["stringValue"],
        "openai"
    );
    assert_eq!(
        attribute(chat, "gen_ai.usage.output_tokens").unwrap()["intValue"],
        "20"
    );
    assert_eq!(attribute(chat, "ybs.llm.retries").unwrap()["intValue"], "1");
    assert_eq!(chat["events"][0]["name"], "ybs.llm.retry");
    // The span covers the retried attempt too.
    assert_eq!(chat["startTimeUnixNano"], "1100000000");
    let shell = named("execute_tool run_shell");
    assert_eq!(
        attribute(shell, "gen_ai.tool.call.id").unwrap()["stringValue"],
        "c1"
    );
    assert_eq!(
        attribute(shell, "ybs.tool.verdict").unwrap()["stringValue"],
        "allow"
    );
    assert_eq!(
        attribute(shell, "process.exit.code").unwrap()["intValue"],
        "2"
    );
    assert_eq!(
        attribute(shell, "ybs.tool.duration_ms").unwrap()["intValue"],
        "80"
    );
    let refused = named("execute_tool write_file");
    assert_eq!(
        attribute(refused, "error.type").unwrap()["stringValue"],
        "refused"
    );
    assert_eq!(
        attribute(refused, "ybs.tool.verdict").unwrap()["stringValue"],
        "deny"
    );
    let check = named("check tests");
    assert_eq!(
        attribute(check, "process.exit.code").unwrap()["intValue"],
        "1"
    );
    for child in [chat, shell, refused, check] {
        assert_eq!(child["parentSpanId"], task["spanId"]);
        assert_eq!(child["traceId"], task["traceId"]);
    }
    // Names and numbers only: no prompt, argument, output or message text.
    let all = requests
        .iter()
        .map(|request| request.text())
        .collect::<String>();
    for text in [
        "SYSTEM PROMPT",
        "ARGUMENT-TEXT",
        "OUTPUT-TEXT",
        "quoting the prompt",
        "SECRET-CHECK",
        "CHECK-OUTPUT",
        "MESSAGE-TEXT",
    ] {
        assert!(!all.contains(text), "{text} was exported");
    }
}

#[test]
fn a_script_call_parents_its_commands() {
    let server = Server::start((0..20).map(|_| Reply::json(200, &json!({}))).collect());
    let mut sink = OtelSink::start(settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ]))
    .unwrap();
    let decided = |call_id: &str, name: &str, parent: Option<&str>| {
        Event::ToolDecided(ToolDecided {
            call_id: call_id.into(),
            name: name.into(),
            arguments: json!({}),
            verdict: "allow".into(),
            rule: "r".into(),
            detail: None,
            resolved: None,
            parent: parent.map(str::to_owned),
        })
    };
    let completed = |call_id: &str, name: &str| {
        Event::ToolCompleted(ToolCompleted {
            call_id: call_id.into(),
            name: name.into(),
            ok: true,
            ran: true,
            duration_ms: 1,
            truncated: false,
            output: String::new(),
        })
    };
    for event in [
        started("t", 1),
        record("t", 2, decided("s", "script", None)),
        record("t", 3, decided("s.1", "read_file", Some("s"))),
        record("t", 4, completed("s.1", "read_file")),
        record("t", 5, completed("s", "script")),
    ] {
        sink.event(&event).unwrap();
    }
    sink.finish().unwrap();
    let spans = spans_of(&server);
    let find = |name: &str| spans.iter().find(|span| span["name"] == name).unwrap();
    let script = find("execute_tool script");
    assert_eq!(
        find("execute_tool read_file")["parentSpanId"],
        script["spanId"]
    );
    // The unfinished task is closed at finish().
    assert_eq!(find("invoke_agent t")["spanId"], script["parentSpanId"]);
}

#[test]
fn an_unreachable_collector_is_a_warning_within_the_timeout() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut sink = OtelSink::start(settings(&[
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            &format!("http://user:pw@127.0.0.1:{port}"),
        ),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
    ]))
    .unwrap();
    let begun = std::time::Instant::now();
    for event in task_events("t") {
        sink.event(&event).unwrap();
    }
    sink.finish().unwrap();
    assert!(begun.elapsed() < Duration::from_secs(4));
    let warning = sink.take_warning().unwrap();
    assert!(warning.starts_with("warning: OpenTelemetry: "), "{warning}");
    assert!(warning.contains("not delivered"), "{warning}");
    assert!(!warning.contains("pw"), "{warning}");
}

#[test]
fn a_collector_that_never_answers_is_given_up_after_the_timeout() {
    // Connections complete in the kernel's backlog; nothing ever answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let mut sink = OtelSink::start(settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "300"),
    ]))
    .unwrap();
    let begun = std::time::Instant::now();
    sink.event(&started("t", 1)).unwrap();
    sink.finish().unwrap();
    assert!(
        begun.elapsed() < Duration::from_secs(3),
        "{:?}",
        begun.elapsed()
    );
    let warning = sink.take_warning().unwrap();
    assert!(warning.contains("1 of 1 span not delivered"), "{warning}");
}

#[test]
fn record_tool_call_exports_one_execute_tool_span() {
    let server = Server::start(vec![Reply::json(200, &json!({}))]);
    let exporter = Exporter::start(settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ]))
    .unwrap();
    exporter.record_tool_call(&ToolCallSpan {
        name: "lint".into(),
        call_id: "7".into(),
        verdict: "allow".into(),
        ok: false,
        ran: true,
        exit_code: Some(3),
        started: UNIX_EPOCH + Duration::from_secs(5),
        duration: Duration::from_millis(12),
    });
    assert_eq!(exporter.shutdown(), None);
    let spans = spans_of(&server);
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0]["name"], "execute_tool lint");
    assert_eq!(spans[0]["startTimeUnixNano"], "5000000000");
    assert_eq!(spans[0]["endTimeUnixNano"], "5012000000");
    assert_eq!(
        attribute(&spans[0], "process.exit.code").unwrap()["intValue"],
        "3"
    );
    assert_eq!(
        attribute(&spans[0], "error.type").unwrap()["stringValue"],
        "tool_error"
    );
}

#[test]
fn after_a_failed_request_spans_are_dropped_not_sent() {
    let server = Server::start(vec![
        Reply::json(503, &json!({})),
        Reply::json(200, &json!({})),
    ]);
    let mut sink = OtelSink::start(settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ]))
    .unwrap();
    let events = task_events("t");
    sink.event(&events[0]).unwrap();
    sink.event(&events[2]).unwrap();
    // The first batch (one chat span) is posted once the window closes.
    let begun = std::time::Instant::now();
    while server.requests().is_empty() {
        assert!(begun.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    for event in &events[3..] {
        sink.event(event).unwrap();
    }
    sink.finish().unwrap();
    assert_eq!(server.requests().len(), 1);
    let warning = sink.take_warning().unwrap();
    assert!(
        warning.contains("5 of 5 spans not delivered") && warning.contains("HTTP 503"),
        "{warning}"
    );
}

#[test]
fn one_exporter_is_shared_by_concurrent_callers() {
    let server = Server::start((0..10).map(|_| Reply::json(200, &json!({}))).collect());
    let exporter = std::sync::Arc::new(
        Exporter::start(settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ]))
        .unwrap(),
    );
    let threads: Vec<_> = (0..10)
        .map(|index| {
            let exporter = std::sync::Arc::clone(&exporter);
            std::thread::spawn(move || {
                exporter.record_tool_call(&ToolCallSpan {
                    name: format!("tool{index}"),
                    call_id: index.to_string(),
                    verdict: "allow".into(),
                    ok: true,
                    ran: true,
                    exit_code: Some(0),
                    started: SystemTime::now(),
                    duration: Duration::from_millis(1),
                });
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(exporter.shutdown(), None);
    assert_eq!(exporter.shutdown(), None);
    let spans = spans_of(&server);
    assert_eq!(spans.len(), 10);
    let mut ids: Vec<&Value> = spans.iter().map(|span| &span["spanId"]).collect();
    ids.sort_by_key(|id| id.to_string());
    ids.dedup();
    assert_eq!(ids.len(), 10);
}

#[test]
fn a_paused_task_and_its_resumed_half_are_spans_of_their_own() {
    use crate::core::event::PendingCall;
    let server = Server::start((0..20).map(|_| Reply::json(200, &json!({}))).collect());
    let mut sink = OtelSink::start(settings(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ]))
    .unwrap();
    let finished = |ts_ms, status| {
        record(
            "t",
            ts_ms,
            Event::TaskFinished(TaskFinished {
                status,
                reason: Reason::Completed,
                message: None,
                expect: "pass".into(),
                iterations: 1,
                usage: Usage::default(),
                cost: Cost::Usd(0.0),
                duration_ms: 10,
            }),
        )
    };
    let pending: PendingCall = serde_json::from_value(json!({
        "id": "c1", "name": "deploy", "arguments": {}, "kind": "caller", "rule": "caller tool"
    }))
    .unwrap();
    for event in [
        started("t", 1_000),
        record(
            "t",
            1_100,
            Event::TaskPaused(TaskPaused {
                pending: vec![pending],
            }),
        ),
        finished(1_100, Status::Paused),
    ] {
        sink.event(&event).unwrap();
    }
    // The resumed process: no task.started, a task.resumed.
    for event in [
        record(
            "t",
            5_000,
            Event::TaskResumed(TaskResumed {
                resumed_by: "approver:alice".into(),
                answers: Vec::new(),
                provider: Some("openai".into()),
                model: Some("m".into()),
            }),
        ),
        finished(5_200, Status::Passed),
    ] {
        sink.event(&event).unwrap();
    }
    sink.finish().unwrap();
    let spans = spans_of(&server);
    let tasks: Vec<&Value> = spans
        .iter()
        .filter(|span| span["name"] == "invoke_agent t")
        .collect();
    assert_eq!(tasks.len(), 2, "{spans:#?}");
    assert_eq!(
        attribute(tasks[0], "ybs.task.pending_calls").unwrap()["intValue"],
        "1"
    );
    assert_eq!(
        attribute(tasks[1], "ybs.resumed_by").unwrap()["stringValue"],
        "approver:alice"
    );
    assert_eq!(tasks[1]["startTimeUnixNano"], "5000000000");
}
