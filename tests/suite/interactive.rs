//! `--interactive` (docs/policy.md, docs/interactive.md; docs/security.md S3): `ask` decisions answered at
//! a prompt on a real pseudo-terminal; without a terminal, a usage error at
//! once, stdin never read.

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, call};
use crate::support::server::{Reply, Server};
use crate::support::tool_calls;

const TASK: &str = "prompt: p\ncommit: false\npolicy:\n  allow: [read_file]\n  ask: [write_file]\n";

/// A task whose model writes `a.txt`, then `b.txt`, then answers.
fn two_writes() -> Ybs {
    let ybs = Ybs::new();
    ybs.file("t.yaml", TASK);
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "a.txt", "content": "x"})),
            call("write_file", json!({"path": "b.txt", "content": "y"})),
            answer("done"),
        ],
    );
    ybs
}

/// What a run on a terminal did: the exit code and everything the
/// terminal showed (stderr, and the echo of what was typed).
struct TtyRun {
    code: i32,
    terminal: String,
    /// When each piece of `terminal` was read: (since start, bytes so far).
    arrivals: Vec<(Duration, usize)>,
}

impl TtyRun {
    /// How long after the start `text` was on the terminal.
    fn seen_at(&self, text: &str) -> Duration {
        let end = self
            .terminal
            .find(text)
            .unwrap_or_else(|| panic!("no {text:?} in:\n{}", self.terminal))
            + text.len();
        self.arrivals
            .iter()
            .find(|(_, read)| *read >= end)
            .map(|(at, _)| *at)
            .unwrap()
    }
}

/// Runs `ybs ARGS` with stdin and stderr on a fresh pseudo-terminal and
/// `typed` already typed on it; stdout is a pipe. Killed after 60s.
fn run_on_tty(ybs: &Ybs, args: &[&str], typed: &[u8]) -> TtyRun {
    on_tty(ybs, args, typed, false)
}

/// As [`run_on_tty`], stdout optionally on the terminal too (`ybs chat`),
/// with `TERM=dumb`: the line editor reads plain lines.
fn on_tty(ybs: &Ybs, args: &[&str], typed: &[u8], stdout_too: bool) -> TtyRun {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut command = ybs.command();
    command
        .args(args)
        .env("TERM", "dumb")
        .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(if stdout_too {
            Stdio::from(pty.slave.try_clone().unwrap())
        } else {
            Stdio::null()
        });
    let mut child = command.spawn().unwrap();
    drop(command);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    master.write_all(typed).unwrap();
    let mut reader = master.try_clone().unwrap();
    let started = Instant::now();
    let drain = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut arrivals = Vec::new();
        let mut buffer = [0u8; 4096];
        // EIO once every copy of the slave is closed: the child is gone.
        while let Ok(n @ 1..) = reader.read(&mut buffer) {
            seen.extend_from_slice(&buffer[..n]);
            arrivals.push((started.elapsed(), seen.len()));
        }
        (String::from_utf8_lossy(&seen).into_owned(), arrivals)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ybs --interactive did not finish within 60s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(master);
    let (terminal, arrivals) = drain.join().unwrap();
    TtyRun {
        code: status.code().unwrap_or(-1),
        terminal,
        arrivals,
    }
}

