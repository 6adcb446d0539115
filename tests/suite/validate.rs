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
    ybs.run(["validate", "t.yaml", "--provider", "ollama"])
        .expect_code(0);
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

/// Issue 10: every key that bounds trust or spend, set wider in the
/// repository (`./.ybs.json`, the task file) than the operator set it, is
/// one diagnostic at its own `file:line:col`; so is every unknown key.
#[test]
fn every_widening_and_every_unknown_key_is_reported_where_it_is_written() {
    let ybs = Ybs::new();
    std::fs::write(
        ybs.home().join(".ybs.json"),
        concat!(
            "agent: { max_iterations: 3, max_total_tokens: 1000, max_cost_usd: 1, timeout: 60, retry_attempts: 1 }\n",
            "context: { max_tool_output_chars: 100, max_tokens: 8000, compaction_threshold: 0.8 }\n",
            "llm: { model: gpt-4o, timeout_seconds: 10, stream_idle_timeout_seconds: 10, total_timeout_seconds: 10 }\n",
            "git: { auto_commit: false }\n",
            "safety: { max_task_file_bytes: 100000 }\n",
            "tools: { builtin: { run_shell: { enabled: false, timeout_seconds: 5 } } }\n",
        ),
    )
    .unwrap();
    let repository = [
        ("agent:", ""),
        ("  max_iterations: 4", "`agent.max_iterations: 4`"),
        ("  max_total_tokens: 2000", "`agent.max_total_tokens: 2000`"),
        ("  max_cost_usd: 1.5", "`agent.max_cost_usd: 1.5`"),
        ("  timeout: 2m", "`agent.timeout: 120s`"),
        ("  retry_attempts: 5", "`agent.retry_attempts: 5`"),
        ("context:", ""),
        (
            "  max_tool_output_chars: 101",
            "`context.max_tool_output_chars: 101`",
        ),
        ("  max_tokens: 9000", "`context.max_tokens: 9000`"),
        (
            "  compaction_threshold: 0.9",
            "`context.compaction_threshold: 0.9`",
        ),
        ("llm:", ""),
        ("  timeout_seconds: 11", "`llm.timeout_seconds: 11s`"),
        (
            "  stream_idle_timeout_seconds: 11",
            "`llm.stream_idle_timeout_seconds: 11s`",
        ),
        (
            "  total_timeout_seconds: 11",
            "`llm.total_timeout_seconds: 11s`",
        ),
        ("  temprature: 1", "unknown field `temprature` in `llm`"),
        ("git:", ""),
        ("  auto_commit: true", "`git.auto_commit: true`"),
        ("safety:", ""),
        (
            "  max_task_file_bytes: 100001",
            "`safety.max_task_file_bytes: 100001`",
        ),
        (
            "  allowed_paths: [/]",
            "`safety.allowed_paths` cannot be set in the repository's config",
        ),
        ("tools:", ""),
        ("  builtin:", ""),
        ("    run_shell:", ""),
        (
            "      enabled: true",
            "`tools.builtin.run_shell.enabled: true`",
        ),
        (
            "      timeout_seconds: 6",
            "`tools.builtin.run_shell.timeout_seconds: 6s`",
        ),
        ("      timeout_secs: 6", "unknown field `timeout_secs`"),
    ];
    let text: String = repository
        .iter()
        .map(|(line, _)| format!("{line}\n"))
        .collect();
    ybs.file(".ybs.json", &text);
    let task = [
        ("prompt: p", ""),
        ("limits:", ""),
        (
            "  max_iterations: 4",
            "`limits.max_iterations: 4` of task `t`",
        ),
        ("  timeout: 61s", "`limits.timeout: 61s` of task `t`"),
        (
            "  max_total_tokens: 1001",
            "`limits.max_total_tokens: 1001` of task `t`",
        ),
        (
            "  max_cost_usd: 1.01",
            "`limits.max_cost_usd: 1.01` of task `t`",
        ),
        (
            "  max_tool_output_chars: 101",
            "`limits.max_tool_output_chars: 101` of task `t`",
        ),
        ("  max_turns: 3", "unknown field `max_turns` in `limits`"),
    ];
    let text: String = task.iter().map(|(line, _)| format!("{line}\n")).collect();
    ybs.file("t.yaml", &text);
    // The config's errors come first: the task is checked against a
    // config that loads.
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    for (index, (line, wanted)) in repository.iter().enumerate() {
        if wanted.is_empty() {
            continue;
        }
        let col = line.find(':').unwrap() + 3;
        let col = if wanted.starts_with("unknown field") || wanted.contains("cannot be set") {
            line.len() - line.trim_start().len() + 1
        } else {
            col
        };
        let prefix = format!(".ybs.json:{}:{col}: {wanted}", index + 1);
        assert!(
            run.stderr.lines().any(|l| l.contains(&prefix)),
            "no `{prefix}` in:\n{}",
            run.stderr
        );
    }
    assert!(
        run.stderr
            .contains("t.yaml:8:3: unknown field `max_turns` in `limits`"),
        "{}",
        run.stderr
    );
    // With a config and a task file that load, the task's widenings.
    std::fs::remove_file(ybs.path().join(".ybs.json")).unwrap();
    let text: String = task[..7]
        .iter()
        .map(|(line, _)| format!("{line}\n"))
        .collect();
    ybs.file("t.yaml", &text);
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    for (index, (line, wanted)) in task[..7].iter().enumerate() {
        if wanted.is_empty() {
            continue;
        }
        let col = line.find(':').unwrap() + 3;
        let prefix = format!("t.yaml:{}:{col}: {wanted}", index + 1);
        assert!(
            run.stderr.lines().any(|l| l.starts_with(&prefix)),
            "no `{prefix}` in:\n{}",
            run.stderr
        );
    }
}

