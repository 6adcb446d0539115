//! Acceptance 4: a run recorded with `--record` against the server replays
//! with `--cassette` and no server, with the same tool calls, retries and
//! final status; the cassette holds no key.

use serde_json::{Value, json};

use super::{assert_no_secrets, run, scratch, task_yaml, transcript};
use crate::support::server::{Reply, Server};
use crate::support::wire;

/// What must match between a recorded run and its replay.
fn outcome(transcript: &Value) -> Value {
    let calls: Vec<Value> = transcript["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            json!([
                call["id"],
                call["name"],
                call["arguments"],
                call["result"]["ok"]
            ])
        })
        .collect();
    json!({
        "status": transcript["status"],
        "reason": transcript["reason"],
        "iterations": transcript["iterations"],
        "calls": calls,
        "retries": transcript["retries"].as_array().unwrap().len(),
        "usage": transcript["usage"],
    })
}

#[test]
fn a_recorded_run_replays_offline() {
    let (ybs, keys) = scratch(&task_yaml(""));
    ybs.file(".ybs.json", r#"{"agent": {"retry_backoff_base_ms": 10}}"#);
    let first = json!({"path": "hello.txt", "content": "hi\n"});
    let second = json!({"path": "notes.txt", "content": "note\n"});
    let recorded = {
        let server = Server::start(vec![
            Reply::json(
                500,
                &json!({"error": {"message": "try again", "type": "server_error"}}),
            ),
            wire::openai_sse_call("call_r1", "write_file", &first),
            wire::openai_sse_call("call_r2", "write_file", &second),
            // The model repeats a key it should never have seen: a
            // cassette is an output like any other.
            wire::openai_sse_answer(&format!("done; key was {}", keys.anthropic)),
        ]);
        let run = run(
            &ybs,
            "openai",
            &format!("{}/v1", server.url),
            &["--record", "rec.cassette.json"],
        );
        run.expect_code(0);
        assert_eq!(server.requests().len(), 4);
        assert_no_secrets(&ybs, &run, &keys);
        run
    };
    let recorded_transcript = transcript(&recorded);
    assert_eq!(ybs.read("notes.txt"), "note\n");
    let cassette = ybs.json("rec.cassette.json");
    let interactions = cassette["interactions"].as_array().unwrap();
    assert_eq!(interactions.len(), 4, "every attempt, the error included");
    assert_eq!(interactions[0]["error"]["status"], 500);
    assert!(interactions.iter().all(|i| i["task"] == "t"));
    assert_eq!(
        interactions[1]["response"]["tool_calls"][0]["id"],
        "call_r1"
    );

    // The server is gone; the outputs and files of the first run too.
    for path in ["hello.txt", "notes.txt"] {
        std::fs::remove_file(ybs.path().join(path)).unwrap();
    }
    std::fs::remove_dir_all(ybs.path().join("ybs-out")).unwrap();
    let replay = ybs.run([
        "run",
        "t.yaml",
        "--cassette",
        "rec.cassette.json",
        "--no-commit",
    ]);
    replay.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    assert_eq!(ybs.read("notes.txt"), "note\n");
    let replayed = transcript(&replay);
    assert_eq!(replayed["manifest"]["provider"], "replay");
    assert_eq!(outcome(&replayed), outcome(&recorded_transcript));
    assert_eq!(outcome(&replayed)["retries"], 1);
    assert_no_secrets(&ybs, &replay, &keys);
}

#[test]
fn a_cassette_replays_a_task_file_that_names_a_real_provider() {
    let server = Server::start(vec![
        wire::openai_sse_call(
            "call_t1",
            "write_file",
            &json!({"path": "hello.txt", "content": "hi\n"}),
        ),
        wire::openai_sse_answer("done"),
    ]);
    let task = format!(
        "provider: openai\nmodel: m\nendpoint: {}/v1\n{}",
        server.url,
        task_yaml("")
    );
    let (ybs, keys) = scratch(&task);
    let recorded = ybs.run(["run", "t.yaml", "--no-commit", "--record", "rec.json"]);
    recorded.expect_code(0);
    let recorded = transcript(&recorded);
    drop(server);
    std::fs::remove_file(ybs.path().join("hello.txt")).unwrap();
    // `--cassette` alone replays: the task file's provider and endpoint
    // are not contacted.
    let replay = ybs.run(["run", "t.yaml", "--no-commit", "--cassette", "rec.json"]);
    replay.expect_code(0);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    let replayed = transcript(&replay);
    assert_eq!(replayed["manifest"]["provider"], "replay");
    assert_eq!(outcome(&replayed), outcome(&recorded));
    assert_no_secrets(&ybs, &replay, &keys);
}

#[test]
fn a_recorded_missing_key_replays_as_an_auth_error() {
    let ybs = crate::support::Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    let args = [
        "run",
        "t.yaml",
        "--no-commit",
        "--provider",
        "openai",
        "--model",
        "m",
    ];
    let recorded = ybs.run(args.iter().copied().chain(["--record", "rec.json"]));
    recorded.expect_code(4);
    let recorded = transcript(&recorded);
    assert_eq!(recorded["reason"], "auth_error");
    let replay = ybs.run(["run", "t.yaml", "--no-commit", "--cassette", "rec.json"]);
    replay.expect_code(4);
    let replayed = transcript(&replay);
    assert_eq!(replayed["reason"], "auth_error");
    assert_eq!(replayed["message"], recorded["message"]);
}
