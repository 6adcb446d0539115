//! When the batch stops starting tasks (docs/ci.md#when-the-batch-stops):
//! the quota breaker (a quota, billing or authentication error), the
//! run's budget (`--max-cost-usd`) and an interrupt. Every selected task
//! is still in JUnit, the summary and the events: the ones never started
//! as `skipped`, with the reason.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cassette::{answer, call};
use crate::support::server::{Reply, Server};
use crate::support::{Run, Ybs};

/// A task file of `ids`, each a task that writes nothing and answers.
fn tasks_yaml(ids: &[&str], extra: &str) -> String {
    let mut yaml = format!("defaults:\n  policy:\n    default: allow\n{extra}tasks:\n");
    for id in ids {
        yaml.push_str(&format!("  - id: {id}\n    prompt: do {id}\n"));
    }
    yaml
}

/// The operator's config: `~/.ybs.json` in the test's own HOME.
fn operator_config(ybs: &Ybs, text: &str) {
    std::fs::write(ybs.home().join(".ybs.json"), text).unwrap();
}

fn transcript(run: &Run, id: &str) -> Value {
    run.json(&format!("ybs-out/{id}/transcript.json"))
}

/// `(status, reason)` of a task's transcript.
fn ended(run: &Run, id: &str) -> (String, String) {
    let transcript = transcript(run, id);
    (
        transcript["status"].as_str().unwrap().to_owned(),
        transcript["reason"].as_str().unwrap().to_owned(),
    )
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
}

/// The `<testcase>` element of `id` in the JUnit file, up to its end.
fn testcase<'a>(junit: &'a str, id: &str) -> &'a str {
    let start = junit
        .find(&format!("<testcase name=\"{id}\""))
        .unwrap_or_else(|| panic!("no testcase {id}: {junit}"));
    let rest = &junit[start..];
    let end = rest.find("</testcase>").unwrap_or(rest.len());
    &rest[..end]
}

/// A skipped task: its events are the manifest and `task.finished`
/// (status `skipped`, the reason), JUnit has `<skipped message=…>`
/// naming the reason, the summary's row says `skipped`.
fn assert_skipped(ybs: &Ybs, run: &Run, id: &str, reason: &str) -> String {
    assert_eq!(ended(run, id), pair("skipped", reason), "{id}");
    let events = run.events(id);
    let types: Vec<&str> = events
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["task.started", "task.finished"], "{id}");
    let finished = &events[1];
    assert_eq!(finished["status"], "skipped");
    assert_eq!(finished["reason"], reason);
    let message = finished["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("not started: "), "{message}");
    let junit = ybs.read("ybs-out/junit.xml");
    let case = testcase(&junit, id);
    assert!(
        case.contains(&format!("<skipped message=\"{reason}: not started: ")),
        "{case}"
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(
        summary.contains(&format!("| {id} | skipped | {reason} |")),
        "{summary}"
    );
    message
}

#[test]
fn insufficient_quota_stops_the_batch_and_the_rest_are_skipped() {
    let server = Server::start(vec![Reply::json(
        429,
        &json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                          "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}),
    )]);
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test-quota-breaker");
    ybs.file("t.yaml", &tasks_yaml(&["a", "b", "c"], ""));
    let endpoint = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
        "--no-commit",
    ]);
    run.expect_code(4);
    assert_eq!(server.requests().len(), 1, "one wall, hit once");
    assert_eq!(ended(&run, "a"), pair("error", "quota_exhausted"));
    for id in ["b", "c"] {
        let message = assert_skipped(&ybs, &run, id, "quota_exhausted");
        assert!(message.contains("task `a`"), "{message}");
        assert!(message.contains("exceeded your current quota"), "{message}");
        assert!(message.contains(&endpoint), "{message}");
    }
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains(r#"skipped="2""#), "{junit}");
    crate::suite::run::well_formed(&ybs.path().join("ybs-out/junit.xml"));
    let summary = ybs.read("ybs-out/summary.md");
    assert!(
        summary.contains("3 tasks: 0 passed, 1 errored, 2 skipped"),
        "{summary}"
    );
    assert!(
        run.stdout.contains("SKIP  b  quota_exhausted"),
        "{}",
        run.stdout
    );
    // A task never started shows no totals (no `$0.0000` beside the
    // `unknown` cost of the unpriced task that ran).
    let skip = run
        .stdout
        .lines()
        .find(|line| line.starts_with("SKIP  b"))
        .unwrap();
    assert!(skip.contains("quota_exhausted  not started"), "{skip}");
    assert!(
        !skip.contains("cost") && !skip.contains("iteration"),
        "{skip}"
    );
    assert!(
        run.stdout.contains("2 skipped (not started)"),
        "{}",
        run.stdout
    );
}

