//! Context compaction (docs/agent-loop.md "Context", docs/performance.md): a long task's requests stay
//! under `context.compaction_threshold` of the window by eliding older tool
//! results from what is sent, while the transcript keeps every result whole;
//! a small conversation is sent exactly as recorded.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::suite::providers::{run as run_provider, scratch, transcript};
use crate::support::cassette::{answer, call};
use crate::support::server::Server;
use crate::support::{Run, Ybs, wire};

const ELIDED: &str = "[ybs: this tool result (";

/// A file of about `bytes` bytes whose every line names it.
fn big_file(step: usize, bytes: usize) -> String {
    let line = format!("file {step:02}: the quick brown fox jumps over the lazy dog\n");
    line.repeat(bytes / line.len())
}

/// Panics unless `output` (a `read_file` result) holds the whole file.
fn assert_whole(output: &str, step: usize) {
    assert!(!output.contains(ELIDED), "step {step}: {output}");
    let result: Value = serde_json::from_str(output).unwrap();
    let content = result["content"].as_str().unwrap();
    let expected = big_file(step, 6000);
    assert_eq!(result["truncated"], false);
    assert_eq!(content.lines().count(), expected.lines().count());
    for (got, want) in content.lines().zip(expected.lines()) {
        assert!(got.ends_with(want), "step {step}: {got}");
    }
}

fn notes(run: &Run, task: &str) -> Vec<String> {
    run.events(task)
        .iter()
        .filter(|event| event["type"] == "task.note")
        .map(|event| event["message"].as_str().unwrap().to_owned())
        .collect()
}

