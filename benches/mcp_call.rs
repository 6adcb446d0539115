#![allow(
    clippy::expect_used,
    reason = "a benchmark: a panic is the failure report"
)]
//! Latency of a trivial MCP tool call through `ybs tools serve` (issue
//! 13; goal: at most 5 ms beyond the tool's own time). Not a timed test:
//! run it and read the figures (docs/mcp.md quotes them).
//!
//!     cargo bench --bench mcp_call
//!
//! Measures, for a POSIX sh tool that prints a fixed envelope:
//! - `raw spawn`: the script started with `std::process::Command` and
//!   waited for: the tool's own time;
//! - `serve --no-sandbox`: one `tools/call` round trip over stdio
//!   (JSON-RPC line out, policy, process start with the full hygiene,
//!   envelope, metrics, JSON-RPC line back);
//! - `serve`: the same, each call confined by the sandbox helper.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOOL: &str =
    "#!/bin/sh\ncat >/dev/null\nprintf '{\"success\": true, \"result\": \"ok\"}\\n'\n";
const SCHEMA: &str = r#"{"name": "trivial", "description": "Does nothing", "parameters": {"message": {"type": "string", "required": true}}}"#;
const WARMUP: usize = 20;
const RUNS: usize = 300;

fn main() {
    let temp = tempfile::tempdir().expect("temp dir");
    let work = temp.path().canonicalize().expect("canonical temp dir");
    let tools = work.join("tools");
    std::fs::create_dir_all(&tools).expect("tools dir");
    let script = tools.join("trivial");
    std::fs::write(&script, TOOL).expect("write tool");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(tools.join("trivial.tool.json"), SCHEMA).expect("write sidecar");
    std::fs::write(work.join("policy.yaml"), "allow: [trivial]\n").expect("write policy");
    let home = work.join("home");
    std::fs::create_dir_all(&home).expect("home");

    let raw = measure(|| {
        let mut child = Command::new(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"{\"message\": \"hello\"}")
            .expect("write");
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success());
    });
    report("raw spawn", &raw, None);
    for (label, extra) in [
        ("serve --no-sandbox", &["--no-sandbox"][..]),
        ("serve", &[][..]),
    ] {
        match serve_calls(&work, &home, extra) {
            Some(times) => report(label, &times, Some(&raw)),
            None => println!("{label:<20} skipped: the server did not start (see stderr)"),
        }
    }
}

/// Round trips of `tools/call trivial` through one `ybs tools serve`.
fn serve_calls(work: &Path, home: &Path, extra: &[&str]) -> Option<Vec<Duration>> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ybs"))
        .args(["tools", "serve", "--policy", "policy.yaml"])
        .args(extra)
        .current_dir(work)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn ybs tools serve");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let times = round_trips(stdin, stdout);
    // stdin was closed: the server ends.
    let _ = child.wait();
    times
}

/// `initialize`, then [`measure`]d `tools/call`s; `None` if the server
/// never answered.
fn round_trips(
    mut stdin: std::process::ChildStdin,
    stdout: std::process::ChildStdout,
) -> Option<Vec<Duration>> {
    let mut lines = BufReader::new(stdout).lines();
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}}),
    );
    lines.next()?.ok()?;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut id = 0;
    Some(measure(|| {
        id += 1;
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "trivial", "arguments": {"message": "hello"}}}));
        let line = lines.next().expect("a reply").expect("read");
        let reply: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(reply["result"]["isError"], false, "{reply}");
    }))
}

fn measure(mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..WARMUP {
        f();
    }
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort_unstable();
    times
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn report(label: &str, times: &[Duration], floor: Option<&[Duration]>) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (p50, p95) = (percentile(times, 50), percentile(times, 95));
    let beyond = floor
        .map(|floor| {
            format!(
                "  (beyond the tool: p50 {:+.2} ms, p95 {:+.2} ms)",
                ms(p50) - ms(percentile(floor, 50)),
                ms(p95) - ms(percentile(floor, 95))
            )
        })
        .unwrap_or_default();
    println!(
        "{label:<20} p50 {:>7.2} ms  p95 {:>7.2} ms{beyond}",
        ms(p50),
        ms(p95)
    );
}
