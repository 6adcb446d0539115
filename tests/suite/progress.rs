//! What `ybs run` shows while it works (docs/progress.md): bars in a real
//! pseudo-terminal (util-linux `script`), plain lines when piped,
//! `::group::` blocks and step outputs under GitHub Actions, and the
//! colour switches `NO_COLOR`, `CLICOLOR_FORCE` and `TERM=dumb`.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::git::for_task;
use crate::support::Ybs;
use crate::support::cassette::{answer, call};
use crate::support::server::{Reply, Server};

/// Two tasks in their own directories, each calling `run_shell` once
/// (long enough for the bars to turn), then answering; `one` passes its
/// check, `two` fails its.
fn two_tasks() -> Ybs {
    let ybs = Ybs::new();
    ybs.file("a/.keep", "").file("b/.keep", "");
    ybs.file(
        "t.yaml",
        "defaults:\n  model: test-model\n  policy:\n    default: allow\ntasks:\n\
         \x20 - id: one\n    prompt: do one\n    workdir: a\n    checks:\n      - name: ok\n        run: 'true'\n\
         \x20 - id: two\n    prompt: do two\n    workdir: b\n    checks:\n      - name: bad\n        run: 'false'\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "one",
                call("run_shell", json!({"command": "sleep 0.6; echo hi"})),
            ),
            for_task(
                "two",
                call("run_shell", json!({"command": "sleep 0.6; echo hi"})),
            ),
            for_task("one", answer("Done with one.\nAll good.")),
            for_task("two", answer("Done with two.")),
        ],
    );
    ybs
}

const ARGS: &[&str] = &["run", "t.yaml", "--no-commit", "--jobs", "2"];

/// `command` with the variables that steer the display cleared, so the
/// test's own environment does not decide.
fn neutral(mut command: Command) -> Command {
    for name in ["NO_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "GITHUB_ACTIONS"] {
        command.env_remove(name);
    }
    command.env("TERM", "xterm-256color");
    command
}

fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Runs `ybs ARGS` in a pseudo-terminal (stdin, stdout and stderr all on
/// it) through `script`, with `env` added; returns everything the
/// terminal received.
fn in_terminal(ybs: &Ybs, args: &[&str], env: &[(&str, &str)]) -> String {
    let inner = neutral(ybs.command());
    let mut line = quote(&inner.get_program().to_string_lossy());
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    let mut command = Command::new("script");
    command.args(["-qfec", &line, "/dev/null"]);
    command.current_dir(inner.get_current_dir().unwrap());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("util-linux `script` runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn piped(ybs: &Ybs, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = neutral(ybs.command());
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_terminal_shows_a_bar_per_task_that_collapses_into_its_result_line() {
    let ybs = two_tasks();
    let screen = in_terminal(&ybs, ARGS, &[]);
    // The bars are redrawn in place: carriage returns and line clears.
    assert!(screen.contains("\r\x1b[2K"), "{screen:?}");
    // Each task's bar: its step of 25, its tokens, the tool it runs,
    // redrawn while the tool runs, the spinner turning.
    for task in ["one", "two"] {
        let bar = format!("{task}\x1b[0m step 1/25 · 120 tokens · cost unknown · run_shell");
        assert!(screen.matches(&bar).count() >= 2, "{screen:?}");
        let spinner =
            regex::Regex::new(&format!("\x1b\\[36m(.)\x1b\\[0m \x1b\\[1m{task}\x1b")).unwrap();
        let frames: std::collections::BTreeSet<&str> = spinner
            .captures_iter(&screen)
            .map(|found| found.get(1).unwrap().as_str())
            .collect();
        assert!(frames.len() >= 2, "{frames:?} {screen:?}");
    }
    assert!(screen.contains(" · run_shell "), "{screen:?}");
    // One result line per task (coloured), then the run's line.
    assert_eq!(
        screen.matches("PASS\x1b[0m  one  completed").count(),
        1,
        "{screen:?}"
    );
    assert_eq!(
        screen.matches("FAIL\x1b[0m  two  checks_failed").count(),
        1,
        "{screen:?}"
    );
    let last_result = screen
        .rfind("PASS\x1b[0m  one")
        .max(screen.rfind("FAIL\x1b[0m  two"))
        .unwrap();
    // No bar is drawn after the last task's result.
    let after = &screen[last_result..];
    assert!(!after.contains("step "), "{after:?}");
    assert!(
        after.contains("ybs: 2 tasks: 1 passed, 1 failed"),
        "{after:?}"
    );
    // `-v` prints above the bars: the model's text, the tool calls.
    let screen = in_terminal(&ybs, &[ARGS, &["-v"]].concat(), &[]);
    assert!(screen.contains("one · model: Done with one."), "{screen:?}");
    assert!(screen.contains("two · ✓ run_shell"), "{screen:?}");
}

#[test]
fn piped_the_same_run_prints_plain_lines_and_no_escape_sequence() {
    let ybs = two_tasks();
    let (code, stdout, stderr) = piped(&ybs, ARGS, &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(!text.contains('\x1b'), "{stream}: {text:?}");
        assert!(!text.contains('\r'), "{stream}: {text:?}");
    }
    for task in ["one", "two"] {
        let lines: Vec<&str> = stdout
            .lines()
            .filter(|line| {
                line.contains(&format!(" {task} ")) || line.contains(&format!(" {task}  "))
            })
            .collect();
        // Started; one line for the tool call, with verdict and duration;
        // the check; the result.
        assert!(
            lines[0].starts_with(&format!("RUN   {task}  (replay/test-model)")),
            "{stdout}"
        );
        let tool = regex::Regex::new(&format!(
            r#"^  {task} · ✓ run_shell \{{"command":"sleep 0.6; echo hi"\}}  \[allow: default\] \d+ms$"#
        ))
        .unwrap();
        assert!(lines.iter().any(|line| tool.is_match(line)), "{stdout}");
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with(&format!("  {task} · check `"))),
            "{stdout}"
        );
        assert_eq!(
            stdout
                .lines()
                .filter(|line| line.starts_with("PASS  ") || line.starts_with("FAIL  "))
                .filter(|line| line.contains(&format!("  {task}  ")))
                .count(),
            1,
            "{stdout}"
        );
    }
    // The model's text only with -v.
    assert!(!stdout.contains("model: "), "{stdout}");
    let (_, verbose, _) = piped(&ybs, &[ARGS, &["-v"]].concat(), &[]);
    assert!(
        verbose.contains("  one · model: Done with one.\n  one · model: All good.\n"),
        "{verbose}"
    );
    // -q: the failure and the run's line, nothing while it works.
    let (_, quiet, _) = piped(&ybs, &[ARGS, &["-q"]].concat(), &[]);
    assert_eq!(quiet.lines().count(), 2, "{quiet}");
    assert!(quiet.starts_with("FAIL  two"), "{quiet}");
    // --json: stdout holds events only, whatever the live view does.
    let (_, json, _) = piped(&ybs, &[ARGS, &["--json"]].concat(), &[]);
    assert!(json.lines().count() > 10, "{json}");
    for line in json.lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "{line}"
        );
    }
}

