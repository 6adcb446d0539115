//! External tools through the binary (issue 6): `ybs tools list|schema|
//! invoke`, tasks calling tools, trust, the schema cache, hot add, and the
//! example tools shipped in `tools/`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, call};

/// A scratch dir whose cache lives in its own HOME.
fn ybs() -> Ybs {
    let ybs = Ybs::new();
    let cache = ybs.home().join(".cache");
    ybs.env("XDG_CACHE_HOME", cache.to_str().unwrap())
}

fn executable(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A tool in the scratch dir (relative path), executable.
fn tool(ybs: &Ybs, relative: &str, body: &str) {
    executable(&ybs.path().join(relative), body);
}

/// A tool in `~/.ybs/tools`: installed by the operator.
fn user_tool(ybs: &Ybs, name: &str, body: &str) {
    executable(&ybs.home().join(".ybs/tools").join(name), body);
}

fn lines(ybs: &Ybs, relative: &str) -> usize {
    std::fs::read_to_string(ybs.path().join(relative))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// A shell tool: counts `--schema` runs in `<name>.schema-runs` and calls
/// in `<name>.calls` (in the directory it runs in), echoes its input.
fn echo_tool(name: &str) -> String {
    format!(
        r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo x >> {name}.schema-runs
  echo '{{"name": "{name}", "description": "Echo a message", "parameters": {{"message": {{"type": "string", "required": true}}, "times": {{"type": "integer", "default": 1}}}}}}'
  exit 0
fi
echo x >> {name}.calls
input=$(cat)
printf '{{"success": true, "result": {{"echo": %s, "mode": "%s"}}}}\n' "$input" "$YBS_TOOL_MODE"
"#
    )
}

const PY_TOOL: &str = r#"#!/usr/bin/env python3
import json, sys
if "--schema" in sys.argv:
    print(json.dumps({"description": "Add", "parameters": {"a": {"type": "number", "required": True}, "b": {"type": "number", "required": True}}}))
    sys.exit(0)
p = json.load(sys.stdin)
print(json.dumps({"success": True, "result": p["a"] + p["b"]}))
"#;

fn list_json(ybs: &Ybs, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["tools", "list", "--json"];
    args.extend_from_slice(extra);
    let run = ybs.run(args);
    run.expect_code(0);
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", run.stdout, run.stderr));
    doc["tools"].as_array().unwrap().clone()
}

fn by_name<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|tool| tool["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {tools:?}"))
}

#[test]
fn list_shows_every_status_and_repository_tools_stay_unrun() {
    let ybs = ybs();
    user_tool(&ybs, "echo", &echo_tool("echo"));
    user_tool(&ybs, "add.py", PY_TOOL);
    user_tool(&ybs, "side", "#!/bin/sh\necho x >> side.calls\n");
    std::fs::write(
        ybs.home().join(".ybs/tools/side.tool.json"),
        r#"{"description": "From the sidecar", "parameters": {}}"#,
    )
    .unwrap();
    user_tool(&ybs, "plain", "#!/bin/sh\necho hello\n");
    user_tool(
        &ybs,
        "broken",
        "#!/bin/sh\necho '{\"parameters\": {\"n\": {\"type\": \"int\"}}}'\n",
    );
    ybs.file(
        "ops.json",
        r#"{"tools": {"external": [{"name": "gone", "path": "/nonexistent/gone"}]}}"#,
    );
    tool(&ybs, "tools/repo", &echo_tool("repo"));
    let tools = list_json(&ybs, &["--config", "ops.json"]);
    let status = |name: &str| by_name(&tools, name)["status"].as_str().unwrap().to_owned();
    assert_eq!(status("echo"), "ready");
    assert_eq!(status("add"), "ready");
    assert_eq!(status("side"), "ready");
    assert_eq!(by_name(&tools, "side")["schema_from"], "sidecar");
    assert_eq!(by_name(&tools, "side")["description"], "From the sidecar");
    assert_eq!(status("plain"), "schema-unknown");
    assert_eq!(by_name(&tools, "plain")["offered"], false);
    assert_eq!(status("broken"), "invalid-schema");
    assert!(
        by_name(&tools, "broken")["reason"]
            .as_str()
            .unwrap()
            .contains("unknown type `int`")
    );
    assert_eq!(status("gone"), "missing-binary");
    assert_eq!(status("repo"), "disabled");
    assert_eq!(by_name(&tools, "repo")["source"], "./tools");
    assert_eq!(
        lines(&ybs, "repo.schema-runs"),
        0,
        "repository tool was run"
    );
    assert_eq!(lines(&ybs, "side.calls"), 0);

    // The table names them too.
    let run = ybs.run(["tools", "list", "--config", "ops.json"]);
    run.expect_code(0);
    assert!(run.stdout.starts_with("NAME"), "{}", run.stdout);
    for name in ["echo", "add", "side", "plain", "broken", "gone", "repo"] {
        assert!(run.stdout.contains(name), "{name}: {}", run.stdout);
    }

    // An operator policy that allows it enables the repository tool.
    ybs.file("policy.yaml", "allow: [repo]\n");
    let tools = list_json(&ybs, &["--policy", "policy.yaml"]);
    assert_eq!(by_name(&tools, "repo")["status"], "ready");
    assert_eq!(by_name(&tools, "repo")["enabled_by"], "policy");
}

