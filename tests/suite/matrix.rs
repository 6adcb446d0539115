//! `ybs run --repeat N` and `--models a,b` (docs/ci.md, "Flakiness and
//! model matrices"): copies `t#k` and `t@model`, a pass rate per task, the
//! `flaky` verdict and its exit code, `--min-pass-rate`, one JUnit suite
//! per model, the models side by side in the summary, and `report merge`
//! keeping both.

use std::time::Duration;

use super::git::Repo;
use crate::support::server::Server;
use crate::support::{Run, Ybs, wire};

/// A multi-task file: `(id, extra YAML lines)`, the model from the flags.
fn tasks_yaml(tasks: &[(&str, &str)]) -> String {
    let mut yaml = "defaults:\n  policy:\n    default: allow\ntasks:\n".to_owned();
    for (id, extra) in tasks {
        yaml.push_str(&format!("  - id: {id}\n    prompt: do {id}\n"));
        for line in extra.lines() {
            yaml.push_str(&format!("    {line}\n"));
        }
    }
    yaml
}

/// Runs `t.yaml` against a server answering `answers` times, with `args`.
fn run_against(ybs: &Ybs, server: &Server, args: &[&str]) -> Run {
    let endpoint = format!("{}/v1", server.url);
    let mut all = vec![
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--no-sandbox",
    ];
    all.extend_from_slice(args);
    ybs.run(all)
}

fn answers(count: usize) -> Vec<crate::support::server::Reply> {
    (0..count)
        .map(|_| wire::openai_sse_answer("done"))
        .collect()
}

/// `steady` always passes; `shaky`'s check passes the first time only
/// (it makes a directory outside the workdir that is there afterwards).
fn flaky_batch(ybs: &Ybs) {
    let flag = ybs.path().join("flag");
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[
            ("steady", ""),
            (
                "shaky",
                &format!(
                    "checks:\n  - name: once\n    run: mkdir {}\n",
                    flag.display()
                ),
            ),
        ]),
    );
}

