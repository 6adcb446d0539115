//! The meaning of a policy does not depend on the order of its rules
//! (issue 40, mismatch 4): an allow rule that names a program vouches for
//! it wherever it is listed, and no hint asks for a rule that is there.

use serde_json::json;

use crate::support::Ybs;
use crate::support::cassette::{answer, call};

fn task(allow: &str) -> String {
    format!(
        "prompt: run the tests\ncommit: false\npolicy:\n  allow: {allow}\n  deny: [\"run_shell(rm *)\"]\n"
    )
}

#[test]
fn a_named_rule_vouches_before_or_after_the_wildcard() {
    let ybs = Ybs::new().parser_alone();
    for allow in [
        r#"["run_shell(*)", "run_shell(sh tests/run)"]"#,
        r#"["run_shell(sh tests/run)", "run_shell(*)"]"#,
    ] {
        ybs.file("t.yaml", &task(allow));
        let run = ybs.run([
            "policy",
            "explain",
            "--task",
            "t.yaml",
            "run_shell(sh tests/run)",
        ]);
        run.expect_code(0);
        assert!(
            run.stdout.contains("verdict: allow"),
            "{allow}:\n{}",
            run.stdout
        );
        assert!(
            run.stdout.contains("run_shell(sh tests/run)\n")
                && run.stdout.contains("] run_shell(sh tests/run)"),
            "{allow}: not decided by the named rule:\n{}",
            run.stdout
        );
        assert!(
            !run.stdout.contains("name it in an allow rule"),
            "{}",
            run.stdout
        );
        // A program no rule names stays opaque under the wildcard.
        let run = ybs.run([
            "policy",
            "explain",
            "--task",
            "t.yaml",
            "run_shell(sh other)",
        ]);
        assert!(run.stdout.contains("verdict: ask"), "{}", run.stdout);
        assert!(
            run.stdout.contains("run_shell(sh other)`)"),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn a_run_allows_the_named_program_listed_after_the_wildcard() {
    let ybs = Ybs::new().parser_alone();
    ybs.file(
        "t.yaml",
        &task(r#"["run_shell(*)", "run_shell(sh tests/run)"]"#),
    );
    ybs.file("tests/run", "echo ran > ran.txt\n");
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "sh tests/run"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml", "--provider", "replay"]);
    run.expect_code(0);
    assert_eq!(ybs.read("ran.txt"), "ran\n");
    let decided: Vec<String> = run
        .events("t")
        .iter()
        .filter(|event| event["type"] == "tool.decided")
        .map(|event| event["rule"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(decided, ["allow[1] run_shell(sh tests/run)"], "{decided:?}");
}

#[test]
fn the_operators_opaque_deny_never_hints_at_a_task_loosening() {
    let ybs = Ybs::new();
    ybs.file(
        "op.yaml",
        "allow: [\"run_shell(*)\"]\ndeny: [\"run_shell(rm *)\"]\nopaque: deny\n",
    );
    ybs.file(
        "t.yaml",
        "prompt: x\ncommit: false\npolicy:\n  allow: [\"run_shell(*)\", \"run_shell(sh tests/run)\"]\n",
    );
    let run = ybs.run([
        "policy",
        "explain",
        "--policy",
        "op.yaml",
        "--task",
        "t.yaml",
        "run_shell(sh tests/run)",
    ]);
    run.expect_code(0);
    assert!(run.stdout.contains("verdict: deny"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("only the operator's policy (--policy) can allow it"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("set `policy.opaque: allow`"),
        "{}",
        run.stdout
    );
    // Without the task's named rule: the task may name it; the operator's
    // `opaque: deny` is not the task's to loosen.
    ybs.file(
        "t.yaml",
        "prompt: x\ncommit: false\npolicy:\n  allow: [\"run_shell(*)\"]\n",
    );
    let run = ybs.run([
        "policy",
        "explain",
        "--policy",
        "op.yaml",
        "--task",
        "t.yaml",
        "run_shell(sh tests/run)",
    ]);
    assert!(
        !run.stdout.contains("set `policy.opaque: allow`"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("a task file cannot"), "{}", run.stdout);
}
