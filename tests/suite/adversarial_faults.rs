//! Fault injection against the promises of docs/security.md that the
//! other suites leave open: allow-rule bypasses (S4), headless runs (S3),
//! output hygiene (S8), subprocesses (S9), limits (S10), provider faults
//! (S11), git (S12), interrupts and crashes. A scripted model plays the
//! attacker; everything runs through the real binary.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, calls};

// ---------------------------------------------------------------------------
// Helpers.

/// `ybs policy explain --task t.yaml CALL`: the verdict line's value and
/// the whole output.
fn explain(ybs: &Ybs, call: &str) -> (String, String) {
    let run = ybs.run(["policy", "explain", "--task", "t.yaml", call]);
    run.expect_code(0);
    let verdict = run
        .stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("verdict:"))
        .unwrap_or_else(|| panic!("no verdict in:\n{}", run.stdout))
        .trim()
        .to_owned();
    (verdict, run.stdout)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "u")
        .env("GIT_AUTHOR_EMAIL", "u@example.com")
        .env("GIT_COMMITTER_NAME", "u")
        .env("GIT_COMMITTER_EMAIL", "u@example.com")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn tool_calls(transcript: &Value) -> &Vec<Value> {
    transcript["tool_calls"].as_array().expect("tool_calls")
}

// ---------------------------------------------------------------------------
// S4: allow rules parse.

/// Under `allow: run_shell(git *)`, git's own ways of running a program
/// are not covered: an option in any abbreviation git accepts (`--up=`
/// for `--upload-pack`), the `ext` remote helper called directly, the
/// daemon's access hook, and another directory's configuration (`-C`,
/// `--git-dir`: an alias `!cmd` or `core.fsmonitor` in a repository the
/// model wrote outside `.git`). The plain forms stay allowed.
#[test]
fn git_under_a_prefix_rule_cannot_run_a_program_in_any_spelling() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\npolicy:\n  allow: ['run_shell(git *)', 'run_shell(rg*)']\n",
    );
    for form in [
        "git clone --up='sh -c id' src y",
        "git clone --u=sh src y",
        "git fetch --upl=sh origin",
        "git archive --ex=sh --remote=x HEAD",
        "git difftool --ex=sh",
        "git remote-ext x 'sh -c id'",
        "git daemon --access-hook=sh",
        "git -C evil x",
        "git --git-dir evil log",
        "git --git-dir=evil log",
        "rg --hostname-bin=./evil --hyperlink-format=default x",
        "rg --hostname-bin ./evil x",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_ne!(verdict, "allow", "{form}:\n{out}");
        assert!(out.contains("not auto-allowed"), "{form}:\n{out}");
    }
    for form in [
        "git status",
        "git -C . status",
        "git clone src y",
        "git log --oneline -5",
        "git push --force",
        "rg -n foo src",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_eq!(verdict, "allow", "{form}:\n{out}");
    }
}

/// A command line bash would refuse (an operator with no command on one
/// side) is "anything that does not parse": never auto-allowed, while the
/// same operators between two allowed commands are.
#[test]
fn an_operator_without_a_command_does_not_parse_and_is_not_allowed() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\npolicy:\n  allow: ['run_shell(cargo test*)', 'run_shell(cat*)']\n",
    );
    for form in [
        "cargo test &&",
        "cargo test ||",
        "cargo test |",
        "cargo test |&",
        "; cargo test",
        "&& cargo test",
        "| cargo test",
        "cargo test & & cargo test",
        "cargo test && ; cargo test",
        "cargo test &&\n",
        "cargo test &| cat",
        "cargo test ;; cargo test",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_ne!(verdict, "allow", "{form:?}:\n{out}");
        assert!(
            out.contains("without a command") || out.contains(";;"),
            "{form:?}:\n{out}"
        );
    }
    for form in [
        "cargo test &",
        "cargo test;",
        "cargo test && cargo test",
        "cargo test &&\n  cargo test",
        "cargo test |\ncat",
        "cargo test |& cat",
        "cargo test || cat x",
        "cargo test # && nothing",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_eq!(verdict, "allow", "{form:?}:\n{out}");
    }
}

/// The same through `ybs run` with real git: `git clone --up=CMD` and
/// `git remote-ext` would run CMD (git accepts the abbreviation); under
/// `allow: run_shell(git *)` neither runs, the model is told why, and a
/// plain git command still runs.
#[test]
fn git_abbreviations_and_remote_helpers_do_not_run_under_a_git_rule() {
    let ybs = Ybs::new();
    ybs.file("src/a.txt", "a\n");
    git(&ybs.path().join("src"), &["init", "-q"]);
    git(&ybs.path().join("src"), &["add", "-A"]);
    git(&ybs.path().join("src"), &["commit", "-qm", "a"]);
    let pwned = ybs.path().join("pwned");
    let pwn = format!("touch {}; git-upload-pack", pwned.display());
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: ['run_shell(git *)', 'run_shell(printf*)']\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                (
                    "run_shell",
                    json!({"command": format!("git clone --up='{pwn}' src y")}),
                ),
                (
                    "run_shell",
                    json!({"command": format!("printf 'capabilities\\nconnect git-upload-pack\\n\\n' | git remote-ext x 'touch {}'", pwned.display())}),
                ),
                ("run_shell", json!({"command": "git -C src log --format=%s"})),
                ("run_shell", json!({"command": "git clone -q src z"})),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!pwned.exists(), "a program ran through git");
    assert!(!ybs.exists("y"), "the abbreviated clone ran");
    assert!(ybs.exists("z/a.txt"), "the plain clone ran: {}", run.stderr);
    let transcript = run.json("ybs-out/t/transcript.json");
    let entries = tool_calls(&transcript);
    for entry in &entries[..3] {
        assert_eq!(entry["decision"]["verdict"], "deny", "{entry}");
        assert_eq!(entry["result"]["ran"], false, "{entry}");
        let told = entry["result"]["output"].as_str().unwrap();
        assert!(told.contains("not auto-allowed"), "{told}");
    }
    assert_eq!(entries[3]["result"]["ran"], true, "{}", entries[3]);
}