#[test]
fn repeat_gives_a_pass_rate_and_a_task_that_passed_some_runs_is_flaky() {
    let outputs = tempfile::tempdir().unwrap();
    let github_output = outputs.path().join("github_output");
    let ybs = Ybs::new().env("GITHUB_OUTPUT", github_output.to_str().unwrap());
    flaky_batch(&ybs);
    let server = Server::start(answers(6));
    let run = run_against(&ybs, &server, &["--model", "m", "--repeat", "3"]);
    // Flaky, and nothing failed outright: still exit 1 (a run failed: the
    // contract's codes), and the step output's status word says flaky.
    run.expect_code(1);
    let written = std::fs::read_to_string(&github_output).unwrap();
    assert!(written.contains("status=flaky\n"), "{written}");
    assert_eq!(server.requests().len(), 6);
    for id in [
        "steady#1", "steady#2", "steady#3", "shaky#1", "shaky#2", "shaky#3",
    ] {
        assert!(ybs.exists(&format!("ybs-out/{id}/transcript.json")), "{id}");
    }
    assert_eq!(
        run.json("ybs-out/shaky#1/transcript.json")["status"],
        "passed"
    );
    assert_eq!(
        run.json("ybs-out/shaky#2/transcript.json")["status"],
        "failed"
    );
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(
        console.contains("ybs: shaky: flaky, passed 1/3 (33%) of its runs")
            && console.contains("(1 flaky)"),
        "{console}"
    );
    // JUnit: one test case per task, with its pass rate; the flaky one a
    // success with a <flakyFailure> per run that failed.
    let junit = ybs.read("ybs-out/junit.xml");
    assert_eq!(junit.matches("<testcase ").count(), 2, "{junit}");
    assert!(junit.contains(r#"<testcase name="shaky""#), "{junit}");
    assert!(
        junit.contains(r#"<property name="pass_rate" value="0.33"/>"#)
            && junit.contains(r#"<property name="pass_rate" value="1.00"/>"#)
            && junit.contains(r#"<property name="status" value="flaky"/>"#),
        "{junit}"
    );
    assert_eq!(junit.matches("<flakyFailure").count(), 2, "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("## Pass rates"), "{summary}");
    assert!(
        summary.contains("| shaky | 3 | 1 | 33% | **flaky** |"),
        "{summary}"
    );
    assert!(
        summary.contains("| steady | 3 | 3 | 100% | passed |"),
        "{summary}"
    );

    // `report merge` reads the runs back and decides them the same way,
    // or by its own --min-pass-rate.
    let merged = ybs.run(["report", "merge", "ybs-out", "--out", "merged"]);
    merged.expect_code(1);
    let merged = ybs.run([
        "report",
        "merge",
        "ybs-out",
        "--out",
        "merged-lenient",
        "--min-pass-rate",
        "0.3",
    ]);
    merged.expect_code(0);
    let merged = ybs.run([
        "report",
        "merge",
        "ybs-out",
        "--out",
        "merged-strict",
        "--min-pass-rate",
        "0.5",
    ]);
    merged.expect_code(1);
    let junit = ybs.read("merged-strict/junit.xml");
    assert!(
        junit.contains("pass rate 1/3 (33%) is below --min-pass-rate 0.5"),
        "{junit}"
    );
}

#[test]
fn min_pass_rate_decides_a_flaky_task() {
    for (rate, code) in [("0.3", 0), ("0.5", 1)] {
        let ybs = Ybs::new();
        flaky_batch(&ybs);
        let server = Server::start(answers(6));
        let run = run_against(
            &ybs,
            &server,
            &["--model", "m", "--repeat", "3", "--min-pass-rate", rate],
        );
        run.expect_code(code);
        let summary = ybs.read("ybs-out/summary.md");
        let verdict = if code == 0 { "passed" } else { "failed" };
        assert!(
            summary.contains(&format!("| shaky | 3 | 1 | 33% | {verdict} (flaky) |")),
            "{rate}: {summary}"
        );
    }
    // Without --repeat it means nothing: said, and nothing runs.
    let ybs = Ybs::new();
    flaky_batch(&ybs);
    let server = Server::start(answers(0));
    let run = run_against(&ybs, &server, &["--model", "m", "--min-pass-rate", "0.5"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("--min-pass-rate needs --repeat"),
        "{}",
        run.stderr
    );
}

#[test]
fn models_run_every_task_once_per_model_at_once_and_are_compared() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[("a", "commit: false\n"), ("b", "commit: false\n")]),
    );
    Repo::init(&ybs, "");
    // Four copies under --jobs 4, each in its own worktree: the server
    // answers only when all four requests are in.
    let server = Server::start_gated(answers(4), 4, Duration::from_secs(20));
    let run = run_against(
        &ybs,
        &server,
        &["--models", "alpha,vendor/beta", "--jobs", "4"],
    );
    run.expect_code(0);
    let mut models: Vec<String> = server
        .requests()
        .iter()
        .map(|request| request.json()["model"].as_str().unwrap().to_owned())
        .collect();
    models.sort();
    assert_eq!(models, ["alpha", "alpha", "vendor/beta", "vendor/beta"]);
    for id in ["a@alpha", "b@alpha", "a@vendor-beta", "b@vendor-beta"] {
        let transcript = run.json(&format!("ybs-out/{id}/transcript.json"));
        assert_eq!(transcript["status"], "passed", "{id}");
    }
    assert_eq!(
        run.json("ybs-out/a@vendor-beta/transcript.json")["manifest"]["model"],
        "vendor/beta"
    );
    // JUnit: one suite per model.
    let junit = ybs.read("ybs-out/junit.xml");
    assert_eq!(junit.matches("<testsuite ").count(), 2, "{junit}");
    assert!(
        junit.contains(r#"<testsuite name="alpha""#)
            && junit.contains(r#"<testsuite name="vendor/beta""#)
            && junit.contains(r#"<property name="model" value="vendor/beta"/>"#),
        "{junit}"
    );
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(
        console.contains("ybs: model alpha: 2/2 runs passed (100%)")
            && console.contains("ybs: model vendor/beta: 2/2 runs passed (100%)"),
        "{console}"
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("## Models"), "{summary}");
    assert!(summary.contains("| alpha | 2 | 2 | 100% |"), "{summary}");
    assert!(
        summary.contains("| vendor/beta | 2 | 2 | 100% |"),
        "{summary}"
    );

    // Another model in another run (another machine): the merge keeps
    // the model axis, one suite per model.
    let server = Server::start(answers(2));
    let endpoint = format!("{}/v1", server.url);
    ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--no-sandbox",
        "--models",
        "gamma",
        "--out",
        "out-gamma",
    ])
    .expect_code(0);
    ybs.run(["report", "merge", "ybs-out", "out-gamma", "--out", "merged"])
        .expect_code(0);
    let junit = ybs.read("merged/junit.xml");
    assert_eq!(junit.matches("<testsuite ").count(), 3, "{junit}");
    assert!(junit.contains(r#"<testsuite name="gamma""#), "{junit}");
    let summary = ybs.read("merged/summary.md");
    assert!(summary.contains("| gamma | 2 | 2 | 100% |"), "{summary}");
}

#[test]
fn the_runs_of_a_committing_task_start_from_the_same_tree_and_commit_on_their_own_branches() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: add x\nmodel: test-model\npolicy:\n  default: allow\nchecks:\n  - name: alone\n    run: test \"$(cat x.txt)\" = x\n",
    );
    let write = |id: &str| {
        super::git::for_task(
            id,
            crate::support::cassette::call(
                "write_file",
                serde_json::json!({"path": "x.txt", "content": "x"}),
            ),
        )
    };
    ybs.cassette(
        "t.cassette.json",
        vec![
            write("t#1"),
            super::git::for_task("t#1", crate::support::cassette::answer("added")),
            write("t#2"),
            super::git::for_task("t#2", crate::support::cassette::answer("added")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    // --jobs 1: the runs still get worktrees of their own.
    let run = ybs.run(["run", "t.yaml", "--repeat", "2", "--no-sandbox"]);
    run.expect_code(0);
    assert_eq!(repo.head(), base, "no run committed on the user's branch");
    assert_eq!(repo.status(), Vec::<String>::new());
    let run_id = super::git::run_id(&run.json("ybs-out/t#1/transcript.json"));
    for k in ["1", "2"] {
        let branch = format!("ybs/{run_id}/t#{k}");
        assert_eq!(
            repo.git(&["rev-parse", &format!("{branch}^")]),
            base,
            "{branch}"
        );
        assert_eq!(repo.files_of(&branch), ["x.txt"]);
    }
}

#[test]
fn a_run_of_repeat_that_paused_is_resumed_as_that_run() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "\
id: t
prompt: deploy a preview
model: test-model
commit: false
tools:
  caller:
    - name: deploy_preview
      description: Deploy a preview and return its URL
      parameters:
        type: object
        properties: {service: {type: string}}
        required: [service]
policy:
  allow: [deploy_preview]
",
    );
    let tagged = |id: &str, value: serde_json::Value| super::git::for_task(id, value);
    ybs.cassette(
        "first.json",
        vec![
            tagged(
                "t#1",
                crate::support::cassette::call(
                    "deploy_preview",
                    serde_json::json!({"service": "web"}),
                ),
            ),
            tagged("t#2", crate::support::cassette::answer("deployed")),
        ],
    );
    let run = ybs.run([
        "run",
        "t.yaml",
        "--repeat",
        "2",
        "--cassette",
        "first.json",
        "--no-sandbox",
    ]);
    // One run passed, the other waits: paused, not flaky.
    run.expect_code(3);
    let state = run.json("ybs-out/t#1/state.json");
    assert_eq!(state["task"]["id"], "t#1");
    let call = state["pending"][0]["id"].as_str().unwrap().to_owned();
    ybs.cassette(
        "second.json",
        vec![tagged("t#1", crate::support::cassette::answer("deployed"))],
    );
    ybs.file(
        "r.json",
        &serde_json::json!({"results": [{"id": call, "output": "https://preview.example/1"}]})
            .to_string(),
    );
    let resumed = ybs.run([
        "resume",
        "ybs-out",
        "--results",
        "r.json",
        "--cassette",
        "second.json",
        "--no-sandbox",
    ]);
    resumed.expect_code(0);
    assert_eq!(
        resumed.json("ybs-out/t#1/transcript.json")["status"],
        "passed"
    );
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(
        junit.contains(r#"<property name="pass_rate" value="1.00"/>"#),
        "{junit}"
    );
}

#[test]
fn models_whose_outputs_would_be_one_are_refused_before_anything_runs() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &tasks_yaml(&[("a", "")]));
    let run = ybs.run(["run", "t.yaml", "--models", "vendor/m,vendor:m"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("`vendor/m` and `vendor:m` give the same id part `vendor-m`"),
        "{}",
        run.stderr
    );
    assert!(!ybs.exists("ybs-out"));
    let run = ybs.run(["run", "t.yaml", "--models", "m,m"]);
    run.expect_code(2);
    assert!(run.stderr.contains("`m` is named twice"), "{}", run.stderr);
    let run = ybs.run(["run", "t.yaml", "--models", "m", "--model", "n"]);
    run.expect_code(2);
}
