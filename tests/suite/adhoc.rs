//! Ad-hoc runs (`ybs run --prompt TEXT`): one task without a task file,
//! which runs as the task file `--save FILE` writes does.

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::server::{Reply, Server};
use crate::support::{Run, Ybs, wire};

const PROMPT: &str = "Write hello.txt saying hi.\nThen say done.\n";

/// The model's side of the run: a write (allowed), a push (denied by
/// `--deny`), an echo (allowed by `--allow`), then the final answer.
fn replies() -> Vec<Reply> {
    vec![
        wire::openai_sse_call(
            "call_1",
            "write_file",
            &json!({"path": "hello.txt", "content": "hi\n"}),
        ),
        wire::openai_sse_call(
            "call_2",
            "run_shell",
            &json!({"command": "git push origin main"}),
        ),
        wire::openai_sse_call("call_3", "run_shell", &json!({"command": "echo ok"})),
        wire::openai_sse_answer("done"),
    ]
}

/// The flags that make the task, as a user would type them.
const TASK_FLAGS: &[&str] = &[
    "--allow",
    "write_file",
    "--allow",
    "run_shell(echo *)",
    "--deny",
    "run_shell(git push*)",
    "--check",
    "test \"$(cat hello.txt)\" = hi",
];

fn provider_flags(url: &str) -> Vec<String> {
    ["--provider", "openai", "--endpoint", url, "--model", "m"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// What a run decided and how it ended, from its outputs.
fn outcome(run: &Run, out: &str) -> Value {
    let transcript = run.json(&format!("{out}/prompt/transcript.json"));
    let verdicts: Vec<Value> = transcript["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| json!([call["name"], call["decision"]["verdict"]]))
        .collect();
    let mut checks = transcript["checks"].clone();
    for check in checks.as_array_mut().unwrap() {
        check.as_object_mut().unwrap().remove("duration_ms");
    }
    json!({
        "status": transcript["status"],
        "reason": transcript["reason"],
        "verdicts": verdicts,
        "checks": checks,
    })
}

/// The first request's messages and offered tools: what the model is
/// told, which is the whole task as it sees it.
fn first_request(server: &Server) -> Value {
    let request = server.requests()[0].json();
    json!({"messages": request["messages"], "tools": request["tools"]})
}

#[test]
fn a_prompt_run_and_its_saved_file_decide_and_end_the_same() {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");

    let server = Server::start(replies());
    let url = format!("{}/v1", server.url);
    let mut args: Vec<String> = ["run", "--prompt", PROMPT, "--no-commit", "--out", "one"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(TASK_FLAGS.iter().map(|s| s.to_string()));
    args.extend(provider_flags(&url));
    let adhoc = ybs.run(&args);
    adhoc.expect_code(0);
    let adhoc_outcome = outcome(&adhoc, "one");
    assert_eq!(
        adhoc_outcome["verdicts"],
        json!([
            ["write_file", "allow"],
            ["run_shell", "deny"],
            ["run_shell", "allow"]
        ]),
        "{adhoc_outcome}"
    );
    assert_eq!(adhoc_outcome["status"], "passed", "{adhoc_outcome}");
    // Every output a task file's run writes.
    for file in ["one/junit.xml", "one/summary.md", "one/prompt/events.jsonl"] {
        assert!(ybs.exists(file), "{file} missing:\n{}", adhoc.stderr);
    }
    assert!(ybs.read("one/junit.xml").contains("prompt"));
    let adhoc_request = first_request(&server);

    // The same flags with --save write the file and run nothing.
    let mut save = args.clone();
    save.extend(["--save".to_owned(), "ci.yaml".to_owned()]);
    let saved = ybs.run(&save);
    saved.expect_code(0);
    assert!(saved.stdout.contains("ci.yaml"), "{}", saved.stdout);
    let text = ybs.read("ci.yaml");
    assert!(
        text.contains("prompt: |\n  Write hello.txt saying hi.\n  Then say done.\n"),
        "{text}"
    );
    ybs.run(["validate", "ci.yaml"]).expect_code(0);

    // The saved file runs the same: same request, decisions and outcome.
    std::fs::remove_file(ybs.path().join("hello.txt")).unwrap();
    let server = Server::start(replies());
    let mut args: Vec<String> = ["run", "ci.yaml", "--no-commit", "--out", "two"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(provider_flags(&format!("{}/v1", server.url)));
    let file_run = ybs.run(&args);
    file_run.expect_code(0);
    assert_eq!(outcome(&file_run, "two"), adhoc_outcome);
    assert_eq!(first_request(&server), adhoc_request);
}

#[test]
fn a_prompt_run_without_a_provider_says_which_flag_is_missing() {
    let ybs = Ybs::new();
    let run = ybs.run(["run", "-p", "fix the typo"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("error: --prompt: no model to run with: no provider is set"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("hint: pass --provider openai|anthropic|ollama --model NAME"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("has none beside it"), "{}", run.stderr);
    assert!(!ybs.exists("ybs-out"), "nothing ran");
}

#[test]
fn the_prompt_comes_from_stdin_with_dash_and_save_never_overwrites() {
    let ybs = Ybs::new();
    let mut child = ybs
        .command()
        .args(["run", "-p", "-", "--id", "fix-it", "--save", "fix.yaml"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"fix the \"typo\" in README.md\n")
        .unwrap();
    let run = Run::from_output(child.wait_with_output().unwrap(), ybs.path());
    run.expect_code(0);
    let text = ybs.read("fix.yaml");
    assert!(text.contains("id: \"fix-it\"\n"), "{text}");
    assert!(
        text.contains("prompt: |\n  fix the \"typo\" in README.md\n"),
        "{text}"
    );

    // A second --save to the same path refuses, and the file stays.
    let again = ybs.run(["run", "-p", "other", "--save", "fix.yaml"]);
    again.expect_code(2);
    assert!(
        again.stderr.contains("never overwrites"),
        "{}",
        again.stderr
    );
    assert_eq!(ybs.read("fix.yaml"), text);

    // A rule that cannot be read is refused before anything is written,
    // naming the file the flags make.
    let bad = ybs.run([
        "run",
        "-p",
        "x",
        "--allow",
        "run_shell(",
        "--save",
        "bad.yaml",
    ]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("bad.yaml:"), "{}", bad.stderr);
    assert!(!ybs.exists("bad.yaml"));
}
