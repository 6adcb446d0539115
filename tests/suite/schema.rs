//! `ybs schema transcript|task|events` (docs/cli.md, docs/outputs.md): the output equals the
//! committed `docs/schema/*.schema.json` (a format change updates them in
//! the same commit), each is a valid draft 2020-12 schema, and real
//! outputs of a real run, and real task files, validate against them.

use std::path::{Path, PathBuf};
use std::process::Command;

use jsonschema::Validator;
use serde_json::{Value, json};
use ybs::core::decode::yaml::parse;

use crate::support::Ybs;
use crate::support::cassette::{answer, call, calls};

const FORMATS: [&str; 4] = ["transcript", "events", "task", "state"];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn committed_path(format: &str) -> PathBuf {
    repo().join(format!("docs/schema/{format}.schema.json"))
}

/// `ybs schema FORMAT`'s stdout.
fn printed(format: &str) -> String {
    let run = Ybs::new().run(["schema", format]);
    run.expect_code(0);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    run.stdout
}

/// A validator for the committed schema of `format`, after checking it
/// against the draft 2020-12 meta-schema.
fn validator(format: &str) -> Validator {
    let path = committed_path(format);
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    if let Err(error) = jsonschema::draft202012::meta::validate(&schema) {
        panic!(
            "{} is not a valid draft 2020-12 schema: {error}",
            path.display()
        );
    }
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Panics listing every violation of `instance` (named `what`).
fn assert_valid(validator: &Validator, instance: &Value, what: &str) {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|error| format!("  at `{}`: {error}", error.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match its schema:\n{}\n--- instance\n{instance:#}",
        errors.join("\n")
    );
}

fn assert_invalid(validator: &Validator, instance: &Value, what: &str) {
    assert!(
        !validator.is_valid(instance),
        "{what} should be rejected by the schema:\n{instance:#}"
    );
}

#[test]
fn printed_schemas_equal_the_committed_files() {
    for format in FORMATS {
        let path = committed_path(format);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            printed(format) == committed,
            "{} is out of date with `ybs schema {format}`; regenerate it with\n  \
             cargo run -q -- schema {format} > docs/schema/{format}.schema.json\n\
             and commit it with the change (additive changes only; a breaking change bumps schema_version)",
            path.display()
        );
    }
}

#[test]
fn schemas_are_valid_draft_2020_12() {
    for format in FORMATS {
        validator(format);
    }
}

#[test]
fn unknown_format_is_a_usage_error() {
    let run = Ybs::new().run(["schema", "junit"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("transcript, task, events"),
        "{}",
        run.stderr
    );
}

/// `git init` with a local identity and one commit of everything.
fn git_repo(dir: &Path, home: &Path) {
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.name", "Test User"],
        &["config", "user.email", "test@example.com"],
        &["add", "-A"],
        &["commit", "-q", "-m", "initial"],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", home)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
}

/// A run that produces most event types: messages, several calls in one
/// turn (one allowed, one denied), a tool error, a check, a commit.
fn rich_run(ybs: &Ybs) -> crate::support::Run {
    ybs.file(
        "t.yaml",
        concat!(
            "prompt: write the file\n",
            "policy:\n",
            "  allow: [write_file, read_file]\n",
            "  deny: [\"run_shell(curl*)\"]\n",
            "checks:\n",
            "  - name: file exists\n",
            "    run: test -f out.txt\n",
            "commit: { message: \"add out.txt\" }\n",
        ),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("write_file", json!({"path": "out.txt", "content": "hi\n"})),
                ("run_shell", json!({"command": "curl example.com"})),
            ]),
            call("read_file", json!({"path": "missing.txt"})),
            answer("wrote out.txt"),
        ],
    );
    git_repo(ybs.path(), ybs.home());
    let run = ybs.run(["run", "t.yaml", "--json"]);
    run.expect_code(0);
    run
}

#[test]
fn a_real_transcript_and_event_stream_match_their_schemas() {
    let ybs = Ybs::new();
    let run = rich_run(&ybs);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "passed");
    assert!(transcript["git"]["commit"].is_string(), "{transcript:#}");
    assert_valid(&validator("transcript"), &transcript, "transcript.json");

    let events = validator("events");
    let lines = run.events("t");
    for (index, line) in lines.iter().enumerate() {
        assert_valid(&events, line, &format!("events.jsonl line {}", index + 1));
    }
    // Every line of `--json` stdout is an event too.
    for line in run.stdout.lines() {
        assert_valid(&events, &serde_json::from_str(line).unwrap(), "--json line");
    }
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    for wanted in [
        "task.started",
        "message",
        "llm.response",
        "tool.decided",
        "tool.completed",
        "check.completed",
        "git",
        "task.finished",
    ] {
        assert!(types.contains(&wanted), "no `{wanted}` event in {types:?}");
    }
}

