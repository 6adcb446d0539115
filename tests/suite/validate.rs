//! Task-file errors: every one, with `file:line:col` and a hint (issue 2,
//! acceptance 2).

use crate::support::Ybs;

#[test]
fn misspelled_field_is_one_line_with_location_and_hint() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "version: 1\npromt: fix it\n");
    for command in ["run", "validate"] {
        let run = ybs.run([command, "t.yaml"]);
        run.expect_code(2);
        let line = run
            .stderr
            .lines()
            .find(|l| l.contains("unknown field `promt`"))
            .unwrap_or_else(|| panic!("no unknown-field line in:\n{}", run.stderr));
        assert!(
            line.starts_with("t.yaml:2:1: unknown field `promt`"),
            "{line}"
        );
        assert!(
            run.stderr.contains("did you mean `prompt`"),
            "{}",
            run.stderr
        );
        assert!(
            !ybs.exists("ybs-out"),
            "nothing may run on a task-file error"
        );
    }
}

#[test]
fn every_error_of_every_file_is_reported() {
    let ybs = Ybs::new();
    ybs.file(
        "tasks/a.yaml",
        "tasks:\n  - id: one\n    promt: x\n  - id: Bad Id\n    prompt: y\n    limits: { max_iteration: 3 }\n",
    );
    ybs.file("tasks/b.yaml", "prompt: hi {{who}}\n");
    let run = ybs.run(["validate", "tasks"]);
    run.expect_code(2);
    let stderr = &run.stderr;
    assert!(
        stderr.contains("a.yaml:3:5: unknown field `promt`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("a.yaml:4:") && stderr.contains("Bad Id"),
        "{stderr}"
    );
    assert!(
        stderr.contains("max_iteration") && stderr.contains("did you mean `max_iterations`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("b.yaml:1:") && stderr.contains("who"),
        "{stderr}"
    );
}

#[test]
fn a_valid_file_validates() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: hello {{name}}\nvars: { name: world }\npolicy:\n  allow: [read_file, \"run_shell(cargo test*)\"]\n");
    ybs.run(["validate", "t.yaml"]).expect_code(0);
}

#[test]
fn yaml_syntax_error_has_a_location() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: [unclosed\n");
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("t.yaml:"), "{}", run.stderr);
}

#[test]
fn help_and_version_answer() {
    let ybs = Ybs::new();
    let run = ybs.run(["--version"]);
    run.expect_code(0);
    assert!(run.stdout.starts_with("ybs "));
    let run = ybs.run(["run", "--help"]);
    run.expect_code(0);
    assert!(run.stdout.contains("--cassette"));
    ybs.run(["run", "--no-such-flag"]).expect_code(2);
}

#[test]
fn a_misspelled_value_gets_a_hint() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\nexpect: pas\npolicy: { default: alow }\n",
    );
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("t.yaml:2:9: invalid `expect`: expected `pass` or `fail`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("did you mean `pass`?"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("did you mean `allow`?"),
        "{}",
        run.stderr
    );
}
