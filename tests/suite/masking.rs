//! Masking on structure, not escaped text (issue 21, item 1; docs/security.md
//! S7): a credential of every shape the redactor knows, at every position
//! real outputs put one (line start, after a tab, after `=`, inside
//! quotes, after an ANSI colour code, split across two writes of one
//! stream, split between stdout and stderr), reaches none of the outputs:
//! the console, events.jsonl, transcript.json, junit.xml, summary.md, the
//! `--record` cassette, `$GITHUB_OUTPUT`, `$GITHUB_STEP_SUMMARY`, the
//! OpenTelemetry export, the request bodies the provider receives, and a
//! paused task's state.json.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::server::{Reply, Server};
use crate::support::{Run, Ybs, wire};

/// A secret ybs knows from its environment (`*_TOKEN`), not by shape.
const ENV_SECRET: &str = "deploy-canary-58f3b1e9a7";

/// One credential: the text a file holds, and the secret in it that must
/// not come out (the whole text, or the value after its context).
struct Shape {
    name: &'static str,
    text: String,
    secret: String,
}

fn shape(name: &'static str, text: &str, secret: &str) -> Shape {
    assert!(text.contains(secret), "{name}");
    Shape {
        name,
        text: text.to_owned(),
        secret: secret.to_owned(),
    }
}

/// Every shape in src/core/secrets.rs, and a known value. None is real.
fn shapes() -> Vec<Shape> {
    let ghp = "ghp_Zq8Tw2Lm5Rx9Vb3Nc7Kd1Hf6Jg4Ps0Ya2Ue8X";
    let pat = format!(
        "github_pat_{}_{}",
        "A1b2C3d4E5f6G7h8I9j0K1",
        "Zq7xK2mB9v".repeat(6)[..59].to_owned()
    );
    let aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKY";
    let slack = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
    let anthropic = format!("sk-ant-api03-{}", "Zq7xK2mB9vR4tW1y_-".repeat(5));
    let openai_project = format!("sk-proj-{}", "Rx9Vb3Nc7Kd1Hf6J".repeat(3));
    let openai_legacy = "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";
    let google = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q";
    let npm = "npm_Zq8Tw2Lm5Rx9Vb3Nc7Kd1Hf6Jg4Ps0Ya2Ue8";
    let basic = "eC1hY2Nlc3MtdG9rZW46Z2hzX1FwN1J3M0xtOVR4NVZiMk5jOEtkNEhmMUpn";
    let bearer = "eyJhbGciOiJIUzI1NiJ9.Zq8Tw2Lm5Rx9Vb3Nc7Kd1";
    let pem = "MIIEowIBAAKCAQEA0Zx7examplebodyQ1w2e3r4t5y6u7i8o9p0";
    vec![
        shape("github_token", ghp, ghp),
        shape("github_pat", &pat, &pat),
        shape(
            "aws_access_key",
            "AKIAQ3EXAMPLE7ZX2MPL",
            "AKIAQ3EXAMPLE7ZX2MPL",
        ),
        shape(
            "aws_secret_key",
            &format!("aws_secret_access_key = {aws_secret}"),
            aws_secret,
        ),
        shape("slack_token", slack, slack),
        shape("anthropic_key", &anthropic, &anthropic),
        shape("openai_project_key", &openai_project, &openai_project),
        shape("openai_key", openai_legacy, openai_legacy),
        shape("google_api_key", google, google),
        shape("npm_token", npm, npm),
        shape(
            "basic_auth_header",
            &format!("Authorization: Basic {basic}"),
            basic,
        ),
        shape(
            "bearer_auth_header",
            &format!("Authorization: Bearer {bearer}"),
            bearer,
        ),
        shape(
            "private_key",
            &format!("-----BEGIN RSA PRIVATE KEY-----\n{pem}\n-----END RSA PRIVATE KEY-----"),
            pem,
        ),
        shape("secret_value", ENV_SECRET, ENV_SECRET),
    ]
}