#[test]
fn under_github_actions_each_task_is_a_group_and_the_results_are_step_outputs() {
    let ybs = two_tasks();
    let outputs = ybs.path().join("github_output");
    std::fs::write(&outputs, "earlier=1\n").unwrap();
    let (code, stdout, _) = piped(
        &ybs,
        ARGS,
        &[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_OUTPUT", outputs.to_str().unwrap()),
        ],
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
    // Every line of a task inside its group; groups never interleave; the
    // result after the group, the failure annotated.
    let mut open: Option<String> = None;
    let mut groups = Vec::new();
    for line in stdout.lines() {
        if let Some(task) = line.strip_prefix("::group::") {
            assert!(open.is_none(), "nested group at {line}\n{stdout}");
            open = Some(task.to_owned());
            groups.push(task.to_owned());
        } else if line == "::endgroup::" {
            assert!(open.take().is_some(), "{stdout}");
        } else if let Some(task) = &open {
            assert!(
                line.starts_with(&format!("RUN   {task}  "))
                    || line.starts_with(&format!("  {task} · ")),
                "{line} in group {task}\n{stdout}"
            );
        } else {
            assert!(
                line.starts_with("PASS  one")
                    || line.starts_with("FAIL  two")
                    || line.starts_with("::error title=ybs two::")
                    || line.starts_with("ybs: 2 tasks"),
                "{line} outside a group\n{stdout}"
            );
        }
    }
    assert!(open.is_none(), "{stdout}");
    groups.sort();
    assert_eq!(groups, ["one", "two"], "{stdout}");
    // The step outputs, appended.
    let text = std::fs::read_to_string(&outputs).unwrap();
    let values = parse_outputs(&text);
    let expected = [
        ("earlier", "1"),
        ("status", "failed"),
        ("passed", "1"),
        ("failed", "1"),
        ("errors", "0"),
        ("paused", "0"),
        ("skipped", "0"),
        ("junit", "ybs-out/junit.xml"),
        ("summary", "ybs-out/summary.md"),
        ("out", "ybs-out"),
        // Two tasks: no one answer to name.
        ("output", ""),
    ];
    assert_eq!(
        values,
        expected
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        "{text}"
    );
    // `ybs report merge` writes the same outputs for the merged run.
    std::fs::write(&outputs, "").unwrap();
    let (code, stdout, stderr) = piped(
        &ybs,
        &["report", "merge", "ybs-out", "--out", "merged"],
        &[("GITHUB_OUTPUT", outputs.to_str().unwrap())],
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let values = parse_outputs(&std::fs::read_to_string(&outputs).unwrap());
    assert_eq!(values["status"], "failed");
    assert_eq!(values["passed"], "1");
    assert_eq!(values["failed"], "1");
    assert_eq!(values["out"], "merged");
    assert_eq!(values["junit"], "merged/junit.xml");
}

/// A `GITHUB_OUTPUT` file: `name=value` lines and `name<<DELIM` blocks.
fn parse_outputs(text: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((name, delimiter)) = line.split_once("<<") {
            let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delimiter).collect();
            values.insert(name.to_owned(), value.join("\n"));
        } else if let Some((name, value)) = line.split_once('=') {
            values.insert(name.to_owned(), value.to_owned());
        }
    }
    values
}