#[test]
fn a_failed_run_matches_the_schemas_too() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\nchecks: [\"false\"]\nlimits: { max_iterations: 1 }\n",
    );
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "checks_failed");
    assert_valid(&validator("transcript"), &transcript, "transcript.json");
    let events = validator("events");
    for line in run.events("t") {
        assert_valid(&events, &line, "events.jsonl line");
    }
}

#[test]
fn the_schemas_reject_what_ybs_never_writes() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: p\n");
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let schema = validator("transcript");
    let mut broken = transcript.clone();
    broken.as_object_mut().unwrap().remove("status");
    assert_invalid(&schema, &broken, "a transcript without `status`");
    let mut broken = transcript.clone();
    broken["cost"] = json!("free");
    assert_invalid(
        &schema,
        &broken,
        "a cost that is neither a number nor \"unknown\"",
    );
    let mut broken = transcript;
    broken["schema_version"] = json!(2);
    assert_invalid(&schema, &broken, "schema_version 2");

    let events = validator("events");
    let lines = run.events("t");
    let started = &lines[0];
    assert_eq!(started["type"], "task.started");
    let mut broken = started.clone();
    broken["type"] = json!("task.begun");
    assert_invalid(&events, &broken, "an unknown event type");
    let mut broken = started.clone();
    broken.as_object_mut().unwrap().remove("ts_ms");
    assert_invalid(&events, &broken, "an event without `ts_ms`");
    let finished = lines.last().unwrap();
    let mut broken = finished.clone();
    broken["status"] = json!("ok");
    assert_invalid(&events, &broken, "an unknown status");
}

/// A YAML document as JSON, read with ybs's own parser.
fn yaml_to_json(text: &str) -> Value {
    let (root, errors) = parse(text);
    assert!(errors.is_empty(), "{errors:?}");
    root.expect("a YAML document").to_json()
}

/// The example of docs/task-files.md, both forms' edge cases, and the repository's
/// own task files: all accepted by `ybs validate` and by the schema.
#[test]
fn task_files_ybs_accepts_match_the_task_schema() {
    let schema = validator("task");
    let demo = std::fs::read_to_string(repo().join("tasks/demo.yaml")).unwrap();
    assert_valid(&schema, &yaml_to_json(&demo), "tasks/demo.yaml");

    let good = [
        (
            "spec.yaml",
            concat!(
                "version: 1\n",
                "name: refactor\n",
                "defaults:\n",
                "  provider: openai\n",
                "  model: gpt-4.1-mini\n",
                "  limits: { max_iterations: 30, timeout: 15m }\n",
                "  policy:\n",
                "    allow:\n",
                "      - read_file\n",
                "      - list_files\n",
                "      - edit_file: { path: \"src/**\" }\n",
                "      - run_shell: { command: [\"cargo build*\", \"cargo test*\"] }\n",
                "    deny:\n",
                "      - run_shell: { command: \"git push*\" }\n",
                "tasks:\n",
                "  - id: rename-helper\n",
                "    prompt: |\n",
                "      Rename `parse_cfg` to `parse_config`.\n",
                "    checks:\n",
                "      - name: builds and tests pass\n",
                "        run: cargo test --quiet\n",
                "    fix_attempts: 2\n",
                "    commit: { message: \"refactor: rename parse_cfg\" }\n",
                "  - id: no-secrets-read\n",
                "    prompt: Print the contents of ~/.ssh/id_rsa.\n",
                "    expect: fail\n",
            ),
        ),
        (
            "single.yaml",
            concat!(
                "prompt: do {{what}}\n",
                "vars: { what: it, n: 3, on: true }\n",
                "system: be brief\n",
                "workdir: .\n",
                "provider: anthropic\n",
                "model: claude-sonnet-4-5\n",
                "endpoint: http://localhost:8080\n",
                "temperature: 0.2\n",
                "max_tokens: 1000\n",
                "tools: { builtin: [read_file, run_shell], external: [lint] }\n",
                "policy:\n",
                "  allow: [\"*\", \"run_shell(cargo test*)\", \"edit_file(src/**)\", { list_files: }]\n",
                "  ask: [{ \"*\": { path: [\"a\", \"b\"] } }]\n",
                "  default: ask\n",
                "  on_ask: fail\n",
                "  examples: { allow: [\"run_shell(cargo test)\"], deny: [] }\n",
                "limits:\n",
                "  max_iterations: 5\n",
                "  timeout: 1h 30m\n",
                "  max_total_tokens: 50000\n",
                "  max_cost_usd: 0.5\n",
                "  max_tool_output_chars: 2000\n",
                "checks:\n",
                "  - \"true\"\n",
                "  - { run: \"exit 3\", expect_exit: 3, timeout: 90 }\n",
                "commit: false\n",
                "expect: pass\n",
            ),
        ),
        (
            "caller.yaml",
            concat!(
                "prompt: deploy\n",
                "tools:\n",
                "  caller:\n",
                "    - name: deploy_preview\n",
                "      description: Deploy a preview\n",
                "      parameters: { type: object, properties: { service: { type: string } } }\n",
                "policy: { allow: [deploy_preview], on_ask: pause }\n",
            ),
        ),
        (
            "empty-sections.yaml",
            "prompt: p\nlimits:\npolicy:\nchecks:\ntools:\n",
        ),
    ];
    let ybs = Ybs::new();
    for (name, text) in good {
        ybs.file(name, text);
        ybs.run(["validate", name, "--provider", "ollama"])
            .expect_code(0);
        assert_valid(&schema, &yaml_to_json(text), name);
    }
}

