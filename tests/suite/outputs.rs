//! Roots come from the operator, and outputs are out of the run's reach
//! (issue 9, items 6 and 7).

use std::path::Path;

use serde_json::json;

use crate::support::cassette::{answer, call};
use crate::support::server::Server;
use crate::support::{Run, Ybs, wire};

/// A one-task file with a permissive policy and the given extra YAML.
fn task_yaml(extra: &str) -> String {
    format!("prompt: do the thing\ncommit: false\npolicy:\n  default: allow\n{extra}")
}

fn git_init(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(status.success());
}

/// `ybs run FILE` against a local OpenAI-style server that answers once.
fn run_against_server(ybs: &Ybs, file: &str, extra: &[&str]) -> (Run, Server) {
    let server = Server::start(vec![wire::openai_sse_answer("done")]);
    let endpoint = format!("{}/v1", server.url);
    let mut args = vec![
        "run",
        file,
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
    ];
    args.extend_from_slice(extra);
    let run = ybs.run(args);
    (run, server)
}

fn refused_workdir(ybs: &Ybs, run: &Run, server: &Server, line: u32) {
    run.expect_code(2);
    assert!(
        run.stderr.contains(&format!("t.yaml:{line}:")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("`workdir`"), "{}", run.stderr);
    assert!(
        run.stderr.contains("safety.allowed_workdirs"),
        "{}",
        run.stderr
    );
    assert!(server.requests().is_empty(), "the provider was asked");
    assert!(!ybs.exists("ybs-out"), "outputs were created");
}

#[test]
fn a_task_file_cannot_move_the_root_to_slash_or_home() {
    for (workdir, name) in [("/".to_owned(), "slash"), (String::new(), "home")] {
        let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");
        let workdir = if name == "home" {
            ybs.home().display().to_string()
        } else {
            workdir
        };
        ybs.file(
            "t.yaml",
            &task_yaml(&format!(
                "workdir: {workdir}\nchecks:\n  - run: touch marker-{name}\n"
            )),
        );
        let (run, server) = run_against_server(&ybs, "t.yaml", &[]);
        refused_workdir(&ybs, &run, &server, 5);
        assert!(!ybs.home().join(format!("marker-{name}")).exists());
        // `ybs validate` says the same, also from `defaults:`.
        let validate = ybs.run(["validate", "t.yaml"]);
        validate.expect_code(2);
        assert!(
            validate.stderr.contains("t.yaml:5:") && validate.stderr.contains("`workdir`"),
            "{}",
            validate.stderr
        );
        ybs.file(
            "t.yaml",
            &format!("defaults:\n  workdir: {workdir}\ntasks:\n  - id: t\n    prompt: p\n"),
        );
        let validate = ybs.run(["validate", "t.yaml"]);
        validate.expect_code(2);
        assert!(validate.stderr.contains("t.yaml:2:"), "{}", validate.stderr);
    }
}

#[test]
fn the_root_is_the_repository_of_the_task_file() {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");
    git_init(&ybs.path().join("repo"));
    ybs.file("repo/sub/keep.txt", "x\n");
    // Inside the task file's repository: runs.
    ybs.file("repo/t.yaml", &task_yaml("workdir: repo/sub\n"));
    let (run, server) = run_against_server(&ybs, "repo/t.yaml", &[]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 1);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "passed");
    std::fs::remove_dir_all(ybs.path().join("ybs-out")).unwrap();
    // The directory ybs started in holds the repository, but is not in it.
    ybs.file("repo/t.yaml", &task_yaml("workdir: .\n"));
    let (run, server) = run_against_server(&ybs, "repo/t.yaml", &[]);
    refused_workdir(&ybs, &run, &server, 5);
    // A symbolic link inside the repository does not lead out of it.
    std::os::unix::fs::symlink(ybs.home(), ybs.path().join("repo/home")).unwrap();
    ybs.file("repo/t.yaml", &task_yaml("workdir: repo/home\n"));
    let (run, server) = run_against_server(&ybs, "repo/t.yaml", &[]);
    refused_workdir(&ybs, &run, &server, 5);
}

#[test]
fn the_operator_allows_more_roots_and_the_repository_cannot() {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");
    let outside = tempfile::tempdir().unwrap();
    ybs.file(
        "t.yaml",
        &task_yaml(&format!("workdir: {}\n", outside.path().display())),
    );
    // The repository's own config may not widen the roots.
    ybs.file(
        ".ybs.json",
        &json!({"safety": {"allowed_workdirs": [outside.path()]}}).to_string(),
    );
    let (run, server) = run_against_server(&ybs, "t.yaml", &[]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("allowed_workdirs") && run.stderr.contains("repository"),
        "{}",
        run.stderr
    );
    assert!(server.requests().is_empty());
    std::fs::remove_file(ybs.path().join(".ybs.json")).unwrap();
    // An operator config may.
    ybs.file(
        "ops.json",
        &json!({"safety": {"allowed_workdirs": [outside.path()]}}).to_string(),
    );
    let (run, server) = run_against_server(&ybs, "t.yaml", &["--config", "ops.json"]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 1);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(
        transcript["manifest"]["workdir"],
        outside.path().canonicalize().unwrap().display().to_string()
    );
    let validate = ybs.run([
        "validate",
        "t.yaml",
        "--config",
        "ops.json",
        "--provider",
        "ollama",
    ]);
    validate.expect_code(0);
}

/// A file outside every root, and what it holds.
fn victim() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("victim.txt");
    std::fs::write(&path, "keep\n").unwrap();
    (dir, path)
}

