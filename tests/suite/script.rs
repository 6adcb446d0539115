//! The `script` tool (issue 14): many tool calls in one turn, each decided
//! by the policy like a direct call. Built with `--features script`.

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, call};
use crate::support::server::Server;
use crate::support::tool_calls;
use crate::support::wire;

/// The `{stdout, stderr, exit_code}` the model got for the script call.
fn script_result(transcript: &Value) -> Value {
    let entry = tool_calls(transcript)
        .iter()
        .find(|entry| entry["name"] == "script")
        .expect("a script call");
    let output = entry["result"]["output"].as_str().expect("an output");
    serde_json::from_str(output).expect("the result is JSON")
}

/// The calls made from inside the script `call_0`.
fn inner_calls(transcript: &Value) -> Vec<&Value> {
    tool_calls(transcript)
        .iter()
        .filter(|entry| entry["parent"] == "call_0")
        .collect()
}

#[test]
fn one_script_reads_three_files_and_the_model_gets_the_summary() {
    let ybs = Ybs::new();
    ybs.file("src/a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n");
    ybs.file("src/b.rs", "let y = 2;\nfn gamma() {}\n");
    ybs.file("src/c.rs", "// nothing here\n");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { script: true }\npolicy: { allow: [read_file, script] }\n",
    );
    let script = "for f in a b c; do\n  n=$(read_file --path src/$f.rs | grep -c '^fn ')\n  echo \"$f: $n\"\ndone\nread_file --path=src/a.rs | grep '^fn' | sed 's/() {}//' | tr '\\n' ' '\n";
    ybs.cassette(
        "t.cassette.json",
        vec![call("script", json!({"commands": script})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let result = script_result(&transcript);
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(
        result["stdout"], "a: 2\nb: 1\nc: 0\nfn alpha fn beta ",
        "{result}"
    );
    // The model's next request carried the combined stdout.
    let told = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["name"] == "script")
        .expect("the script's result message");
    assert!(
        told["content"]
            .as_str()
            .unwrap()
            .contains("a: 2\\nb: 1\\nc: 0"),
        "{told}"
    );
    // One decision per tool command, each a child of the script call.
    let inner = inner_calls(&transcript);
    assert_eq!(inner.len(), 4, "{inner:?}");
    for (entry, path) in inner.iter().zip(["src/a.rs", "src/b.rs", "src/c.rs"]) {
        assert_eq!(entry["name"], "read_file");
        assert_eq!(entry["arguments"]["path"], path);
        assert_eq!(entry["decision"]["verdict"], "allow", "{entry}");
        assert_eq!(entry["decision"]["rule"], "allow[0] read_file", "{entry}");
        assert_eq!(entry["result"]["ran"], true);
    }
    assert_eq!(inner[0]["id"], "call_0.1");
    // The same records are in the event log.
    let decided: Vec<Value> = run
        .events("t")
        .into_iter()
        .filter(|e| e["type"] == "tool.decided" && e["parent"] == "call_0")
        .collect();
    assert_eq!(decided.len(), 4);
}

#[test]
fn a_denied_inner_write_names_the_rule_and_the_fallback_runs() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { script: true }\npolicy:\n  allow: [script, read_file, write_file]\n  deny: ['write_file(locked/**)']\n",
    );
    let script = "echo secret | write_file --path locked/out.txt || echo fallback\necho hi | write_file --path open.txt && echo wrote";
    ybs.cassette(
        "t.cassette.json",
        vec![call("script", json!({"commands": script})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("locked/out.txt"), "the denied write happened");
    assert_eq!(ybs.read("open.txt"), "hi\n");
    let transcript = run.json("ybs-out/t/transcript.json");
    let result = script_result(&transcript);
    assert_eq!(
        result["stdout"], "fallback\n{\"path\":\"open.txt\",\"bytes_written\":3}\nwrote\n",
        "{result}"
    );
    let stderr = result["stderr"].as_str().unwrap();
    assert!(stderr.contains("write_file: denied by policy"), "{stderr}");
    assert!(stderr.contains("deny[0] write_file(locked/**)"), "{stderr}");
    let inner = inner_calls(&transcript);
    assert_eq!(inner.len(), 2);
    assert_eq!(inner[0]["decision"]["verdict"], "deny");
    assert_eq!(inner[0]["result"]["ran"], false);
    assert_eq!(inner[1]["decision"]["verdict"], "allow");
}

#[test]
fn run_shell_and_disabled_tools_are_no_commands() {
    let ybs = Ybs::new();
    ybs.file("a.txt", "x\n");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { builtin: [read_file, list_files, run_shell], script: true }\npolicy: { default: allow }\n",
    );
    let script = "run_shell --command 'touch ran' || echo no-shell\nwrite_file --path w.txt --content x || echo no-write\nls / || echo no-fs";
    ybs.cassette(
        "t.cassette.json",
        vec![call("script", json!({"commands": script})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("ran") && !ybs.exists("w.txt"));
    let transcript = run.json("ybs-out/t/transcript.json");
    let result = script_result(&transcript);
    assert_eq!(result["stdout"], "no-shell\nno-write\nno-fs\n", "{result}");
    assert!(inner_calls(&transcript).is_empty());
}

#[test]
fn limits_end_runaway_scripts_and_the_task_goes_on() {
    let ybs = Ybs::new();
    ybs.file("a.txt", "x\n");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { script: true }\npolicy: { allow: [script, read_file] }\n",
    );
    let many = "read_file --path a.txt >/dev/null\n".repeat(10_000);
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("script", json!({"commands": "while true; do :; done"})),
            call("script", json!({"commands": many})),
            answer("done"),
        ],
    );
    let started = std::time::Instant::now();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "passed", "{}", transcript["message"]);
    let scripts: Vec<Value> = tool_calls(&transcript)
        .iter()
        .filter(|entry| entry["name"] == "script")
        .map(|entry| serde_json::from_str(entry["result"]["output"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(scripts.len(), 2);
    let looped = scripts[0]["stderr"].as_str().unwrap();
    // Each turn of the loop runs two commands: the command limit ends it.
    assert!(
        looped.contains("resource limit exceeded: maximum command count exceeded (10000)"),
        "{looped}"
    );
    assert!(looped.contains("ybs: the script was ended"), "{looped}");
    assert_eq!(scripts[0]["exit_code"], 1);
    let many = scripts[1]["stderr"].as_str().unwrap();
    assert!(
        many.contains("more than 100 tool commands in one script"),
        "{many}"
    );
    // Exactly the allowed number of tool commands was decided and run.
    let inner = tool_calls(&transcript)
        .iter()
        .filter(|entry| entry["parent"] == "call_0" && entry["name"] == "read_file")
        .count();
    assert_eq!(inner, 100);
    // The next turn happened: the model answered after both scripts.
    assert_eq!(transcript["llm_calls"].as_array().unwrap().len(), 3);
}

#[test]
fn tools_script_is_validated() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: p\ntools: { script: maybe }\n");
    let run = ybs.run(["validate", "t.yaml"]);
    assert_ne!(run.code, 0);
}

#[test]
fn the_next_request_carries_the_scripts_stdout_with_secrets_masked() {
    const KEY: &str = "sk-canary-script-5e1d0c";
    let script = "for f in a b c; do read_file --path $f.txt | grep -v '^#'; done | sort";
    let server = Server::start(vec![
        wire::openai_sse_call("call_s", "script", &json!({"commands": script})),
        wire::openai_sse_answer("done"),
    ]);
    let ybs = Ybs::new().env("OPENAI_API_KEY", KEY);
    ybs.file("a.txt", "# header\nzeta\n");
    ybs.file("b.txt", "alpha\n# note\n");
    ybs.file("c.txt", &format!("key = {KEY}\n"));
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { script: true }\npolicy: { allow: [read_file, script] }\n",
    );
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--model",
        "m",
        "--endpoint",
        &format!("{}/v1", server.url),
    ]);
    run.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The first request offers `script`, its description listing the
    // commands with their usage lines.
    let first = requests[0].json();
    let offered = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "script")
        .expect("script is offered");
    let description = offered["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("- read_file --path <str>"),
        "{description}"
    );
    assert!(!description.contains("run_shell"), "{description}");
    // The second carries the combined stdout, the secret masked.
    let second = requests[1].json();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the script's result");
    let result: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        result["stdout"], "alpha\nkey = [REDACTED]\nzeta\n",
        "{result}"
    );
    for request in &requests {
        let body = String::from_utf8_lossy(&request.body);
        assert!(!body.contains(KEY), "the key reached the model");
    }
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(
        tool_calls(&transcript)
            .iter()
            .filter(|entry| entry["parent"] == "call_s")
            .count(),
        3
    );
}

