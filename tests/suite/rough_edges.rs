//! Rough edges a new user hit (issue 40): each said plainly.

use serde_json::json;

use crate::support::Ybs;

#[test]
fn a_cassette_recorded_under_another_task_id_names_the_ids() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "id: t\nprompt: hi\ncommit: false\n");
    let answer = |task: &str| json!({"task": task, "response": {"content": "done", "usage": {"input_tokens": 1, "output_tokens": 1}}});
    ybs.cassette("t.cassette.json", vec![answer("old-id"), answer("old-id")]);
    let run = ybs.run(["run", "t.yaml", "--provider", "replay"]);
    run.expect_code(4);
    let printed = format!("{}{}", run.stdout, run.stderr);
    assert!(
        printed
            .contains("nothing was recorded for task `t`; the cassette holds the tasks `old-id`"),
        "{printed}"
    );
}

#[test]
fn a_run_with_no_task_files_points_at_a_prompt_run() {
    let ybs = Ybs::new();
    ybs.file("README", "nothing here\n");
    let run = ybs.run(["run"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains(".: no task files (*.yaml, *.yml) in this directory"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("ybs run -p 'PROMPT'"), "{}", run.stderr);
}

#[test]
fn tools_schema_prints_a_built_in_as_the_model_is_offered_it() {
    let ybs = Ybs::new();
    let run = ybs.run(["tools", "schema", "read_file"]);
    run.expect_code(0);
    let spec: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(spec["name"], "read_file");
    assert_eq!(spec["parameters"]["properties"]["path"]["type"], "string");
    let run = ybs.run(["tools", "schema", "no-such-tool"]);
    run.expect_code(2);
}

#[test]
fn explain_with_an_operator_policy_and_no_task_says_what_it_decided_with() {
    let ybs = Ybs::new();
    ybs.file("op.yaml", "allow: [\"run_shell(*)\"]\n");
    let run = ybs.run(["policy", "explain", "--policy", "op.yaml", "run_shell(ls)"]);
    run.expect_code(0);
    assert!(run.stdout.contains("verdict: deny"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("note: no task given: the task's side is an empty policy"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("--task FILE#ID"), "{}", run.stdout);
}

#[test]
fn a_scratch_run_names_no_deleted_temp_path() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: hi\n");
    ybs.cassette(
        "t.cassette.json",
        vec![json!({"response": {"content": "done", "usage": {"input_tokens": 1, "output_tokens": 1}}})],
    );
    let run = ybs.run(["run", "--scratch", "t.yaml", "--provider", "replay"]);
    run.expect_code(0);
    let summary = ybs.read("ybs-out/summary.md");
    assert!(!summary.contains("ybs-scratch-"), "{summary}");
    assert!(
        summary.contains("the --scratch copy is no git repository"),
        "{summary}"
    );
}

#[test]
fn a_missing_task_file_is_one_line_and_a_hint() {
    let ybs = Ybs::new();
    for command in ["run", "validate"] {
        let run = ybs.run([command, "nope.yaml"]);
        run.expect_code(2);
        let mut lines = run.stderr.lines();
        assert_eq!(lines.next(), Some("nope.yaml: no such file or directory"));
        assert!(
            lines
                .next()
                .is_some_and(|line| line.starts_with("  hint: ")),
            "{}",
            run.stderr
        );
    }
}
