//! `provider: apple` (issue 25 item 1) against a fake `fm serve`: a
//! server with its quirks. It refuses any tool schema with a nested
//! parameter object, answers only the model `system`, reports
//! `prompt_tokens: 0` (or no usage at all), and ends a safety abort with
//! `finish_reason: content_filter`.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use super::{Keys, assert_no_secrets, transcript};
use crate::support::Ybs;
use crate::support::server::{Reply, Request, Server};
use crate::support::wire;

/// A tool whose parameters nest an object two levels deep; it answers
/// with the arguments it got.
const PLACE_SCHEMA: &str = r#"{"name": "place", "description": "Record a place",
  "parameters": {"type": "object",
    "properties": {
      "name": {"type": "string"},
      "address": {"type": "object", "description": "Where it is",
        "properties": {
          "city": {"type": "string"},
          "geo": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
        "required": ["city"]}},
    "required": ["name", "address"]}}"#;

const PLACE_TOOL: &str =
    "#!/bin/sh\ninput=$(cat)\nprintf '{\"success\": true, \"result\": %s}\\n' \"$input\"\n";

/// True when a tool's parameters hold an object-typed property.
fn nested_parameter(tools: &Value) -> bool {
    tools.as_array().into_iter().flatten().any(|tool| {
        tool["function"]["parameters"]["properties"]
            .as_object()
            .is_some_and(|properties| properties.values().any(|p| p["type"] == "object"))
    })
}

/// What `fm serve` refuses: a nested parameter object (its tool-schema
/// subset) and any model but `system`.
fn fm_serve_gate(request: &Request) -> Option<Reply> {
    let body = request.json();
    if nested_parameter(&body["tools"]) {
        return Some(Reply::json(
            400,
            &json!({"error": {"message": "Unsupported tool schema: nested object parameters are not supported",
                              "type": "invalid_request_error"}}),
        ));
    }
    if body["model"] != "system" {
        return Some(Reply::json(
            404,
            &json!({"error": {"message": format!("The model `{}` does not exist", body["model"]),
                              "type": "invalid_request_error"}}),
        ));
    }
    None
}

/// A streamed turn calling `place` with flat argument names, usage
/// `prompt_tokens: 0` as `fm serve` reports it.
fn flat_call() -> Reply {
    let arguments = json!({"name": "home", "address__city": "Paris", "address__geo__lat": 48.85});
    let mut chunks =
        wire::openai_call_chunks(&[("call_a1", "place", &arguments.to_string())], 12, false);
    let last = chunks.last_mut().unwrap();
    last["usage"] = json!({"prompt_tokens": 0, "completion_tokens": 9, "total_tokens": 9});
    Reply::sse(&wire::sse_done(&chunks))
}

