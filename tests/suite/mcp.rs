//! MCP both ways (issue 13, docs/mcp.md) against real peers: servers
//! written with the official Python SDK (`mcp<2` from PyPI, installed by
//! [`python`] into a venv under the target dir) as `tools.mcp` of a
//! task, and the SDK's stdio client driving `ybs tools serve`.
//!
//! When PyPI cannot be reached the tests print why and return: they are
//! skipped, loudly, never passed on nothing.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cassette::{answer, call, calls};
use crate::support::{Run, Ybs};

/// The venv's python, with `mcp<2` installed; `None` (after saying so on
/// stderr) when the package registry is unreachable.
pub fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Option<PathBuf>> = OnceLock::new();
    PYTHON.get_or_init(install).clone()
}

fn install() -> Option<PathBuf> {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target dir")
        .to_owned();
    let venv = target.join("mcp-venv");
    let python = venv.join("bin/python");
    let ready = venv.join(".ybs-ready");
    let lock = std::fs::File::create(target.join("mcp-venv.lock")).expect("the venv lock");
    // Test binaries of parallel runs share the venv: one installs.
    lock.lock().expect("lock the venv");
    if ready.exists() {
        return Some(python);
    }
    if !python.exists() {
        let status = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(
            status.success(),
            "python3 -m venv {} failed",
            venv.display()
        );
    }
    let output = std::process::Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "mcp<2"])
        .output()
        .expect("pip");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let unreachable = [
            "NewConnectionError",
            "Max retries exceeded",
            "Temporary failure in name resolution",
            "Network is unreachable",
            "No matching distribution found",
            "Could not fetch URL",
        ]
        .iter()
        .any(|sign| stderr.contains(sign));
        assert!(unreachable, "pip install 'mcp<2' failed:\n{stderr}");
        eprintln!(
            "SKIPPED: the MCP tests need the Python SDK (`mcp<2`) from PyPI, which is unreachable:\n{stderr}"
        );
        return None;
    }
    std::fs::write(&ready, "").expect("mark the venv ready");
    Some(python)
}

/// A FastMCP server (official Python SDK). `argv[1]` picks a behaviour:
/// `ok` (tools below), `exit` (dies at start), `silent` (never answers
/// `initialize`), `garbage` (answers with non-JSON-RPC lines). Every
/// call is logged to `calls.log` in its working directory; in `ok` mode
/// it also starts a child, so the whole tree must be stopped.
const SERVER: &str = r#"
import os, subprocess, sys, time
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if mode == "exit":
    sys.stderr.write("boom: cannot start\n")
    sys.exit(3)
if mode == "silent":
    time.sleep(3600)
if mode == "garbage":
    for line in sys.stdin:
        print("this is not JSON-RPC", flush=True)
    sys.exit(0)
from mcp.server.fastmcp import FastMCP
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", os.path.abspath(__file__)])
mcp = FastMCP("files")
def log(name):
    with open("calls.log", "a") as f:
        f.write(name + "\n")
@mcp.tool()
def list_dir(path: str = ".") -> str:
    """List the entries of a directory."""
    log("list_dir")
    return "\n".join(sorted(e for e in os.listdir(path) if not e.startswith(".")))
@mcp.tool()
def read_file(path: str) -> str:
    """Read a text file."""
    log("read_file")
    with open(path) as f:
        return f.read()
@mcp.tool()
def delete_file(path: str) -> str:
    """Delete a file."""
    log("delete_file")
    os.remove(path)
    return "deleted"
@mcp.tool()
def hang() -> str:
    """Never answers."""
    log("hang")
    time.sleep(3600)
    return "never"
mcp.run()
"#;

/// Processes whose command line mentions `needle` (the test's own
/// absolute script path), waiting up to 3 s for them to go.
fn survivors(needle: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                found.push(format!("{name}: {cmdline}"));
            }
        }
        if found.is_empty() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A scratch dir with the server script; returns its absolute path.
fn with_server(ybs: &Ybs) -> String {
    ybs.file("server.py", SERVER);
    ybs.path().join("server.py").to_string_lossy().into_owned()
}

fn server_entry(name: &str, python: &Path, script: &str, mode: &str, timeout: u64) -> String {
    format!(
        "{{name: {name}, command: '{}', args: ['{script}', {mode}], timeout_seconds: {timeout}}}",
        python.display()
    )
}

fn tool_calls(ybs: &Ybs, task: &str) -> Vec<Value> {
    ybs.json(&format!("ybs-out/{task}/transcript.json"))["tool_calls"]
        .as_array()
        .unwrap()
        .clone()
}