#[test]
fn an_authentication_error_skips_the_tasks_of_its_provider_only() {
    let server = Server::start(vec![Reply::json(
        401,
        &json!({"error": {"message": "Incorrect API key provided: sk-test***.", "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )]);
    let ybs = Ybs::new()
        .env("OPENAI_API_KEY", "sk-test-auth-breaker")
        .env("YBS_ENDPOINT", &format!("{}/v1", server.url))
        .env("GITHUB_ACTIONS", "true");
    // `a` and `b` spend the same account; `c` replays its cassette.
    ybs.file(
        "t.yaml",
        "defaults:\n  provider: openai\n  model: m\n  policy:\n    default: allow\ntasks:\n\
         \x20 - id: a\n    prompt: do a\n\
         \x20 - id: c\n    prompt: do c\n    provider: replay\n\
         \x20 - id: b\n    prompt: do b\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![crate::suite::git::for_task("c", answer("c done"))],
    );
    let run = ybs.run(["run", "t.yaml", "--no-commit"]);
    run.expect_code(4);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(ended(&run, "a"), pair("error", "auth_error"));
    assert_eq!(ended(&run, "c"), pair("passed", "completed"));
    let message = assert_skipped(&ybs, &run, "b", "auth_error");
    assert!(message.contains("401"), "{message}");
    assert!(!run.stdout.contains("sk-test-auth-breaker"));
    // The task that hit the wall is the error to look at; a skipped one
    // gets no annotation of its own.
    assert!(
        run.stdout.contains("::error title=ybs a::auth_error"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("::error title=ybs b"),
        "{}",
        run.stdout
    );
}

#[test]
fn the_runs_budget_stops_new_tasks_and_merge_adds_the_costs() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &tasks_yaml(&["a", "b", "c"], ""));
    // Each task: one call (100 in, 20 out) and an answer (120 in, 10
    // out), at $100 per million input tokens: $0.022 a task.
    let for_task = crate::suite::git::for_task;
    let mut interactions = Vec::new();
    for id in ["a", "b", "c"] {
        interactions.push(for_task(id, call("list_files", json!({"path": "."}))));
        interactions.push(for_task(id, answer("done")));
    }
    ybs.cassette("t.cassette.json", interactions);
    operator_config(
        &ybs,
        r#"{"llm": {"price": {"input_per_mtok": 100, "output_per_mtok": 0}}}"#,
    );
    let run = ybs.run([
        "run",
        "t.yaml",
        "--no-commit",
        "--max-cost-usd",
        "0.04",
        "--out",
        "ybs-out",
    ]);
    run.expect_code(4);
    assert_eq!(ended(&run, "a"), pair("passed", "completed"));
    assert_eq!(ended(&run, "b"), pair("passed", "completed"));
    let message = assert_skipped(&ybs, &run, "c", "cost_budget");
    assert!(message.contains("$0.0440"), "{message}");
    assert!(message.contains("--max-cost-usd"), "{message}");
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("cost $0.0440"), "{summary}");

    // A second shard's run: `report merge` adds the costs.
    ybs.file("u.yaml", &tasks_yaml(&["d"], ""));
    ybs.cassette(
        "u.cassette.json",
        vec![
            for_task("d", call("list_files", json!({"path": "."}))),
            for_task("d", answer("done")),
        ],
    );
    ybs.run(["run", "u.yaml", "--no-commit", "--out", "ybs-out-2"])
        .expect_code(0);
    let merged = ybs.run(["report", "merge", "ybs-out", "ybs-out-2", "--out", "merged"]);
    merged.expect_code(4);
    let summary = ybs.read("merged/summary.md");
    assert!(summary.contains("cost $0.0660"), "{summary}");
    assert!(
        summary.contains("| c | skipped | cost_budget |"),
        "{summary}"
    );
    let junit = ybs.read("merged/junit.xml");
    assert!(
        junit.contains("<skipped message=\"cost_budget: not started"),
        "{junit}"
    );

    // A model without a price: the budget could not be counted.
    operator_config(&ybs, "{}");
    let run = ybs.run(["run", "t.yaml", "--no-commit", "--max-cost-usd", "1"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("the price of model `replay` (task `a`) is not known"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("llm.price"), "{}", run.stderr);
    let run = ybs.run(["run", "t.yaml", "--max-cost-usd", "0"]);
    run.expect_code(2);
}

#[test]
fn sigterm_under_jobs_reports_the_tasks_never_started_as_skipped() {
    let ybs = Ybs::new();
    for dir in ["a", "b", "c", "d"] {
        ybs.file(&format!("{dir}/.keep"), "");
    }
    // Four tasks in four workdirs, two at once: `a` and `b` run, `c` and
    // `d` never start.
    ybs.file(
        "t.yaml",
        "defaults:\n  policy:\n    default: allow\ntasks:\n\
         \x20 - id: a\n    prompt: do a\n    workdir: a\n\
         \x20 - id: b\n    prompt: do b\n    workdir: b\n\
         \x20 - id: c\n    prompt: do c\n    workdir: c\n\
         \x20 - id: d\n    prompt: do d\n    workdir: d\n",
    );
    let for_task = crate::suite::git::for_task;
    let sleep = |seconds: &str| {
        call(
            "run_shell",
            json!({"command": format!("sleep {seconds}"), "timeout_seconds": 60}),
        )
    };
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task("a", sleep("41.25")),
            for_task("b", sleep("41.75")),
            for_task("a", answer("never")),
            for_task("b", answer("never")),
            for_task("c", answer("never")),
            for_task("d", answer("never")),
        ],
    );
    let child = ybs
        .command()
        .args(["run", "t.yaml", "--jobs", "2", "--no-commit"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let running = |id: &str, seconds: &str| {
        let path = format!("ybs-out/{id}/events.jsonl");
        ybs.exists(&path) && ybs.read(&path).contains(&format!("sleep {seconds}"))
    };
    while !(running("a", "41.25") && running("b", "41.75")) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the tools never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let run = Run::from_output(child.wait_with_output().unwrap(), ybs.path());
    run.expect_code(130);
    for id in ["a", "b"] {
        assert_eq!(ended(&run, id), pair("failed", "interrupted"), "{id}");
    }
    for id in ["c", "d"] {
        let message = assert_skipped(&ybs, &run, id, "interrupted");
        assert_eq!(message, "not started: interrupted by SIGTERM");
    }
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains(r#"tests="4""#), "{junit}");
    let summary = ybs.read("ybs-out/summary.md");
    assert!(
        summary.contains("4 tasks: 0 passed, 2 failed, 2 skipped"),
        "{summary}"
    );
}
