//! `ybs run` end to end with the replay provider (issue 2, acceptance 1, 3, 4).

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, call, calls};
use crate::support::{git, task_yaml, tool_calls};

fn junit(ybs: &Ybs) -> String {
    let xml = ybs.read("ybs-out/junit.xml");
    well_formed(&ybs.path().join("ybs-out/junit.xml"));
    xml
}

/// Parses the XML with Python's expat: a real, independent parser.
pub fn well_formed(path: &std::path::Path) {
    let status = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])",
        ])
        .arg(path)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "{} is not well-formed XML",
        path.display()
    );
}

#[test]
fn demo_task_from_the_repository_passes() {
    let ybs = Ybs::new();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    ybs.file(
        "tasks/demo.yaml",
        &std::fs::read_to_string(repo.join("tasks/demo.yaml")).unwrap(),
    );
    ybs.file(
        "tasks/demo.cassette.json",
        &std::fs::read_to_string(repo.join("tasks/demo.cassette.json")).unwrap(),
    );
    ybs.file(
        "work/hello.sh",
        &std::fs::read_to_string(repo.join("tasks/demo/hello.sh")).unwrap(),
    );
    let workdir = ybs.path().join("work");
    let run = ybs.run([
        "run",
        "tasks/demo.yaml",
        "--var",
        &format!("workdir={}", workdir.display()),
    ]);
    run.expect_code(0);
    assert!(ybs.read("work/hello.sh").contains("Hello, world!"));
    let transcript = run.json("ybs-out/fix-greeting/transcript.json");
    assert_eq!(transcript["status"], "passed");
    assert_eq!(transcript["schema_version"], 1);
    assert!(ybs.exists("ybs-out/fix-greeting/events.jsonl"));
    assert!(junit(&ybs).contains("fix-greeting"));
    assert!(ybs.exists("ybs-out/summary.md"));
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The README's demo command, run as is (its `ybs` part) in a fresh
/// clone-like checkout holding the repository's tasks/: it passes twice
/// in a row and leaves the checkout as it was.
#[test]
fn the_readme_demo_runs_twice_in_a_clean_checkout_and_leaves_it_clean() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let demo = readme
        .lines()
        .find_map(|line| line.strip_prefix("cargo run -q -- "))
        .expect("the README's demo line");
    let args: Vec<&str> = demo.split_whitespace().collect();
    let ybs = Ybs::new();
    copy_tree(&repo.join("tasks"), &ybs.path().join("tasks"));
    std::fs::copy(repo.join(".gitignore"), ybs.path().join(".gitignore")).unwrap();
    git(ybs.path(), &["init", "-q", "-b", "main"]);
    git(ybs.path(), &["add", "-A"]);
    git(
        ybs.path(),
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "clone",
        ],
    );
    for attempt in 1..=2 {
        let run = ybs.run(&args);
        run.expect_code(0);
        let transcript = run.json("ybs-out/fix-greeting/transcript.json");
        assert_eq!(transcript["status"], "passed", "run {attempt}");
        assert_eq!(
            git(
                ybs.path(),
                &["status", "--porcelain", "--untracked-files=all"]
            ),
            "",
            "run {attempt} left the checkout dirty"
        );
    }
    assert_eq!(
        ybs.read("tasks/demo/hello.sh"),
        std::fs::read_to_string(repo.join("tasks/demo/hello.sh")).unwrap()
    );
}

#[test]
fn passing_task_records_every_tool_call() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &task_yaml("checks:\n  - name: file exists\n    run: test -f out.txt\n"),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "out.txt", "content": "hi\n"})),
            answer("wrote out.txt"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(ybs.read("out.txt"), "hi\n");
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "passed");
    assert_eq!(transcript["task"]["id"], "t");
    assert_eq!(transcript["iterations"], 2);
    let calls = tool_calls(&transcript);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "write_file");
    assert_eq!(calls[0]["arguments"]["path"], "out.txt");
    assert_eq!(calls[0]["decision"]["verdict"], "allow");
    assert_eq!(calls[0]["result"]["ok"], true);
    assert!(calls[0]["duration_ms"].is_u64());
    assert_eq!(transcript["checks"][0]["passed"], true);
    assert!(transcript["manifest"]["ybs_version"].is_string());
    let xml = junit(&ybs);
    assert!(
        xml.contains("testcase") && xml.contains("name=\"t\""),
        "{xml}"
    );
    assert!(!xml.contains("<failure"), "{xml}");
    let events = run.events("t");
    assert_eq!(events.first().unwrap()["type"], "task.started");
    assert_eq!(events.last().unwrap()["type"], "task.finished");
}