fn assert_untouched(victim: &Path) {
    assert_eq!(std::fs::read_to_string(victim).unwrap(), "keep\n");
}

fn is_link(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|meta| meta.file_type().is_symlink())
}

#[test]
fn a_link_planted_at_events_jsonl_before_the_run_is_replaced_not_followed() {
    let ybs = Ybs::new();
    let (_keep, victim) = victim();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    std::fs::create_dir_all(ybs.path().join("ybs-out/t")).unwrap();
    std::os::unix::fs::symlink(&victim, ybs.path().join("ybs-out/t/events.jsonl")).unwrap();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_untouched(&victim);
    let events = ybs.path().join("ybs-out/t/events.jsonl");
    assert!(!is_link(&events));
    assert_eq!(run.events("t").last().unwrap()["type"], "task.finished");
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "failed");
    assert_eq!(transcript["reason"], "output_tampered");
    assert!(
        run.stderr.contains("output tampering") && run.stderr.contains("events.jsonl"),
        "{}",
        run.stderr
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("output tampering"), "{summary}");
}

/// A task that runs `sh tamper.sh` (unconfined: `--no-sandbox` stands
/// for a sandbox bypass) and then answers.
fn tampering_task(ybs: &Ybs, script: &str) {
    ybs.file("t.yaml", &task_yaml(""));
    ybs.file("tamper.sh", script);
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "sh tamper.sh"})),
            answer("done"),
        ],
    );
}

#[test]
fn a_link_planted_at_events_jsonl_during_the_run_is_not_written_through() {
    let ybs = Ybs::new();
    let (_keep, victim) = victim();
    tampering_task(
        &ybs,
        &format!(
            "rm ybs-out/t/events.jsonl && ln -s {} ybs-out/t/events.jsonl\n",
            victim.display()
        ),
    );
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(1);
    assert_untouched(&victim);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(
        transcript["tool_calls"][0]["result"]["ok"], true,
        "{transcript}"
    );
    assert_eq!(transcript["reason"], "output_tampered");
    let notes = transcript.to_string();
    assert!(
        notes.contains("events.jsonl` was replaced by a symbolic link"),
        "{notes}"
    );
    assert!(run.stderr.contains("output tampering"), "{}", run.stderr);
    // No audit event is lost: what ybs wrote replaced the link.
    assert!(!is_link(&ybs.path().join("ybs-out/t/events.jsonl")));
    let events = run.events("t");
    assert_eq!(events.first().unwrap()["type"], "task.started");
    assert_eq!(events.last().unwrap()["type"], "task.finished");
    assert!(
        events.iter().any(|event| event["type"] == "tool.completed"),
        "{events:?}"
    );
}

#[test]
fn an_output_directory_that_is_a_link_is_refused_before_anything_runs() {
    let ybs = Ybs::new();
    let elsewhere = tempfile::tempdir().unwrap();
    ybs.file("t.yaml", &task_yaml("checks:\n  - run: touch ran\n"));
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    std::os::unix::fs::symlink(elsewhere.path(), ybs.path().join("ybs-out")).unwrap();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("ybs-out") && run.stderr.contains("symbolic link"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    assert!(!ybs.exists("ran"));
    // `--junit` into a linked directory is refused the same way.
    std::fs::remove_file(ybs.path().join("ybs-out")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), ybs.path().join("reports")).unwrap();
    let run = ybs.run(["run", "t.yaml", "--junit", "reports/junit.xml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("reports"), "{}", run.stderr);
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    assert!(!ybs.exists("ran"));
}

#[test]
fn an_output_directory_replaced_by_a_link_during_the_run_is_reported_and_not_followed() {
    let ybs = Ybs::new();
    let elsewhere = tempfile::tempdir().unwrap();
    tampering_task(
        &ybs,
        &format!(
            "mv ybs-out moved && ln -s {} ybs-out\n",
            elsewhere.path().display()
        ),
    );
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(1);
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).unwrap().count(),
        0,
        "ybs wrote through the link"
    );
    // Everything went to the directory ybs opened, wherever it now is.
    let transcript = run.json("moved/t/transcript.json");
    assert_eq!(transcript["reason"], "output_tampered");
    assert!(ybs.exists("moved/junit.xml") && ybs.exists("moved/summary.md"));
    assert!(
        run.stderr
            .contains("output directory `ybs-out` was replaced by a symbolic link"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_later_task_forging_an_earlier_transcript_fails_the_run_and_the_merge() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "defaults:\n  commit: false\n  policy:\n    default: allow\ntasks:\n  - id: a\n    prompt: p\n    checks: [{name: broken, run: \"false\"}]\n  - id: b\n    prompt: p\n",
    );
    ybs.file(
        "tamper.sh",
        "sed -i 's/\"failed\"/\"passed\"/' ybs-out/a/transcript.json\n",
    );
    let mut first = answer("a done");
    first["task"] = json!("a");
    let mut tamper = call("run_shell", json!({"command": "sh tamper.sh"}));
    tamper["task"] = json!("b");
    let mut last = answer("b done");
    last["task"] = json!("b");
    ybs.cassette("t.cassette.json", vec![first, tamper, last]);
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(1);
    assert!(
        run.stderr.contains("ybs-out/a/transcript.json"),
        "{}",
        run.stderr
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("output tampering"), "{summary}");
    let merge = ybs.run(["report", "merge", "ybs-out", "--out", "merged"]);
    merge.expect_code(2);
    assert!(
        merge.stderr.contains("ybs-out/a/transcript.json")
            && merge.stderr.contains("does not match"),
        "{}",
        merge.stderr
    );
    assert!(!ybs.exists("merged"));
}