#[test]
fn ask_inside_a_script_resolves_as_headless() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        // write_file may be allowed (elsewhere), so it is offered and a
        // script command; a.txt needs approval.
        "prompt: p\ncommit: false\ntools: { script: true }\npolicy:\n  allow: [script, 'write_file(b.txt)']\n  ask: ['write_file(a.txt)']\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "script",
                json!({"commands": "write_file --path a.txt --content x || echo refused"}),
            ),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("a.txt"));
    let transcript = run.json("ybs-out/t/transcript.json");
    let result = script_result(&transcript);
    assert_eq!(result["stdout"], "refused\n");
    let stderr = result["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("needs approval (rule `ask[0] write_file(a.txt)`)"),
        "{stderr}"
    );
    assert!(stderr.contains("policy.on_ask: deny"), "{stderr}");
    assert_eq!(inner_calls(&transcript)[0]["decision"]["verdict"], "ask");
}

#[test]
fn external_tools_are_commands_with_typed_flags() {
    let ybs = Ybs::new();
    let cache = ybs.home().join(".cache");
    let ybs = ybs.env("XDG_CACHE_HOME", cache.to_str().unwrap());
    let path = ybs.path().join("tools/shout");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo '{"name": "shout", "description": "Repeat a message", "parameters": {"message": {"type": "string", "required": true}, "times": {"type": "integer", "default": 1}}}'
  exit 0
fi
echo x >> shout.calls
input=$(cat)
printf '{"success": true, "result": %s}\n' "$input"
"#,
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions).unwrap();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { external: [shout], script: true }\npolicy: { allow: [script, shout] }\n",
    );
    let script = "shout --message hi --times=3\nshout --times 1 || echo no-message";
    ybs.cassette(
        "t.cassette.json",
        vec![call("script", json!({"commands": script})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let result = script_result(&transcript);
    let stdout = result["stdout"].as_str().unwrap();
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first, json!({"message": "hi", "times": 3}), "{result}");
    assert!(stdout.ends_with("no-message\n"), "{result}");
    let stderr = result["stderr"].as_str().unwrap();
    assert!(stderr.contains("shout: "), "{stderr}");
    assert!(stderr.contains("message"), "{stderr}");
    // The call without `--message` was refused before any process ran.
    assert_eq!(ybs.read("shout.calls").lines().count(), 1);
    let inner = inner_calls(&transcript);
    assert_eq!(inner.len(), 2);
    assert_eq!(inner[0]["decision"]["rule"], "allow[1] shout");
}