/// The shape's text at every position in one file: a line of its own
/// (the first line), after a tab, after `=`, inside quotes, after an ANSI
/// colour code.
fn positions(text: &str) -> String {
    format!("{text}\n\t{text}\nKEY={text}\nvalue: \"{text}\"\n\x1b[32m{text}\x1b[0m\n")
}

/// Where `one.txt` (the text alone) is cut in two for the split
/// positions: the middle of the secret.
fn cut(shape: &Shape) -> usize {
    shape.text.find(&shape.secret).unwrap() + shape.secret.len() / 2
}

/// What must not come out: the secret, and each half of it (the split
/// positions print it in two parts).
fn needles(shape: &Shape) -> Vec<String> {
    let half = shape.secret.len() / 2;
    vec![
        shape.secret.clone(),
        shape.secret[..half].to_owned(),
        shape.secret[half..].to_owned(),
    ]
}

/// The files of the workspace: the positions file, a one-line file that
/// is the text alone, and a file whose second line is the text.
fn workspace(ybs: &Ybs, shape: &Shape) {
    ybs.file("tokens.txt", &positions(&shape.text));
    ybs.file("one.txt", &shape.text);
    ybs.file("two.txt", &format!("first line\n{}\n", shape.text));
}

/// The model's calls: the files through the shell and `read_file`, then
/// `one.txt` in two writes to stdout, split between stdout and stderr,
/// and the other way round.
fn calls(shape: &Shape) -> Vec<Reply> {
    let at = cut(shape);
    let rest = at + 1;
    let shell = |id: &str, command: String| {
        wire::openai_sse_call(id, "run_shell", &json!({ "command": command }))
    };
    vec![
        shell("c1", "cat tokens.txt two.txt one.txt".to_owned()),
        wire::openai_sse_call("c2", "read_file", &json!({"path": "tokens.txt"})),
        wire::openai_sse_call("c3", "read_file", &json!({"path": "one.txt"})),
        wire::openai_sse_call("c4", "read_file", &json!({"path": "two.txt"})),
        shell(
            "c5",
            format!("head -c {at} one.txt; tail -c +{rest} one.txt"),
        ),
        shell(
            "c6",
            format!("head -c {at} one.txt; tail -c +{rest} one.txt >&2"),
        ),
        shell(
            "c7",
            format!("head -c {at} one.txt >&2; tail -c +{rest} one.txt"),
        ),
    ]
}

/// A failing check that prints the positions, and the text split between
/// its stdout and stderr (joined with a line break in its report).
fn check(shape: &Shape) -> String {
    let at = cut(shape);
    format!(
        "  - name: show\n    run: \"cat tokens.txt; head -c {at} one.txt; tail -c +{} one.txt >&2; exit 1\"\n",
        at + 1
    )
}

/// Every file under `dir`, as text, with its path.
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out
}

fn assert_absent(shape: &Shape, place: &str, text: &str) {
    for needle in needles(shape) {
        assert!(
            !text.contains(&needle),
            "{}: `{needle}` in {place}:\n{text}",
            shape.name
        );
    }
}

fn assert_absent_from_console(shape: &Shape, run: &Run) {
    assert_absent(shape, "stdout", &run.stdout);
    assert_absent(shape, "stderr", &run.stderr);
}

fn assert_absent_from_requests(shape: &Shape, place: &str, server: &Server) {
    let requests = server.requests();
    assert!(
        !requests.is_empty(),
        "{}: no request to {place}",
        shape.name
    );
    for request in requests {
        assert_absent(shape, place, &request.text());
    }
}

fn otel_collector() -> Server {
    Server::start((0..50).map(|_| Reply::json(200, &json!({}))).collect())
}

