//! Acceptance 2: tool calls reassembled from any chunking — 1-character
//! argument fragments, bodies cut into small TCP writes, two calls
//! interleaved by index, keep-alive comments between events.

use serde_json::{Value, json};

use super::{assert_no_secrets, run, scratch, task_yaml, transcript};
use crate::support::server::{Reply, Server};
use crate::support::wire;

#[test]
fn openai_one_character_fragments_in_small_writes_with_comments() {
    // Non-ASCII content: small TCP writes split its UTF-8 bytes.
    let arguments =
        json!({"path": "notes/hello.txt", "content": "héllo, \"wörld\"\n{not: json}\n"});
    let chunks = wire::openai_call_chunks(
        &[("call_frag", "write_file", &arguments.to_string())],
        1,
        false,
    );
    let body = wire::sse_done_with_comments(&chunks);
    let server = Server::start(vec![
        Reply::sse_in_pieces(&body, 7),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert_eq!(
        ybs.read("notes/hello.txt"),
        "héllo, \"wörld\"\n{not: json}\n"
    );
    let transcript = transcript(&run);
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["id"], "call_frag");
    assert_eq!(calls[0]["arguments"], arguments);
    assert_eq!(transcript["usage"]["input_tokens"], 230);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn openai_two_parallel_calls_interleaved_by_index() {
    let first = json!({"path": "a.txt", "content": "alpha alpha alpha\n"});
    let second = json!({"path": "b.txt", "content": "beta\n"});
    let chunks = wire::openai_call_chunks(
        &[
            ("call_a", "write_file", &first.to_string()),
            ("call_b", "write_file", &second.to_string()),
        ],
        1,
        true,
    );
    let server = Server::start(vec![
        Reply::sse(&wire::sse_done_with_comments(&chunks)),
        wire::openai_sse_answer("both written"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "openai", &format!("{}/v1", server.url), &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("a.txt"), "alpha alpha alpha\n");
    assert_eq!(ybs.read("b.txt"), "beta\n");
    let transcript = transcript(&run);
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["id"], "call_a");
    assert_eq!(calls[0]["arguments"], first);
    assert_eq!(calls[1]["id"], "call_b");
    assert_eq!(calls[1]["arguments"], second);
    // The next request carries both calls and each result under its id.
    let body = server.requests()[1].json();
    let messages = body["messages"].as_array().unwrap();
    let sent: Vec<(&Value, Value)> = messages[2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            let arguments = call["function"]["arguments"].as_str().unwrap();
            (&call["id"], serde_json::from_str(arguments).unwrap())
        })
        .collect();
    assert_eq!(
        sent,
        [(&json!("call_a"), first), (&json!("call_b"), second)]
    );
    let results: Vec<(&Value, &str)> = messages[3..]
        .iter()
        .map(|m| (&m["tool_call_id"], m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(results.len(), 2, "{messages:?}");
    assert_eq!(results[0].0, "call_a");
    assert!(results[0].1.contains("a.txt"), "{}", results[0].1);
    assert_eq!(results[1].0, "call_b");
    assert!(results[1].1.contains("b.txt"), "{}", results[1].1);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn anthropic_one_character_input_fragments_with_pings() {
    let input = json!({"path": "hello.txt", "content": "hi ünïcode\n"});
    let server = Server::start(vec![
        wire::anthropic_sse_call("toolu_frag", "write_file", &input, 1),
        wire::anthropic_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "anthropic", &server.url, &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi ünïcode\n");
    let calls = &transcript(&run)["tool_calls"];
    assert_eq!(calls[0]["id"], "toolu_frag");
    assert_eq!(calls[0]["arguments"], input);
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn anthropic_two_tool_use_blocks_get_their_results_in_one_message() {
    let first = json!({"path": "a.txt", "content": "a"});
    let second = json!({"path": "b.txt", "content": "b"});
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_p", "type": "message",
        "role": "assistant", "content": [], "model": "m", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ];
    for (index, (id, input)) in [("toolu_a", &first), ("toolu_b", &second)]
        .iter()
        .enumerate()
    {
        events.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": "write_file", "input": {}}}));
        let text = input.to_string();
        let (head, tail) = text.split_at(text.len() / 2);
        for piece in [head, tail] {
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}));
    events.push(json!({"type": "message_stop"}));
    let server = Server::start(vec![
        Reply::sse(&wire::sse_events(&events)),
        wire::anthropic_sse_answer("done"),
    ]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let run = run(&ybs, "anthropic", &server.url, &[]);
    run.expect_code(0);
    assert_eq!(ybs.read("a.txt"), "a");
    assert_eq!(ybs.read("b.txt"), "b");
    let body = server.requests()[1].json();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "roles alternate: {messages:?}");
    let results: Vec<&Value> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| &block["tool_use_id"])
        .collect();
    assert_eq!(results, [&json!("toolu_a"), &json!("toolu_b")]);
    assert_no_secrets(&ybs, &run, &keys);
}
