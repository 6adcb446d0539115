//! Issue 21 item 11: nothing left behind. The empty placeholder
//! directories the sandbox makes at missing read-only paths (`.ybs.json/`,
//! `.github/workflows/`, `.github/actions/`) are removed by the next run
//! when a run was killed with `kill -9`, never with anything put into
//! them; and none is ever made through a symlink (a `.github` linking
//! outside the repository). The real binary, killed for real.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::Ybs;
use crate::support::cassette::{answer, calls};

/// `name.yaml`: a confined `run_shell` that touches `started`, then sleeps.
fn sleeping_task(ybs: &Ybs, name: &str) {
    ybs.file(
        &format!("{name}.yaml"),
        "prompt: p\nmodel: test-model\ncommit: false\npolicy: { default: allow }\n",
    );
    ybs.cassette(
        &format!("{name}.cassette.json"),
        vec![
            calls(&[(
                "run_shell",
                json!({"command": "touch started && sleep 60", "timeout_seconds": 90}),
            )]),
            answer("slept"),
        ],
    );
}

/// Starts `ybs run name.yaml` and returns once its shell command runs
/// (the sandbox, and so the placeholders, are in place).
fn start(ybs: &Ybs, name: &str) -> Child {
    let mut child = ybs
        .command()
        .args(["run", &format!("{name}.yaml")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let marker = ybs.path().join("started");
    while !marker.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("ybs ended before its shell command ran: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the shell command never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// `kill -9`.
fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

fn quick_task(ybs: &Ybs) {
    ybs.file(
        "quick.yaml",
        "prompt: p\nmodel: test-model\ncommit: false\npolicy: { default: allow }\n",
    );
    ybs.cassette("quick.cassette.json", vec![answer("done")]);
}

#[test]
fn placeholders_a_killed_run_left_are_removed_by_the_next_run_and_user_files_stay() {
    let ybs = Ybs::new();
    sleeping_task(&ybs, "slow");
    quick_task(&ybs);
    let dir = ybs.path();
    kill(start(&ybs, "slow"));
    // What the killed run left: empty directories in the user's checkout.
    for left in [".ybs.json", ".github/workflows", ".github/actions"] {
        assert!(dir.join(left).is_dir(), "{left} was not left behind");
    }
    // The user puts a file into one of them before the next run.
    std::fs::write(dir.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
    ybs.run(["run", "quick.yaml"]).expect_code(0);
    assert!(!dir.join(".ybs.json").exists());
    assert!(!dir.join(".github/actions").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join(".github/workflows/ci.yml")).unwrap(),
        "on: push\n",
        "the user's file stays"
    );
    // And the next run after that has nothing left to do.
    ybs.run(["run", "quick.yaml"]).expect_code(0);
    assert!(dir.join(".github/workflows/ci.yml").exists());
}

/// Entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn no_placeholder_is_made_through_a_github_link_pointing_outside() {
    let ybs = Ybs::new();
    let outside = ybs.home().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("kept.txt"), "x\n").unwrap();
    std::os::unix::fs::symlink(&outside, ybs.path().join(".github")).unwrap();
    sleeping_task(&ybs, "slow");
    let child = start(&ybs, "slow");
    // While the task runs: nothing made outside.
    assert_eq!(entries(&outside), ["kept.txt"]);
    kill(child);
    assert_eq!(entries(&outside), ["kept.txt"]);
    assert!(ybs.path().join(".github").is_symlink());
    // The placeholder that could be made is gone after the next run.
    quick_task(&ybs);
    ybs.run(["run", "quick.yaml"]).expect_code(0);
    assert_eq!(entries(&outside), ["kept.txt"]);
    assert!(!ybs.path().join(".ybs.json").exists());
}