#[test]
fn no_color_clicolor_force_and_a_dumb_terminal_are_honoured() {
    let ybs = two_tasks();
    let colour = "\x1b[1;32mPASS";
    // NO_COLOR: bars still move, nothing is coloured.
    let screen = in_terminal(&ybs, ARGS, &[("NO_COLOR", "1")]);
    assert!(screen.contains("\r\x1b[2K"), "{screen:?}");
    assert!(!screen.contains("\x1b[1;"), "{screen:?}");
    assert!(!screen.contains("\x1b[36m"), "{screen:?}");
    assert!(screen.contains("PASS  one"), "{screen:?}");
    // NO_COLOR wins over CLICOLOR_FORCE.
    let screen = in_terminal(&ybs, ARGS, &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")]);
    assert!(!screen.contains(colour), "{screen:?}");
    // CLICOLOR_FORCE colours a pipe, but draws no bar there.
    let (_, stdout, stderr) = piped(&ybs, ARGS, &[("CLICOLOR_FORCE", "1")]);
    assert!(stdout.contains(colour), "{stdout:?}");
    assert!(
        !stdout.contains('\r') && !stderr.contains('\x1b'),
        "{stdout:?}{stderr:?}"
    );
    // TERM=dumb: plain lines on the terminal, no bar, no colour.
    let screen = in_terminal(&ybs, ARGS, &[("TERM", "dumb")]);
    assert!(!screen.contains('\x1b'), "{screen:?}");
    assert!(!screen.contains("step "), "{screen:?}");
    assert!(screen.contains("RUN   one"), "{screen:?}");
}

/// One OpenAI chunk of streamed text.
fn text_chunk(text: &str) -> String {
    let chunk = json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

#[test]
fn verbose_streams_the_model_text_line_by_line_as_it_arrives_masking_secrets() {
    // The first line arrives, the model "thinks" for two seconds, then the
    // rest. A key ybs holds comes split across two chunks of one line.
    let key = "sk-canary-progress-5e1d7a90c3";
    let end: Vec<Value> = vec![
        json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
    ];
    let mut reply = Reply::new(200, "text/event-stream")
        .send(text_chunk("Looking at "))
        .send(text_chunk("the code.\nThe key is sk-canary-pro"))
        .send(text_chunk("gress-5e1d7a90c3 here.\n"))
        .pause(Duration::from_secs(2))
        .send(text_chunk("All done"));
    for chunk in &end {
        reply = reply.send(format!("data: {chunk}\n\n"));
    }
    let server = Server::start(vec![reply.send("data: [DONE]\n\n")]);
    let ybs = Ybs::new().env("OPENAI_API_KEY", key);
    ybs.file("t.yaml", "prompt: look\npolicy:\n  default: allow\n");
    let mut command = neutral(ybs.command());
    command
        .args([
            "run",
            "t.yaml",
            "-v",
            "--no-commit",
            "--provider",
            "openai",
            "--model",
            "m",
        ])
        .args(["--endpoint", &format!("{}/v1", server.url)])
        .stdout(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    let mut seen: Vec<(Duration, String)> = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        seen.push((started.elapsed(), line.unwrap()));
    }
    assert!(child.wait().unwrap().success(), "{seen:?}");
    let at = |text: &str| {
        seen.iter()
            .find(|(_, line)| line == text)
            .unwrap_or_else(|| panic!("no line {text:?} in {seen:?}"))
            .0
    };
    let first = at("  t · model: Looking at the code.");
    let masked = at("  t · model: The key is [REDACTED] here.");
    let last = at("  t · model: All done");
    assert!(last >= first + Duration::from_millis(1500), "{seen:?}");
    assert!(masked <= first + Duration::from_millis(1000), "{seen:?}");
    // Each line once; the key nowhere.
    let printed: Vec<&str> = seen.iter().map(|(_, line)| line.as_str()).collect();
    assert_eq!(
        printed.iter().filter(|l| l.contains("model: ")).count(),
        3,
        "{printed:?}"
    );
    assert!(
        !printed.iter().any(|l| l.contains("canary-pro")),
        "{printed:?}"
    );
    // Not in the event files either: the lines are for the console only.
    let events = ybs.read("ybs-out/t/events.jsonl");
    assert!(!events.contains("\"text\""), "{events}");
}
