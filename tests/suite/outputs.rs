//! Roots come from the operator, and outputs are out of the run's reach
//! (issue 9, items 6 and 7).

use std::path::Path;

use serde_json::json;

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
    let validate = ybs.run(["validate", "t.yaml", "--config", "ops.json"]);
    validate.expect_code(0);
}
