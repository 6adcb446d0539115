#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::cast_precision_loss,
    reason = "a benchmark: a panic is the failure report, stdout is its output"
)]
//! ybs's own overhead (docs/performance.md), measured on the real binary: `cargo bench --bench overhead`.
//!
//! The model is the `replay` provider (instant, no network), so what is
//! measured is ybs alone: start-up, the agent loop, policy, tool dispatch,
//! a `run_shell` of `cat`, events, transcript, JUnit and summary.
//! Peak memory is the child's max RSS from `wait4`. The step is timed
//! with the whole kernel sandbox (the default: every `run_shell` goes
//! through the helper, namespaces, Landlock and seccomp) and with
//! `--no-sandbox`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 20;
const STEPS: usize = 50;

/// The binary measured: this build's, or `YBS_BENCH_BIN` (to measure
/// another build, say the one before a change, on the same machine).
fn binary() -> std::path::PathBuf {
    std::env::var_os("YBS_BENCH_BIN").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_BIN_EXE_ybs")),
        std::path::PathBuf::from,
    )
}

fn ybs() -> Command {
    let mut command = Command::new(binary());
    command.stdout(std::process::Stdio::null());
    command.stderr(std::process::Stdio::null());
    command
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Max RSS of all waited-for children so far, in KiB.
fn children_max_rss_kib() -> i64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map_or(0, |usage| usage.max_rss())
}

fn time_command(mut make: impl FnMut() -> Command) -> Duration {
    median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                let status = make().status().expect("ybs runs");
                assert!(status.success() || status.code() == Some(1));
                started.elapsed()
            })
            .collect(),
    )
}

fn write_task(dir: &Path, steps: usize) {
    std::fs::write(dir.join("data.txt"), "hello\n".repeat(100)).unwrap();
    std::fs::write(
        dir.join("t.yaml"),
        "prompt: bench\ncommit: false\nlimits: { max_iterations: 1000 }\npolicy: { allow: [\"run_shell(cat *)\", read_file] }\n",
    )
    .unwrap();
    let mut interactions = Vec::new();
    for step in 0..steps {
        // Alternate files so loop detection does not stop the run.
        let command = if step % 2 == 0 {
            "cat data.txt"
        } else {
            "cat t.yaml"
        };
        interactions.push(
            serde_json::json!({"response": {"content": "", "tool_calls": [
            {"id": format!("c{step}"), "name": "run_shell", "arguments": {"command": command}}
        ], "usage": {"input_tokens": 1000, "output_tokens": 10}}}),
        );
    }
    interactions.push(serde_json::json!({"response": {"content": "done", "usage": {"input_tokens": 1, "output_tokens": 1}}}));
    let cassette = serde_json::json!({"version": 1, "interactions": interactions});
    std::fs::write(dir.join("t.cassette.json"), cassette.to_string()).unwrap();
}

