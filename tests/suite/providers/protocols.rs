//! Acceptance 1: a two-turn task (write a file, then answer) against each
//! wire format, streaming and not; the server checks what ybs sent.

use serde_json::{Value, json};

use super::{BUILTIN, MARKER, assert_no_secrets, run, scratch, task_yaml, transcript};
use crate::support::server::{Request, Server};
use crate::support::wire;

fn write_hello() -> Value {
    json!({"path": "hello.txt", "content": "hi\n"})
}

fn names(tools: &Value, name_of: impl Fn(&Value) -> &Value) -> Vec<String> {
    tools
        .as_array()
        .expect("tools array")
        .iter()
        .map(|tool| name_of(tool).as_str().unwrap().to_owned())
        .collect()
}

/// The write_file schema as ybs offers it.
fn assert_write_file_schema(schema: &Value) {
    assert_eq!(schema["type"], "object", "{schema}");
    assert_eq!(schema["properties"]["path"]["type"], "string", "{schema}");
    assert_eq!(
        schema["properties"]["content"]["type"], "string",
        "{schema}"
    );
    assert_eq!(schema["required"], json!(["path", "content"]), "{schema}");
}

/// What every passing two-turn run leaves behind.
fn assert_two_turns_passed(ybs: &crate::support::Ybs, run: &crate::support::Run, call_id: &str) {
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let transcript = transcript(run);
    assert_eq!(transcript["status"], "passed");
    assert_eq!(transcript["iterations"], 2);
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["id"], call_id);
    assert_eq!(calls[0]["name"], "write_file");
    assert_eq!(calls[0]["arguments"], write_hello());
    assert_eq!(calls[0]["result"]["ran"], true);
    assert_eq!(calls[0]["result"]["ok"], true);
    assert_eq!(transcript["usage"]["input_tokens"], 230);
    assert_eq!(transcript["usage"]["output_tokens"], 25);
    assert!(transcript["retries"].as_array().unwrap().is_empty());
}

fn assert_openai_request(request: &Request, streaming: bool, key: &str) {
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(&*format!("Bearer {key}"))
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body = request.json();
    assert_eq!(body["model"], "m");
    if streaming {
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
    } else {
        assert!(body.get("stream").is_none(), "{body}");
    }
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"].as_str().unwrap().ends_with(MARKER),
        "{}",
        messages[0]
    );
    assert_eq!(messages[1]["role"], "user");
    assert!(
        messages[1..].iter().all(|m| m["role"] != "system"),
        "one system message, first"
    );
    let tools = &body["tools"];
    assert_eq!(names(tools, |t| &t["function"]["name"]), BUILTIN);
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["type"] == "function")
    );
    assert_write_file_schema(&tools[1]["function"]["parameters"]);
}

/// The second OpenAI request carries the call and its result, tied by id.
fn assert_openai_result(request: &Request, call_id: &str) {
    let body = request.json();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:?}");
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["tool_calls"][0]["id"], call_id);
    assert_eq!(assistant["tool_calls"][0]["type"], "function");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "write_file");
    let arguments: Value = serde_json::from_str(
        assistant["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .expect("arguments as a JSON string"),
    )
    .unwrap();
    assert_eq!(arguments, write_hello());
    let result = &messages[3];
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], call_id);
    assert!(
        result["content"].as_str().unwrap().contains("hello.txt"),
        "{result}"
    );
}