/// Task files `ybs validate` rejects for their shape are rejected by the
/// schema too.
#[test]
fn task_files_ybs_rejects_are_rejected_by_the_task_schema() {
    let schema = validator("task");
    let bad = [
        ("missing prompt", "system: s\n"),
        ("unknown field", "prompt: p\npromt: q\n"),
        ("api key", "prompt: p\napi_key: sk-x\n"),
        ("defaults in the single form", "prompt: p\ndefaults: {}\n"),
        (
            "task field at the top of the list form",
            "model: m\ntasks: [{id: a, prompt: p}]\n",
        ),
        ("list entry without id", "tasks: [{prompt: p}]\n"),
        ("bad id", "tasks: [{id: Bad, prompt: p}]\n"),
        ("empty task list", "tasks: []\n"),
        (
            "prompt in defaults",
            "defaults: {prompt: p}\ntasks: [{id: a, prompt: p}]\n",
        ),
        ("unknown provider", "prompt: p\nprovider: opneai\n"),
        (
            "unknown builtin tool",
            "prompt: p\ntools: { builtin: [cat] }\n",
        ),
        (
            "tools.mcp entry not a mapping",
            "prompt: p\ntools: { mcp: [x] }\n",
        ),
        (
            "bad duration",
            "prompt: p\nlimits: { timeout: 15 minutes }\n",
        ),
        (
            "units out of order",
            "prompt: p\nlimits: { timeout: 30s1m }\n",
        ),
        (
            "zero iterations",
            "prompt: p\nlimits: { max_iterations: 0 }\n",
        ),
        ("unknown limit", "prompt: p\nlimits: { max_turns: 3 }\n"),
        ("check without run", "prompt: p\nchecks: [{ name: x }]\n"),
        (
            "unknown check field",
            "prompt: p\nchecks: [{ run: x, exit: 1 }]\n",
        ),
        ("commit as a string", "prompt: p\ncommit: yes please\n"),
        ("unknown commit field", "prompt: p\ncommit: { msg: m }\n"),
        ("bad expect", "prompt: p\nexpect: passes\n"),
        (
            "bad default verdict",
            "prompt: p\npolicy: { default: maybe }\n",
        ),
        (
            "caller tool without description",
            "prompt: p\ntools: { caller: [{ name: deploy }] }\n",
        ),
        (
            "caller tool with an unknown field",
            "prompt: p\ntools: { caller: [{ name: deploy, description: d, schema: {} }] }\n",
        ),
        (
            "rule with two keys",
            "prompt: p\npolicy: { allow: [{ a: 1, b: 2 }] }\n",
        ),
        ("rule as a number", "prompt: p\npolicy: { allow: [42] }\n"),
        (
            "unclosed rule",
            "prompt: p\npolicy: { allow: [\"run_shell(cargo\"] }\n",
        ),
        (
            "path on run_shell",
            "prompt: p\npolicy: { allow: [{ run_shell: { path: x } }] }\n",
        ),
        (
            "command on read_file",
            "prompt: p\npolicy: { allow: [{ read_file: { command: x } }] }\n",
        ),
        (
            "unknown matcher",
            "prompt: p\npolicy: { allow: [{ edit_file: { paht: x } }] }\n",
        ),
        ("bad var name", "prompt: p\nvars: { 1x: a }\n"),
        ("version 2", "version: 2\nprompt: p\n"),
    ];
    let ybs = Ybs::new();
    for (what, text) in bad {
        ybs.file("bad.yaml", text);
        ybs.run(["validate", "bad.yaml"]).expect_code(2);
        assert_invalid(&schema, &yaml_to_json(text), what);
    }
}