#[test]
fn no_credential_shape_at_any_position_reaches_any_output() {
    for shape in shapes() {
        let ybs = Ybs::new().env("DEPLOY_TOKEN", ENV_SECRET);
        workspace(&ybs, &shape);
        ybs.file(
            "t.yaml",
            &format!(
                "prompt: Look at the tokens.\ncommit: false\nfix_attempts: 1\npolicy:\n  default: allow\nchecks:\n{}",
                check(&shape)
            ),
        );
        let mut replies = calls(&shape);
        replies.push(wire::openai_sse_answer("done"));
        // After the failing check's output comes back.
        replies.push(wire::openai_sse_answer("still done"));
        let model = Server::start(replies);
        let otel = otel_collector();
        let home = ybs.home().to_owned();
        let record = home.join("rec.json");
        let github_output = home.join("github_output");
        let step_summary = home.join("step_summary.md");
        let mut command = ybs.command();
        command
            .env("GITHUB_OUTPUT", &github_output)
            .env("GITHUB_STEP_SUMMARY", &step_summary)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otel.url)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            .env_remove("OTEL_SDK_DISABLED")
            .env_remove("OTEL_TRACES_EXPORTER")
            .args([
                "run",
                "t.yaml",
                "--provider",
                "openai",
                "--endpoint",
                &format!("{}/v1", model.url),
                "--model",
                "m",
                "--record",
                record.to_str().unwrap(),
                "--junit",
                "ybs-out/junit.xml",
            ]);
        let run = Run::from_output(command.output().unwrap(), ybs.path());
        run.expect_code(1);

        // It ran: every call's output and the check's are in the outputs.
        let events = run.read("ybs-out/t/events.jsonl");
        assert_eq!(
            events.matches("\"tool.completed\"").count(),
            7,
            "{}: {events}",
            shape.name
        );
        assert!(events.contains("[REDACTED]"), "{}: {events}", shape.name);
        let transcript: Value = run.json("ybs-out/t/transcript.json");
        assert!(
            transcript["redactions"]
                .as_object()
                .is_some_and(|counts| !counts.is_empty()),
            "{}: {}",
            shape.name,
            transcript["redactions"]
        );

        assert_absent_from_console(&shape, &run);
        let outputs = files(&ybs.path().join("ybs-out"));
        for name in ["events.jsonl", "transcript.json", "junit.xml", "summary.md"] {
            assert!(
                outputs.iter().any(|(path, _)| path.ends_with(name)),
                "{}: no {name}",
                shape.name
            );
        }
        for (path, text) in &outputs {
            assert_absent(&shape, path, text);
        }
        for path in [&record, &github_output, &step_summary] {
            let text = std::fs::read_to_string(path)
                .unwrap_or_else(|error| panic!("{}: {}: {error}", shape.name, path.display()));
            assert_absent(&shape, &path.display().to_string(), &text);
        }
        assert_absent_from_requests(&shape, "the model", &model);
        assert_absent_from_requests(&shape, "the OTLP receiver", &otel);
    }
}

/// A paused task keeps its conversation in state.json: the tool results
/// in it are masked too.
#[test]
fn no_credential_reaches_a_paused_tasks_state() {
    let ybs = Ybs::new().env("DEPLOY_TOKEN", ENV_SECRET);
    let shapes = shapes();
    let all: Vec<String> = shapes.iter().map(|shape| positions(&shape.text)).collect();
    ybs.file("tokens.txt", &all.concat());
    ybs.file(
        "t.yaml",
        "prompt: Look at the tokens, then publish.\ncommit: false\npolicy:\n  allow: [read_file, \"run_shell(cat*)\"]\n  ask: [\"run_shell(npm publish*)\"]\n  on_ask: pause\n",
    );
    let model = Server::start(vec![
        wire::openai_sse_call("c1", "run_shell", &json!({"command": "cat tokens.txt"})),
        wire::openai_sse_call("c2", "read_file", &json!({"path": "tokens.txt"})),
        wire::openai_sse_call("c3", "run_shell", &json!({"command": "npm publish"})),
    ]);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &format!("{}/v1", model.url),
        "--model",
        "m",
    ]);
    run.expect_code(3);
    let state = run.read("ybs-out/t/state.json");
    assert!(state.contains("[REDACTED]"), "{state}");
    for shape in &shapes {
        assert_absent(shape, "state.json", &state);
        assert_absent_from_console(shape, &run);
    }
}
