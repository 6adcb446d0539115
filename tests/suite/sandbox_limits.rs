//! What the sandbox holds back and bounds (docs/sandbox.md): the
//! non-interactive environment of every child, ybs's own state and the
//! credentials a machine holds, the `--record` file, and the number of
//! processes a task may have.

use serde_json::{Value, json};

use crate::support::cassette::{answer, call};
use crate::support::{Run, Ybs};

/// The results of the tool calls the model saw, in order (JSON when the
/// result is JSON).
fn tool_results(run: &Run) -> Vec<Value> {
    run.json("ybs-out/t/transcript.json")["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let content = m["content"].as_str().unwrap();
            serde_json::from_str(content).unwrap_or_else(|_| json!(content))
        })
        .collect()
}

/// The output of the check named `name`.
fn check_output(run: &Run, name: &str) -> String {
    run.events("t")
        .iter()
        .find(|e| e["type"] == "check.completed" && e["name"] == name)
        .map(|e| e["output_tail"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no check {name}"))
}

const NON_INTERACTIVE: &[&str] = &[
    "GIT_TERMINAL_PROMPT=0",
    "DEBIAN_FRONTEND=noninteractive",
    "GIT_PAGER=cat",
    "PAGER=cat",
];

/// A shell command and a check see the non-interactive settings, even
/// when the operator passes a `PAGER` of their own through.
#[test]
fn every_child_gets_the_non_interactive_environment() {
    let ybs = Ybs::new()
        .env("PAGER", "less")
        .env("GIT_PAGER", "less")
        .env("CI", "");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\nchecks:\n  - run: env\n    name: env\n",
    );
    ybs.file(
        "operator.json",
        r#"{"safety": {"env_passthrough": ["PAGER", "GIT_PAGER"]}}"#,
    );
    ybs.cassette(
        "t.cassette.json",
        vec![call("run_shell", json!({"command": "env"})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    let shell = tool_results(&run)[0]["stdout"].as_str().unwrap().to_owned();
    let check = check_output(&run, "env");
    for output in [&shell, &check] {
        let lines: Vec<&str> = output.lines().collect();
        for setting in NON_INTERACTIVE {
            assert!(lines.contains(setting), "{setting} missing:\n{output}");
        }
        assert!(!lines.contains(&"PAGER=less"), "{output}");
        assert!(lines.contains(&"CI=1"), "{output}");
    }
}
