//! OpenTelemetry export (issue 13, acceptance 4): the real `ybs` binary,
//! a scripted model making a tool call, and a local OTLP/HTTP receiver
//! (the test server) that decodes what arrives, as JSON or, for the
//! default `http/protobuf`, with the small protobuf reader below.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, call};
use crate::support::server::{Reply, Server};

const OTEL_VARIABLES: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "TRACEPARENT",
];

/// A task whose model runs one shell command, then answers; its check
/// passes or fails as asked.
fn scratch(check_passes: bool) -> Ybs {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: do the thing\ncommit: false\npolicy:\n  default: allow\nchecks:\n  - name: ok\n    run: {}\n",
            if check_passes { "\"true\"" } else { "\"false\"" }
        ),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "echo SHELL-OUTPUT; exit 3"})),
            answer("done"),
        ],
    );
    ybs
}

/// Runs `ybs run t.yaml` with exactly these OTel variables.
fn run(ybs: &Ybs, variables: &[(&str, &str)]) -> (crate::support::Run, Duration) {
    let mut command = ybs.command();
    for name in OTEL_VARIABLES {
        command.env_remove(name);
    }
    for (name, value) in variables {
        command.env(name, value);
    }
    let begun = Instant::now();
    let output = command.args(["run", "t.yaml"]).output().unwrap();
    (
        crate::support::Run::from_output(output, ybs.path()),
        begun.elapsed(),
    )
}

fn collector() -> Server {
    Server::start((0..50).map(|_| Reply::json(200, &json!({}))).collect())
}

fn json_spans(server: &Server) -> Vec<Value> {
    server
        .requests()
        .iter()
        .flat_map(|request| {
            assert_eq!(request.path, "/v1/traces");
            assert_eq!(request.header("content-type"), Some("application/json"));
            request.json()["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .cloned()
                .unwrap()
        })
        .collect()
}

fn attribute(span: &Value, key: &str) -> Value {
    let found = span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|attribute| attribute["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {span:#}"));
    let value = &found["value"];
    // OTLP JSON: 64-bit integers are strings.
    match value.get("intValue") {
        Some(Value::String(number)) => json!(number.parse::<i64>().unwrap()),
        _ => value.as_object().unwrap().values().next().unwrap().clone(),
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| span["name"] == name).collect()
}