/// A build without the `script` tool (the test binary's default) says
/// where to get one that has it, for the command line and for the Action.
#[cfg(not(feature = "script"))]
#[test]
fn a_script_task_in_a_build_without_it_says_how_to_get_one() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: p\ntools: {script: true}\n");
    for command in ["run", "validate"] {
        let run = ybs.run([command, "t.yaml"]);
        run.expect_code(2);
        assert!(
            run.stderr
                .contains("t.yaml:2:9: `tools.script` is not available in this build of ybs"),
            "{}",
            run.stderr
        );
        for needle in [
            "the release binaries",
            "--features script",
            "ybs-binary: target/release/ybs",
        ] {
            assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
        }
    }
}

/// `ybs validate` refuses what `ybs run` would refuse before running: a
/// task with no model (no provider, no cassette) and a cost limit with no
/// price, and only for the tasks `--filter` selects, with the provider
/// flags `run` would get.
#[test]
fn validate_refuses_what_run_would_for_the_selected_tasks() {
    let ybs = Ybs::new();
    ybs.file(
        "two.yaml",
        "tasks:\n  - id: a\n    prompt: p\n    provider: openai\n    model: gpt-4.1\n  - id: b\n    prompt: p\n    limits: {max_cost_usd: 1}\n",
    );
    let run = ybs.run(["validate", "two.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(
            "two.yaml:8:28: task `b` has max_cost_usd 1, but the price of model `replay` is not known"
        ),
        "{}",
        run.stderr
    );
    // Task `a` alone is fine, as `run --filter a` runs it.
    let run = ybs.run(["validate", "two.yaml", "--filter", "a"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains("ok: 1 file, 1 task valid"),
        "{}",
        run.stdout
    );
    // With the model `run` would be given, `b` has a price and a model.
    ybs.run([
        "validate",
        "two.yaml",
        "--provider",
        "openai",
        "--model",
        "gpt-4.1",
    ])
    .expect_code(0);

    // No provider and no cassette: `run` stops at this task, so does validate.
    ybs.file("t.yaml", "prompt: p\n");
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("t.yaml: task `t`: no model to run with: no provider is set"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("hint: pass --provider"),
        "{}",
        run.stderr
    );
    // A cassette beside the file, or --cassette, is a model.
    ybs.file("t.cassette.json", "{\"version\": 1, \"interactions\": []}");
    ybs.run(["validate", "t.yaml"]).expect_code(0);
}

/// A failing policy example is reported at its `line:col` (in the task
/// file, or in the `--policy` file that holds it), one line each, and
/// another file's errors do not hide it.
#[test]
fn policy_example_failures_name_their_place_and_survive_other_files_errors() {
    let ybs = Ybs::new();
    ybs.file(
        "a.yaml",
        "prompt: p\nprovider: ollama\npolicy:\n  allow: [read_file]\n  examples:\n    allow:\n      - write_file(a)\n    deny: [read_file(x), \"run_shell(ls)\"]\n",
    );
    ybs.file("bad.yaml", "prompt: p\nbogus: 1\n");
    ybs.file(
        "policy.yaml",
        "allow: [read_file, list_files]\nexamples:\n  deny: [read_file(src)]\n",
    );
    let run = ybs.run(["validate", "a.yaml", "bad.yaml", "--policy", "policy.yaml"]);
    run.expect_code(2);
    for expected in [
        "bad.yaml:2:1: unknown field `bogus`",
        "a.yaml:7:9: task `a`: policy example fails: example `write_file(a)` should be allow but is deny",
        "a.yaml:8:12: task `a`: policy example fails: example `read_file(x)` should be deny but is allow",
        "policy.yaml:3:10: task `a`: policy example fails: example `read_file(src)` should be deny but is allow",
    ] {
        assert!(run.stderr.contains(expected), "{expected}:\n{}", run.stderr);
    }
    assert!(run.stderr.contains("hint: fix the rules or the examples"));
}

/// Every path under `root`, sorted.
fn tree(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut paths = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            paths.push(path);
        }
    }
    paths.sort();
    paths
}

/// `ybs validate` and `ybs policy explain` open the session a run opens,
/// yet write nothing: no outputs, no step outputs, nothing in the home.
#[test]
fn validate_and_explain_write_nothing() {
    let ybs = Ybs::new()
        .env("GITHUB_OUTPUT", "github-output")
        .env("GITHUB_STEP_SUMMARY", "step-summary");
    ybs.file(
        "t.yaml",
        "prompt: hi\npolicy:\n  allow: [read_file]\n  examples: { allow: [read_file(a.txt)] }\n",
    );
    let before = (tree(ybs.path()), tree(ybs.home()));
    let validated = ybs.run(["validate", "t.yaml", "--provider", "ollama"]);
    assert_eq!(validated.stdout, "ok: 1 file, 1 task valid\n");
    let explained = ybs.run(["policy", "explain", "--task", "t.yaml", "read_file(a.txt)"]);
    assert!(explained.stdout.contains("allow"), "{}", explained.stdout);
    assert_eq!((validated.code, explained.code), (0, 0));
    assert_eq!((tree(ybs.path()), tree(ybs.home())), before);
}