#[test]
fn failing_check_fails_the_task_and_names_the_check() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &task_yaml("checks:\n  - name: needs-out-file\n    run: test -f out.txt\n"),
    );
    ybs.cassette("t.cassette.json", vec![answer("done, I think")]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "failed");
    assert_eq!(transcript["reason"], "checks_failed");
    assert_eq!(transcript["checks"][0]["exit_code"], 1);
    let xml = junit(&ybs);
    assert!(xml.contains("<failure"), "{xml}");
    assert!(xml.contains("checks_failed"), "{xml}");
    assert!(xml.contains("needs-out-file"), "{xml}");
}

#[test]
fn fix_attempt_turns_a_failing_check_into_a_pass() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &task_yaml("fix_attempts: 1\nchecks:\n  - name: out\n    run: test -f out.txt\n"),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            answer("done"),
            call("write_file", json!({"path": "out.txt", "content": "x"})),
            answer("now really done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "passed");
    let checks = transcript["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0]["passed"], false);
    assert_eq!(checks[1]["passed"], true);
    let fed_back = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "user" && m["content"].as_str().unwrap().contains("check `out`"));
    assert!(
        fed_back,
        "the failing check's output must go back to the model"
    );
}

#[test]
fn expect_fail_passes_when_the_task_fails() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &task_yaml("expect: fail\nchecks:\n  - run: \"false\"\n"),
    );
    ybs.cassette("t.cassette.json", vec![answer("I refuse")]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "passed");
    assert_eq!(transcript["expect"], "fail");

    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml("expect: fail\n"));
    ybs.cassette("t.cassette.json", vec![answer("sure, done")]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_eq!(
        run.json("ybs-out/t/transcript.json")["reason"],
        "expectation_not_met"
    );
}

#[test]
fn max_iterations_stops_the_task() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml("limits: { max_iterations: 2 }\n"));
    ybs.file("a.txt", "a\n");
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("read_file", json!({"path": "a.txt"})),
            call("list_files", json!({"pattern": "*"})),
            call("read_file", json!({"path": "a.txt", "limit": 1})),
            answer("never reached"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "max_iterations");
    assert_eq!(transcript["iterations"], 2);
    let xml = junit(&ybs);
    assert!(xml.contains("max_iterations"), "{xml}");
}

#[test]
fn the_same_call_three_times_is_a_loop() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.file("a.txt", "a\n");
    let same = || call("read_file", json!({"path": "a.txt"}));
    ybs.cassette(
        "t.cassette.json",
        vec![same(), same(), same(), answer("never")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "loop_detected");
    assert!(junit(&ybs).contains("loop_detected"));
}

#[test]
fn a_tool_error_goes_back_to_the_model() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("read_file", json!({"path": "missing.txt"})),
            answer("the file does not exist"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let calls = tool_calls(&transcript);
    assert_eq!(calls[0]["result"]["ok"], false);
    let tool_message = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    assert_eq!(tool_message["is_error"], true);
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("missing.txt")
    );
}

#[test]
fn long_tool_output_is_truncated_with_a_marker() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &task_yaml("limits: { max_tool_output_chars: 200 }\n"),
    );
    ybs.file("big.txt", &"0123456789\n".repeat(500));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("read_file", json!({"path": "big.txt"})),
            answer("read it"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let result = &tool_calls(&transcript)[0]["result"];
    assert_eq!(result["truncated"], true);
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("truncated"), "{output}");
    assert!(output.len() < 400, "{}", output.len());
}

#[test]
fn several_calls_in_one_turn_all_run() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("write_file", json!({"path": "a.txt", "content": "a"})),
                ("write_file", json!({"path": "b.txt", "content": "b"})),
            ]),
            answer("both written"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(ybs.read("a.txt"), "a");
    assert_eq!(ybs.read("b.txt"), "b");
}

#[test]
fn denied_call_is_explained_to_the_model() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: p\npolicy:\n  allow: [read_file]\n");
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "x.txt", "content": "x"})),
            answer("could not write"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("x.txt"));
    let transcript = run.json("ybs-out/t/transcript.json");
    let entry = &tool_calls(&transcript)[0];
    assert_eq!(entry["decision"]["verdict"], "deny");
    assert_eq!(entry["decision"]["rule"], "default");
    assert_eq!(entry["result"]["ran"], false);
    assert!(
        entry["result"]["output"]
            .as_str()
            .unwrap()
            .contains("denied by policy")
    );
}

#[test]
fn dry_run_decides_but_does_not_execute() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "x.txt", "content": "x"})),
            answer("ok"),
        ],
    );
    let run = ybs.run(["run", "t.yaml", "--dry-run"]);
    run.expect_code(0);
    assert!(!ybs.exists("x.txt"));
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(tool_calls(&transcript)[0]["result"]["ran"], false);
    assert_eq!(transcript["manifest"]["dry_run"], true);
}

#[test]
fn json_mode_prints_only_events_on_stdout() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    let run = ybs.run(["run", "t.yaml", "--json"]);
    run.expect_code(0);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.first().unwrap()["type"], "task.started");
    assert_eq!(lines.last().unwrap()["type"], "task.finished");
}