fn tool_message(transcript: &Value, index: usize) -> String {
    transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .nth(index)
        .unwrap_or_else(|| panic!("no tool message {index}"))["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn interactive_without_a_terminal_is_a_usage_error_at_once() {
    let ybs = two_writes();
    let started = Instant::now();
    let run = ybs.run(["run", "--interactive", "t.yaml"]);
    run.expect_code(2);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        run.stderr
            .contains("error: --interactive needs a terminal (stdin is not a TTY)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);
    assert!(!ybs.exists("ybs-out"), "nothing may run");
    // An answer waiting on a pipe is never read (S3).
    let output = ybs
        .command()
        .args(["run", "--interactive", "t.yaml"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            // ybs may exit before the write: a broken pipe only shows it
            // never waited for the answer.
            let _ = child.stdin.take().unwrap().write_all(b"y\ny\n");
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(!ybs.exists("a.txt"));
}

#[test]
fn stderr_must_be_a_terminal_too() {
    let ybs = two_writes();
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let output = ybs
        .command()
        .args(["run", "--interactive", "t.yaml"])
        .stdin(Stdio::from(pty.slave))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("(stderr is not a TTY)"), "{stderr}");
}

#[test]
fn yes_runs_the_call_and_no_declines_it() {
    let ybs = two_writes();
    let run = run_on_tty(&ybs, &["run", "--interactive", "t.yaml"], b"y\nn\n\n");
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert!(
        run.terminal
            .contains("ybs: approval needed: write_file(a.txt)"),
        "{}",
        run.terminal
    );
    assert!(run.terminal.contains("rule `ask[0] write_file`"));
    assert!(run.terminal.contains("[y]es / [n]o / [a]lways?"));
    assert_eq!(ybs.read("a.txt"), "x");
    assert!(!ybs.exists("b.txt"));
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let calls = tool_calls(&transcript);
    assert_eq!(calls[0]["decision"]["verdict"], "allow");
    assert_eq!(
        calls[0]["decision"]["rule"],
        "ask[0] write_file (approved interactively)"
    );
    assert_eq!(calls[0]["result"]["ran"], true);
    assert_eq!(calls[1]["decision"]["verdict"], "deny");
    assert_eq!(
        calls[1]["decision"]["rule"],
        "ask[0] write_file (declined interactively)"
    );
    assert_eq!(calls[1]["result"]["ran"], false);
    let told = tool_message(&transcript, 1);
    assert!(told.contains("the user declined"), "{told}");
    assert!(told.contains("not run"), "{told}");
}

#[test]
fn always_approves_the_rule_for_the_rest_of_the_run_and_asks_once() {
    let ybs = two_writes();
    let run = run_on_tty(
        &ybs,
        &["run", "--interactive", "t.yaml"],
        b"what\nalways\n\n",
    );
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert!(
        run.terminal.contains("answer y, n or a"),
        "{}",
        run.terminal
    );
    assert_eq!(
        run.terminal.matches("approval needed").count(),
        1,
        "{}",
        run.terminal
    );
    assert_eq!(ybs.read("a.txt"), "x");
    assert_eq!(ybs.read("b.txt"), "y");
    let transcript = ybs.json("ybs-out/t/transcript.json");
    for entry in tool_calls(&transcript) {
        assert_eq!(entry["decision"]["verdict"], "allow");
        assert_eq!(
            entry["decision"]["rule"],
            "ask[0] write_file (approved interactively, always)"
        );
    }
}

#[test]
fn end_of_input_declines() {
    let ybs = two_writes();
    // Ctrl-D at the start of a line: end of input on a terminal.
    let run = run_on_tty(&ybs, &["run", "--interactive", "t.yaml"], b"\x04");
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert!(run.terminal.contains("declined"), "{}", run.terminal);
    assert!(!ybs.exists("a.txt"));
}

/// A task that answers at once, then writes `c.txt` when asked for more.
fn answers_then_writes() -> Ybs {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [read_file, write_file]\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            answer("first answer"),
            call("write_file", json!({"path": "c.txt", "content": "z"})),
            answer("second answer"),
        ],
    );
    ybs
}

#[test]
fn after_the_task_stops_the_user_may_continue_the_conversation() {
    let ybs = answers_then_writes();
    let run = run_on_tty(
        &ybs,
        &["run", "--interactive", "t.yaml"],
        b"now write c\n\n",
    );
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert!(run.terminal.contains("first answer"), "{}", run.terminal);
    assert!(run.terminal.contains("second answer"), "{}", run.terminal);
    assert_eq!(
        run.terminal.matches("continue the conversation?").count(),
        2,
        "{}",
        run.terminal
    );
    assert_eq!(ybs.read("c.txt"), "z");
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let said: Vec<&str> = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(said, ["p", "now write c"], "{transcript}");
    assert_eq!(transcript["status"], "passed");
}

#[test]
fn exit_at_the_follow_up_prompt_finishes_the_task() {
    let ybs = answers_then_writes();
    let run = run_on_tty(&ybs, &["run", "--interactive", "t.yaml"], b"/exit\n");
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert!(run.terminal.contains("first answer"), "{}", run.terminal);
    assert!(!ybs.exists("c.txt"));
    // Headless, the same task never asks.
    let ybs = answers_then_writes();
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert!(!ybs.exists("c.txt"));
}

/// `/help` and `/model` at the follow-up prompt are answered there, not
/// sent to the model; the prompt comes again and the next plain line is
/// the message.
#[test]
fn help_and_model_at_the_follow_up_prompt_are_commands() {
    let ybs = answers_then_writes();
    let run = run_on_tty(
        &ybs,
        &["run", "--interactive", "t.yaml"],
        b"/help\n/model gpt-4.1\n/tools\nnow write c\n/exit\n",
    );
    assert_eq!(run.code, 0, "{}", run.terminal);
    for expected in [
        "/exit       finish the task",
        "/model      a task keeps its model",
        "a task keeps the model it started with",
        "unknown command /tools; /help lists the commands",
        "second answer",
    ] {
        assert!(
            run.terminal.contains(expected),
            "{expected}:\n{}",
            run.terminal
        );
    }
    assert_eq!(ybs.read("c.txt"), "z");
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let said: Vec<&str> = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(said, ["p", "now write c"], "{transcript}");
}

// ---------------------------------------------------------------------------
// ybs chat

#[test]
fn chat_without_a_terminal_is_a_usage_error_at_once() {
    let ybs = Ybs::new();
    ybs.cassette("c.json", vec![answer("never")]);
    let run = ybs.run(["chat", "--cassette", "c.json"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("error: ybs chat needs a terminal (stdin is not a TTY)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);
}

#[test]
fn chat_talks_runs_tools_and_answers_its_commands() {
    let ybs = Ybs::new();
    ybs.file("notes.txt", "the notes\n");
    ybs.cassette(
        "c.json",
        vec![
            answer("hello human"),
            call("read_file", json!({"path": "notes.txt"})),
            answer("read it"),
            answer("said again"),
        ],
    );
    let typed = b"hi\n/tools\n/policy\n/config\n/bogus\nread notes\n/retry\n\
/provider nope\n/provider replay\n/model m2\n/help\n/exit\n";
    let run = on_tty(&ybs, &["chat", "--cassette", "c.json"], typed, true);
    assert_eq!(run.code, 0, "{}", run.terminal);
    let seen = &run.terminal;
    for expected in [
        "hello human",
        "read_file, write_file, edit_file, list_files, search_files, run_shell",
        "provider replay",
        "unknown command or wrong arguments: /bogus",
        "read_file {\"path\":\"notes.txt\"}  [allow",
        "read it",
        // /retry asked again for the last answer.
        "said again",
        // A provider that cannot be built leaves the chat as it was.
        "cannot switch to nope/replay",
        "now replay/m2",
        "/provider NAME [MODEL]",
    ] {
        assert!(seen.contains(expected), "missing {expected:?} in:\n{seen}");
    }
    // The order of events: the answer to /retry came after the tool call.
    assert!(seen.find("read it").unwrap() < seen.find("said again").unwrap());
}

#[test]
fn chat_asks_before_any_call_the_read_only_tools_do_not_cover() {
    let ybs = Ybs::new();
    ybs.cassette(
        "c.json",
        vec![
            call("write_file", json!({"path": "w.txt", "content": "w"})),
            answer("wrote"),
            call("run_shell", json!({"command": "touch s.txt"})),
            answer("did not"),
        ],
    );
    let typed = b"write it\ny\nnow touch\nn\n/exit\n";
    let run = on_tty(&ybs, &["chat", "--cassette", "c.json"], typed, true);
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert!(
        run.terminal
            .contains("ybs: approval needed: write_file(w.txt)"),
        "{}",
        run.terminal
    );
    assert!(run.terminal.contains("rule `default`"), "{}", run.terminal);
    assert_eq!(ybs.read("w.txt"), "w");
    assert!(!ybs.exists("s.txt"));
    assert!(run.terminal.contains("did not"), "{}", run.terminal);
}

#[test]
fn interactive_and_parallel_jobs_do_not_mix() {
    let ybs = crate::support::Ybs::new();
    ybs.file("t.yaml", "prompt: p\n");
    let run = ybs.run(["run", "t.yaml", "--interactive", "--jobs", "2"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("cannot be combined with --jobs"),
        "{}",
        run.stderr
    );
    assert!(!ybs.exists("ybs-out"));
}

/// One OpenAI chunk of streamed text.
fn text_chunk(text: &str) -> String {
    let chunk = json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

#[test]
fn chat_shows_the_answer_as_it_streams_in_and_once() {
    let end = json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let reply = Reply::new(200, "text/event-stream")
        .send(text_chunk("First line of the answer.\nSecond "))
        .send(text_chunk("line.\n"))
        .pause(Duration::from_secs(2))
        .send(text_chunk("The end, unterminated"))
        .send(format!("data: {end}\n\ndata: [DONE]\n\n"));
    let server = Server::start(vec![reply]);
    let ybs = Ybs::new();
    let endpoint = format!("{}/v1", server.url);
    let args = [
        "chat",
        "--provider",
        "openai",
        "--model",
        "m",
        "--endpoint",
        endpoint.as_str(),
    ];
    let run = on_tty(&ybs, &args, b"tell me\n/exit\n", true);
    assert_eq!(run.code, 0, "{}", run.terminal);
    for line in [
        "First line of the answer.",
        "Second line.",
        "The end, unterminated",
    ] {
        assert_eq!(
            run.terminal.matches(line).count(),
            1,
            "{line:?} once in:\n{}",
            run.terminal
        );
    }
    // The first lines showed while the model was still writing.
    let first = run.seen_at("Second line.");
    let last = run.seen_at("The end, unterminated");
    assert!(
        last >= first + Duration::from_millis(1500),
        "{first:?} {last:?}:\n{}",
        run.terminal
    );
}

/// Issue 21, item 1: the model's text streams to the terminal one line at
/// a time; a private key it writes spans lines, none of which shows the
/// block whole. Every line of the block is masked, wherever the stream's
/// pieces cut it.
#[test]
fn chat_masks_a_private_key_streamed_line_by_line() {
    let body = [
        "MIIEowIBAAKCAQEA0Zx7examplebodyQ1w2e3r4t5y6",
        "u7i8o9p0Zq8Tw2Lm5Rx9Vb3Nc7Kd1Hf6Jg4Ps0Ya2Ue",
    ];
    let end = json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let reply = Reply::new(200, "text/event-stream")
        .send(text_chunk("Here it is:\n-----BEGIN RSA PRIVATE KEY-----\n"))
        .send(text_chunk(&format!("{}\n{}", body[0], &body[1][..10])))
        .send(text_chunk(&format!(
            "{}\n-----END RSA PRIVATE KEY-----\n",
            &body[1][10..]
        )))
        .send(text_chunk("That was all.\n"))
        .send(format!("data: {end}\n\ndata: [DONE]\n\n"));
    let server = Server::start(vec![reply]);
    let ybs = Ybs::new();
    let endpoint = format!("{}/v1", server.url);
    let args = [
        "chat",
        "--provider",
        "openai",
        "--model",
        "m",
        "--endpoint",
        endpoint.as_str(),
    ];
    let run = on_tty(&ybs, &args, b"show me a key\n/exit\n", true);
    assert_eq!(run.code, 0, "{}", run.terminal);
    assert!(run.terminal.contains("That was all."), "{}", run.terminal);
    for part in body {
        assert!(
            !run.terminal.contains(&part[..16]),
            "{part}:\n{}",
            run.terminal
        );
        assert!(
            !run.terminal.contains(&part[part.len() - 16..]),
            "{part}:\n{}",
            run.terminal
        );
    }
}
