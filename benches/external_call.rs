#![allow(
    clippy::expect_used,
    reason = "a benchmark: a panic is the failure report"
)]
//! End-to-end latency of a trivial external tool call (docs/performance.md: under
//! 5 ms). Not a timed test: run it and read the figures.
//!
//!     cargo bench --bench external_call
//!
//! Measures, for a POSIX sh tool that prints a fixed envelope:
//! - `call`: what the agent pays per call: parameter check, process start
//!   with the full hygiene (own group, scrubbed env, pipes, pdeathsig,
//!   subreaper sweep), JSON on stdin, envelope parsed, metrics recorded;
//! - `raw spawn`: the same script started with `std::process::Command`
//!   and waited for, the floor any implementation pays;
//! - `discover`: a task start's rescan of a tools directory with a cached
//!   schema (no process);
//! - `ybs tools invoke`: the whole binary, when `target/release/ybs` exists.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use ybs::tools::external::{self, DiscoverySettings, Enable, ExternalTool, Metrics};
use ybs::tools::{ChildEnv, Tool, ToolCtx, process};

const TOOL: &str =
    "#!/bin/sh\ncat >/dev/null\nprintf '{\"success\": true, \"result\": \"ok\"}\\n'\n";
const SCHEMA: &str = r#"{"name": "trivial", "description": "Does nothing", "parameters": {"message": {"type": "string", "required": true}}}"#;
const WARMUP: usize = 20;
const RUNS: usize = 300;

fn main() {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = temp.path().canonicalize().expect("canonical temp dir");
    let work = root.join("work");
    let tools = work.join("tools");
    std::fs::create_dir_all(&tools).expect("tools dir");
    let script = tools.join("trivial");
    std::fs::write(&script, TOOL).expect("write tool");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(tools.join("trivial.tool.json"), SCHEMA).expect("write sidecar");
    let _ = process::harden_self();

    let env = ChildEnv::scrubbed(&ybs::config::process_environ(), &[]);
    let ctx = ToolCtx {
        workdir: work.clone(),
        allowed_roots: vec![work.clone()],
        blocked_paths: Vec::new(),
        protected_paths: Vec::new(),
        env: env.clone(),
        shell_timeout: Duration::from_secs(30),
        max_shell_timeout: Duration::from_secs(60),
        output_cap_bytes: 1 << 20,
        sandbox: None,
        shell_sandbox: None,
    };
    let settings = DiscoverySettings {
        cwd: work.clone(),
        home: None,
        search_paths: Vec::new(),
        declared: Vec::new(),
        cache_dir: Some(root.join("cache")),
        sandbox: None,
    };
    let names = vec!["trivial".to_owned()];
    let enable = Enable {
        names: &names,
        named_by: "task",
        policy: &|_| false,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let catalog = runtime.block_on(external::discover(&settings, &enable, &env));
    let entry = catalog.get("trivial").expect("trivial discovered");
    let tool = ExternalTool::new(entry, Metrics::new()).expect("trivial is ready");
    let args = json!({"message": "hello"});

    let call = measure(|| {
        let output = runtime
            .block_on(tool.call(args.clone(), &ctx))
            .expect("call succeeds");
        assert_eq!(output.content, "ok");
    });
    let single = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let call_single = measure(|| {
        let output = single
            .block_on(tool.call(args.clone(), &ctx))
            .expect("call succeeds");
        assert_eq!(output.content, "ok");
    });
    let raw = measure(|| {
        let status = std::process::Command::new(&script)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status()
            .expect("spawn");
        assert!(status.success());
    });
    let discover = measure(|| {
        let catalog = runtime.block_on(external::discover(&settings, &enable, &env));
        assert!(catalog.get("trivial").is_some());
    });
    report("call (multi-thread runtime, as `run`)", &call);
    report("call (current-thread runtime)", &call_single);
    report("raw spawn + wait", &raw);
    report("discover (task start)", &discover);
    println!(
        "ybs overhead per call over a raw spawn: p50 {:.2} ms",
        ms(call[call.len() / 2].saturating_sub(raw[raw.len() / 2]))
    );

    let binary = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/ybs");
    if binary.exists() {
        let invoke = measure_n(50, || {
            let output = std::process::Command::new(&binary)
                .args([
                    "tools",
                    "invoke",
                    "trivial",
                    "--input",
                    r#"{"message": "hi"}"#,
                ])
                .current_dir(&work)
                .env("HOME", &root)
                .env("XDG_CACHE_HOME", root.join("cache"))
                .output()
                .expect("ybs runs");
            assert!(output.status.success(), "{output:?}");
        });
        report("`ybs tools invoke` (whole process)", &invoke);
    }
}

fn measure(run: impl FnMut()) -> Vec<Duration> {
    measure_n(RUNS, run)
}

fn measure_n(runs: usize, mut run: impl FnMut()) -> Vec<Duration> {
    for _ in 0..WARMUP.min(runs) {
        run();
    }
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    samples.sort();
    samples
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn report(label: &str, samples: &[Duration]) {
    let p = |percent: usize| samples[(samples.len() * percent / 100).min(samples.len() - 1)];
    println!(
        "{label:<40} p50 {:>6.2} ms   p95 {:>6.2} ms   min {:>6.2} ms   (n={})",
        ms(p(50)),
        ms(p(95)),
        ms(samples[0]),
        samples.len()
    );
}