#[test]
fn exhausted_cassette_is_a_provider_error() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette("t.cassette.json", vec![]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(4);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "error");
    assert_eq!(transcript["reason"], "provider_error");
    assert!(junit(&ybs).contains("<error"));
}

#[test]
fn filter_selects_tasks_and_outputs_cover_two_files() {
    let ybs = Ybs::new();
    ybs.file(
        "tasks/a.yaml",
        "tasks:\n  - id: one\n    prompt: p\n  - id: two\n    prompt: p\n    checks: [{run: \"false\"}]\n",
    );
    ybs.file("tasks/b.yaml", "prompt: p\n");
    ybs.cassette("answers.json", vec![answer("a"), answer("b"), answer("c")]);
    let run = ybs.run(["run", "tasks", "--cassette", "answers.json"]);
    run.expect_code(1);
    let xml = junit(&ybs);
    assert_eq!(xml.matches("<testsuite ").count(), 2, "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("one") && summary.contains("two") && summary.contains('b'));

    let ybs2 = Ybs::new();
    ybs2.file(
        "tasks/a.yaml",
        "tasks:\n  - id: one\n    prompt: p\n  - id: two\n    prompt: p\n",
    );
    ybs2.cassette("answers.json", vec![answer("a")]);
    let run = ybs2.run([
        "run",
        "tasks",
        "--cassette",
        "answers.json",
        "--filter",
        "o*",
    ]);
    run.expect_code(0);
    assert!(ybs2.exists("ybs-out/one/transcript.json"));
    assert!(!ybs2.exists("ybs-out/two"));
}

#[test]
fn sigint_stops_the_run_and_still_writes_outputs() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml("commit: false\n"));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "run_shell",
                json!({"command": "sleep 37.5", "timeout_seconds": 60}),
            ),
            answer("never"),
        ],
    );
    let mut child = ybs.command().args(["run", "t.yaml"]).spawn().unwrap();
    // Wait until the tool is running, then interrupt.
    let started = std::time::Instant::now();
    while !ybs.exists("ybs-out/t/events.jsonl")
        || !ybs.read("ybs-out/t/events.jsonl").contains("tool.decided")
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the tool never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let transcript = ybs.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "interrupted");
    assert!(junit(&ybs).contains("interrupted"));
    // The tool's process went with the run.
    let leftover = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.unwrap().path().join("cmdline")).ok())
        .any(|cmdline| String::from_utf8_lossy(&cmdline).contains("37.5"));
    assert!(!leftover, "the interrupted tool's `sleep` is still running");
}

#[test]
fn task_timeout_stops_a_long_tool_call() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &task_yaml("commit: false\nlimits: { timeout: 1s }\n"),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "run_shell",
                json!({"command": "sleep 20", "timeout_seconds": 60}),
            ),
            answer("never"),
        ],
    );
    let started = std::time::Instant::now();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "timeout");
}

#[test]
fn token_budget_stops_the_task() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &task_yaml("commit: false\nlimits: { max_total_tokens: 150 }\n"),
    );
    ybs.file("a.txt", "a");
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("read_file", json!({"path": "a.txt"})),
            call("list_files", json!({"pattern": "*"})),
            answer("never"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_eq!(
        run.json("ybs-out/t/transcript.json")["reason"],
        "token_budget"
    );
}

#[test]
fn a_mistyped_command_suggests_the_one_meant() {
    let ybs = Ybs::new();
    let run = ybs.run(["rn", "tasks/"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("hint: a similar subcommand exists: 'run'"),
        "{}",
        run.stderr
    );
    // Only a top-level command is suggested for a top-level typo.
    let run = ybs.run(["tools", "rn"]);
    run.expect_code(2);
    assert!(!run.stderr.contains("'run'"), "{}", run.stderr);
}

#[test]
fn a_flag_value_that_does_not_parse_says_what_was_expected() {
    let ybs = Ybs::new();
    for (flag, value, expected) in [
        ("--var", "NOEQUALS", "expected KEY=VALUE, got `NOEQUALS`"),
        (
            "--max-cost-usd",
            "0",
            "expected an amount in USD above 0, like 2.50, got `0`",
        ),
        (
            "--min-pass-rate",
            "1.5",
            "expected a pass rate from 0 to 1, e.g. 0.8, got `1.5`",
        ),
        (
            "--shard",
            "3/2",
            "shard 3 of 2 does not exist: K must be between 1 and N, e.g. `1/2`",
        ),
    ] {
        let run = ybs.run(["run", flag, value, "tasks/"]);
        run.expect_code(2);
        assert!(
            run.stderr
                .contains(&format!("invalid value '{value}' for '{flag} ")),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains(expected), "{flag}: {}", run.stderr);
    }
}
