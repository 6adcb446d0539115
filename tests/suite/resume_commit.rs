//! A paused run's commit settings hold at resume (issue 40, mismatch 2):
//! `--no-commit` and `--scratch` are carried by the state, `ybs resume`
//! takes `--no-commit` itself, and the printed resume command repeats it.

use serde_json::json;

use crate::support::Ybs;
use crate::support::cassette::{answer, calls};
use crate::support::git;

const TASK: &str = "id: t\nprompt: Write a.txt, then publish.\npolicy:\n  allow: [read_file, write_file]\n  ask: [\"run_shell(npm publish*)\"]\n  on_ask: pause\n";

/// A repository with the task committed on `main`, and the two cassettes
/// (outside it): the paused half and the resumed one.
fn setup() -> (Ybs, String, String) {
    let ybs = Ybs::new();
    git(ybs.path(), &["init", "-q", "-b", "main"]);
    ybs.file("t.yaml", TASK);
    ybs.file(".gitignore", "ybs-out/\n");
    git(ybs.path(), &["add", "."]);
    git(ybs.path(), &["commit", "-qm", "task"]);
    let write = |name: &str, interactions: Vec<serde_json::Value>| {
        let path = ybs.home().join(name);
        let text = json!({"version": 1, "interactions": interactions}).to_string();
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let first = write(
        "c1.json",
        vec![calls(&[
            ("write_file", json!({"path": "a.txt", "content": "x\n"})),
            ("run_shell", json!({"command": "npm publish --dry-run"})),
        ])],
    );
    let second = write("c2.json", vec![answer("done")]);
    (ybs, first, second)
}

fn head(ybs: &Ybs) -> String {
    git(ybs.path(), &["rev-parse", "HEAD"])
}

#[test]
fn a_no_commit_run_resumes_without_committing() {
    let (ybs, first, second) = setup();
    let before = head(&ybs);
    let run = ybs.run(["run", "--no-commit", "t.yaml", "--cassette", &first]);
    run.expect_code(3);
    let printed = format!("{}{}", run.stdout, run.stderr);
    assert!(
        printed.contains("`ybs resume ybs-out --no-commit --approve all`"),
        "{printed}"
    );
    assert_eq!(ybs.json("ybs-out/t/state.json")["no_commit"], true);
    let run = ybs.run([
        "resume",
        "ybs-out",
        "--approve",
        "all",
        "--cassette",
        &second,
    ]);
    run.expect_code(0);
    assert_eq!(head(&ybs), before, "resume committed:\n{}", run.stderr);
    assert_eq!(ybs.read("a.txt"), "x\n");
    assert!(git(ybs.path(), &["status", "--porcelain"]).contains("?? a.txt"));
}

#[test]
fn resume_takes_no_commit_itself() {
    let (ybs, first, second) = setup();
    let before = head(&ybs);
    ybs.run(["run", "t.yaml", "--cassette", &first])
        .expect_code(3);
    let run = ybs.run([
        "resume",
        "ybs-out",
        "--no-commit",
        "--approve",
        "all",
        "--cassette",
        &second,
    ]);
    run.expect_code(0);
    assert_eq!(head(&ybs), before, "{}", run.stderr);
    assert_eq!(ybs.read("a.txt"), "x\n");
}

#[test]
fn a_scratch_run_resumes_in_a_scratch_copy() {
    let (ybs, first, second) = setup();
    let before = head(&ybs);
    ybs.run(["run", "--scratch", "t.yaml", "--cassette", &first])
        .expect_code(3);
    assert_eq!(ybs.json("ybs-out/t/state.json")["scratch"], true);
    let run = ybs.run([
        "resume",
        "ybs-out",
        "--approve",
        "all",
        "--cassette",
        &second,
    ]);
    run.expect_code(0);
    assert_eq!(head(&ybs), before, "{}", run.stderr);
    assert!(!ybs.exists("a.txt"), "the checkout was written");
    assert_eq!(git(ybs.path(), &["status", "--porcelain"]), "");
    assert_eq!(ybs.json("ybs-out/t/transcript.json")["status"], "passed");
}