#[test]
fn openai_streaming_two_turns() {
    let server = Server::start(vec![
        wire::openai_sse_call("call_w1", "write_file", &write_hello()),
        wire::openai_sse_answer("wrote hello.txt"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    assert_two_turns_passed(&ybs, &run, "call_w1");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_openai_request(request, true, &keys.openai);
    }
    assert_eq!(requests[0].json()["messages"].as_array().unwrap().len(), 2);
    assert_openai_result(&requests[1], "call_w1");
    let transcript = transcript(&run);
    assert_eq!(transcript["manifest"]["provider"], "openai");
    assert_eq!(transcript["cost"], "unknown", "model `m` has no price");
    assert_eq!(
        transcript["manifest"]["response_ids"],
        json!(["chatcmpl-1", "chatcmpl-2"])
    );
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn openai_non_streaming_two_turns() {
    let server = Server::start(vec![
        wire::openai_json_call("call_w2", "write_file", &write_hello()),
        wire::openai_json_answer("wrote hello.txt"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", r#"{"llm": {"stream": false}}"#);
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    assert_two_turns_passed(&ybs, &run, "call_w2");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_openai_request(request, false, &keys.openai);
    }
    assert_openai_result(&requests[1], "call_w2");
    assert_no_secrets(&ybs, &run, &keys);
}

fn assert_anthropic_request(request: &Request, streaming: bool, key: &str) {
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(key));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    let body = request.json();
    assert_eq!(body["model"], "m");
    assert!(body["max_tokens"].as_u64().is_some_and(|n| n > 0), "{body}");
    assert_eq!(body.get("stream").is_some(), streaming, "{body}");
    // Top-level, as one text block with a prompt-cache breakpoint.
    assert_eq!(body["system"][0]["type"], "text", "{body}");
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    assert!(
        body["system"][0]["text"]
            .as_str()
            .unwrap()
            .ends_with(MARKER),
        "system prompt is top-level: {body}"
    );
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"] != "system"));
    assert_eq!(messages[0]["role"], "user");
    let tools = &body["tools"];
    assert_eq!(names(tools, |t| &t["name"]), BUILTIN);
    assert_write_file_schema(&tools[1]["input_schema"]);
}

fn assert_anthropic_result(request: &Request, call_id: &str) {
    let body = request.json();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    let assistant = &messages[1];
    assert_eq!(assistant["role"], "assistant");
    let tool_use = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|block| block["type"] == "tool_use")
        .expect("a tool_use block");
    assert_eq!(tool_use["id"], call_id);
    assert_eq!(tool_use["name"], "write_file");
    assert_eq!(tool_use["input"], write_hello());
    let result = &messages[2];
    assert_eq!(result["role"], "user");
    let block = &result["content"][0];
    assert_eq!(block["type"], "tool_result");
    assert_eq!(block["tool_use_id"], call_id);
    assert_eq!(block["is_error"], false);
    assert!(
        block["content"].as_str().unwrap().contains("hello.txt"),
        "{block}"
    );
}

#[test]
fn anthropic_streaming_two_turns() {
    let server = Server::start(vec![
        wire::anthropic_sse_call("toolu_w3", "write_file", &write_hello(), 7),
        wire::anthropic_sse_answer("wrote hello.txt"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "anthropic", &server.url, &[]);
    assert_two_turns_passed(&ybs, &run, "toolu_w3");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_anthropic_request(request, true, &keys.anthropic);
    }
    assert_anthropic_result(&requests[1], "toolu_w3");
    assert_eq!(
        transcript(&run)["manifest"]["response_ids"],
        json!(["msg_1", "msg_2"])
    );
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn anthropic_non_streaming_two_turns() {
    let server = Server::start(vec![
        wire::anthropic_json_call("toolu_w4", "write_file", &write_hello()),
        wire::anthropic_json_answer("wrote hello.txt"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(
        "operator.json",
        r#"{"llm": {"stream": false, "pricing": {"m": {"input_per_mtok": 3, "output_per_mtok": 15}}}}"#,
    );
    let run = run(
        &ybs,
        "anthropic",
        &server.url,
        &["--config", "operator.json"],
    );
    assert_two_turns_passed(&ybs, &run, "toolu_w4");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_anthropic_request(request, false, &keys.anthropic);
    }
    assert_anthropic_result(&requests[1], "toolu_w4");
    // Usage priced from `llm.pricing`: 230 in × $3/M + 25 out × $15/M.
    let cost = transcript(&run)["cost"].as_f64().expect("a priced model");
    assert!((cost - 0.001_065).abs() < 1e-9, "{cost}");
    // The text before the call is kept with it.
    let assistant = &requests[1].json()["messages"][1];
    assert_eq!(assistant["content"][0]["text"], "Writing it.");
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn ollama_streaming_two_turns() {
    let server = Server::start(vec![
        wire::ollama_call(&[("write_file", write_hello())]),
        wire::ollama_answer("wrote hello.txt"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "ollama", &server.url, &[]);
    // Ollama sends no call ids: ybs numbers them across the conversation.
    assert_two_turns_passed(&ybs, &run, "call_1");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/api/chat");
        // Ollama takes no key: neither vendor's key is sent to it.
        assert_eq!(request.header("authorization"), None);
        assert_eq!(request.header("x-api-key"), None);
        let body = request.json();
        assert_eq!(body["model"], "m");
        assert_eq!(body["stream"], true);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        assert!(messages[0]["content"].as_str().unwrap().ends_with(MARKER));
        assert_eq!(names(&body["tools"], |t| &t["function"]["name"]), BUILTIN);
        assert_write_file_schema(&body["tools"][1]["function"]["parameters"]);
    }
    let body = requests[1].json();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["name"],
        "write_file"
    );
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        write_hello(),
        "Ollama takes arguments as an object"
    );
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_name"], "write_file");
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("hello.txt")
    );
    assert_no_secrets(&ybs, &run, &keys);
}