#[test]
fn schema_cache_spares_unchanged_tools_across_runs() {
    let ybs = ybs();
    user_tool(&ybs, "echo", &echo_tool("echo"));
    user_tool(
        &ybs,
        "plain",
        "#!/bin/sh\necho x >> plain.schema-runs\nexit 2\n",
    );
    for _ in 0..3 {
        let tools = list_json(&ybs, &[]);
        assert_eq!(by_name(&tools, "echo")["status"], "ready");
        assert_eq!(by_name(&tools, "plain")["status"], "schema-unknown");
    }
    assert_eq!(lines(&ybs, "echo.schema-runs"), 1);
    // A failed probe is never cached (issue 21): asked again each time.
    assert_eq!(lines(&ybs, "plain.schema-runs"), 3);
    // Touching the file (new mtime) makes it probe again.
    let path = ybs.home().join(".ybs/tools/echo");
    std::fs::write(&path, echo_tool("echo") + "# edited\n").unwrap();
    list_json(&ybs, &[]);
    assert_eq!(lines(&ybs, "echo.schema-runs"), 2);
}

#[test]
fn schema_prints_the_json_schema_offered_to_the_model() {
    let ybs = ybs();
    tool(&ybs, "tools/echo", &echo_tool("echo"));
    let run = ybs.run(["tools", "schema", "echo"]);
    run.expect_code(0);
    let spec: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        spec,
        json!({
            "name": "echo",
            "description": "Echo a message",
            "parameters": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "times": {"type": "integer", "default": 1},
                },
                "required": ["message"],
                "additionalProperties": false,
            }
        })
    );
    let run = ybs.run(["tools", "schema", "ecko"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("did you mean `echo`?"),
        "{}",
        run.stderr
    );
}