fn main() {
    let version = time_command(|| {
        let mut command = ybs();
        command.arg("--version");
        command
    });
    println!(
        "ybs --version                      median {:>8.2} ms   (goal < 5 ms)",
        ms(version)
    );

    let size = std::fs::metadata(binary()).unwrap().len();
    println!(
        "binary {}: {:.1} MB   (goal ≤ 24 MB stripped, built as released: --release --features script)",
        binary().display(),
        size as f64 / 1e6
    );

    // Memory first, while no other run has raised the children's peak:
    // the largest single process of a 10-step sandboxed run (ybs itself;
    // its sandbox helpers are smaller).
    let dir = tempfile::tempdir().unwrap();
    write_task(dir.path(), 10);
    let ten = time_command(|| {
        let mut command = ybs();
        command
            .current_dir(dir.path())
            .args(["run", "-q", "t.yaml"]);
        command
    });
    let peak_ten = children_max_rss_kib() as f64 / 1024.0;
    println!(
        "run, 10 steps of run_shell cat     median {:>8.2} ms   peak RSS {peak_ten:.1} MB (goal ≤ 16 MB)",
        ms(ten)
    );

    let dir = tempfile::tempdir().unwrap();
    write_task(dir.path(), 0);
    let first = median((0..RUNS).map(|_| first_request(dir.path())).collect());
    // `--version` again, interleaved with the start-ups' time on the
    // machine, so the ratio holds both under the same load.
    let version_again = time_command(|| {
        let mut command = ybs();
        command.arg("--version");
        command
    });
    let version_both = (version + version_again) / 2;
    println!(
        "start → first request (openai wire) median {:>8.2} ms   = {:.1}× ybs --version ({:.2} ms; goal ≤ 3×)",
        ms(first),
        ms(first) / ms(version_both),
        ms(version_both)
    );
    let empty = time_command(|| {
        let mut command = ybs();
        command
            .current_dir(dir.path())
            .args(["run", "-q", "t.yaml"]);
        command
    });
    println!(
        "run, 0 steps (start → outputs)     median {:>8.2} ms   (start to first request target < 20 ms)",
        ms(empty)
    );

    let dir = tempfile::tempdir().unwrap();
    write_task(dir.path(), STEPS);
    let full = time_command(|| {
        let mut command = ybs();
        command
            .current_dir(dir.path())
            .args(["run", "-q", "t.yaml"]);
        command
    });
    // The sandboxed run above used every layer (namespaces, Landlock,
    // seccomp): a machine without them would measure something else.
    let transcript: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("ybs-out/t/transcript.json")).unwrap(),
    )
    .unwrap();
    let mode = transcript["manifest"]["sandbox"]["mode"].clone();
    assert_eq!(mode, "namespaces+landlock+seccomp", "{mode}");
    println!("sandbox of the runs below                  {mode}");
    let per_step = full.saturating_sub(empty) / u32::try_from(STEPS).unwrap();
    println!(
        "run, {STEPS} steps of run_shell cat    median {:>8.2} ms",
        ms(full)
    );
    println!(
        "  ybs's own time per agent step           {:>8.2} ms   (target < 3 ms)",
        ms(per_step)
    );
    // What one step cannot beat: spawning the command itself.
    let bare = time_command(|| {
        let mut command = Command::new("sh");
        command
            .current_dir(dir.path())
            .args(["-c", "cat data.txt"])
            .stdout(std::process::Stdio::null());
        command
    });
    println!(
        "  a bare `sh -c 'cat data.txt'` spawn     {:>8.2} ms   (step / spawn = {:.2}; target <= 2)",
        ms(bare),
        ms(per_step) / ms(bare)
    );
    let unconfined = time_command(|| {
        let mut command = ybs();
        command
            .current_dir(dir.path())
            .args(["run", "-q", "--no-sandbox", "t.yaml"]);
        command
    });
    let per_step_unconfined = unconfined.saturating_sub(empty) / u32::try_from(STEPS).unwrap();
    println!(
        "  the same with --no-sandbox              {:>8.2} ms   (sandbox cost per call {:.2} ms; target with sandbox < 8 ms)",
        ms(per_step_unconfined),
        ms(per_step) - ms(per_step_unconfined)
    );
    println!(
        "peak RSS of any run above                 {:>8.1} MB   (the 10-step run: {peak_ten:.1} MB, goal ≤ 16 MB)",
        children_max_rss_kib() as f64 / 1024.0
    );
}

/// From spawning `ybs run` to the first request arriving at a model
/// server on loopback (headers read); the run is then killed.
fn first_request(dir: &Path) -> Duration {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1", listener.local_addr().unwrap());
    let started = Instant::now();
    let mut child = ybs()
        .current_dir(dir)
        .args([
            "run",
            "-q",
            "--provider",
            "openai",
            "--model",
            "m",
            "--endpoint",
        ])
        .arg(&endpoint)
        .arg("t.yaml")
        .spawn()
        .unwrap();
    let (mut stream, _) = listener.accept().unwrap();
    let mut request = Vec::new();
    let mut buffer = [0_u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).unwrap();
        assert!(read > 0, "the connection closed before the request");
        request.extend_from_slice(&buffer[..read]);
    }
    let elapsed = started.elapsed();
    child.kill().unwrap();
    child.wait().unwrap();
    elapsed
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