/// A streamed answer with no usage at all (a bridge's way).
fn answer_without_usage(text: &str) -> Reply {
    Reply::sse(&wire::sse_done(&[
        json!({"id": "chatcmpl-a2", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
        json!({"id": "chatcmpl-a2", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]))
}

fn scratch() -> (Ybs, Keys) {
    let keys = Keys::new();
    let ybs = Ybs::new()
        .env("OPENAI_API_KEY", &keys.openai)
        .env("ANTHROPIC_API_KEY", &keys.anthropic);
    let cache = ybs.home().join(".cache");
    let ybs = ybs.env("XDG_CACHE_HOME", cache.to_str().unwrap());
    let tool = ybs.path().join("tools/place");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::write(&tool, PLACE_TOOL).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    ybs.file("tools/place.tool.json", PLACE_SCHEMA);
    ybs.file(
        "t.yaml",
        "prompt: Record home, in Paris.\ncommit: false\ntools: { builtin: [read_file], external: [place] }\npolicy: { allow: [place, read_file] }\n",
    );
    (ybs, keys)
}

#[test]
fn apple_sends_no_key_flattens_nested_parameters_and_estimates_usage() {
    let server = Server::start_checked(
        vec![flat_call(), answer_without_usage("Recorded.")],
        fm_serve_gate,
    );
    let (ybs, keys) = scratch();
    // The endpoint from the environment, no `--model`: `system`.
    let ybs = ybs.env("APPLE_FM_BASE_URL", &format!("{}/v1", server.url));
    let run = ybs.run(["run", "t.yaml", "--provider", "apple"]);
    run.expect_code(0);
    let transcript = transcript(&run);
    assert_eq!(transcript["status"], "passed", "{transcript}");
    assert_eq!(transcript["manifest"]["provider"], "apple");

    // The call as the tool and the transcript see it: nested again.
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let nested = json!({"name": "home", "address": {"city": "Paris", "geo": {"lat": 48.85}}});
    assert_eq!(calls[0]["arguments"], nested);
    assert_eq!(calls[0]["result"]["ok"], true, "{}", calls[0]);
    assert!(
        calls[0]["result"]["output"]
            .to_string()
            .contains(r#"\"geo\""#),
        "the tool got its arguments nested: {}",
        calls[0]
    );

    // What the server got: no key, the model `system`, flat parameters,
    // and the call sent back with the names it was made with.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, "/v1/chat/completions");
        assert!(
            request.header("authorization").is_none(),
            "{:?}",
            request.headers
        );
        let body = request.json();
        assert_eq!(body["model"], "system");
        assert!(!nested_parameter(&body["tools"]), "{}", body["tools"]);
        let place = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["function"]["name"] == "place")
            .unwrap();
        let parameters = &place["function"]["parameters"];
        assert_eq!(
            parameters["required"],
            json!(["name", "address__city"]),
            "`geo` is optional, so `lat` is too: {parameters}"
        );
    }
    let history = requests[1].json()["messages"].clone();
    let assistant = history
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "assistant")
        .unwrap();
    let sent: Value = serde_json::from_str(
        assistant["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        sent,
        json!({"name": "home", "address__city": "Paris", "address__geo__lat": 48.85})
    );

    // Usage: the zero counts replaced by estimates, and marked so.
    let llm_calls = transcript["llm_calls"].as_array().unwrap();
    assert_eq!(llm_calls.len(), 2);
    for call in llm_calls {
        assert_eq!(call["usage_estimated"], true, "{call}");
        assert!(
            call["usage"]["input_tokens"].as_u64().unwrap() > 10,
            "{call}"
        );
        assert!(
            call["usage"]["output_tokens"].as_u64().unwrap() > 0,
            "{call}"
        );
    }
    assert_eq!(
        llm_calls[0]["usage"]["output_tokens"], 9,
        "the server's own count of the answer is kept"
    );
    let events = run.events("t");
    let responses: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "llm.response")
        .collect();
    assert!(
        responses
            .iter()
            .all(|event| event["usage_estimated"] == true)
    );
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn an_openai_provider_against_fm_serve_is_refused_for_the_nested_schema() {
    // The same task with `provider: openai` at the same server: the schema
    // goes as it is, and the server refuses it. What `apple` fixes.
    let server = Server::start_checked(vec![flat_call()], fm_serve_gate);
    let (ybs, _keys) = scratch();
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--model",
        "system",
        "--endpoint",
        &format!("{}/v1", server.url),
    ]);
    run.expect_code(4);
    let transcript = transcript(&run);
    assert_eq!(transcript["reason"], "provider_error", "{transcript}");
    assert!(
        transcript["message"]
            .as_str()
            .unwrap()
            .contains("nested object parameters"),
        "{transcript}"
    );
}

#[test]
fn apple_safety_abort_fails_with_content_filter_and_runs_no_call() {
    // A safety abort mid-stream: partial text kept, a call in the same
    // turn never run.
    let abort = Reply::sse(&wire::sse_done(&[
        json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "Here is the pl"}, "finish_reason": null}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
               "function": {"name": "place", "arguments": "{\"name\": \"x\", \"address__city\": \"y\"}"}}]}, "finish_reason": null}]}),
        json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}),
    ]));
    let server = Server::start_checked(vec![abort], fm_serve_gate);
    let (ybs, keys) = scratch();
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "apple",
        "--endpoint",
        &format!("{}/v1", server.url),
    ]);
    run.expect_code(1);
    let transcript = transcript(&run);
    assert_eq!(transcript["status"], "failed", "{transcript}");
    assert_eq!(transcript["reason"], "content_filter", "{transcript}");
    let message = transcript["message"].as_str().unwrap();
    assert!(message.contains("content filter"), "{message}");
    assert!(message.contains("Here is the pl"), "{message}");
    assert!(transcript["tool_calls"].as_array().unwrap().is_empty());
    assert_eq!(server.requests().len(), 1);
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains("content_filter"), "{junit}");
    assert_no_secrets(&ybs, &run, &keys);
}
