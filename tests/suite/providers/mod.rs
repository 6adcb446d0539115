//! The real wire protocols through the `ybs` binary (issue 3): a scripted
//! HTTP server on 127.0.0.1 speaks OpenAI, Anthropic or Ollama, and the
//! tests check what ybs sent, what it ran and what it wrote. Every test
//! puts canary API keys in ybs's environment and checks that they reach
//! no file and no output (acceptance 6).

mod apple;
mod caching;
mod edges;
mod faults;
mod keys;
mod protocols;
mod reassembly;
mod record;
mod registry;
mod text_calls;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::support::{Run, Ybs};

/// Canary API keys, unique per test.
pub struct Keys {
    pub openai: String,
    pub anthropic: String,
}

impl Keys {
    pub fn new() -> Self {
        Self {
            openai: canary("sk"),
            anthropic: canary("sk-ant"),
        }
    }

    pub fn all(&self) -> [&str; 2] {
        [&self.openai, &self.anthropic]
    }
}

fn canary(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}-canary-{:x}{nanos:08x}{:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Text of the task's `system`, to find where each protocol put it.
pub const MARKER: &str = "Marker-7c1: keep greetings short.";

/// A one-task file whose system text is [`MARKER`], policy allow-all.
pub fn task_yaml(extra: &str) -> String {
    format!(
        "prompt: Write hello.txt saying hi, then say done.\nsystem: \"{MARKER}\"\npolicy:\n  default: allow\n{extra}"
    )
}

/// A scratch dir with `t.yaml` and both canary keys in ybs's environment.
pub fn scratch(task: &str) -> (Ybs, Keys) {
    let keys = Keys::new();
    let ybs = Ybs::new()
        .env("OPENAI_API_KEY", &keys.openai)
        .env("ANTHROPIC_API_KEY", &keys.anthropic);
    ybs.file("t.yaml", task);
    (ybs, keys)
}

/// `ybs run t.yaml --provider P --endpoint E --model m --no-commit EXTRA…`
pub fn run(ybs: &Ybs, provider: &str, endpoint: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "run",
        "t.yaml",
        "--provider",
        provider,
        "--endpoint",
        endpoint,
        "--model",
        "m",
        "--no-commit",
    ];
    args.extend_from_slice(extra);
    ybs.run(args)
}

pub fn transcript(run: &Run) -> Value {
    run.json("ybs-out/t/transcript.json")
}

/// No canary in stdout, stderr, or any file under the scratch dir (outputs,
/// cassettes, files the tools wrote) or the isolated home.
pub fn assert_no_secrets(ybs: &Ybs, run: &Run, keys: &Keys) {
    for key in keys.all() {
        assert!(!run.stdout.contains(key), "key on stdout:\n{}", run.stdout);
        assert!(!run.stderr.contains(key), "key on stderr:\n{}", run.stderr);
        for root in [ybs.path(), ybs.home()] {
            walk(root, &mut |path, bytes| {
                let found = bytes.windows(key.len()).any(|w| w == key.as_bytes());
                assert!(!found, "key found in {}", path.display());
            });
        }
    }
}

fn walk(dir: &Path, visit: &mut dyn FnMut(&Path, &[u8])) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, visit);
        } else if let Ok(bytes) = std::fs::read(&path) {
            visit(&path, &bytes);
        }
    }
}

/// The built-in tools every request offers.
pub const BUILTIN: [&str; 6] = [
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "search_files",
    "run_shell",
];

/// The event types of a task's events.jsonl, in order.
pub fn event_types(run: &Run) -> Vec<String> {
    run.events("t")
        .iter()
        .map(|event| event["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}