#[test]
fn a_run_exports_one_task_span_with_llm_and_tool_spans_as_json() {
    let server = collector();
    let ybs = scratch(true);
    let (run, _) = run(
        &ybs,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0ken"),
            ("OTEL_SERVICE_NAME", "agents-ci"),
        ],
    );
    run.expect_code(0);
    assert!(!run.stderr.contains("OpenTelemetry"), "{}", run.stderr);
    let requests = server.requests();
    assert!(!requests.is_empty());
    assert!(
        requests
            .iter()
            .all(|request| request.header("authorization") == Some("Bearer t0ken"))
    );
    let resource = &requests[0].json()["resourceSpans"][0]["resource"];
    assert_eq!(attribute(resource, "service.name"), "agents-ci");
    let spans = json_spans(&server);
    let tasks = named(&spans, "invoke_agent t");
    assert_eq!(tasks.len(), 1, "{spans:#?}");
    let task = tasks[0];
    assert!(task.get("parentSpanId").is_none());
    assert_eq!(task["status"]["code"], 1);
    assert_eq!(attribute(task, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attribute(task, "ybs.task.status"), "passed");
    assert_eq!(attribute(task, "gen_ai.usage.input_tokens"), 220);
    assert_eq!(attribute(task, "gen_ai.usage.output_tokens"), 30);
    let chats = named(&spans, "chat replay");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for (chat, (input, output)) in chats.iter().zip([(100, 20), (120, 10)]) {
        assert_eq!(chat["kind"], 3);
        assert_eq!(attribute(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attribute(chat, "gen_ai.request.model"), "replay");
        assert_eq!(attribute(chat, "gen_ai.usage.input_tokens"), input);
        assert_eq!(attribute(chat, "gen_ai.usage.output_tokens"), output);
        assert_eq!(attribute(chat, "ybs.llm.retries"), 0);
    }
    let tools = named(&spans, "execute_tool run_shell");
    assert_eq!(tools.len(), 1, "{spans:#?}");
    let tool = tools[0];
    assert_eq!(attribute(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attribute(tool, "gen_ai.tool.name"), "run_shell");
    assert_eq!(attribute(tool, "gen_ai.tool.call.id"), "call_0");
    assert_eq!(attribute(tool, "ybs.tool.verdict"), "allow");
    assert_eq!(attribute(tool, "process.exit.code"), 3);
    assert!(attribute(tool, "ybs.tool.duration_ms").is_i64());
    let check = named(&spans, "check ok");
    assert_eq!(check.len(), 1, "{spans:#?}");
    for child in chats.iter().chain([&tool, &check[0]]) {
        assert_eq!(child["parentSpanId"], task["spanId"], "{child:#}");
        assert_eq!(child["traceId"], task["traceId"], "{child:#}");
        let (start, end) = (
            child["startTimeUnixNano"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
            child["endTimeUnixNano"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        );
        assert!(start <= end, "{child:#}");
    }
    // No prompt, no tool output in any request.
    let everything: String = requests.iter().map(|request| request.text()).collect();
    assert!(!everything.contains("SHELL-OUTPUT"));
    assert!(!everything.contains("do the thing"));
}

#[test]
fn the_default_protocol_is_protobuf() {
    let server = collector();
    let ybs = scratch(false);
    let (run, _) = run(
        &ybs,
        &[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            &format!("{}/custom/traces", server.url),
        )],
    );
    // A failing task: the exit code is the task's.
    run.expect_code(1);
    let requests = server.requests();
    assert!(!requests.is_empty());
    let mut spans = Vec::new();
    for request in &requests {
        assert_eq!(request.path, "/custom/traces");
        assert_eq!(
            request.header("content-type"),
            Some("application/x-protobuf")
        );
        spans.extend(protobuf::spans(&request.body));
    }
    let task = spans
        .iter()
        .find(|span| span.name == "invoke_agent t")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(task.parent, None);
    assert_eq!(task.status_code, 2);
    assert_eq!(task.trace_id.len(), 16);
    assert_eq!(task.span_id.len(), 8);
    assert_eq!(
        task.string("ybs.task.reason").as_deref(),
        Some("checks_failed")
    );
    let tool = spans
        .iter()
        .find(|span| span.name == "execute_tool run_shell")
        .unwrap();
    assert_eq!(tool.parent.as_ref(), Some(&task.span_id));
    assert_eq!(tool.trace_id, task.trace_id);
    assert_eq!(tool.int("process.exit.code"), Some(3));
    assert_eq!(
        tool.string("gen_ai.tool.name").as_deref(),
        Some("run_shell")
    );
    let chats: Vec<_> = spans
        .iter()
        .filter(|span| span.name == "chat replay")
        .collect();
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[0].int("gen_ai.usage.input_tokens"), Some(100));
    assert_eq!(chats[0].kind, 3);
    assert!(
        chats
            .iter()
            .all(|chat| chat.parent.as_ref() == Some(&task.span_id))
    );
    assert!(
        spans
            .iter()
            .all(|span| span.start <= span.end && span.start > 0)
    );
}

#[test]
fn nothing_is_sent_when_disabled_or_unset() {
    let server = collector();
    let ybs = scratch(true);
    let (disabled, _) = run(
        &ybs,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    );
    disabled.expect_code(0);
    let (empty, _) = run(
        &ybs,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x=y"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    empty.expect_code(0);
    let (unset, _) = run(&ybs, &[]);
    unset.expect_code(0);
    for run in [&disabled, &empty, &unset] {
        assert!(!run.stderr.contains("OpenTelemetry"), "{}", run.stderr);
    }
    assert!(server.requests().is_empty());
}

#[test]
fn an_unreachable_collector_is_one_warning_and_changes_no_exit_code() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    for (passes, code) in [(true, 0), (false, 1)] {
        let ybs = scratch(passes);
        let (run, took) = run(&ybs, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
        run.expect_code(code);
        assert!(took < Duration::from_secs(20), "{took:?}");
        let warnings: Vec<&str> = run
            .stderr
            .lines()
            .filter(|line| line.contains("OpenTelemetry"))
            .collect();
        assert_eq!(warnings.len(), 1, "{}", run.stderr);
        assert!(
            warnings[0].starts_with("warning: OpenTelemetry: "),
            "{}",
            warnings[0]
        );
        assert!(warnings[0].contains("not delivered"), "{}", warnings[0]);
    }
}

#[test]
fn a_collector_that_never_answers_costs_at_most_the_timeout() {
    // Connections complete in the kernel's backlog; nothing ever answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let ybs = scratch(true);
    let (run, took) = run(
        &ybs,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &url),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
        ],
    );
    run.expect_code(0);
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(
        run.stderr.contains("warning: OpenTelemetry: "),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unusable_variable_is_a_warning_and_the_run_goes_on() {
    let ybs = scratch(true);
    let (run, _) = run(
        &ybs,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
    );
    run.expect_code(0);
    assert!(
        run.stderr.contains(
            "warning: OpenTelemetry disabled: OTEL_EXPORTER_OTLP_PROTOCOL=`grpc` is not supported"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn an_interrupted_run_still_delivers_its_spans() {
    let server = collector();
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: do the thing\ncommit: false\npolicy:\n  default: allow\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "run_shell",
                json!({"command": "sleep 38.5", "timeout_seconds": 60}),
            ),
            answer("never"),
        ],
    );
    let mut command = ybs.command();
    for name in OTEL_VARIABLES {
        command.env_remove(name);
    }
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    let mut child = command.args(["run", "t.yaml"]).spawn().unwrap();
    let started = Instant::now();
    while !ybs.exists("ybs-out/t/events.jsonl")
        || !ybs.read("ybs-out/t/events.jsonl").contains("tool.decided")
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let spans = json_spans(&server);
    let task = named(&spans, "invoke_agent t");
    assert_eq!(task.len(), 1, "{spans:#?}");
    assert_eq!(attribute(task[0], "ybs.task.reason"), "interrupted");
    assert_eq!(named(&spans, "chat replay").len(), 1, "{spans:#?}");
}

/// Just enough of a protobuf reader for `ExportTraceServiceRequest`:
/// field numbers from opentelemetry/proto/trace/v1/trace.proto and
/// common/v1/common.proto, written independently of ybs's encoder.
mod protobuf {
    #[derive(Debug, Default)]
    pub struct Span {
        pub trace_id: Vec<u8>,
        pub span_id: Vec<u8>,
        pub parent: Option<Vec<u8>>,
        pub name: String,
        pub kind: u64,
        pub start: u64,
        pub end: u64,
        pub status_code: u64,
        pub attributes: Vec<(String, Value)>,
    }

    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Str(String),
        Int(i64),
        Other,
    }

    impl Span {
        pub fn string(&self, key: &str) -> Option<String> {
            self.attributes
                .iter()
                .find_map(|(name, value)| match value {
                    Value::Str(text) if name == key => Some(text.clone()),
                    _ => None,
                })
        }

        pub fn int(&self, key: &str) -> Option<i64> {
            self.attributes
                .iter()
                .find_map(|(name, value)| match value {
                    Value::Int(number) if name == key => Some(*number),
                    _ => None,
                })
        }
    }

    enum Field<'a> {
        Varint(u64),
        Fixed64(u64),
        Bytes(&'a [u8]),
        Fixed32,
    }

    /// Every (field number, value) of one message.
    fn fields(mut data: &[u8]) -> Vec<(u64, Field<'_>)> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let key = varint(&mut data);
            let field = match key & 7 {
                0 => Field::Varint(varint(&mut data)),
                1 => {
                    let (bytes, rest) = data.split_at(8);
                    data = rest;
                    Field::Fixed64(u64::from_le_bytes(bytes.try_into().unwrap()))
                }
                2 => {
                    let len = usize::try_from(varint(&mut data)).unwrap();
                    let (bytes, rest) = data.split_at(len);
                    data = rest;
                    Field::Bytes(bytes)
                }
                5 => {
                    data = &data[4..];
                    Field::Fixed32
                }
                other => panic!("wire type {other}"),
            };
            out.push((key >> 3, field));
        }
        out
    }

    fn varint(data: &mut &[u8]) -> u64 {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = data[0];
            *data = &data[1..];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
        }
        value
    }

    fn bytes_of(message: &[u8], number: u64) -> Vec<&[u8]> {
        fields(message)
            .into_iter()
            .filter_map(|(field, value)| match value {
                Field::Bytes(bytes) if field == number => Some(bytes),
                _ => None,
            })
            .collect()
    }

    /// ExportTraceServiceRequest.resource_spans(1) → ResourceSpans.scope_spans(2)
    /// → ScopeSpans.spans(2).
    pub fn spans(request: &[u8]) -> Vec<Span> {
        let mut out = Vec::new();
        for resource_spans in bytes_of(request, 1) {
            for scope_spans in bytes_of(resource_spans, 2) {
                for span in bytes_of(scope_spans, 2) {
                    out.push(span_of(span));
                }
            }
        }
        out
    }

    fn span_of(message: &[u8]) -> Span {
        let mut span = Span::default();
        for (number, field) in fields(message) {
            match (number, field) {
                (1, Field::Bytes(bytes)) => span.trace_id = bytes.to_vec(),
                (2, Field::Bytes(bytes)) => span.span_id = bytes.to_vec(),
                (4, Field::Bytes(bytes)) => span.parent = Some(bytes.to_vec()),
                (5, Field::Bytes(bytes)) => span.name = String::from_utf8(bytes.to_vec()).unwrap(),
                (6, Field::Varint(kind)) => span.kind = kind,
                (7, Field::Fixed64(nanos)) => span.start = nanos,
                (8, Field::Fixed64(nanos)) => span.end = nanos,
                (9, Field::Bytes(key_value)) => span.attributes.push(attribute(key_value)),
                (15, Field::Bytes(status)) => {
                    for (number, field) in fields(status) {
                        if let (3, Field::Varint(code)) = (number, field) {
                            span.status_code = code;
                        }
                    }
                }
                _ => {}
            }
        }
        span
    }

    /// KeyValue { key = 1; AnyValue value = 2 }; AnyValue { string_value = 1;
    /// int_value = 3; ... }.
    fn attribute(message: &[u8]) -> (String, Value) {
        let mut key = String::new();
        let mut value = Value::Other;
        for (number, field) in fields(message) {
            match (number, field) {
                (1, Field::Bytes(bytes)) => key = String::from_utf8(bytes.to_vec()).unwrap(),
                (2, Field::Bytes(any)) => {
                    for (number, field) in fields(any) {
                        value = match (number, field) {
                            (1, Field::Bytes(text)) => {
                                Value::Str(String::from_utf8(text.to_vec()).unwrap())
                            }
                            (3, Field::Varint(number)) => {
                                Value::Int(i64::from_ne_bytes(number.to_ne_bytes()))
                            }
                            _ => Value::Other,
                        };
                    }
                }
                _ => {}
            }
        }
        (key, value)
    }
}

