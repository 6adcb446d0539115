//! The bytes of a run's records: for one fixed scripted run, a real
//! repository and a scripted model making a fixed series of tool calls,
//! `events.jsonl` and `transcript.json` are compared byte for byte with
//! the files checked in under `tests/fixtures/golden/`, after
//! [`normalise`] has replaced what differs from run to run.
//!
//! A change that alters either file's bytes fails here; when the change
//! is meant (a new field, a new event), regenerate the files with
//! `YBS_BLESS=1 cargo test --test all suite::golden` and review the diff.

use std::path::Path;

use regex::Regex;
use serde_json::json;

use super::git::Repo;
use crate::support::server::{Reply, Server};
use crate::support::{Ybs, wire};

/// The task: write a file, read it back with the shell, try a command the
/// policy denies, answer; one check; commit.
const TASK: &str = "\
prompt: write greeting.txt saying hello, then show it
commit: true
policy:
  default: allow
  deny: [\"run_shell(rm *)\"]
checks:
  - name: greeting
    run: grep -q hello greeting.txt
";

/// The repository's config: a short, fixed retry wait.
const CONFIG: &str = r#"{"agent": {"retry_backoff_base_ms": 10}}"#;

/// What the scripted model says, in order: a rate limit first (one
/// retry), then four tool calls (the last prints a token-shaped string,
/// which ybs masks) and the answer.
fn replies() -> Vec<Reply> {
    vec![
        Reply::json(
            429,
            &json!({"error": {"message": "slow down", "type": "rate_limit_exceeded"}}),
        )
        .header("retry-after", "0"),
        wire::openai_sse_call(
            "call_1",
            "write_file",
            &json!({"path": "greeting.txt", "content": "hello\n"}),
        ),
        wire::openai_sse_call(
            "call_2",
            "run_shell",
            &json!({"command": "cat greeting.txt"}),
        ),
        wire::openai_sse_call(
            "call_3",
            "run_shell",
            &json!({"command": "rm greeting.txt"}),
        ),
        wire::openai_sse_call(
            "call_4",
            "run_shell",
            &json!({"command": "echo ghp_0123456789abcdefghijklmnopqrstuvwxyz"}),
        ),
        wire::openai_sse_answer("greeting.txt says hello"),
    ]
}

/// Replaces what genuinely differs between two runs of the same task, and
/// nothing else, so that everything else is compared byte for byte:
///
/// - the scratch directory's path (a temp dir), as `<ROOT>`;
/// - the values of `ts_ms` and of every `*_ms` duration, and the
///   transcript's `started_at`/`finished_at` times, as `0`;
/// - the run id (`run_id`), as `<RUN_ID>`;
/// - git object ids (the base commit and ybs's commit depend on the time
///   they were made): 40 hex digits, and the short id in the git note
///   (`committed 1 file as 44d319d`), as `<SHA>`;
/// - the ybs version (`ybs_version`), as `<VERSION>`.
fn normalise(text: &str, root: &Path) -> String {
    let mut text = text.replace(&root.display().to_string(), "<ROOT>");
    let rules: [(&str, &str); 6] = [
        (r#""(\w*_ms|ts_ms)":\d+"#, r#""$1":0"#),
        (r#""(\w*_ms|ts_ms)": \d+"#, r#""$1": 0"#),
        (r#""(run_id|ybs_version)":( ?)"[^"]*""#, r#""$1":$2"<$1>""#),
        (
            r#""(started_at|finished_at)":( ?)"[^"]*""#,
            r#""$1":$2"<time>""#,
        ),
        (r"\b[0-9a-f]{40}\b", "<SHA>"),
        (r"(committed \d+ files? as )[0-9a-f]{7,40}\b", "$1<SHA>"),
    ];
    for (pattern, replacement) in rules {
        text = Regex::new(pattern)
            .unwrap()
            .replace_all(&text, replacement)
            .into_owned();
    }
    text
}

/// With the `tokenizer` feature the request estimates are counted another
/// way (`o200k`, not `bytes/4`): their values are replaced on both sides,
/// so the golden files, made by a default build, still hold the rest.
fn estimates(text: &str) -> String {
    if !cfg!(feature = "tokenizer") {
        return text.to_owned();
    }
    Regex::new(r#""(request_tokens_estimate|request_tokens_method)":( ?)("[^"]*"|\d+)"#)
        .unwrap()
        .replace_all(text, r#""$1":$2"<$1>""#)
        .into_owned()
}

/// Compares `actual` with the golden file `name`, or writes it under
/// `YBS_BLESS=1`.
fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/golden")
        .join(name);
    if std::env::var_os("YBS_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let (expected, actual) = (estimates(&expected), estimates(actual));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from its golden file at line {}\n--- expected\n{}\n--- actual\n{}\n(rerun with YBS_BLESS=1 if the change is meant)",
            line + 1,
            expected.lines().nth(line).unwrap_or("<end of file>"),
            actual.lines().nth(line).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn a_fixed_run_keeps_the_bytes_of_its_events_and_transcript() {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");
    ybs.file("t.yaml", TASK).file(".ybs.json", CONFIG);
    let repo = Repo::init(&ybs, "");
    let server = Server::start(replies());
    let endpoint = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
        "--no-sandbox",
    ]);
    run.expect_code(0);
    assert_eq!(server.replies_left(), 0, "the script was not played out");
    assert_eq!(repo.git(&["show", "HEAD:greeting.txt"]), "hello");
    let root = ybs.path().canonicalize().unwrap();
    let events = normalise(&run.read("ybs-out/t/events.jsonl"), &root);
    let transcript = normalise(&run.read("ybs-out/t/transcript.json"), &root);
    golden("events.jsonl", &events);
    golden("transcript.json", &transcript);
}

#[test]
fn the_normaliser_replaces_only_what_varies() {
    let root = Path::new("/tmp/.tmpAbC");
    let line = r#"{"ts_ms":1764662400123,"task":"t","type":"task.started","run_id":"r-1","workdir":"/tmp/.tmpAbC/sub","base_commit":"0123456789abcdef0123456789abcdef01234567","iterations":3,"duration_ms":17,"delay_ms":10,"note":"committed 2 files as 44d319d on main"}"#;
    assert_eq!(
        normalise(line, root),
        r#"{"ts_ms":0,"task":"t","type":"task.started","run_id":"<run_id>","workdir":"<ROOT>/sub","base_commit":"<SHA>","iterations":3,"duration_ms":0,"delay_ms":0,"note":"committed 2 files as <SHA> on main"}"#
    );
    let pretty = "{\n  \"duration_ms\": 250,\n  \"started_at\": \"2026-12-02T07:00:00Z\",\n  \"attempt\": 2\n}";
    assert_eq!(
        normalise(pretty, root),
        "{\n  \"duration_ms\": 0,\n  \"started_at\": \"<time>\",\n  \"attempt\": 2\n}"
    );
}