fn estimates(run: &Run, task: &str) -> Vec<u64> {
    run.events(task)
        .iter()
        .filter(|event| event["type"] == "llm.response")
        .map(|event| event["request_tokens_estimate"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_50_step_task_stays_under_the_window_and_the_transcript_keeps_everything() {
    const STEPS: usize = 50;
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: read every file\ncommit: false\npolicy:\n  default: allow\nlimits: { max_iterations: 60 }\n",
    );
    ybs.file("ops.json", r#"{"context": {"max_tokens": 8000}}"#);
    let mut turns = Vec::new();
    for step in 0..STEPS {
        ybs.file(&format!("f{step:02}.txt"), &big_file(step, 6000));
        turns.push(call(
            "read_file",
            json!({"path": format!("f{step:02}.txt")}),
        ));
    }
    turns.push(answer("read them all"));
    ybs.cassette("t.cassette.json", turns);

    let run = ybs.run(["run", "t.yaml", "--config", "ops.json"]);
    run.expect_code(0);

    // Every request, as sent, under 0.95 of the 8,000-token window; without
    // compaction the last would be about 50 × 1,500 tokens.
    let estimates = estimates(&run, "t");
    assert_eq!(estimates.len(), STEPS + 1);
    assert!(
        estimates.iter().all(|tokens| *tokens <= 7600),
        "{estimates:?}"
    );
    assert!(
        estimates.iter().any(|tokens| *tokens > 5000),
        "{estimates:?}"
    );
    // Compactions are noted, each once, and not at every step: each one
    // frees room for the next step or two (here a step is a fifth of the
    // window).
    let compactions: Vec<String> = notes(&run, "t")
        .into_iter()
        .filter(|note| note.starts_with("context compaction: elided"))
        .collect();
    assert!(!compactions.is_empty());
    assert!(compactions.len() < STEPS * 2 / 3, "{compactions:#?}");
    assert!(
        compactions[0].contains("8000-token window") && compactions[0].contains("transcript keeps"),
        "{}",
        compactions[0]
    );

    // The transcript keeps every result whole.
    let transcript = run.json("ybs-out/t/transcript.json");
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), STEPS);
    for (step, call) in calls.iter().enumerate() {
        assert_eq!(call["result"]["truncated"], false);
        assert_whole(call["result"]["output"].as_str().unwrap(), step);
    }
    let results: Vec<&Value> = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .collect();
    assert_eq!(results.len(), STEPS);
    for (step, message) in results.iter().enumerate() {
        assert_whole(message["content"].as_str().unwrap(), step);
    }
    let recorded = transcript["llm_calls"].as_array().unwrap();
    assert!(
        recorded
            .iter()
            .all(|call| call["request_tokens_estimate"].is_u64())
    );
}

/// What a provider receives: every call keeps its result, the oldest
/// results are markers, the newest is whole.
#[test]
fn a_compacted_request_keeps_every_call_paired_and_the_newest_result_whole() {
    const STEPS: usize = 8;
    let mut replies = Vec::new();
    for step in 0..STEPS {
        replies.push(wire::openai_sse_call(
            &format!("call_{step}"),
            "read_file",
            &json!({"path": format!("f{step}.txt")}),
        ));
    }
    replies.push(wire::openai_sse_answer("done"));
    let server = Server::start(replies);
    let (ybs, _keys) = scratch(
        "prompt: read every file\npolicy:\n  default: allow\nlimits: { max_iterations: 20 }\n",
    );
    for step in 0..STEPS {
        ybs.file(&format!("f{step}.txt"), &big_file(step, 6000));
    }
    ybs.file("ops.json", r#"{"context": {"max_tokens": 6000}}"#);
    let endpoint = format!("{}/v1", server.url);
    let run = run_provider(&ybs, "openai", &endpoint, &["--config", "ops.json"]);
    run.expect_code(0);

    let requests = server.requests();
    assert_eq!(requests.len(), STEPS + 1);
    let last = requests.last().unwrap().json();
    let messages = last["messages"].as_array().unwrap();
    let mut called = HashSet::new();
    let mut answered = HashSet::new();
    let mut contents = Vec::new();
    for message in messages {
        if let Some(calls) = message["tool_calls"].as_array() {
            called.extend(calls.iter().map(|c| c["id"].as_str().unwrap().to_owned()));
        }
        if message["role"] == "tool" {
            answered.insert(message["tool_call_id"].as_str().unwrap().to_owned());
            contents.push(message["content"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(called.len(), STEPS);
    assert_eq!(called, answered);
    assert!(contents[0].starts_with(ELIDED), "{}", contents[0]);
    assert_whole(contents.last().unwrap(), STEPS - 1);
    // The body itself, JSON and all, is near the estimate.
    assert!(
        requests.last().unwrap().body.len() / 4 < 6000,
        "{}",
        requests.last().unwrap().body.len()
    );
    // The transcript has what the model was not sent.
    let transcript = transcript(&run);
    assert_whole(
        transcript["tool_calls"][0]["result"]["output"]
            .as_str()
            .unwrap(),
        0,
    );
}

/// Far below the threshold nothing changes: the provider receives the
/// results as recorded, and no compaction is noted.
#[test]
fn a_small_conversation_is_sent_as_recorded() {
    let server = Server::start(vec![
        wire::openai_sse_call("call_1", "read_file", &json!({"path": "a.txt"})),
        wire::openai_sse_call("call_2", "read_file", &json!({"path": "b.txt"})),
        wire::openai_sse_answer("done"),
    ]);
    let (ybs, _keys) = scratch("prompt: read two files\npolicy:\n  default: allow\n");
    ybs.file("a.txt", &big_file(1, 3000));
    ybs.file("b.txt", &big_file(2, 3000));
    let endpoint = format!("{}/v1", server.url);
    let run = run_provider(&ybs, "openai", &endpoint, &[]);
    run.expect_code(0);

    assert!(
        notes(&run, "t")
            .iter()
            .all(|note| !note.contains("compaction")),
        "{:?}",
        notes(&run, "t")
    );
    let transcript = transcript(&run);
    let recorded: Vec<&str> = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap())
        .collect();
    let last = server.requests().last().unwrap().json();
    let sent: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap())
        .collect();
    assert_eq!(sent, recorded);
    let estimates = estimates(&run, "t");
    assert_eq!(estimates.len(), 3);
    assert!(
        estimates.windows(2).all(|pair| pair[0] < pair[1]),
        "{estimates:?}"
    );
    // The fixed part (system prompt and six tool schemas) stays under the
    // 1,500 tokens docs/performance.md promises.
    assert!(estimates[0] < 1500, "{estimates:?}");
}

/// docs/performance.md: with no `context` settings, a 50-step task whose every result
/// is as long as `max_tool_output_chars` allows never sends a request over
/// 32k tokens.
#[test]
fn by_default_a_50_step_task_stays_under_32k_tokens() {
    const STEPS: usize = 50;
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: read every file\ncommit: false\npolicy:\n  default: allow\nlimits: { max_iterations: 60 }\n",
    );
    let mut turns = Vec::new();
    for step in 0..STEPS {
        ybs.file(&format!("f{step:02}.txt"), &big_file(step, 12_000));
        turns.push(call(
            "read_file",
            json!({"path": format!("f{step:02}.txt")}),
        ));
    }
    turns.push(answer("read them all"));
    ybs.cassette("t.cassette.json", turns);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let estimates = estimates(&run, "t");
    assert_eq!(estimates.len(), STEPS + 1);
    let largest = *estimates.iter().max().unwrap();
    assert!(largest <= 30_400, "{estimates:?}");
    assert!(largest > 20_000, "{estimates:?}");
    assert!(
        notes(&run, "t")
            .iter()
            .any(|note| note.contains("32000-token window"))
    );
}
