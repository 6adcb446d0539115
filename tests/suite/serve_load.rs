//! `ybs tools serve --listen` under load (issue 24 item 5), driven by a
//! Rust Streamable HTTP client (`support::mcp_http`): the server runs a
//! worker thread a core, two calls in two sessions run at the same time
//! (each tool waits for the other to arrive: a barrier, not a timing),
//! many concurrent calls all succeed, and after the load the server holds
//! no more descriptors than before it and no child process.

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::mcp_http::Session;

/// Marks its arrival, then waits (up to 20 s) for the other's: it
/// succeeds only if the other call runs while it does.
const MEET_TOOL: &str = r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo '{"name": "meet", "description": "Wait for another call", "parameters": {"me": {"type": "string", "required": true}, "other": {"type": "string", "required": true}}}'
  exit 0
fi
input=$(cat)
me=$(printf '%s' "$input" | sed 's/.*"me": *"\([a-z]*\)".*/\1/')
other=$(printf '%s' "$input" | sed 's/.*"other": *"\([a-z]*\)".*/\1/')
: > "$me.arrived"
i=0
while [ ! -e "$other.arrived" ]; do
  i=$((i + 1))
  if [ $i -gt 400 ]; then
    printf '{"success": false, "error": "%s never came"}\n' "$other"
    exit 0
  fi
  sleep 0.05
done
printf '{"success": true, "result": "met %s"}\n' "$other"
"#;

const ECHO_TOOL: &str = r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo '{"name": "echo", "description": "Echo", "parameters": {"n": {"type": "integer", "required": true}}}'
  exit 0
fi
input=$(cat)
printf '{"success": true, "result": %s}\n' "$input"
"#;

fn executable(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The server's threads named `ybs-serve` (its workers).
fn workers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.trim().starts_with("ybs-serve"))
        })
        .count()
}

fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The server's child processes, from every one of its threads.
fn children(pid: u32) -> Vec<String> {
    all_children(pid)
        .into_iter()
        .filter(|child| !resident(child))
        .collect()
}

/// Every child of `pid`, the resident sandbox included.
fn all_children(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The server's resident sandbox (docs/sandbox.md): kept on purpose, one
/// per view, not one per call.
fn resident(child: &str) -> bool {
    std::fs::read(format!("/proc/{child}/cmdline"))
        .is_ok_and(|cmdline| cmdline.windows(14).any(|w| w == b"__sandbox-init"))
}

/// Waits (up to 10 s) for `done`, then says whether it held.
fn settles(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn http() -> reqwest::Client {
    ybs::core::tls::install();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn tools_serve_listen_runs_calls_at_once_on_every_core_and_leaves_nothing_behind() {
    let ybs = Ybs::new();
    let cache = ybs.home().join(".cache");
    let ybs = ybs.env("XDG_CACHE_HOME", cache.to_str().unwrap());
    executable(&ybs.path().join("tools/meet"), MEET_TOOL);
    executable(&ybs.path().join("tools/echo"), ECHO_TOOL);
    ybs.file("policy.yaml", "allow: [meet, echo]\n");
    let mut serve = ybs
        .command()
        .args(["tools", "serve", "--policy", "policy.yaml"])
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = serve.id();
    let mut lines = std::io::BufReader::new(serve.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();

    // A worker thread a core (two at least where there are two cores).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        workers(pid) >= cores.min(2),
        "{} ybs-serve threads on {cores} cores",
        workers(pid)
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // A warm-up call, its connection closed: the descriptors the server
    // keeps for good (caches, the status file) are open from now on.
    runtime.block_on(async {
        let mut session = Session::open(http(), &url).await.unwrap();
        let result = session.call("echo", json!({"n": 0})).await.unwrap();
        assert_eq!(result["isError"], false, "{result}");
        session.close().await;
    });
    assert!(settles(|| children(pid).is_empty()));
    let baseline = descriptors(pid);
    let residents = all_children(pid).len();
    assert!(residents <= 1, "{residents} resident sandboxes");

    runtime.block_on(async {
        // Two sessions, one call each: each tool waits for the other.
        let (a, b) = tokio::join!(
            async {
                let mut session = Session::open(http(), &url).await.unwrap();
                let result = session
                    .call("meet", json!({"me": "a", "other": "b"}))
                    .await
                    .unwrap();
                session.close().await;
                result
            },
            async {
                let mut session = Session::open(http(), &url).await.unwrap();
                let result = session
                    .call("meet", json!({"me": "b", "other": "a"}))
                    .await
                    .unwrap();
                session.close().await;
                result
            }
        );
        assert_eq!(text(&a), "met b", "{a}");
        assert_eq!(text(&b), "met a", "{b}");

        // Load: 20 sessions at once, 5 calls each.
        let sessions: Vec<_> = (0..20)
            .map(|s| {
                let url = url.clone();
                tokio::spawn(async move {
                    let mut session = Session::open(http(), &url).await.unwrap();
                    let mut answers = Vec::new();
                    for call in 0..5 {
                        let n = s * 100 + call;
                        let result = session.call("echo", json!({"n": n})).await.unwrap();
                        answers.push((n, result));
                    }
                    session.close().await;
                    answers
                })
            })
            .collect();
        for session in sessions {
            for (n, result) in session.await.unwrap() {
                assert_eq!(result["isError"], false, "{result}");
                assert_eq!(result["structuredContent"]["result"], json!({"n": n}));
            }
        }
    });
    drop(runtime);

    // Nothing left: no child, no descriptor beyond the baseline (the
    // clients' connections are closed).
    assert!(
        settles(|| children(pid).is_empty()),
        "children left: {:?}",
        children(pid)
    );
    // No more resident sandboxes than after the first call.
    assert_eq!(
        all_children(pid).len(),
        residents,
        "{:?}",
        all_children(pid)
    );
    assert!(
        settles(|| descriptors(pid) <= baseline),
        "{} descriptors after the load, {baseline} before",
        descriptors(pid)
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "ybs tools serve did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}
