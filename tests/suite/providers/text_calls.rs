//! Acceptance 5: `llm.text_tool_calls` — a turn whose content is one
//! JSON call for an offered tool runs that tool (a call inside prose:
//! tests/suite/small_models.rs); JSON naming no offered tool stays an
//! answer; with the option off nothing is recovered; a cut-off call is an
//! error result the model sees, never completed.

use serde_json::{Value, json};

use super::{assert_no_secrets, run, scratch, task_yaml, transcript};
use crate::support::server::{Reply, Server};
use crate::support::wire;
use crate::support::{Run, Ybs};

const ON: &str = r#"{"llm": {"text_tool_calls": true}}"#;

fn fenced_call() -> String {
    let call = json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}});
    format!("```json\n{call:#}\n```")
}

/// The assistant messages of a transcript.
fn assistant_messages(transcript: &Value) -> Vec<Value> {
    transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .cloned()
        .collect()
}

/// Runs a one-turn task whose only turn has `content`; it must stay an
/// answer: nothing runs, the content is the final answer.
fn assert_stays_an_answer(config: Option<&str>, content: &str) {
    let server = Server::start(vec![wire::openai_sse_content(content)]);
    let (ybs, keys) = scratch(&task_yaml(""));
    if let Some(config) = config {
        ybs.file(".ybs.json", config);
    }
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 1, "{content}");
    assert!(!ybs.exists("hello.txt"));
    let transcript = transcript(&run);
    assert_eq!(transcript["iterations"], 1);
    assert!(transcript["tool_calls"].as_array().unwrap().is_empty());
    let answers = assistant_messages(&transcript);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["content"], content);
    assert_no_secrets(&ybs, &run, &keys);
}

/// The second request's tool result for `call_id` (OpenAI format).
fn openai_tool_result(server: &Server, call_id: &str) -> String {
    let body = server.requests()[1].json();
    let result = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("a tool result in the next request");
    assert_eq!(result["tool_call_id"], call_id);
    result["content"].as_str().unwrap().to_owned()
}

fn two_turn(ybs: &Ybs, server: &Server) -> Run {
    run(ybs, "openai", &format!("{}/v1", server.url), &[])
}

#[test]
fn a_fenced_json_call_for_an_offered_tool_runs_it() {
    let server = Server::start(vec![
        wire::openai_sse_content(&fenced_call()),
        wire::openai_sse_answer("wrote hello.txt"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file("operator.json", ON);
    let run = run(
        &ybs,
        "openai",
        &format!("{}/v1", server.url),
        &["--config", "operator.json"],
    );
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let transcript = transcript(&run);
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "write_file");
    assert_eq!(calls[0]["decision"]["verdict"], "allow");
    assert_eq!(
        calls[0]["from_text"], true,
        "the call is recorded as recovered from text"
    );
    let turn = &assistant_messages(&transcript)[0];
    assert_eq!(
        turn["content"].as_str().unwrap_or_default(),
        "",
        "the text became the call"
    );
    assert_eq!(turn["tool_calls"][0]["from_text"], true);
    let id = turn["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    // The server is told about it as a structured call with its result.
    let body = server.requests()[1].json();
    assert_eq!(body["messages"][2]["tool_calls"][0]["id"], id.as_str());
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["name"],
        "write_file"
    );
    assert!(openai_tool_result(&server, &id).contains("hello.txt"));
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_bare_json_call_is_recovered_from_ollama_too() {
    let call = json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}});
    let server = Server::start(vec![
        wire::ollama_answer(&call.to_string()),
        wire::ollama_answer("wrote hello.txt"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", ON);
    let run = run(&ybs, "ollama", &server.url, &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let turn = &assistant_messages(&transcript(&run))[0];
    assert_eq!(turn["tool_calls"][0]["from_text"], true);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn json_naming_no_offered_tool_stays_an_answer() {
    let content = json!({"name": "get_weather", "arguments": {"city": "Paris"}}).to_string();
    assert_stays_an_answer(Some(ON), &content);
}

#[test]
fn with_the_option_off_a_json_call_stays_an_answer() {
    assert_stays_an_answer(None, &fenced_call());
    assert_stays_an_answer(
        Some(r#"{"llm": {"text_tool_calls": false}}"#),
        &fenced_call(),
    );
}

#[test]
fn an_unterminated_text_call_is_an_error_result_not_repaired() {
    let cut = "```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hi";
    let server = Server::start(vec![
        wire::openai_sse_content(cut),
        wire::openai_sse_answer("giving up"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", ON);
    let run = two_turn(&ybs, &server);
    run.expect_code(0);
    assert!(!ybs.exists("hello.txt"), "never completed and run");
    let transcript = transcript(&run);
    let call = &transcript["tool_calls"][0];
    assert_eq!(call["result"]["ran"], false);
    assert_eq!(call["result"]["ok"], false);
    let turn = &assistant_messages(&transcript)[0];
    let id = turn["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    let result = openai_tool_result(&server, &id);
    assert!(result.contains("unterminated"), "{result}");
    assert!(result.contains("not run"), "{result}");
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_structured_call_cut_by_the_length_limit_is_an_error_result() {
    let arguments = json!({"path": "hello.txt", "content": "hi\n"}).to_string();
    let mut chunks = wire::openai_call_chunks(&[("call_cut", "write_file", &arguments)], 4, false);
    // Keep the opening and half the fragments, then the token limit.
    chunks.truncate(2 + arguments.len() / 8);
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}));
    let server = Server::start(vec![
        Reply::sse(&wire::sse_done(&chunks)),
        wire::openai_sse_answer("giving up"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = two_turn(&ybs, &server);
    run.expect_code(0);
    assert!(!ybs.exists("hello.txt"));
    let call = &transcript(&run)["tool_calls"][0];
    assert_eq!(call["id"], "call_cut");
    assert_eq!(call["result"]["ran"], false);
    let result = openai_tool_result(&server, "call_cut");
    assert!(result.contains("cut off"), "{result}");
    // Sent back as `{}`, not as a guess at the rest.
    let body = server.requests()[1].json();
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );
    assert_no_secrets(&ybs, &run, &keys);
}