fn notes(run: &Run, task: &str) -> Vec<String> {
    run.events(task)
        .into_iter()
        .filter(|event| event["type"] == "task.note")
        .map(|event| event["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_task_lists_and_reads_through_an_mcp_server_and_a_denied_tool_never_reaches_it() {
    let Some(python) = python() else { return };
    let ybs = Ybs::new();
    let script = with_server(&ybs);
    ybs.file("notes.txt", "the secret of the notes\n");
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: read the notes\ncommit: false\ntools:\n  builtin: [read_file]\n  mcp:\n    - {}\npolicy:\n  allow: [files__list_dir, {{files__read_file: {{path: '*.txt'}}}}]\n",
            server_entry("files", &python, &script, "ok", 30)
        ),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("files__list_dir", json!({"path": "."})),
            call("files__read_file", json!({"path": "notes.txt"})),
            calls(&[
                ("files__delete_file", json!({"path": "notes.txt"})),
                ("files__read_file", json!({"path": "server.py"})),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let offered = transcript["manifest"]["tools"].as_array().unwrap();
    for name in ["files__list_dir", "files__read_file", "files__delete_file"] {
        assert!(offered.contains(&json!(name)), "{name} in {offered:?}");
    }
    let calls = tool_calls(&ybs, "t");
    assert_eq!(calls[0]["result"]["ok"], true, "{:?}", calls[0]);
    let listing = calls[0]["result"]["output"].as_str().unwrap();
    assert!(listing.contains("notes.txt") && listing.contains("server.py"));
    assert_eq!(
        calls[1]["result"]["output"], "the secret of the notes\n",
        "{:?}",
        calls[1]
    );
    // The results reached the model: the next requests carry them.
    let messages = serde_json::to_string(&transcript["messages"]).unwrap();
    assert!(messages.contains("the secret of the notes"));
    assert_eq!(calls[2]["decision"]["verdict"], "deny");
    assert_eq!(calls[2]["result"]["ran"], false);
    // An argument matcher decides on the MCP tool's own `path`.
    assert_eq!(calls[3]["decision"]["verdict"], "deny", "{:?}", calls[3]);
    assert!(ybs.path().join("notes.txt").exists());
    assert_eq!(ybs.read("calls.log"), "list_dir\nread_file\n");
    assert_eq!(survivors(&script), Vec::<String>::new());
}

#[test]
fn failing_servers_end_in_error_results_within_their_timeouts_and_leave_no_process() {
    let Some(python) = python() else { return };
    let ybs = Ybs::new();
    let script = with_server(&ybs);
    let task = |id: &str, server: &str, mode: &str, tool: &str| {
        format!(
            "  - id: {id}\n    prompt: p\n    commit: false\n    tools:\n      builtin: [read_file]\n      mcp: [{}]\n    policy: {{ allow: [{server}__{tool}] }}\n",
            server_entry(server, &python, &script, mode, 2)
        )
    };
    ybs.file(
        "t.yaml",
        &format!(
            "tasks:\n{}{}{}{}",
            task("exits", "dead", "exit", "list_dir"),
            task("silent", "mute", "silent", "list_dir"),
            task("garbage", "noise", "garbage", "list_dir"),
            task("hangs", "stuck", "ok", "hang"),
        ),
    );
    let mut interactions = Vec::new();
    for (id, tool) in [
        ("exits", "dead__list_dir"),
        ("silent", "mute__list_dir"),
        ("garbage", "noise__list_dir"),
        ("hangs", "stuck__hang"),
    ] {
        for mut turn in [call(tool, json!({})), answer("done")] {
            turn["task"] = json!(id);
            interactions.push(turn);
        }
    }
    ybs.cassette("t.cassette.json", interactions);
    let started = Instant::now();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    // Four servers, each bounded by its 2 s (plus the model's turns).
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
    for (task, expected) in [
        ("exits", "boom: cannot start"),
        ("silent", "did not answer `initialize` within 2s"),
        ("garbage", "did not answer `initialize` within 2s"),
    ] {
        let notes = notes(&run, task);
        assert!(
            notes
                .iter()
                .any(|note| note.contains("is not offered") && note.contains(expected)),
            "{task}: {notes:?}"
        );
        let calls = tool_calls(&ybs, task);
        assert_eq!(calls[0]["result"]["ok"], false, "{task}: {calls:?}");
    }
    let calls = tool_calls(&ybs, "hangs");
    let output = calls[0]["result"]["output"].as_str().unwrap();
    assert!(
        output.contains("did not answer `hang` within 2s") && output.contains("stopped"),
        "{output}"
    );
    assert!(calls[0]["duration_ms"].as_u64().unwrap() < 5000);
    assert!(
        notes(&run, "hangs")
            .iter()
            .any(|note| note.contains("did not answer `hang`"))
    );
    assert_eq!(survivors(&script), Vec::<String>::new());
}

#[test]
fn a_repository_config_cannot_declare_mcp_servers() {
    let ybs = Ybs::new();
    ybs.file(
        ".ybs.json",
        r#"{"version": 1, "tools": {"mcp": [{"name": "x", "command": "true"}]}}"#,
    );
    ybs.file("t.yaml", "prompt: p\ncommit: false\n");
    let run = ybs.run(["validate", "t.yaml"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("`tools.mcp` cannot be set in the repository's config"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_bad_mcp_entry_is_a_clear_error() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ntools:\n  mcp:\n    - name: a__b\n      command: x\n    - command: y\n",
    );
    let run = ybs.run(["validate", "t.yaml"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("t.yaml:4:13: invalid MCP server name `a__b`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("missing required field `name` in a `tools.mcp` entry"),
        "{}",
        run.stderr
    );
}
