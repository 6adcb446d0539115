#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::cast_precision_loss,
    reason = "a benchmark: a panic is the failure report, stdout is its output"
)]
//! A read-only batch under `--jobs` (docs/performance.md): `cargo bench --bench batch`.
//!
//! TASKS review tasks (`commit: false`) of STEPS `run_shell cat` steps each,
//! in a git repository, replayed (the `replay` provider: no model server,
//! so all the CPU measured is ybs's own, with its children: the sandbox
//! helper and `cat`). Each task runs in its own worktree under `--jobs`.
//! Printed: wall time with `--jobs 1` and `--jobs 4` and their ratio, and
//! ybs's CPU (user + system, with its children) per step, measured in one
//! run so the machine's load cancels out of the ratio.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TASKS: usize = 20;
const STEPS: usize = 10;

/// The binary measured: this build's, or `YBS_BENCH_BIN` (another build,
/// say the one before a change, on the same machine).
fn binary() -> std::path::PathBuf {
    std::env::var_os("YBS_BENCH_BIN").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_BIN_EXE_ybs")),
        std::path::PathBuf::from,
    )
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// A repository with TASKS read-only tasks and their cassette, committed.
fn write_batch(dir: &Path) {
    std::fs::write(dir.join("data.txt"), "hello\n".repeat(100)).unwrap();
    let mut yaml = "defaults:\n  model: m\n  commit: false\n  limits: { max_iterations: 1000 }\n  policy: { allow: [\"run_shell(cat *)\"] }\ntasks:\n".to_owned();
    let mut interactions = Vec::new();
    for task in 0..TASKS {
        let id = format!("review-{task}");
        yaml.push_str(&format!("  - id: {id}\n    prompt: review {task}\n"));
        for step in 0..STEPS {
            // Alternate files so loop detection does not stop the run.
            let command = if step % 2 == 0 {
                "cat data.txt"
            } else {
                "cat t.yaml"
            };
            interactions.push(
                serde_json::json!({"task": id, "response": {"content": "", "tool_calls": [
                {"id": format!("c{step}"), "name": "run_shell", "arguments": {"command": command}}
            ], "usage": {"input_tokens": 1000, "output_tokens": 10}}}),
            );
        }
        interactions.push(serde_json::json!({"task": id, "response": {"content": "fine", "usage": {"input_tokens": 1, "output_tokens": 1}}}));
    }
    std::fs::write(dir.join("t.yaml"), yaml).unwrap();
    let cassette = serde_json::json!({"version": 1, "interactions": interactions});
    std::fs::write(dir.join("t.cassette.json"), cassette.to_string()).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(
        dir,
        &[
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
            "commit",
            "-q",
            "-m",
            "batch",
        ],
    );
}

/// User + system CPU of every waited-for child so far.
fn children_cpu() -> Duration {
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let time = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap())
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap())
    };
    time(usage.user_time()) + time(usage.system_time())
}

/// One run of the batch with `--jobs jobs`: wall time and CPU.
fn run(dir: &Path, jobs: &str) -> (Duration, Duration) {
    let cpu = children_cpu();
    let started = Instant::now();
    let status = Command::new(binary())
        .current_dir(dir)
        .args([
            "run",
            "-q",
            "--jobs",
            jobs,
            "--out",
            &format!("out-{jobs}"),
            "t.yaml",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let wall = started.elapsed();
    assert!(status.success(), "the batch with --jobs {jobs} failed");
    (wall, children_cpu().saturating_sub(cpu))
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    write_batch(dir.path());
    let steps = u32::try_from(TASKS * STEPS).unwrap();
    let (serial, serial_cpu) = run(dir.path(), "1");
    let (parallel, parallel_cpu) = run(dir.path(), "4");
    let transcript: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out-4/review-0/transcript.json")).unwrap(),
    )
    .unwrap();
    let mode = transcript["manifest"]["sandbox"]["mode"].clone();
    println!("read-only batch: {TASKS} tasks x {STEPS} steps, sandbox {mode}");
    println!(
        "  --jobs 1  wall {:>8.1} ms   ybs CPU per step {:>6.2} ms",
        ms(serial),
        ms(serial_cpu / steps)
    );
    println!(
        "  --jobs 4  wall {:>8.1} ms   ybs CPU per step {:>6.2} ms   (target < 3 ms)",
        ms(parallel),
        ms(parallel_cpu / steps)
    );
    println!(
        "  wall --jobs 4 / --jobs 1      {:>6.2}   (tasks overlap when below 1; bound by the cores)",
        ms(parallel) / ms(serial)
    );
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
