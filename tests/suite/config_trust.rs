//! Trust in settings (issue 10, items 1, 2, 3, 10) through the binary:
//! operator settings are ceilings the repository may only narrow, every
//! key has an effect or is refused, cost is known or says "unknown", and
//! inputs are strict (tool parameters, YAML tags, task file size).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cassette::{answer, call, error};
use crate::support::tool_calls;
use crate::support::{Run, Ybs};

/// A one-task file with a permissive policy, no commit, and `extra`.
fn task_yaml(extra: &str) -> String {
    format!("prompt: do the thing\ncommit: false\npolicy:\n  default: allow\n{extra}")
}

/// The operator's config: `~/.ybs.json` in the test's own HOME.
fn operator_config(ybs: &Ybs, text: &str) {
    std::fs::write(ybs.home().join(".ybs.json"), text).unwrap();
}

fn transcript(run: &Run) -> Value {
    run.json("ybs-out/t/transcript.json")
}

/// The content of the tool messages the model was sent.
fn tool_results(transcript: &Value) -> Vec<String> {
    transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect()
}

#[test]
fn the_repository_config_cannot_widen_the_operators_and_validate_says_where() {
    let ybs = Ybs::new();
    operator_config(
        &ybs,
        r#"{"agent": {"max_iterations": 3}, "git": {"auto_commit": false}, "tools": {"builtin": {"run_shell": {"timeout_seconds": 5}}}}"#,
    );
    ybs.file(
        ".ybs.json",
        "{\n  \"agent\": {\"max_iterations\": 50},\n  \"git\": {\"auto_commit\": true},\n  \"tools\": {\"builtin\": {\"run_shell\": {\"timeout_seconds\": 600}}}\n}\n",
    );
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    let home = ybs.home().join(".ybs.json");
    for args in [vec!["run", "t.yaml"], vec!["validate", "t.yaml"]] {
        let run = ybs.run(&args);
        run.expect_code(2);
        assert!(
            run.stderr.contains(&format!(
                ".ybs.json:2:31: `agent.max_iterations: 50` in the repository's config is wider than the operator's 3 (set by {})",
                home.display()
            )),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr.contains(".ybs.json:3:26: `git.auto_commit: true` in the repository's config is wider than the operator's false"),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr.contains("`tools.builtin.run_shell.timeout_seconds: 600s` in the repository's config is wider than the operator's 5s"),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains("hint: the repository may turn it off, never on")
        );
        assert!(!ybs.exists("ybs-out/t/transcript.json"));
    }
    // Narrower values are taken: the repository's 1 iteration stops a
    // task that wants a second.
    ybs.file(".ybs.json", r#"{"agent": {"max_iterations": 1}}"#);
    ybs.file("a.txt", "a");
    ybs.cassette(
        "t.cassette.json",
        vec![call("read_file", json!({"path": "a.txt"})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_eq!(transcript(&run)["reason"], "max_iterations");
    assert_eq!(transcript(&run)["iterations"], 1);
}

#[test]
fn a_task_limit_narrower_than_the_operators_wins_and_a_wider_one_is_refused() {
    let ybs = Ybs::new();
    ybs.file("ops.json", r#"{"agent": {"max_iterations": 25}}"#);
    ybs.file("a.txt", "a");
    ybs.file("t.yaml", &task_yaml("limits:\n  max_iterations: 2\n"));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("read_file", json!({"path": "a.txt"})),
            call("read_file", json!({"path": "a.txt"})),
            call("read_file", json!({"path": "a.txt"})),
            answer("done"),
        ],
    );
    // Before issue 10 the operator's 25 replaced the task's 2.
    let run = ybs.run(["run", "t.yaml", "--config", "ops.json"]);
    run.expect_code(1);
    assert_eq!(transcript(&run)["reason"], "max_iterations");
    assert_eq!(transcript(&run)["iterations"], 2);
    std::fs::remove_dir_all(ybs.path().join("ybs-out")).unwrap();

    ybs.file("t.yaml", &task_yaml("limits:\n  max_iterations: 50\n"));
    let from_env = ybs
        .command()
        .env("YBS_MAX_ITERATIONS", "3")
        .args(["run", "t.yaml"])
        .output()
        .unwrap();
    let from_config = ybs
        .command()
        .args(["validate", "t.yaml", "--config", "ops.json"])
        .output()
        .unwrap();
    for (output, operator) in [
        (from_env, "3 (set by a YBS_* variable)"),
        (from_config, "25 (set by ops.json)"),
    ] {
        let run = Run::from_output(output, ybs.path());
        run.expect_code(2);
        assert!(
            run.stderr.contains(&format!(
                "t.yaml:6:19: `limits.max_iterations: 50` of task `t` is wider than the operator's {operator}"
            )),
            "{}",
            run.stderr
        );
        assert!(
            run.stderr
                .contains("hint: the repository may only narrow it")
        );
        assert!(!ybs.exists("ybs-out/t/transcript.json"));
    }
    // The environment is the operator too, for every limit.
    let ybs = ybs.env("YBS_TIMEOUT", "1m");
    ybs.file("t.yaml", &task_yaml("limits:\n  timeout: 2h\n"));
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("t.yaml:6:12: `limits.timeout: 7200s` of task `t` is wider than the operator's 60s (set by a YBS_* variable)"),
        "{}",
        run.stderr
    );
    ybs.file(
        "ops.json",
        r#"{"agent": {"max_total_tokens": 1000, "max_cost_usd": 1}, "llm": {"model": "gpt-4o"}}"#,
    );
    ybs.file(
        "t.yaml",
        &task_yaml("limits:\n  max_total_tokens: 5000\n  max_cost_usd: 2\n"),
    );
    let run = ybs.run(["validate", "t.yaml", "--config", "ops.json"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("t.yaml:6:21: `limits.max_total_tokens: 5000`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("t.yaml:7:17: `limits.max_cost_usd: 2`"),
        "{}",
        run.stderr
    );
}

fn executable(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn lint_tool(who: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = \"--schema\" ]; then\n  echo '{{\"description\": \"Lint ({who})\", \"parameters\": {{}}}}'\n  exit 0\nfi\ncat > /dev/null\necho '{{\"success\": true, \"result\": \"{who}\"}}'\n"
    )
}

#[test]
fn an_operator_tool_wins_over_a_repository_tool_of_the_same_name() {
    let ybs = Ybs::new();
    let ybs = {
        let cache = ybs.home().join(".cache");
        ybs.env("XDG_CACHE_HOME", cache.to_str().unwrap())
    };
    executable(&ybs.home().join(".ybs/tools/lint"), &lint_tool("operator"));
    executable(&ybs.path().join("tools/lint"), &lint_tool("repository"));
    let run = ybs.run(["tools", "invoke", "lint"]);
    run.expect_code(0);
    assert!(run.stdout.contains("operator"), "{}", run.stdout);
    assert!(!run.stdout.contains("repository"), "{}", run.stdout);

    let run = ybs.run(["tools", "list", "--json"]);
    run.expect_code(0);
    let listed: Value = serde_json::from_str(&run.stdout).unwrap();
    let lint: Vec<&Value> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| tool["name"] == "lint")
        .collect();
    assert_eq!(lint.len(), 2, "{listed}");
    assert_eq!(lint[0]["source"], "~/.ybs/tools");
    assert_ne!(lint[0]["status"], "shadowed");
    assert_eq!(lint[1]["source"], "./tools");
    assert_eq!(lint[1]["status"], "shadowed");
    assert_eq!(lint[1]["offered"], false);
    assert!(
        lint[1]["reason"]
            .as_str()
            .unwrap()
            .starts_with("shadowed by `lint` from ~/.ybs/tools"),
        "{listed}"
    );
    let table = ybs.run(["tools", "list"]);
    assert!(
        table.stdout.lines().any(|line| line.starts_with("lint")
            && line.contains("shadowed")
            && line.contains("./tools")),
        "{}",
        table.stdout
    );

    // The same between config entries: the operator's `tools.external`
    // entry wins over the repository config's, whatever the file order.
    executable(
        &ybs.path().join("bin/op-lint"),
        &lint_tool("operator-config"),
    );
    executable(
        &ybs.path().join("bin/repo-lint"),
        &lint_tool("repository-config"),
    );
    let op = ybs.path().join("bin/op-lint");
    operator_config(
        &ybs,
        &format!(
            r#"{{"tools": {{"external": [{{"name": "check", "path": "{}"}}]}}}}"#,
            op.display()
        ),
    );
    ybs.file(
        ".ybs.json",
        r#"{"tools": {"external": [{"name": "check", "path": "bin/repo-lint"}]}}"#,
    );
    let run = ybs.run(["tools", "invoke", "check"]);
    run.expect_code(0);
    assert!(run.stdout.contains("operator-config"), "{}", run.stdout);
    let run = ybs.run(["tools", "list", "--json"]);
    let listed: Value = serde_json::from_str(&run.stdout).unwrap();
    let check: Vec<&Value> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| tool["name"] == "check")
        .collect();
    assert_eq!(check.len(), 2, "{listed}");
    assert_eq!(check[1]["source"], "repository-config");
    assert_eq!(check[1]["status"], "shadowed");
}

#[test]
fn a_disabled_builtin_tool_is_not_offered_and_a_call_to_it_is_refused() {
    let ybs = Ybs::new();
    operator_config(
        &ybs,
        r#"{"tools": {"builtin": {"run_shell": {"enabled": false}}}}"#,
    );
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "echo ran > ran.txt"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("ran.txt"), "the disabled tool ran");
    let transcript = transcript(&run);
    let results = tool_results(&transcript);
    assert!(
        results[0].contains("unknown tool `run_shell`") && !results[0].contains("run_shell,"),
        "{results:?}"
    );
    assert!(results[0].contains("read_file"), "{results:?}");
    assert_eq!(
        tool_calls(&transcript)[0]["decision"]["rule"],
        "unknown_tool"
    );
    // A task that asks for it by name is refused before anything runs.
    ybs.file(
        "t.yaml",
        &task_yaml("tools: { builtin: [read_file, run_shell] }\n"),
    );
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(
            "t.yaml:1:1: task `t` asks for the built-in tool `run_shell`, which the config disables"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn the_operators_shell_timeout_ends_a_long_command() {
    let ybs = Ybs::new();
    operator_config(
        &ybs,
        r#"{"tools": {"builtin": {"run_shell": {"timeout_seconds": 2}}}}"#,
    );
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette(
        "t.cassette.json",
        vec![
            // The model asks for more: the operator's value is also the most.
            call(
                "run_shell",
                json!({"command": "sleep 30", "timeout_seconds": 60}),
            ),
            answer("done"),
        ],
    );
    let started = Instant::now();
    let run = ybs.run(["run", "t.yaml"]);
    let elapsed = started.elapsed();
    run.expect_code(0);
    assert!(elapsed < Duration::from_secs(15), "took {elapsed:?}");
    let results = tool_results(&transcript(&run));
    assert!(results[0].contains(r#"\"timed_out\":true"#), "{results:?}");
    assert!(
        results[0].contains(r#"\"timeout_seconds\":2"#),
        "{results:?}"
    );
}

#[test]
fn keys_without_an_effect_are_refused_at_load() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: p\n");
    for (text, wanted, hint) in [
        (
            r#"{"safety": {"require_confirmation": ["run_shell"]}}"#,
            "ops.json:1:13: `safety.require_confirmation` is not supported",
            "policy `ask` rule",
        ),
        (
            r#"{"ui": {"color": false}}"#,
            "ops.json:1:2: `ui` is not supported",
            "-q and -v",
        ),
        (
            r#"{"context": {"repo_map_tokens": 1024}}"#,
            "ops.json:1:14: `context.repo_map_tokens` is not supported",
            "list_files",
        ),
        (
            r#"{"tools": {"builtin": {"read_file": {"timeout_seconds": 5}}}}"#,
            "ops.json:1:38: `tools.builtin.read_file.timeout_seconds` has no effect",
            "remove it",
        ),
    ] {
        ybs.file("ops.json", text);
        let run = ybs.run(["validate", "t.yaml", "--config", "ops.json"]);
        run.expect_code(2);
        assert!(run.stderr.contains(wanted), "{}", run.stderr);
        assert!(run.stderr.contains(hint), "{}", run.stderr);
    }
}

#[test]
fn a_cost_limit_needs_a_known_price_and_then_stops_the_task() {
    let ybs = Ybs::new();
    ybs.file("a.txt", "a");
    ybs.file("t.yaml", &task_yaml("limits:\n  max_cost_usd: 0.01\n"));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("read_file", json!({"path": "a.txt"})),
            call("read_file", json!({"path": "a.txt"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("t.yaml:6:17: task `t` has max_cost_usd 0.01, but the price of model `replay` is not known"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("llm.price"), "{}", run.stderr);
    assert!(!ybs.exists("ybs-out/t/transcript.json"));
    // The repository cannot name a price.
    ybs.file(
        ".ybs.json",
        r#"{"llm": {"price": {"input_per_mtok": 0, "output_per_mtok": 0}}}"#,
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("`llm.price` cannot be set in the repository's config"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(ybs.path().join(".ybs.json")).unwrap();
    // With the operator's price, the limit is enforced: 100 input tokens
    // at $100/Mtok and 20 output at $0 cost $0.01, the whole budget.
    operator_config(
        &ybs,
        r#"{"llm": {"price": {"input_per_mtok": 100, "output_per_mtok": 0, "cached_input_per_mtok": 10}}}"#,
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let transcript = transcript(&run);
    assert_eq!(transcript["reason"], "cost_budget");
    assert_eq!(transcript["iterations"], 1);
    assert!((transcript["cost"].as_f64().unwrap() - 0.01).abs() < 1e-9);
}

#[test]
fn unknown_cost_is_unknown_in_every_output_even_when_the_provider_failed() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette(
        "t.cassette.json",
        vec![error("auth", 401, "invalid api key")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(4);
    assert_eq!(transcript(&run)["reason"], "auth_error");
    assert_eq!(transcript(&run)["cost"], "unknown");
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("cost unknown"), "{summary}");
    assert!(!summary.contains("$0.0000"), "{summary}");
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains(r#"name="cost" value="unknown""#), "{junit}");
    assert!(run.stdout.contains("cost unknown"), "{}", run.stdout);
    assert!(!run.stdout.contains("$0.0000"), "{}", run.stdout);
    let finished = run
        .events("t")
        .into_iter()
        .find(|event| event["type"] == "task.finished")
        .unwrap();
    assert_eq!(finished["cost"], "unknown");
}

#[test]
fn built_in_tools_refuse_unknown_parameters_by_name() {
    let ybs = Ybs::new();
    ybs.file("a.txt", "CANARY-CONTENT");
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("read_file", json!({"path": "a.txt", "extra": true})),
            call(
                "write_file",
                json!({"path": "b.txt", "content": "x", "cwd": "/tmp"}),
            ),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = transcript(&run);
    let results = tool_results(&transcript);
    assert!(
        results[0].contains("unknown parameter `extra` for `read_file`; it takes `path`"),
        "{results:?}"
    );
    assert!(!results[0].contains("CANARY-CONTENT"), "{results:?}");
    assert!(
        results[1].contains("unknown parameter `cwd` for `write_file`"),
        "{results:?}"
    );
    assert!(!ybs.exists("b.txt"), "the refused write ran");
    for entry in tool_calls(&transcript) {
        assert_eq!(entry["decision"]["verdict"], "deny", "{entry}");
        assert_eq!(entry["decision"]["rule"], "guard:arguments", "{entry}");
        assert_eq!(entry["result"]["ran"], false, "{entry}");
    }
}

#[test]
fn custom_yaml_tags_are_errors_in_task_policy_and_config_files() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: !include /etc/passwd\n");
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("t.yaml:1:9: unsupported YAML tag `!include`"),
        "{}",
        run.stderr
    );
    // Core-schema tags are fine.
    ybs.file("t.yaml", "prompt: !!str 42\n");
    ybs.run(["validate", "t.yaml", "--provider", "ollama"])
        .expect_code(0);
    ybs.file("policy.yaml", "allow: !custom [read_file]\n");
    let run = ybs.run(["validate", "t.yaml", "--policy", "policy.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("policy.yaml:1:8: unsupported YAML tag `!custom`"),
        "{}",
        run.stderr
    );
    ybs.file("ops.yaml", "llm:\n  model: !env MODEL\n");
    let run = ybs.run(["validate", "t.yaml", "--config", "ops.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("ops.yaml:2:10: unsupported YAML tag `!env`"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_oversized_task_file_is_refused_before_parsing() {
    let ybs = Ybs::new();
    // 64 MiB of YAML would take hundreds of MB to parse; ybs reads 1 MiB + 1.
    let big = format!("prompt: p\n# {}\n", "x".repeat(64 << 20));
    ybs.file("t.yaml", &big);
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("t.yaml: the task file is larger than 1048576 bytes"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("safety.max_task_file_bytes"),
        "{}",
        run.stderr
    );
    // The operator may raise it; the repository may only lower it.
    ybs.file("t.yaml", &format!("prompt: p\n# {}\n", "x".repeat(2 << 20)));
    operator_config(&ybs, r#"{"safety": {"max_task_file_bytes": 4194304}}"#);
    ybs.run(["validate", "t.yaml", "--provider", "ollama"])
        .expect_code(0);
    ybs.file(".ybs.json", r#"{"safety": {"max_task_file_bytes": 100}}"#);
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("larger than 100 bytes"),
        "{}",
        run.stderr
    );
}

/// Peak memory of a `ybs validate` of a 64 MiB task file stays small
/// (measured per process by GNU time).
#[test]
fn a_huge_task_file_does_not_take_memory() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &format!("prompt: p\n# {}\n", "x".repeat(64 << 20)),
    );
    let output = std::process::Command::new("/usr/bin/time")
        .arg("-v")
        .arg(assert_cmd::cargo::cargo_bin("ybs"))
        .args(["validate", "t.yaml"])
        .current_dir(ybs.path())
        .env("HOME", ybs.home())
        .output()
        .expect("GNU time at /usr/bin/time");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let kb: u64 = stderr
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .expect("a peak RSS line")
        .trim()
        .parse()
        .unwrap();
    assert!(kb < 50_000, "peak RSS {kb} kB");
}