#[test]
fn exported_attributes_pass_through_secret_masking() {
    const SECRET: &str = "s3cr3t-deploy-value-4242";
    let server = collector();
    let ybs = Ybs::new().env("DEPLOY_TOKEN", SECRET);
    // The policy rule that decides the call names the secret: the rule is
    // exported (`ybs.tool.rule`), masked like in every other output.
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: do the thing\ncommit: false\npolicy:\n  allow: [\"run_shell(echo {SECRET}*)\"]\n"
        ),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": format!("echo {SECRET}")})),
            answer("done"),
        ],
    );
    let (run, _) = run(
        &ybs,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    run.expect_code(0);
    let spans = json_spans(&server);
    let tool = named(&spans, "execute_tool run_shell");
    assert_eq!(tool.len(), 1, "{spans:#?}");
    assert_eq!(attribute(tool[0], "ybs.tool.verdict"), "allow");
    let rule = attribute(tool[0], "ybs.tool.rule");
    assert!(rule.as_str().unwrap().contains("[REDACTED"), "{rule}");
    let everything: String = server
        .requests()
        .iter()
        .map(|request| request.text())
        .collect();
    assert!(!everything.contains(SECRET), "the secret was exported");
}

/// `ybs resume` goes on in a new process: the chat spans of the task's
/// second half name the model, as the first half's do (they had an empty
/// model, `chat ` and `gen_ai.request.model: ""`).
#[test]
fn the_chat_spans_of_a_resumed_task_name_its_model() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: deploy, then say done\nmodel: tiny-model\ncommit: false\ntools:\n  caller:\n    - {name: deploy, description: Deploys}\npolicy:\n  allow: [deploy]\n",
    );
    let first = ybs.home().join("c1.json");
    let second = ybs.home().join("c2.json");
    for (path, interactions) in [
        (&first, vec![call("deploy", json!({}))]),
        (&second, vec![answer("done")]),
    ] {
        let text = json!({"version": 1, "interactions": interactions}).to_string();
        std::fs::write(path, text).unwrap();
    }
    let results = ybs.home().join("r.json");
    std::fs::write(
        &results,
        json!({"results": [{"id": "call_0", "output": "deployed"}]}).to_string(),
    )
    .unwrap();
    let mut spans = Vec::new();
    for (args, code) in [
        (
            vec!["run", "t.yaml", "--cassette", first.to_str().unwrap()],
            3,
        ),
        (
            vec![
                "resume",
                "ybs-out",
                "--results",
                results.to_str().unwrap(),
                "--cassette",
                second.to_str().unwrap(),
            ],
            0,
        ),
    ] {
        let server = collector();
        let mut command = ybs.command();
        for name in OTEL_VARIABLES {
            command.env_remove(name);
        }
        command
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
        let output = command.args(&args).output().unwrap();
        crate::support::Run::from_output(output, ybs.path()).expect_code(code);
        spans.push(json_spans(&server));
    }
    for (half, spans) in spans.iter().enumerate() {
        let chats: Vec<&Value> = spans
            .iter()
            .filter(|span| span["name"].as_str().unwrap().starts_with("chat"))
            .collect();
        assert_eq!(chats.len(), 1, "half {half}: {spans:#?}");
        assert_eq!(chats[0]["name"], "chat tiny-model", "half {half}");
        assert_eq!(
            attribute(chats[0], "gen_ai.request.model"),
            "tiny-model",
            "half {half}"
        );
        assert_eq!(attribute(chats[0], "gen_ai.provider.name"), "replay");
    }
}
