#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark: a panic is the failure report"
)]
//! Throughput of `ybs tools serve --listen` under load (issue 24 item 5;
//! goal: 50 concurrent sessions get at least 1.6× the calls/s of one
//! session on 2 cores). Not a timed test: run it and read the figures
//! (docs/performance.md quotes them).
//!
//!     cargo bench --bench serve_load
//!
//! One server (`--builtin`, confined unless the machine cannot), one
//! Streamable HTTP client written here (`tests/support/mcp_http.rs`).
//! Four calls in five run a sandboxed external tool (a POSIX sh script
//! printing its envelope), the fifth the built-in `read_file`. Measured in
//! one run, so the machine's load cancels in the ratio:
//! - `1 session`: [`ALONE`] calls one after another;
//! - `50 sessions`: [`SESSIONS`] sessions at once, [`PER_SESSION`] calls
//!   each, one after another within a session.
//!
//! Then calls/s, p50 and p95 of each, the ratio of calls/s, the server's
//! peak RSS, and its descriptors and children after the load.

#[path = "../tests/support/mcp_http.rs"]
mod mcp_http;

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use mcp_http::Session;

const TOOL: &str =
    "#!/bin/sh\ncat >/dev/null\nprintf '{\"success\": true, \"result\": \"ok\"}\\n'\n";
const SCHEMA: &str = r#"{"name": "trivial", "description": "Does nothing", "parameters": {"message": {"type": "string", "required": true}}}"#;
const WARMUP: usize = 20;
const ALONE: usize = 400;
const SESSIONS: usize = 50;
const PER_SESSION: usize = 40;

fn main() {
    let temp = tempfile::tempdir().expect("temp dir");
    let work = temp.path().canonicalize().expect("canonical temp dir");
    let tools = work.join("tools");
    std::fs::create_dir_all(&tools).expect("tools dir");
    let script = tools.join("trivial");
    std::fs::write(&script, TOOL).expect("write tool");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(tools.join("trivial.tool.json"), SCHEMA).expect("write sidecar");
    std::fs::write(work.join("policy.yaml"), "allow: [trivial, read_file]\n").expect("policy");
    std::fs::write(work.join("notes.txt"), "a line\n".repeat(20)).expect("notes");
    let home = work.join("home");
    std::fs::create_dir_all(&home).expect("home");

    let mut server = Command::new(env!("CARGO_BIN_EXE_ybs"))
        .args(["tools", "serve", "--builtin", "--policy", "policy.yaml"])
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(&work)
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ybs tools serve");
    let pid = server.id();
    let first = std::io::BufReader::new(server.stdout.take().expect("stdout"))
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    let Some(url) = first.strip_prefix("listening on ").map(str::to_owned) else {
        let _ = server.kill();
        let output = server.wait_with_output().expect("wait");
        println!(
            "skipped: the server did not start: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return;
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("ybs tools serve --listen, {cores} cores, pid {pid}");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (alone, alone_s, many, many_s) = runtime.block_on(async {
        ybs::core::tls::install();
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(SESSIONS * 2)
            .build()
            .expect("client");
        let mut session = Session::open(http.clone(), &url).await.expect("session");
        for n in 0..WARMUP {
            call(&mut session, n).await;
        }
        let started = Instant::now();
        let mut alone = Vec::with_capacity(ALONE);
        for n in 0..ALONE {
            alone.push(call(&mut session, n).await);
        }
        let alone_s = started.elapsed();
        session.close().await;

        let started = Instant::now();
        let tasks: Vec<_> = (0..SESSIONS)
            .map(|_| {
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(async move {
                    let mut session = Session::open(http, &url).await.expect("session");
                    let mut times = Vec::with_capacity(PER_SESSION);
                    for n in 0..PER_SESSION {
                        times.push(call(&mut session, n).await);
                    }
                    session.close().await;
                    times
                })
            })
            .collect();
        let mut many = Vec::with_capacity(SESSIONS * PER_SESSION);
        for task in tasks {
            many.extend(task.await.expect("a session"));
        }
        (alone, alone_s, many, started.elapsed())
    });
    drop(runtime);

    let one = report("1 session", alone, alone_s);
    let fifty = report(&format!("{SESSIONS} sessions"), many, many_s);
    println!(
        "ratio               {:.2}x the calls/s of one session (goal: at least 1.6x on 2 cores)",
        fifty / one
    );
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "server              peak RSS {} kB; after the load: {} descriptors, {} children",
        status_field(pid, "VmHWM:").unwrap_or_default(),
        std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count),
        children(pid)
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid")),
        nix::sys::signal::Signal::SIGTERM,
    );
    let output = server.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("no sandbox") {
        println!("note: the calls ran UNCONFINED: {}", stderr.trim());
    }
}

/// One call: four in five the sandboxed external tool, the fifth the
/// built-in `read_file`; its round trip.
async fn call(session: &mut Session, n: usize) -> Duration {
    let started = Instant::now();
    let result = if n % 5 == 4 {
        session
            .call("read_file", json!({"path": "notes.txt"}))
            .await
    } else {
        session.call("trivial", json!({"message": "hello"})).await
    }
    .expect("a call");
    assert_eq!(result["isError"], false, "{result}");
    started.elapsed()
}

/// Prints calls/s, p50 and p95; returns calls/s.
fn report(label: &str, mut times: Vec<Duration>, wall: Duration) -> f64 {
    times.sort_unstable();
    let percentile = |p: usize| {
        let rank = (p * times.len()).div_ceil(100).clamp(1, times.len());
        times[rank - 1].as_secs_f64() * 1000.0
    };
    #[expect(clippy::cast_precision_loss, reason = "a count of calls")]
    let rate = times.len() as f64 / wall.as_secs_f64();
    println!(
        "{label:<20}{:>5} calls  {rate:>7.1} calls/s  p50 {:>7.2} ms  p95 {:>7.2} ms",
        times.len(),
        percentile(50),
        percentile(95)
    );
    rate
}

fn status_field(pid: u32, field: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|line| {
            line.strip_prefix(field)
                .map(|v| v.trim().trim_end_matches(" kB").to_owned())
        })
}

fn children(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
                .map(|list| list.split_whitespace().count())
                .sum()
        })
        .unwrap_or(0)
}
