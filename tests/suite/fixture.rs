//! `ybs report fixture OUT/<task> --to DIR` (docs/outputs.md#fixtures): a
//! run recorded with `--record` against the server becomes a task file and
//! a masked cassette that replay offline, with no server, to the same end.

use serde_json::{Value, json};

use super::providers::{assert_no_secrets, scratch};
use crate::support::server::Server;
use crate::support::wire;

/// What must match between the recorded run and the fixture's replay.
fn end(transcript: &Value) -> Value {
    let calls: Vec<Value> = transcript["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| json!([call["name"], call["arguments"], call["result"]["ok"]]))
        .collect();
    json!({
        "status": transcript["status"],
        "reason": transcript["reason"],
        "iterations": transcript["iterations"],
        "calls": calls,
        "suite": transcript["task"]["suite"],
        "checks": transcript["checks"].as_array().unwrap().iter()
            .map(|check| json!([check["name"], check["passed"]])).collect::<Vec<_>>(),
    })
}

#[test]
fn a_recorded_failure_becomes_a_fixture_that_replays_offline_to_the_same_end() {
    let (ybs, keys) = scratch(
        "name: nightly\ndefaults:\n  provider: openai\n  model: m\n  limits: { max_iterations: 8, timeout: 5m }\n  policy:\n    default: allow\ntasks:\n\
         \x20 - id: greet\n    prompt: Write hello.txt saying bye.\n    checks:\n      - name: says bye\n        run: grep -q bye hello.txt\n\
         \x20 - id: other\n    prompt: never asked\n",
    );
    let recorded = {
        let server = Server::start(vec![
            wire::openai_sse_call(
                "call_1",
                "write_file",
                &json!({"path": "hello.txt", "content": "hi\n"}),
            ),
            wire::openai_sse_call("call_2", "run_shell", &json!({"command": "cat hello.txt"})),
            // A key the model should never have seen: masked in the fixture.
            wire::openai_sse_answer(&format!("done; key was {}", keys.anthropic)),
        ]);
        let endpoint = format!("{}/v1", server.url);
        let run = ybs.run([
            "run",
            "t.yaml",
            "--filter",
            "greet",
            "--endpoint",
            &endpoint,
            "--no-commit",
            "--record",
            "rec.json",
        ]);
        run.expect_code(1);
        assert_eq!(server.requests().len(), 3);
        run
    };
    let recorded = end(&recorded.json("ybs-out/greet/transcript.json"));
    assert_eq!(recorded["reason"], "checks_failed");
    assert_eq!(recorded["calls"].as_array().unwrap().len(), 2);

    let made = ybs.run(["report", "fixture", "ybs-out/greet", "--to", "fixtures"]);
    made.expect_code(0);
    assert!(
        made.stdout.contains("fixtures/greet.yaml")
            && made
                .stdout
                .contains("failed (checks_failed) after 2 tool calls"),
        "{}",
        made.stdout
    );
    let task = ybs.read("fixtures/greet.yaml");
    assert!(!task.contains("never asked"), "only the task: {task}");
    assert!(task.contains("\"provider\": \"replay\""), "{task}");
    let cassette = ybs.json("fixtures/greet.cassette.json");
    let interactions = cassette["interactions"].as_array().unwrap();
    assert_eq!(interactions.len(), 3);
    assert!(interactions.iter().all(|i| i["task"] == "greet"));

    // No server, no outputs, the file as before the run: the fixture
    // alone replays to the same end.
    std::fs::remove_file(ybs.path().join("hello.txt")).unwrap();
    std::fs::remove_dir_all(ybs.path().join("ybs-out")).unwrap();
    let replay = ybs.run(["run", "fixtures/greet.yaml", "--no-commit"]);
    replay.expect_code(1);
    let replayed = replay.json("ybs-out/greet/transcript.json");
    assert_eq!(replayed["manifest"]["provider"], "replay");
    assert_eq!(end(&replayed), recorded);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    assert_no_secrets(&ybs, &replay, &keys);

    // A run that was not recorded has nothing to replay.
    let refused = ybs.run(["report", "fixture", "ybs-out/greet", "--to", "again"]);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("was not recorded"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("--record"), "{}", refused.stderr);
    assert!(!ybs.exists("again/greet.yaml"));
    let refused = ybs.run(["report", "fixture", "nowhere", "--to", "again"]);
    refused.expect_code(2);
}
