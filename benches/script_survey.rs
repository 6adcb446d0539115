#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::cast_precision_loss,
    reason = "a benchmark: a panic is the failure report, stdout is its output"
)]
//! The `script` tool against plain tool calls on a 10-file survey (issue
//! 14): `cargo bench --features script --bench script_survey`.
//!
//! The scripted model (the `replay` provider) surveys ten files — how many
//! functions each has, and its TODO lines — three ways: one `read_file`
//! per turn, all ten `read_file`s in one turn, and one `script` call. The
//! figures are the number of provider requests and their input tokens as
//! ybs estimates them for each request it sends
//! (`llm.response.request_tokens_estimate`, the bytes of the system
//! prompt, tool schemas and messages at about 4 per token), read from the
//! transcript: the replay provider's own usage figures are canned.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

const FILES: usize = 10;

fn source(index: usize) -> String {
    let mut text = format!("//! Module {index}.\n\n");
    for function in 0..(4 + index % 3) {
        text.push_str(&format!(
            "/// Does step {function} of module {index}.\npub fn step_{function}(input: &str) -> usize {{\n    // a comment about the input\n    let trimmed = input.trim();\n    trimmed.len() + {function}\n}}\n\n"
        ));
        if function == 1 {
            text.push_str(&format!("// TODO: handle errors in module {index}\n\n"));
        }
    }
    text
}

fn turn(id: &str, calls: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(n, (name, arguments))| json!({"id": format!("{id}_{n}"), "name": name, "arguments": arguments}))
        .collect();
    json!({"response": {"content": "", "tool_calls": calls, "usage": {"input_tokens": 1, "output_tokens": 1}}})
}

fn answer() -> Value {
    json!({"response": {"content": "survey done", "usage": {"input_tokens": 1, "output_tokens": 1}}})
}

fn paths() -> Vec<String> {
    (0..FILES).map(|i| format!("src/m{i}.rs")).collect()
}

/// Runs the task with these model turns; returns (requests, estimated
/// input tokens summed over the requests, the first request's estimate).
fn run(dir: &Path, script: bool, turns: Vec<Value>) -> (usize, u64, u64) {
    let tools = if script {
        "tools: { script: true }\n"
    } else {
        ""
    };
    std::fs::write(
        dir.join("t.yaml"),
        format!("prompt: \"Survey src: functions per file and every TODO.\"\ncommit: false\n{tools}policy: {{ allow: [read_file, list_files, search_files, script] }}\n"),
    )
    .unwrap();
    let cassette = json!({"version": 1, "interactions": turns});
    std::fs::write(dir.join("t.cassette.json"), cassette.to_string()).unwrap();
    let _ = std::fs::remove_dir_all(dir.join("ybs-out"));
    let status = Command::new(env!("CARGO_BIN_EXE_ybs"))
        .current_dir(dir)
        .args(["run", "-q", "t.yaml"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the run failed");
    let transcript: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("ybs-out/t/transcript.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(transcript["status"], "passed", "{}", transcript["message"]);
    if script {
        // The survey really happened: every file's count and TODO came back.
        let output = transcript["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|call| call["name"] == "script")
            .map(|call| call["result"]["output"].to_string())
            .unwrap();
        for index in 0..FILES {
            let fns = 4 + index % 3;
            assert!(
                output.contains(&format!("src/m{index}.rs: {fns} fns")),
                "{output}"
            );
            assert!(
                output.contains(&format!("TODO: handle errors in module {index}")),
                "{output}"
            );
        }
    }
    let calls = transcript["llm_calls"].as_array().unwrap();
    let estimate = |call: &Value| call["request_tokens_estimate"].as_u64().unwrap_or(0);
    (
        calls.len(),
        calls.iter().map(estimate).sum(),
        calls.first().map_or(0, estimate),
    )
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    for (index, path) in paths().iter().enumerate() {
        std::fs::write(dir.path().join(path), source(index)).unwrap();
    }
    let list = ("list_files", json!({"pattern": "src/*.rs"}));

    // One read per turn, as a cautious model works.
    let mut turns = vec![turn("l", std::slice::from_ref(&list))];
    for (n, path) in paths().iter().enumerate() {
        turns.push(turn(
            &format!("r{n}"),
            &[("read_file", json!({"path": path}))],
        ));
    }
    turns.push(answer());
    let sequential = run(dir.path(), false, turns);

    // All reads in one turn.
    let reads: Vec<(&str, Value)> = paths()
        .iter()
        .map(|path| ("read_file", json!({"path": path})))
        .collect();
    let parallel = run(
        dir.path(),
        false,
        vec![turn("l", &[list]), turn("r", &reads), answer()],
    );

    // One script: the survey comes back, the files do not.
    let script = "for f in $(list_files --pattern 'src/*.rs'); do\n  text=$(read_file --path \"$f\")\n  echo \"$f: $(echo \"$text\" | grep -c '^pub fn ') fns\"\n  echo \"$text\" | grep 'TODO' | sed 's/^/  /'\ndone";
    let scripted = run(
        dir.path(),
        true,
        vec![
            turn("s", &[("script", json!({"commands": script}))]),
            answer(),
        ],
    );

    let row = |name: &str, (requests, tokens, first): (usize, u64, u64)| {
        println!("{name:<34} {requests:>8} {tokens:>14} {first:>18}");
    };
    println!(
        "{:<34} {:>8} {:>14} {:>18}",
        "10-file survey", "requests", "input tokens", "first request"
    );
    row("read_file, one per turn", sequential);
    row("read_file, ten in one turn", parallel);
    row("script, one call", scripted);
    println!(
        "script vs one per turn: {:.1}x fewer requests, {:.1}x fewer input tokens",
        sequential.0 as f64 / scripted.0 as f64,
        sequential.1 as f64 / scripted.1 as f64
    );
    println!(
        "script vs ten in one turn: {:.1}x fewer requests, {:.1}x fewer input tokens",
        parallel.0 as f64 / scripted.0 as f64,
        parallel.1 as f64 / scripted.1 as f64
    );
    println!(
        "fixed overhead (first request, tools.script on): {} tokens; the script tool adds {} tokens",
        scripted.2,
        scripted.2.saturating_sub(sequential.2)
    );
}
