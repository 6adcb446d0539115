//! `ybs validate` runs the preflight `ybs run` runs before its first
//! task, in the same words, and reports every independent error of every
//! file in one pass (issue 40, mismatches 5 and 6).

use crate::support::Ybs;

/// The line of `stderr` that holds `needle`.
fn line_with<'a>(stderr: &'a str, needle: &str) -> &'a str {
    stderr
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in:\n{stderr}"))
}

#[test]
fn validate_refuses_what_run_refuses_before_starting_in_the_same_words() {
    let ybs = Ybs::new();
    ybs.file(
        "a.yaml",
        "prompt: x\ncommit: false\nworkdir: does/not/exist\n",
    );
    ybs.file("b.yaml", "prompt: x\ncommit: false\nworkdir: \"~\"\n");
    ybs.file(
        "c.yaml",
        "prompt: x\ncommit: false\ntools:\n  external: [{name: nosuchtool, required: true}]\n",
    );
    let model = ["--provider", "ollama", "--model", "m"];
    for (file, needle) in [
        ("a.yaml", "does/not/exist"),
        ("b.yaml", "cannot be used"),
        ("c.yaml", "nosuchtool"),
    ] {
        let validate = ybs.run(["validate", file].iter().chain(&model));
        validate.expect_code(2);
        let said = line_with(&validate.stderr, needle);
        assert!(said.starts_with(file), "{said}");
        let mut args = vec!["run", file, "--endpoint", "http://127.0.0.1:9"];
        args.extend(model);
        let run = ybs.run(args);
        assert_ne!(run.code, 0, "{}", run.stderr);
        let printed = format!("{}{}", run.stdout, run.stderr);
        // The same message: `run` says it on its error line or task line.
        let message = said.split_once(": ").map_or(said, |(_, rest)| rest);
        let message = message.split_once(": ").map_or(message, |(_, rest)| rest);
        assert!(
            printed.contains(message),
            "validate said `{message}`, run said:\n{printed}"
        );
    }
    // A workdir that exists validates.
    ybs.file("d/keep", "");
    ybs.file("d.yaml", "prompt: x\ncommit: false\nworkdir: d\n");
    ybs.run(["validate", "d.yaml"].iter().chain(&model))
        .expect_code(0);
}

#[test]
fn every_independent_error_of_every_file_in_one_pass() {
    let ybs = Ybs::new();
    ybs.file("tasks/a.yaml", "tasks:\n  - id: same\n    prompt: x\n");
    ybs.file(
        "tasks/b.yaml",
        "tasks:\n  - id: same\n    prompt: y\n    policy:\n      allow: [nosuch_tool]\n",
    );
    ybs.file("tasks/c.yaml", "promt: x\n");
    ybs.file(
        "tasks/d.yaml",
        "prompt: x\ncommit: false\nworkdir: does/not/exist\n",
    );
    let run = ybs.run(["validate", "tasks"]);
    run.expect_code(2);
    let stderr = &run.stderr;
    for needle in [
        "c.yaml:1:1: unknown field `promt`",
        "duplicate task id `same`",
        "`nosuch_tool` is not a built-in",
        "no model to run with",
        "d.yaml:3:10: task `d`: workdir",
    ] {
        assert!(stderr.contains(needle), "no `{needle}` in:\n{stderr}");
    }
}

#[test]
fn no_provider_is_said_the_same_way_by_run_and_validate() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: x\ncommit: false\n");
    let expected = "t.yaml: task `t`: no model to run with: no provider is set";
    for command in ["validate", "run"] {
        let run = ybs.run([command, "t.yaml"]);
        run.expect_code(2);
        assert!(run.stderr.contains(expected), "{command}: {}", run.stderr);
        assert!(!run.stderr.contains("replay"), "{command}: {}", run.stderr);
        assert!(
            run.stderr.contains("hint: pass --provider"),
            "{}",
            run.stderr
        );
    }
}
