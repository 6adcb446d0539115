//! Small local models as first-class users (issue 16): every request
//! bounds the answer, only the tools the policy can allow are offered, a
//! stream the task's timeout cuts keeps its text, a call written as text
//! with `llm.text_tool_calls` off is pointed out, a junk answer does not
//! become the commit subject, refusals say once that the call was not run
//! and why, and `--provider ollama` against a server without that API
//! hints at `openai` with `/v1`.

use std::time::Duration;

use serde_json::{Value, json};

use super::git::Repo;
use super::providers::{assert_no_secrets, run as run_task, scratch, task_yaml, transcript};
use crate::support::cassette::{answer, call};
use crate::support::server::{Reply, Server};
use crate::support::{Run, Ybs, wire};

fn notes(run: &Run) -> Vec<String> {
    run.events("t")
        .iter()
        .filter(|event| event["type"] == "task.note")
        .map(|event| event["message"].as_str().unwrap().to_owned())
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_openai_wire_request_carries_an_output_limit() {
    // Streamed and whole, default and configured: each request says how
    // long the answer may be.
    for (streaming, config, expected) in [
        (true, None, 4096),
        (false, None, 4096),
        (true, Some(r#"{"llm": {"max_output_tokens": 256}}"#), 256),
    ] {
        let (first, second) = if streaming {
            (
                wire::openai_sse_call(
                    "call_1",
                    "write_file",
                    &json!({"path": "hello.txt", "content": "hi\n"}),
                ),
                wire::openai_sse_answer("done"),
            )
        } else {
            (
                wire::openai_json_call(
                    "call_1",
                    "write_file",
                    &json!({"path": "hello.txt", "content": "hi\n"}),
                ),
                wire::openai_json_answer("done"),
            )
        };
        let server = Server::start(vec![first, second]);
        let (ybs, keys) = scratch(&task_yaml(""));
        let mut extra = Vec::new();
        if let Some(config) = config {
            ybs.file("operator.json", config);
            extra.extend(["--config", "operator.json"]);
        }
        if !streaming {
            ybs.file("nostream.json", r#"{"llm": {"stream": false}}"#);
            extra.extend(["--config", "nostream.json"]);
        }
        let run = run_task(&ybs, "openai", &format!("{}/v1", server.url), &extra);
        run.expect_code(0);
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            // A compatible server (not api.openai.com) takes `max_tokens`.
            assert_eq!(request.json()["max_tokens"], expected, "{}", request.text());
        }
        assert_no_secrets(&ybs, &run, &keys);
    }
}

#[test]
fn ollama_and_anthropic_requests_carry_the_limit_too() {
    let server = Server::start(vec![wire::ollama_answer("done")]);
    let (ybs, _keys) = scratch(&task_yaml("max_output_tokens: 300\n"));
    run_task(&ybs, "ollama", &server.url, &[]).expect_code(0);
    assert_eq!(server.requests()[0].json()["options"]["num_predict"], 300);

    let server = Server::start(vec![wire::anthropic_sse_answer("done")]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    run_task(&ybs, "anthropic", &server.url, &[]).expect_code(0);
    assert_eq!(server.requests()[0].json()["max_tokens"], 4096);
}

#[test]
fn a_policy_allowing_only_read_file_offers_one_tool() {
    let server = Server::start(vec![
        // The model calls a tool it was not offered anyway.
        wire::openai_sse_call(
            "call_1",
            "write_file",
            &json!({"path": "hello.txt", "content": "hi\n"}),
        ),
        wire::openai_sse_answer("could not write"),
    ]);
    let (ybs, keys) = scratch("prompt: p\npolicy:\n  allow: [read_file]\n");
    let run = run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    let requests = server.requests();
    for request in &requests {
        assert_eq!(tool_names(&request.json()), ["read_file"]);
    }
    let transcript = transcript(&run);
    assert_eq!(transcript["manifest"]["tools"], json!(["read_file"]));
    let withheld = notes(&run)
        .into_iter()
        .find(|note| note.starts_with("not offered to the model"))
        .expect("a note naming the withheld tools");
    for name in [
        "write_file",
        "edit_file",
        "list_files",
        "search_files",
        "run_shell",
    ] {
        assert!(withheld.contains(&format!("`{name}`")), "{withheld}");
    }
    // The call to a withheld tool is decided by the policy like any
    // other, and refused.
    assert!(!ybs.exists("hello.txt"));
    let entry = &transcript["tool_calls"][0];
    assert_eq!(entry["decision"]["verdict"], "deny");
    assert_eq!(entry["decision"]["rule"], "default");
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn the_first_request_is_the_same_from_two_checkouts_at_different_paths() {
    // The same task in two checkouts at different absolute paths: the
    // system prompt, the tool descriptions and the task say no absolute
    // path, so the first request is the same byte for byte (and a
    // provider's prompt cache serves both).
    let checkouts: Vec<Ybs> = (0..2)
        .map(|_| {
            let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-the-same-in-both");
            ybs.file(
                "t.yaml",
                "prompt: Fix the greeting in src/hello.sh.\nsystem: Keep it short.\npolicy:\n  default: deny\n  allow:\n    - read_file\n    - write_file: { path: 'src/**' }\n    - run_shell: { command: 'sh src/*' }\n",
            );
            ybs.file("AGENTS.md", "Run `sh src/hello.sh` to check a change.\n");
            ybs.file("src/AGENTS.md", "Scripts here are POSIX sh.\n");
            ybs.file("src/hello.sh", "echo helo\n");
            let status = std::process::Command::new("git")
                .args(["init", "-q"])
                .current_dir(ybs.path())
                .status()
                .unwrap();
            assert!(status.success());
            ybs
        })
        .collect();
    assert_ne!(checkouts[0].path(), checkouts[1].path());
    let mut bodies = Vec::new();
    for ybs in &checkouts {
        let server = Server::start(vec![wire::openai_sse_answer("done")]);
        let run = run_task(ybs, "openai", &format!("{}/v1", server.url), &[]);
        run.expect_code(0);
        let body = String::from_utf8_lossy(&server.requests()[0].body).into_owned();
        let canonical = ybs.path().canonicalize().unwrap();
        for dir in [ybs.path(), canonical.as_path()] {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                !body.contains(&name),
                "the checkout's path `{}` is in the first request:\n{body}",
                dir.display()
            );
        }
        bodies.push(body);
    }
    assert_eq!(bodies[0], bodies[1]);
}

#[test]
fn a_stream_cut_by_the_task_timeout_keeps_its_text_and_usage() {
    let chunk = |text: &str| {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        )
    };
    // Half an answer, then the server keeps generating past the task's
    // one-second timeout.
    let reply = Reply::new(200, "text/event-stream")
        .send(chunk("Here is the first half of a very long"))
        .send(chunk(" answer that never"))
        .pause(Duration::from_secs(4));
    let server = Server::start(vec![reply]);
    let (ybs, keys) = scratch(&task_yaml("limits: { timeout: 1s }\n"));
    let run = run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(1);
    let transcript = transcript(&run);
    assert_eq!(transcript["reason"], "timeout");
    let last = transcript["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant", "{transcript:#}");
    assert_eq!(
        last["content"],
        "Here is the first half of a very long answer that never"
    );
    // One entry per iteration, saying what happened, its usage counted.
    let calls = transcript["llm_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(transcript["iterations"], 1);
    assert!(
        calls[0]["incomplete"]
            .as_str()
            .unwrap()
            .contains("text so far is kept"),
        "{}",
        calls[0]
    );
    assert!(calls[0]["usage"]["output_tokens"].as_u64().unwrap() > 5);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_failed_request_still_has_its_llm_calls_entry() {
    let error = json!({"error": {"message": "bad request", "type": "invalid_request_error"}});
    let server = Server::start(vec![Reply::json(400, &error)]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(4);
    let transcript = transcript(&run);
    let calls = transcript["llm_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(transcript["iterations"], 1);
    assert!(
        calls[0]["incomplete"]
            .as_str()
            .unwrap()
            .contains("bad request"),
        "{}",
        calls[0]
    );
}

#[test]
fn a_stream_that_stalls_past_its_idle_deadline_keeps_its_text() {
    let chunk = |text: &str| {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        )
    };
    // Some text, then silence past the one-second idle deadline, on the
    // first attempt and on its retry.
    let stalled = || {
        Reply::new(200, "text/event-stream")
            .send(chunk("I will now explain"))
            .send(chunk(" the whole plan"))
            .pause(Duration::from_secs(3))
    };
    let server = Server::start(vec![stalled(), stalled()]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(
        "operator.json",
        r#"{"llm": {"stream_idle_timeout_seconds": 1}, "agent": {"retry_attempts": 1, "retry_backoff_base_ms": 10}}"#,
    );
    let run = run_task(
        &ybs,
        "openai",
        &format!("{}/v1", server.url),
        &["--config", "operator.json"],
    );
    assert_ne!(run.code, 0, "{}", run.stderr);
    let transcript = transcript(&run);
    // The retried attempt and the last one both say what had arrived.
    let retries = transcript["retries"].as_array().unwrap();
    assert_eq!(retries.len(), 1, "{transcript:#}");
    let calls = transcript["llm_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{transcript:#}");
    for text in [
        retries[0]["error"].as_str().unwrap(),
        calls[0]["incomplete"].as_str().unwrap(),
    ] {
        assert!(text.contains("idle deadline"), "{text}");
        assert!(text.contains("I will now explain the whole plan"), "{text}");
    }
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_json_call_answer_with_the_option_off_names_the_option() {
    let content = "```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.txt\", \"content\": \"hi\"}}\n```";
    let server = Server::start(vec![wire::openai_sse_content(content)]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert!(!ybs.exists("hello.txt"));
    let hint = notes(&run)
        .into_iter()
        .find(|note| note.contains("llm.text_tool_calls: true"))
        .expect("a note naming the option");
    assert!(hint.contains("`write_file`"), "{hint}");
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(console.contains("llm.text_tool_calls"), "{console}");

    // A call inside prose is pointed out too.
    let server = Server::start(vec![wire::openai_sse_content(&format!(
        "I will write it now: {}",
        json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"}})
    ))]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert!(
        notes(&run)
            .iter()
            .any(|note| note.contains("llm.text_tool_calls: true") && note.contains("`write_file`")),
        "{:?}",
        notes(&run)
    );

    // Prose is no call: no note.
    let server = Server::start(vec![wire::openai_sse_content("All done.")]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert!(
        notes(&run)
            .iter()
            .all(|note| !note.contains("text_tool_calls")),
        "{:?}",
        notes(&run)
    );
}

#[test]
fn a_json_answer_gives_way_to_a_subject_from_the_changed_files() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: write hello.txt\nmodel: test-model\npolicy:\n  default: allow\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "write_file",
                json!({"path": "hello.txt", "content": "hello\n"}),
            ),
            answer(r#"{"path":"hello.txt","bytes_written":6}"#),
        ],
    );
    let repo = Repo::init(&ybs, "");
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert_eq!(repo.subject("HEAD"), "[ybs] t: update hello.txt");

    // `commit.message` wins over both.
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: write hello.txt\nmodel: test-model\npolicy:\n  default: allow\ncommit:\n  message: Say hello\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "write_file",
                json!({"path": "hello.txt", "content": "hello\n"}),
            ),
            answer("{}"),
        ],
    );
    let repo = Repo::init(&ybs, "");
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert_eq!(repo.subject("HEAD"), "[ybs] t: Say hello");
}

/// The tool result the second request carries (OpenAI wire).
fn second_tool_result(server: &Server) -> String {
    let body = server.requests()[1].json();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .expect("a tool result")["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_refusal_says_once_that_the_call_was_not_run_and_why() {
    // Arguments that are not JSON.
    let chunks =
        wire::openai_call_chunks(&[("call_1", "write_file", "{\"path\": oops}")], 8, false);
    let server = Server::start(vec![
        Reply::sse(&wire::sse_done(&chunks)),
        wire::openai_sse_answer("gave up"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]).expect_code(0);
    let told = second_tool_result(&server);
    assert_eq!(told.matches("not run").count(), 1, "{told}");
    assert!(
        told.starts_with("the `write_file` call was not run: its arguments are not valid JSON"),
        "{told}"
    );

    // A call the output token limit cut off.
    let mut chunks = wire::openai_call_chunks(
        &[("call_1", "write_file", "{\"path\": \"hello.txt\", \"con")],
        8,
        false,
    );
    for chunk in &mut chunks {
        if chunk["choices"][0]["finish_reason"] == "tool_calls" {
            chunk["choices"][0]["finish_reason"] = json!("length");
        }
    }
    let server = Server::start(vec![
        Reply::sse(&wire::sse_done(&chunks)),
        wire::openai_sse_answer("gave up"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]).expect_code(0);
    let told = second_tool_result(&server);
    assert_eq!(told.matches("not run").count(), 1, "{told}");
    assert!(
        told.contains("cut off by the output token limit (llm.max_output_tokens)"),
        "{told}"
    );

    // A tool that does not exist.
    let server = Server::start(vec![
        wire::openai_sse_call("call_1", "deploy", &json!({})),
        wire::openai_sse_answer("gave up"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    run_task(&ybs, "openai", &format!("{}/v1", server.url), &[]).expect_code(0);
    let told = second_tool_result(&server);
    assert_eq!(told.matches("not run").count(), 1, "{told}");
    assert!(told.contains("unknown tool `deploy`"), "{told}");
}

#[test]
fn ollama_against_a_server_without_its_api_hints_at_openai_and_v1() {
    // llama.cpp's server answers `/api/chat` with this.
    let not_found =
        json!({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}});
    let server = Server::start(vec![Reply::json(404, &not_found)]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "ollama", &server.url, &[]);
    run.expect_code(4);
    let message = transcript(&run)["message"].as_str().unwrap().to_owned();
    assert!(message.contains("--provider openai"), "{message}");
    assert!(message.contains("/v1"), "{message}");
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(console.contains("--provider openai"), "{console}");

    // Ollama's own 404 for a model it does not have is not that.
    let missing = json!({"error": "model 'm' not found, try pulling it first"});
    let server = Server::start(vec![Reply::json(404, &missing)]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "ollama", &server.url, &[]);
    let message = transcript(&run)["message"].as_str().unwrap().to_owned();
    assert!(!message.contains("--provider openai"), "{message}");
}

/// The messages of request `index` the server received (OpenAI wire).
fn request_messages(server: &Server, index: usize) -> Vec<Value> {
    server.requests()[index].json()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// The text of the last message of request `index`, and its role.
fn last_message(server: &Server, index: usize) -> (String, String) {
    let messages = request_messages(server, index);
    let last = messages.last().unwrap();
    (
        last["role"].as_str().unwrap().to_owned(),
        last["content"].as_str().unwrap_or_default().to_owned(),
    )
}

fn openai(ybs: &Ybs, server: &Server, extra: &[&str]) -> Run {
    run_task(ybs, "openai", &format!("{}/v1", server.url), extra)
}

#[test]
fn an_empty_reply_is_told_once_and_a_second_one_ends_the_task() {
    // Empty, told, then the answer: the task passes.
    let server = Server::start(vec![
        wire::openai_sse_content(""),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 2);
    let (role, told) = last_message(&server, 1);
    assert_eq!(role, "user");
    assert!(
        told.contains("Call a tool, or give your final answer"),
        "{told}"
    );
    assert!(
        notes(&run)
            .iter()
            .any(|note| note.contains("reply was empty")),
        "{:?}",
        notes(&run)
    );
    assert_eq!(transcript(&run)["reason"], "completed");
    // The first request carries no such message: nothing for a model
    // that answers.
    let first = server.requests()[0].text();
    assert!(!first.contains("Call a tool, or give"), "{first}");
    assert_no_secrets(&ybs, &run, &keys);

    // Empty twice: the task fails with `empty_answer`, after two requests.
    let server = Server::start(vec![
        wire::openai_sse_content(""),
        wire::openai_sse_content(" \n"),
        wire::openai_sse_answer("never asked"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(
        "fix_attempts: 2\nchecks:\n  - name: never\n    run: \"false\"\n",
    ));
    let run = openai(&ybs, &server, &[]);
    run.expect_code(1);
    assert_eq!(server.requests().len(), 2);
    let transcript = transcript(&run);
    assert_eq!(transcript["status"], "failed");
    assert_eq!(transcript["reason"], "empty_answer");
    assert!(
        transcript["message"].as_str().unwrap().contains("empty"),
        "{transcript:#}"
    );
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains("empty_answer"), "{junit}");
}

#[test]
fn a_reply_cut_at_the_output_limit_is_no_answer_and_every_stop_reason_is_recorded() {
    let cut = Reply::sse(&wire::sse_done(&[
        json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": "The fix is to change the"}, "finish_reason": null}]}),
        json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    ]));
    let server = Server::start(vec![
        cut,
        wire::openai_sse_call(
            "call_1",
            "write_file",
            &json!({"path": "hello.txt", "content": "hi\n"}),
        ),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let (role, told) = last_message(&server, 1);
    assert_eq!(role, "user");
    assert!(told.contains("cut off at the output token limit"), "{told}");
    // The cut text went back to the model before the request to go on.
    let messages = request_messages(&server, 1);
    assert_eq!(
        messages[messages.len() - 2]["content"],
        "The fix is to change the"
    );
    assert!(
        notes(&run)
            .iter()
            .any(|note| note.contains("llm.max_output_tokens")),
        "{:?}",
        notes(&run)
    );
    let transcript = transcript(&run);
    assert_eq!(transcript["reason"], "completed");
    let reasons: Vec<&str> = transcript["llm_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| call["finish_reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["length", "tool_calls", "stop"]);
    let events: Vec<String> = run
        .events("t")
        .iter()
        .filter(|event| event["type"] == "llm.response")
        .map(|event| event["finish_reason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["length", "tool_calls", "stop"]);
    assert_no_secrets(&ybs, &run, &keys);
}

const TEXT_CALLS: &str = r#"{"llm": {"text_tool_calls": true}}"#;

#[test]
fn a_call_inside_prose_runs_and_the_prose_is_kept() {
    let call = json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}});
    let content =
        format!("I will write the file now.\n```json\n{call:#}\n```\nThen I will check it.");
    let server = Server::start(vec![
        wire::openai_sse_content(&content),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let transcript = transcript(&run);
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["from_text"], true);
    let turn = &transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(
        turn["content"],
        "I will write the file now.\n\nThen I will check it."
    );
    assert_eq!(turn["tool_calls"][0]["name"], "write_file");
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn two_calls_in_prose_are_not_run_and_the_model_is_told_to_send_one() {
    let call = |path: &str| {
        json!({"name": "write_file", "arguments": {"path": path, "content": "hi\n"}}).to_string()
    };
    let content = format!("First {} and then {}.", call("a.txt"), call("b.txt"));
    let server = Server::start(vec![
        wire::openai_sse_content(&content),
        wire::openai_sse_answer("gave up"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert!(!ybs.exists("a.txt") && !ybs.exists("b.txt"));
    let told = second_tool_result(&server);
    assert!(told.contains("exactly one call"), "{told}");
    assert!(told.contains("2 tool calls"), "{told}");
    assert!(
        notes(&run)
            .iter()
            .any(|note| note.contains("was not run") && note.contains("`write_file`")),
        "{:?}",
        notes(&run)
    );

    // One call whose arguments do not validate: the same, saying what is wrong.
    let content = format!(
        "Writing: {}",
        json!({"name": "write_file", "arguments": {"path": "a.txt"}})
    );
    let server = Server::start(vec![
        wire::openai_sse_content(&content),
        wire::openai_sse_answer("gave up"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    let told = second_tool_result(&server);
    assert!(
        told.contains("missing required argument `content`"),
        "{told}"
    );
    assert!(told.contains("exactly one"), "{told}");
}

#[test]
fn a_made_up_tool_response_is_no_answer_and_the_model_is_told_once() {
    let made_up = "I wrote the file.\n<tool_response>\n{\"ok\": true}\n</tool_response>\nDone.";
    let server = Server::start(vec![
        wire::openai_sse_content(made_up),
        wire::openai_sse_call(
            "call_1",
            "write_file",
            &json!({"path": "hello.txt", "content": "hi\n"}),
        ),
        wire::openai_sse_content("Result:\n```tool_output\nwritten\n```"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    // Told once: the second made-up block is taken as the answer.
    assert_eq!(server.requests().len(), 3);
    let (role, told) = last_message(&server, 1);
    assert_eq!(role, "user");
    assert!(
        told.contains("Tool results come only from calling the tool"),
        "{told}"
    );
    assert!(
        notes(&run)
            .iter()
            .any(|note| note.contains("<tool_response>")),
        "{:?}",
        notes(&run)
    );
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn anthropic_max_tokens_and_ollama_length_are_cut_replies_too() {
    let cut = Reply::json(
        200,
        &json!({"id": "msg_c", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "The plan is"}],
                "stop_reason": "max_tokens", "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 512}}),
    );
    let server = Server::start(vec![cut, wire::anthropic_json_answer("done")]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    ybs.file("nostream.json", r#"{"llm": {"stream": false}}"#);
    let run = run_task(
        &ybs,
        "anthropic",
        &server.url,
        &["--config", "nostream.json"],
    );
    run.expect_code(0);
    assert_eq!(server.requests().len(), 2);
    let calls = transcript(&run)["llm_calls"].clone();
    assert_eq!(calls[0]["finish_reason"], "length", "{calls:#}");
    assert_eq!(calls[1]["finish_reason"], "stop", "{calls:#}");
    let body = server.requests()[1].text();
    assert!(body.contains("cut off at the output token limit"), "{body}");

    let cut = Reply::ndjson(&[
        json!({"model": "m", "message": {"role": "assistant", "content": "The plan is"}, "done": false}),
        json!({"model": "m", "message": {"role": "assistant", "content": ""}, "done": true,
               "done_reason": "length", "prompt_eval_count": 100, "eval_count": 512}),
    ]);
    let server = Server::start(vec![cut, wire::ollama_answer("done")]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    let run = run_task(&ybs, "ollama", &server.url, &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 2);
    let calls = transcript(&run)["llm_calls"].clone();
    assert_eq!(calls[0]["finish_reason"], "length", "{calls:#}");
    let body = server.requests()[1].text();
    assert!(body.contains("cut off at the output token limit"), "{body}");
}

/// A reply of content that stopped at the output token limit (OpenAI SSE).
fn openai_sse_cut(content: &str) -> Reply {
    Reply::sse(&wire::sse_done(&[
        json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]}),
        json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    ]))
}

/// A `write_file` call of `path` written as JSON text.
fn write_call(path: &str) -> String {
    json!({"name": "write_file", "arguments": {"path": path, "content": "hi\n"}}).to_string()
}

/// Asserts that some note of the run is `wanted`.
fn assert_noted(run: &Run, wanted: impl Fn(&str) -> bool) {
    let noted = notes(run);
    assert!(noted.iter().any(|note| wanted(note)), "{noted:?}");
}

/// The tool results of request `index` (OpenAI wire).
fn tool_results(server: &Server, index: usize) -> Vec<String> {
    request_messages(server, index)
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_final_answer_restating_the_call_just_run_is_the_answer_not_a_second_run() {
    let call = json!({"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi\n"}});
    // The call, then the same call written again with a result the model
    // imagined: small models word their final answer so.
    let server = Server::start(vec![
        wire::openai_sse_content(&format!("```json\n{call:#}\n```")),
        wire::openai_sse_content(&format!("{call}\n{{\"bytes_written\":3}}")),
        wire::openai_sse_answer("never asked"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(
        "checks:\n  - name: hello\n    run: grep -q hi hello.txt\n",
    ));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 2);
    let written = transcript(&run);
    assert_eq!(written["reason"], "completed", "{written:#}");
    assert_eq!(written["tool_calls"].as_array().unwrap().len(), 1);
    let last = written["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["content"], "{\"bytes_written\":3}");
    assert!(last.get("tool_calls").is_none(), "{last:#}");
    assert_noted(&run, |note| {
        note.contains("`write_file`") && note.contains("not run again")
    });
    assert_no_secrets(&ybs, &run, &keys);

    // The same call again after it failed is a new try: it runs again.
    let call = json!({"name": "read_file", "arguments": {"path": "missing.txt"}});
    let server = Server::start(vec![
        wire::openai_sse_content(&call.to_string()),
        wire::openai_sse_content(&format!("Again: {call}")),
        wire::openai_sse_answer("gave up"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(transcript(&run)["tool_calls"].as_array().unwrap().len(), 2);
}

#[test]
fn replies_of_several_calls_refused_again_and_again_are_no_loop() {
    let several = format!("{}\n{}", write_call("a.txt"), write_call("b.txt"));
    let server = Server::start(vec![
        wire::openai_sse_content(&several),
        wire::openai_sse_content(&several),
        wire::openai_sse_content(&several),
        wire::openai_sse_content(&write_call("hello.txt")),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    let transcript = transcript(&run);
    assert_eq!(transcript["reason"], "completed", "{transcript:#}");
    assert_eq!(server.requests().len(), 5);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let refusals = tool_results(&server, 3);
    assert_eq!(refusals.len(), 3, "{refusals:#?}");
    assert!(
        refusals
            .iter()
            .all(|told| told.contains("exactly one call")),
        "{refusals:#?}"
    );
}

#[test]
fn a_cut_reply_of_several_calls_is_asked_to_continue_first() {
    let cut = format!(
        "{}\n{}\n{{\"name\": \"write_file\", \"arguments\": {{\"path\": \"c.t",
        write_call("a.txt"),
        write_call("b.txt")
    );
    let server = Server::start(vec![
        openai_sse_cut(&cut),
        wire::openai_sse_content(&write_call("hello.txt")),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 3);
    assert!(!ybs.exists("a.txt") && !ybs.exists("b.txt"));
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    // Told to continue, not sent a refusal asking for one call.
    let (role, told) = last_message(&server, 1);
    assert_eq!(role, "user");
    assert!(told.contains("cut off at the output token limit"), "{told}");
    assert!(told.contains("one call at a time"), "{told}");
    assert!(tool_results(&server, 1).is_empty());
    // The cut text went back as it was, with no call.
    let messages = request_messages(&server, 1);
    assert_eq!(messages[messages.len() - 2]["content"], cut.as_str());
    assert!(messages[messages.len() - 2].get("tool_calls").is_none());
    assert_noted(&run, |note| {
        note.contains("cut off") && note.contains("2 tool calls")
    });
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn an_answer_calling_a_tool_that_is_not_offered_is_noted() {
    // Shaped like a call of a tool that does not exist: the answer stays
    // (it may be JSON the task asked for), and the transcript says so.
    let content = format!(
        "```json\n{:#}\n```",
        json!({"name": "repeat", "arguments": {"path": "lib/repeat.sh", "limit": 500}})
    );
    let server = Server::start(vec![wire::openai_sse_content(&content)]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 1);
    assert_noted(&run, |note| {
        note.contains("`repeat`")
            && note.contains("no tool of that name is offered")
            && note.contains("`read_file`")
    });
    // JSON that is no call gets no such note.
    let server = Server::start(vec![wire::openai_sse_content(r#"{"answer": 42}"#)]);
    let (ybs, _keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(0);
    assert!(
        !notes(&run).iter().any(|note| note.contains("is offered")),
        "{:?}",
        notes(&run)
    );
}

#[test]
fn the_same_cut_reply_five_times_in_a_row_is_a_loop() {
    let cut = format!(
        "{}\n{}\n{{\"name\": \"wri",
        write_call("a.txt"),
        write_call("a.txt")
    );
    // The model sends it again and again, whatever it is told; the task
    // ends on the fifth, not at its timeout or iteration limit.
    let mut replies: Vec<Reply> = (0..5).map(|_| openai_sse_cut(&cut)).collect();
    replies.push(wire::openai_sse_answer("never asked"));
    let server = Server::start(replies);
    let (ybs, _keys) = scratch(&task_yaml("limits: { max_iterations: 20 }\n"));
    ybs.file(".ybs.json", TEXT_CALLS);
    let run = openai(&ybs, &server, &[]);
    run.expect_code(1);
    assert_eq!(server.requests().len(), 5);
    let transcript = transcript(&run);
    assert_eq!(transcript["reason"], "loop_detected", "{transcript:#}");
    let message = transcript["message"].as_str().unwrap();
    assert!(message.contains("same reply 5 times"), "{message}");
    assert!(message.contains("output token limit"), "{message}");
    assert!(!ybs.exists("a.txt"));
}
