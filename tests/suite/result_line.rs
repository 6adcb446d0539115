//! The result lines count in English (issue 40, rough edges): `1
//! iteration`, `1 error`, `2 iterations`, `0 errors`.

use crate::support::Ybs;
use crate::support::cassette::{answer, error};

#[test]
fn one_iteration_and_one_error_are_singular() {
    let ybs = Ybs::new();
    ybs.file("a.yaml", "prompt: hi\ncommit: false\n");
    ybs.cassette("a.cassette.json", vec![answer("done")]);
    ybs.file("b.yaml", "prompt: hi\ncommit: false\n");
    ybs.cassette("b.cassette.json", vec![error("auth", 401, "bad key")]);
    let run = ybs.run(["run", "a.yaml", "b.yaml", "--provider", "replay"]);
    run.expect_code(4);
    let printed = format!("{}{}", run.stdout, run.stderr);
    let pass = printed
        .lines()
        .find(|line| line.starts_with("PASS  a"))
        .unwrap_or_else(|| panic!("{printed}"));
    assert!(pass.contains("  1 iteration · "), "{pass}");
    let last = printed
        .lines()
        .find(|line| line.starts_with("ybs: 2 tasks:"))
        .unwrap_or_else(|| panic!("{printed}"));
    assert!(last.contains("1 passed, 0 failed, 1 error —"), "{last}");
    assert!(!printed.contains("1 iterations"), "{printed}");
    assert!(!printed.contains("1 errors"), "{printed}");
    // And plural otherwise.
    let run = ybs.run(["run", "a.yaml", "--provider", "replay"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains("0 failed, 0 errors —"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_run_that_min_pass_rate_lets_pass_says_so_on_its_last_line() {
    let ybs = Ybs::new();
    // The first run's check passes and leaves `ran`; the second's fails.
    ybs.file(
        "t.yaml",
        "prompt: hi\ncommit: false\nchecks:\n  - name: once\n    run: if [ -e ran ]; then exit 1; fi; touch ran\n",
    );
    ybs.cassette("t.cassette.json", vec![answer("done"), answer("done")]);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "replay",
        "--repeat",
        "2",
        "--min-pass-rate",
        "0.5",
    ]);
    run.expect_code(0);
    let last = run
        .stdout
        .lines()
        .find(|line| line.starts_with("ybs: 2 tasks:"))
        .unwrap_or_else(|| panic!("{}{}", run.stdout, run.stderr));
    assert!(last.contains("1 passed, 1 failed"), "{last}");
    assert!(
        last.contains("(1 flaky, passing at or above --min-pass-rate 0.5"),
        "{last}"
    );
}