#[test]
fn invoke_prints_the_envelope_with_honest_exit_codes() {
    let ybs = ybs();
    tool(&ybs, "tools/echo", &echo_tool("echo"));
    tool(
        &ybs,
        "tools/fails",
        "#!/bin/sh\necho 'cannot frobnicate' >&2\nexit 3\n",
    );
    ybs.file("tools/fails.tool.json", r#"{"parameters": {}}"#);

    let run = ybs.run(["tools", "invoke", "echo", "--input", r#"{"message": "hi"}"#]);
    run.expect_code(0);
    let envelope: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(envelope["success"], true);
    assert_eq!(
        envelope["result"],
        json!({"echo": {"message": "hi", "times": 1}, "mode": "subprocess"})
    );

    let run = ybs.run(["tools", "invoke", "fails"]);
    run.expect_code(1);
    let envelope: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(envelope["success"], false);
    let error = envelope["error"].as_str().unwrap();
    assert!(
        error.contains("exited with code 3") && error.contains("cannot frobnicate"),
        "{error}"
    );

    for (input, expected) in [
        ("{}", "missing required parameter `message`"),
        (r#"{"message": 1}"#, "parameter `message` must be a string"),
        ("{not json", "not valid JSON"),
        ("[1]", "one JSON object"),
    ] {
        let run = ybs.run(["tools", "invoke", "echo", "--input", input]);
        run.expect_code(2);
        assert!(run.stderr.contains(expected), "{input}: {}", run.stderr);
    }
    ybs.run(["tools", "invoke", "nope"]).expect_code(2);
    assert_eq!(lines(&ybs, "echo.calls"), 1, "bad input never spawned");

    // An operator policy decides like it would for the agent.
    ybs.file("policy.yaml", "deny: [echo]\n");
    let run = ybs.run([
        "tools",
        "invoke",
        "echo",
        "--input",
        r#"{"message": "hi"}"#,
        "--policy",
        "policy.yaml",
    ]);
    run.expect_code(1);
    assert!(run.stdout.contains("denied by policy"), "{}", run.stdout);
    assert_eq!(lines(&ybs, "echo.calls"), 1);

    // Metrics persist and show in the list.
    let tools = list_json(&ybs, &["--policy", "policy.yaml"]);
    let metrics = &by_name(&tools, "fails")["metrics"];
    assert_eq!(metrics["calls"], 1);
    assert_eq!(metrics["failures"], 1);
    let tools = list_json(&ybs, &[]);
    assert_eq!(by_name(&tools, "echo")["metrics"]["successes"], 1);
}

#[test]
fn ten_concurrent_invocations_are_ten_processes() {
    let ybs = ybs();
    tool(
        &ybs,
        "tools/slow",
        // Each call is PID 2 of its own sandbox: a random id tells them apart.
        "#!/bin/sh\ninput=$(cat)\ncat /proc/sys/kernel/random/uuid >> pids\nsleep 1\nprintf '{\"success\": true, \"result\": %s}\\n' \"$input\"\n",
    );
    ybs.file(
        "tools/slow.tool.json",
        r#"{"parameters": {"n": {"type": "integer", "required": true}}}"#,
    );
    let started = std::time::Instant::now();
    let children: Vec<_> = (0..10)
        .map(|n| {
            ybs.command()
                .args([
                    "tools",
                    "invoke",
                    "slow",
                    "--input",
                    &format!("{{\"n\": {n}}}"),
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (n, child) in children.into_iter().enumerate() {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(envelope["result"], json!({"n": n}));
    }
    let pids: std::collections::BTreeSet<String> =
        ybs.read("pids").lines().map(str::to_owned).collect();
    assert_eq!(pids.len(), 10);
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
}

#[test]
fn a_task_calls_an_external_tool_and_bad_calls_never_spawn() {
    let ybs = ybs();
    tool(&ybs, "tools/echo", &echo_tool("echo"));
    tool(&ybs, "tools/other", &echo_tool("other"));
    ybs.file(
        "t.yaml",
        "prompt: echo it\ncommit: false\ntools: { external: [echo] }\npolicy: { allow: [echo] }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("echo", json!({"message": "hello"})),
            call("echo", json!({})),
            call("echo", json!({"message": 42})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert!(
        transcript["manifest"]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("echo"))
    );
    assert!(
        !transcript["manifest"]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("other")),
        "an unnamed repository tool is not offered"
    );
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["result"]["ok"], true);
    let output: Value =
        serde_json::from_str(calls[0]["result"]["output"].as_str().unwrap()).unwrap();
    assert_eq!(output["echo"], json!({"message": "hello", "times": 1}));
    for (call, expected) in [
        (&calls[1], "missing required parameter `message`"),
        (&calls[2], "parameter `message` must be a string"),
    ] {
        assert_eq!(call["result"]["ok"], false);
        assert_eq!(call["result"]["ran"], false);
        let text = call["result"]["output"].as_str().unwrap();
        assert!(text.contains(expected), "{text}");
    }
    assert_eq!(lines(&ybs, "echo.calls"), 1, "rejected calls never spawned");
    assert_eq!(lines(&ybs, "other.schema-runs"), 0);
    let metrics = &transcript["tool_metrics"];
    assert_eq!(metrics[0]["name"], "echo");
    assert_eq!(metrics[0]["calls"], 1);
    assert_eq!(metrics[0]["successes"], 1);
    assert!(
        run.events("t")
            .iter()
            .any(|event| event["type"] == "tool.metrics")
    );
}

#[test]
fn bad_tools_fail_their_calls_and_the_task_goes_on() {
    let ybs = ybs();
    tool(&ybs, "tools/hang", "#!/bin/sh\nsleep 60 &\nsleep 60\n");
    ybs.file(
        "tools/hang.tool.json",
        r#"{"parameters": {}, "timeout_seconds": 1}"#,
    );
    tool(
        &ybs,
        "tools/garbage",
        "#!/bin/sh\necho 'not json at all'\necho 'the real problem' >&2\n",
    );
    ybs.file("tools/garbage.tool.json", r#"{"parameters": {}}"#);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { external: [hang, garbage, missing] }\npolicy: { allow: [hang, garbage] }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("hang", json!({})),
            call("garbage", json!({})),
            answer("done"),
        ],
    );
    let started = std::time::Instant::now();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let transcript = run.json("ybs-out/t/transcript.json");
    let calls = transcript["tool_calls"].as_array().unwrap();
    let hang = calls[0]["result"]["output"].as_str().unwrap();
    assert!(hang.contains("timed out after 1s"), "{hang}");
    let garbage = calls[1]["result"]["output"].as_str().unwrap();
    assert!(
        garbage.contains("not json at all") && garbage.contains("the real problem"),
        "{garbage}"
    );
    let notes = transcript["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|note| note
            .as_str()
            .unwrap()
            .contains("external tool `missing` is not offered")),
        "{notes:?}"
    );
    let hang_metrics = transcript["tool_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "hang")
        .unwrap()
        .clone();
    assert_eq!(hang_metrics["timeouts"], 1);
}

#[test]
fn a_tool_added_between_tasks_is_found() {
    let ybs = ybs();
    ybs.file(
        "t.yaml",
        "tasks:\n  - id: one\n    prompt: make a tool\n    commit: false\n    policy: { default: allow }\n  - id: two\n    prompt: use it\n    commit: false\n    tools: { external: [late] }\n    policy: { allow: [late] }\n",
    );
    let mut first = call(
        "write_file",
        json!({"path": "tools/late", "content": echo_tool("late")}),
    );
    first["task"] = json!("one");
    let mut second = call("run_shell", json!({"command": "chmod +x tools/late"}));
    second["task"] = json!("one");
    let mut done = answer("made it");
    done["task"] = json!("one");
    let mut use_it = call("late", json!({"message": "fresh"}));
    use_it["task"] = json!("two");
    let mut finished = answer("used it");
    finished["task"] = json!("two");
    ybs.cassette(
        "t.cassette.json",
        vec![first, second, done, use_it, finished],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/two/transcript.json");
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["name"], "late");
    assert_eq!(calls[0]["result"]["ok"], true, "{:?}", calls[0]);
    assert!(
        calls[0]["result"]["output"]
            .as_str()
            .unwrap()
            .contains("fresh")
    );
}

/// The example tools of this repository, copied into a scratch `./tools`.
fn with_examples() -> Ybs {
    let ybs = ybs();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools");
    for name in ["git-summary", "run-tests", "todo-scan"] {
        let body = std::fs::read_to_string(repo.join(name)).unwrap();
        tool(&ybs, &format!("tools/{name}"), &body);
    }
    ybs
}

fn invoke(ybs: &Ybs, name: &str, input: &str) -> Value {
    invoke_expecting(ybs, name, input, 0)
}

fn invoke_expecting(ybs: &Ybs, name: &str, input: &str, code: i32) -> Value {
    let run = ybs.run(["tools", "invoke", name, "--input", input]);
    run.expect_code(code);
    serde_json::from_str(&run.stdout).unwrap()
}

#[test]
fn example_tools_have_schemas() {
    let ybs = with_examples();
    for name in ["git-summary", "run-tests", "todo-scan"] {
        let run = ybs.run(["tools", "schema", name]);
        run.expect_code(0);
        let spec: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(spec["name"], name);
        assert_eq!(spec["parameters"]["type"], "object");
        assert!(spec["description"].as_str().unwrap().len() > 20);
    }
}

#[test]
fn example_git_summary_reports_the_repository() {
    let ybs = with_examples();
    ybs.git(&["init", "-q", "-b", "main"]);
    ybs.file("a.txt", "a\n");
    ybs.git(&["add", "a.txt"]);
    ybs.git(&["commit", "-q", "-m", "first \"quoted\" commit"]);
    ybs.file("b.txt", "b\n");
    let envelope = invoke(&ybs, "git-summary", r#"{"max_commits": 2}"#);
    assert_eq!(envelope["success"], true, "{envelope}");
    let result = &envelope["result"];
    assert_eq!(result["branch"], "main");
    assert_eq!(result["clean"], false);
    assert_eq!(result["commits"][0]["subject"], "first \"quoted\" commit");
    assert!(result["untracked"].as_u64().unwrap() >= 1);
}

#[test]
fn example_run_tests_detects_and_runs_python_tests() {
    let ybs = with_examples();
    ybs.file(
        "tests/test_math.py",
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        self.assertEqual(2, 1 + 1)\n\n    def test_broken(self):\n        self.assertEqual(3, 1 + 1)\n",
    );
    let detected = invoke(&ybs, "run-tests", r#"{"detect_only": true}"#);
    assert_eq!(detected["result"]["detected_from"], "python (unittest)");
    let all = invoke(&ybs, "run-tests", "{}");
    assert_eq!(all["result"]["passed"], false, "{all}");
    assert_eq!(all["result"]["summary"]["failed"], 1);
    let one = invoke(&ybs, "run-tests", r#"{"filter": "test_ok"}"#);
    assert_eq!(one["result"]["passed"], true, "{one}");
}

#[test]
fn example_todo_scan_finds_markers_and_stays_inside() {
    let ybs = with_examples();
    ybs.file(
        "src/a.rs",
        "fn a() {}\n// TODO: handle errors\n// FIXME later\n",
    );
    ybs.file("src/b.rs", "// nothing here\n");
    let found = invoke(&ybs, "todo-scan", r#"{"path": "src"}"#);
    let matches = found["result"]["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 2, "{found}");
    assert_eq!(matches[0]["file"], "src/a.rs");
    assert_eq!(matches[0]["line"], 2);
    assert_eq!(matches[0]["marker"], "TODO");
    let outside = invoke_expecting(&ybs, "todo-scan", r#"{"path": "/etc"}"#, 1);
    assert_eq!(outside["success"], false);
}

/// Issue 21 item 9: an operator's tool under the host's `/tmp` is
/// reachable from the sandbox (its `--schema` probe and its calls); a
/// probe that fails is said on the console and in the summary, is not
/// cached, and makes a task that marks the tool `required: true` an error.
#[test]
fn an_operators_tool_anywhere_is_offered_and_a_failed_probe_is_said_and_not_cached() {
    let outside = tempfile::Builder::new()
        .prefix("ybs-operator-tool")
        .tempdir_in("/tmp")
        .unwrap();
    let hello = outside.path().join("hello");
    executable(&hello, &echo_tool("hello"));
    // Fails its `--schema` while `fail-schema` is in the workdir.
    let flaky = outside.path().join("flaky");
    executable(
        &flaky,
        &echo_tool("flaky").replacen(
            "if [ \"$1\" = \"--schema\" ]; then\n",
            "if [ \"$1\" = \"--schema\" ]; then\n  if [ -e fail-schema ]; then exit 1; fi\n",
            1,
        ),
    );
    let ybs = ybs();
    ybs.file(
        "op.json",
        &json!({"tools": {"external": [
            {"name": "hello", "path": hello},
            {"name": "flaky", "path": flaky},
        ]}})
        .to_string(),
    );
    ybs.file(
        "t.yaml",
        "prompt: echo it\ncommit: false\npolicy: { allow: [hello, flaky] }\n",
    );
    ybs.file("fail-schema", "");
    ybs.cassette(
        "t.cassette.json",
        vec![call("hello", json!({"message": "hi"})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml", "--config", "op.json"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let calls = transcript["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["result"]["ok"], true, "{:?}", calls[0]);
    let offered = transcript["manifest"]["tools"].as_array().unwrap().clone();
    assert!(offered.contains(&json!("hello")), "{offered:?}");
    assert!(!offered.contains(&json!("flaky")), "{offered:?}");
    let said = "external tool `flaky` is not offered to the model";
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(
        console.contains(&format!("warning: {said}")) && console.contains("--schema` exited"),
        "{console}"
    );
    let summary = ybs.read("ybs-out/summary.md");
    // Escaped for Markdown there.
    assert!(
        summary.contains("## Warnings")
            && summary.contains("- ⚠ t: external tool \\`flaky\\` is not offered to the model"),
        "{summary}"
    );

    // Required: the task is an error, and the model is never asked.
    ybs.file(
        "r.yaml",
        "prompt: echo it\ncommit: false\ntools:\n  external: [{name: flaky, required: true}]\npolicy: { allow: [flaky] }\n",
    );
    ybs.cassette("r.cassette.json", vec![answer("done")]);
    let run = ybs.run(["run", "r.yaml", "--config", "op.json"]);
    run.expect_code(4);
    let transcript = run.json("ybs-out/r/transcript.json");
    assert_eq!(transcript["status"], "error", "{transcript}");
    assert_eq!(transcript["reason"], "tool_unavailable", "{transcript}");
    assert!(
        transcript["message"].as_str().unwrap().contains(said),
        "{transcript}"
    );

    // The failure was not cached: once the probe works, the tool is there.
    std::fs::remove_file(ybs.path().join("fail-schema")).unwrap();
    let run = ybs.run(["run", "r.yaml", "--config", "op.json"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/r/transcript.json");
    assert!(
        transcript["manifest"]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("flaky")),
        "{transcript}"
    );
}

#[test]
fn an_operators_tool_the_policy_can_never_allow_is_not_offered_and_a_note_says_so() {
    let outside = tempfile::Builder::new()
        .prefix("ybs-operator-tool")
        .tempdir_in("/tmp")
        .unwrap();
    let hello = outside.path().join("hello");
    executable(&hello, &echo_tool("hello"));
    let bye = outside.path().join("bye");
    executable(&bye, &echo_tool("bye"));
    let ybs = ybs();
    ybs.file(
        "op.json",
        &json!({"tools": {"external": [
            {"name": "hello", "path": hello},
            {"name": "bye", "path": bye},
        ]}})
        .to_string(),
    );
    // Both are declared (enabled); the policy can allow only `hello`.
    ybs.file(
        "t.yaml",
        "prompt: echo it\ncommit: false\ntools: { builtin: [read_file] }\npolicy: { allow: [hello] }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![call("bye", json!({"message": "hi"})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml", "--config", "op.json"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["manifest"]["tools"], json!(["hello"]));
    let notes: Vec<String> = run
        .events("t")
        .iter()
        .filter(|event| event["type"] == "task.note")
        .map(|event| event["message"].as_str().unwrap().to_owned())
        .collect();
    let withheld = notes
        .iter()
        .find(|note| note.starts_with("not offered to the model"))
        .unwrap_or_else(|| panic!("a note naming the tools not offered: {notes:?}"));
    assert!(
        withheld.contains("`bye`") && withheld.contains("`read_file`"),
        "{withheld}"
    );
    assert!(!withheld.contains("`hello`"), "{withheld}");
    // A call to it anyway is decided by the policy, and refused.
    let entry = &transcript["tool_calls"][0];
    assert_eq!(entry["decision"]["verdict"], "deny", "{entry}");
    assert_eq!(entry["result"]["ran"], false, "{entry}");
    assert_eq!(lines(&ybs, "bye.calls"), 0);
}

#[test]
fn json_schema_keywords_beyond_the_subset_are_enforced_before_the_tool_runs() {
    let ybs = ybs();
    tool(
        &ybs,
        "tools/count",
        "#!/bin/sh\necho x >> count.calls\ncat > /dev/null\necho '{\"success\": true, \"result\": 1}'\n",
    );
    ybs.file(
        "tools/count.tool.json",
        r#"{"description": "Count", "parameters": {"type": "object", "required": ["count"], "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 5}, "label": {"type": "string", "pattern": "^[a-z]+$"}}}}"#,
    );
    for (input, expected) in [
        (
            r#"{"count": 0}"#,
            "parameter `count`: 0 is less than the minimum of 1",
        ),
        (r#"{"count": 2, "label": "A1"}"#, "parameter `label`"),
    ] {
        let run = ybs.run(["tools", "invoke", "count", "--input", input]);
        run.expect_code(2);
        assert!(run.stderr.contains(expected), "{input}: {}", run.stderr);
    }
    assert_eq!(lines(&ybs, "count.calls"), 0, "bad input never spawned");
    ybs.run([
        "tools",
        "invoke",
        "count",
        "--input",
        r#"{"count": 3, "label": "ok"}"#,
    ])
    .expect_code(0);
    assert_eq!(lines(&ybs, "count.calls"), 1);
}
