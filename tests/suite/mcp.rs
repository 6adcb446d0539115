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
use crate::support::server::Server;
use crate::support::{Run, Ybs, wire};

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
def getenv(name: str) -> str:
    """A variable of the server's environment."""
    log("getenv")
    return os.environ.get(name, "<unset>")
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

/// A scratch dir whose ybs runs with the venv's `bin/` first on `PATH`,
/// the way a CI job that made a virtualenv runs it: a task file's server
/// named `python` is found there, and the venv stays visible inside the
/// sandbox even when it lives under the host's `/tmp` (a clone there).
pub(super) fn with_venv_on_path(python: &Path) -> Ybs {
    let bin = python.parent().expect("the venv's bin/");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Ybs::new().env("PATH", &path)
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
    let Some(venv_python) = python() else { return };
    let ybs = with_venv_on_path(&venv_python);
    let python = PathBuf::from("python");
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
    for name in ["files__list_dir", "files__read_file"] {
        assert!(offered.contains(&json!(name)), "{name} in {offered:?}");
    }
    // No rule can allow it: not offered, yet a call is decided (below).
    assert!(!offered.contains(&json!("files__delete_file")));
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
fn only_the_mcp_tools_the_policy_may_allow_are_offered_and_a_note_names_the_others() {
    // The server declares five tools; the policy can allow two. The
    // model is offered those two only (the others' schemas would cost
    // tokens and invite refused calls), and a note says which were not.
    let Some(venv_python) = python() else { return };
    let ybs = with_venv_on_path(&venv_python).env("OPENAI_API_KEY", "sk-test");
    let script = with_server(&ybs);
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: list the files\ncommit: false\ntools:\n  mcp:\n    - {}\npolicy:\n  allow: [files__list_dir, {{files__read_file: {{path: '*.txt'}}}}]\n",
            server_entry("files", Path::new("python"), &script, "ok", 30)
        ),
    );
    let server = Server::start(vec![wire::openai_sse_answer("nothing to do")]);
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
    ]);
    run.expect_code(0);
    let request = server.requests()[0].json();
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .expect("tools in the request")
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["files__list_dir", "files__read_file"]);
    let transcript = ybs.json("ybs-out/t/transcript.json");
    assert_eq!(
        transcript["manifest"]["tools"],
        json!(["files__list_dir", "files__read_file"])
    );
    let notes = notes(&run, "t");
    let withheld = notes
        .iter()
        .find(|note| note.starts_with("not offered to the model"))
        .unwrap_or_else(|| panic!("a note naming the tools not offered: {notes:?}"));
    for name in ["files__delete_file", "files__getenv", "files__hang"] {
        assert!(withheld.contains(&format!("`{name}`")), "{withheld}");
    }
    for name in ["files__list_dir", "files__read_file"] {
        assert!(!withheld.contains(&format!("`{name}`")), "{withheld}");
    }
    assert_eq!(survivors(&script), Vec::<String>::new());
}

#[test]
fn failing_servers_end_in_error_results_within_their_timeouts_and_leave_no_process() {
    let Some(venv_python) = python() else { return };
    let ybs = with_venv_on_path(&venv_python);
    let python = PathBuf::from("python");
    let script = with_server(&ybs);
    // The hanging server must start first (Python imports the SDK, slow
    // under load): it gets more time than the ones that never start.
    let task = |id: &str, server: &str, mode: &str, tool: &str, timeout: u64| {
        format!(
            "  - id: {id}\n    prompt: p\n    commit: false\n    tools:\n      builtin: [read_file]\n      mcp: [{}]\n    policy: {{ allow: [{server}__{tool}] }}\n",
            server_entry(server, &python, &script, mode, timeout)
        )
    };
    ybs.file(
        "t.yaml",
        &format!(
            "tasks:\n{}{}{}{}",
            task("exits", "dead", "exit", "list_dir", 2),
            task("silent", "mute", "silent", "list_dir", 2),
            task("garbage", "noise", "garbage", "list_dir", 2),
            task("hangs", "stuck", "ok", "hang", 8),
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
    // Each server is bounded by its timeout (plus the model's turns).
    assert!(
        started.elapsed() < Duration::from_secs(40),
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
                .any(|note| note.starts_with("warning: MCP server")
                    && note.contains("could not start")
                    && note.contains(expected)),
            "{task}: {notes:?}"
        );
        let calls = tool_calls(&ybs, task);
        assert_eq!(calls[0]["result"]["ok"], false, "{task}: {calls:?}");
    }
    let calls = tool_calls(&ybs, "hangs");
    let output = calls[0]["result"]["output"].as_str().unwrap();
    assert!(
        output.contains("did not answer `hang` within 8s") && output.contains("stopped"),
        "{output}"
    );
    let took = calls[0]["duration_ms"].as_u64().unwrap();
    assert!((8000..12_000).contains(&took), "{took} ms");
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

/// A shell tool for `./tools` answering `--schema` and echoing its input.
fn echo_tool(name: &str) -> String {
    format!(
        r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo '{{"name": "{name}", "description": "Echo a message", "parameters": {{"message": {{"type": "string", "required": true}}}}}}'
  exit 0
fi
input=$(cat)
printf '{{"success": true, "result": {{"echo": %s}}}}\n' "$input"
"#
    )
}

const SLOW_TOOL: &str = r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo '{"name": "slow", "description": "Sleep a second", "parameters": {}}'
  exit 0
fi
cat > /dev/null
sleep 1
echo '{"success": true, "result": "slept"}'
"#;

/// Holds its call forever (in a child) after saying it started.
const HOLD_TOOL: &str = r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo '{"name": "hold", "description": "Never ends", "parameters": {}}'
  exit 0
fi
cat > /dev/null
touch hold.started
sleep 300
"#;

fn executable(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Drives `ybs tools serve` with the Python SDK's stdio client: list,
/// call, refusal, hot add (waiting for `list_changed`), 10 concurrent
/// calls, the metrics resource. Prints one JSON document.
const CLIENT: &str = r#"
import asyncio, json, os, sys, time
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

async def main():
    ybs, cwd = sys.argv[1], sys.argv[2]
    env = {k: os.environ[k] for k in ("PATH", "HOME", "XDG_CACHE_HOME") if k in os.environ}
    params = StdioServerParameters(command=ybs, args=["tools", "serve", "--policy", "policy.yaml"], cwd=cwd, env=env)
    changed = asyncio.Event()
    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ToolListChangedNotification):
            changed.set()
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            listed = await session.list_tools()
            out["tools"] = {t.name: {"status": (t.meta or {}).get("status"), "input": t.inputSchema, "output": t.outputSchema, "description": t.description} for t in listed.tools}
            r = await session.call_tool("echo", {"message": "hi"})
            out["echo"] = {"isError": r.isError, "text": r.content[0].text, "structured": r.structuredContent}
            r = await session.call_tool("secret", {"message": "hi"})
            out["secret"] = {"isError": r.isError, "text": r.content[0].text}
            tools = os.path.join(cwd, "tools")
            with open(os.path.join(tools, "echo")) as f:
                body = f.read().replace('"echo"', '"late"')
            with open(os.path.join(tools, ".late.tmp"), "w") as f:
                f.write(body)
            os.chmod(os.path.join(tools, ".late.tmp"), 0o755)
            os.rename(os.path.join(tools, ".late.tmp"), os.path.join(tools, "late"))
            added = time.monotonic()
            await asyncio.wait_for(changed.wait(), 30)
            out["hot_add_s"] = time.monotonic() - added
            listed = await session.list_tools()
            out["after"] = sorted(t.name for t in listed.tools)
            r = await session.call_tool("late", {"message": "new"})
            out["late"] = {"isError": r.isError, "text": r.content[0].text}
            started = time.monotonic()
            results = await asyncio.gather(*[session.call_tool("slow", {}) for _ in range(10)])
            out["concurrent_s"] = time.monotonic() - started
            out["concurrent"] = [r.content[0].text for r in results]
            res = await session.read_resource("ybs://metrics")
            out["metrics"] = json.loads(res.contents[0].text)
    print(json.dumps(out))

asyncio.run(main())
"#;

fn serve_dir() -> Ybs {
    let ybs = Ybs::new();
    let cache = ybs.home().join(".cache");
    let ybs = ybs.env("XDG_CACHE_HOME", cache.to_str().unwrap());
    executable(&ybs.path().join("tools/echo"), &echo_tool("echo"));
    executable(&ybs.path().join("tools/secret"), &echo_tool("secret"));
    executable(&ybs.path().join("tools/slow"), SLOW_TOOL);
    executable(&ybs.path().join("tools/hold"), HOLD_TOOL);
    ybs.file("policy.yaml", "allow: [echo, slow, late, hold]\n");
    ybs
}

#[test]
fn tools_serve_answers_the_python_sdk_client_lists_calls_refuses_hot_adds_and_runs_ten_at_once() {
    let Some(python) = python() else { return };
    let ybs = serve_dir();
    ybs.file("client.py", CLIENT);
    let ybs_bin = assert_cmd::cargo::cargo_bin("ybs");
    // The client runs with the environment `ybs.command()` gives ybs
    // (HOME, XDG_CACHE_HOME), and passes it on to the server it starts.
    let command = ybs.command();
    let output = std::process::Command::new(&python)
        .arg("client.py")
        .arg(&ybs_bin)
        .arg(ybs.path())
        .current_dir(ybs.path())
        .envs(
            command
                .get_envs()
                .filter_map(|(key, value)| Some((key.to_owned(), value?.to_owned()))),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let out: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    // tools/list: names, schemas, statuses.
    let echo = &out["tools"]["echo"];
    assert_eq!(echo["status"], "ready");
    assert_eq!(echo["description"], "Echo a message");
    assert_eq!(echo["input"]["required"], json!(["message"]));
    assert_eq!(echo["output"]["required"], json!(["success"]));
    assert_eq!(out["tools"]["slow"]["status"], "ready");
    assert!(out["tools"]["secret"]["status"].is_string());
    // tools/call.
    assert_eq!(out["echo"]["isError"], false);
    assert_eq!(
        out["echo"]["structured"],
        json!({"success": true, "result": {"echo": {"message": "hi"}}})
    );
    // A tool the policy does not allow: refused, never run.
    assert_eq!(out["secret"]["isError"], true);
    let refusal = out["secret"]["text"].as_str().unwrap();
    assert!(refusal.contains("denied by policy"), "{refusal}");
    // Hot add: announced and callable within 30 s.
    assert!(out["hot_add_s"].as_f64().unwrap() < 30.0);
    assert!(out["after"].as_array().unwrap().contains(&json!("late")));
    assert_eq!(out["late"]["isError"], false);
    // Ten one-second calls at once take about one second, not ten.
    assert_eq!(out["concurrent"], json!(vec!["slept"; 10]));
    assert!(
        out["concurrent_s"].as_f64().unwrap() < 5.0,
        "{}",
        out["concurrent_s"]
    );
    // Metrics resource: counts and percentiles per tool.
    let metrics = out["metrics"]["tools"].as_array().unwrap();
    let slow = metrics.iter().find(|tool| tool["name"] == "slow").unwrap();
    assert_eq!(slow["calls"], 10);
    assert_eq!(slow["failures"], 0);
    assert!(slow["p50_ms"].as_u64().unwrap() >= 1000);
    assert!(slow["p95_ms"].as_u64().unwrap() >= slow["p50_ms"].as_u64().unwrap());
    assert!(metrics.iter().all(|tool| tool["name"] != "secret"));
}

/// Raw JSON-RPC over the pipes of a `ybs tools serve` child.
struct RawServe {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl RawServe {
    fn start(ybs: &Ybs, extra: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = ybs
            .command()
            .args(["tools", "serve", "--policy", "policy.yaml"])
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut serve = Self {
            child,
            stdin,
            lines,
        };
        serve.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        );
        let reply = serve.next();
        assert_eq!(reply["id"], 1, "{reply}");
        serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        serve
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&mut self) -> Value {
        serde_json::from_str(&self.lines.next().unwrap().unwrap()).unwrap()
    }

    /// Starts `hold` and waits until it runs.
    fn hold(&mut self, ybs: &Ybs) {
        self.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "hold", "arguments": {}}}));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ybs.path().join("hold.started").exists() {
            assert!(Instant::now() < deadline, "hold never started");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `limit` for the server to exit.
    fn exits_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        false
    }
}

#[test]
fn tools_serve_ends_with_every_child_on_stdin_eof() {
    let ybs = serve_dir();
    let hold = ybs.path().join("tools/hold").to_string_lossy().into_owned();
    let mut serve = RawServe::start(&ybs, &[]);
    serve.hold(&ybs);
    assert!(!survivors(&hold).is_empty(), "the held call runs");
    drop(serve.stdin.take());
    assert!(serve.exits_within(Duration::from_secs(5)));
    assert_eq!(serve.child.wait().unwrap().code(), Some(0));
    assert_eq!(survivors(&hold), Vec::<String>::new());
}

#[test]
fn tools_serve_ends_with_every_child_on_sigterm_and_status_shows_its_metrics() {
    let ybs = serve_dir();
    let hold = ybs.path().join("tools/hold").to_string_lossy().into_owned();
    let mut serve = RawServe::start(&ybs, &[]);
    serve.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "x"}}}));
    let reply = serve.next();
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // The status file follows the calls within a few seconds.
    let deadline = Instant::now() + Duration::from_secs(10);
    let doc = loop {
        let status = ybs.run(["tools", "status", "--json"]);
        status.expect_code(0);
        let doc: Value = serde_json::from_str(&status.stdout).unwrap();
        if doc["servers"][0]["tools"][0]["calls"] == 1 || Instant::now() > deadline {
            break doc;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let servers = doc["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1, "{doc}");
    assert_eq!(servers[0]["pid"], serve.child.id());
    assert_eq!(servers[0]["tools"][0]["name"], "echo");
    assert_eq!(servers[0]["tools"][0]["calls"], 1);
    let table = ybs.run(["tools", "status"]);
    assert!(table.stdout.contains("echo"), "{}", table.stdout);
    serve.hold(&ybs);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(serve.exits_within(Duration::from_secs(5)));
    assert_eq!(survivors(&hold), Vec::<String>::new());
    let status = ybs.run(["tools", "status", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&status.stdout).unwrap()["servers"],
        json!([])
    );
}

#[test]
fn tools_serve_builtin_offers_the_file_tools_under_the_policy() {
    let ybs = serve_dir();
    ybs.file("policy.yaml", "allow: [{read_file: {path: 'notes/**'}}]\n");
    ybs.file("notes/a.txt", "alpha\n");
    ybs.file("other.txt", "beta\n");
    let mut serve = RawServe::start(&ybs, &["--builtin"]);
    serve.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = serve.next();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    for name in ["read_file", "write_file", "list_files", "echo"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    assert!(!names.contains(&"run_shell"));
    let mut read = |id: u64, path: &str| {
        serve.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": path}}}));
        serve.next()["result"].clone()
    };
    let allowed = read(3, "notes/a.txt");
    assert_eq!(allowed["isError"], false, "{allowed}");
    assert!(
        allowed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );
    let denied = read(4, "other.txt");
    assert_eq!(denied["isError"], true, "{denied}");
    assert!(
        denied["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("denied by policy")
    );
    drop(serve.stdin.take());
    assert!(serve.exits_within(Duration::from_secs(5)));
}

#[test]
fn operator_config_servers_serve_every_task_and_a_task_cannot_replace_one() {
    let Some(python) = python() else { return };
    let ybs = Ybs::new();
    let script = with_server(&ybs);
    ybs.file("notes.txt", "from the operator's server\n");
    let config = json!({"version": 1, "tools": {"mcp": [{
        "name": "ops", "command": python, "args": [script, "ok"], "timeout_seconds": 30,
        "env": {"OPS_API_TOKEN": "tok-0perator-s3cret-value"}}]}});
    let config_path = ybs.home().join("ops.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: p\ncommit: false\ntools:\n  builtin: [read_file]\n  mcp: [{}]\npolicy: {{ allow: [ops__read_file, ops__getenv] }}\n",
            server_entry("ops", &python, "/nonexistent/server.py", "ok", 5)
        ),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("ops__read_file", json!({"path": "notes.txt"})),
            call("ops__getenv", json!({"name": "OPS_API_TOKEN"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml", "--config", config_path.to_str().unwrap()]);
    run.expect_code(0);
    let calls = tool_calls(&ybs, "t");
    assert_eq!(
        calls[0]["result"]["output"], "from the operator's server\n",
        "{calls:?}"
    );
    assert!(
        notes(&run, "t")
            .iter()
            .any(|note| note.contains("the task's MCP server `ops` is not started"))
    );
    // The declared env reaches the server, and a secret-looking value of
    // the operator's is masked in what comes back.
    let token = calls[1]["result"]["output"].as_str().unwrap();
    assert!(!token.contains("s3cret"), "{token}");
    assert_eq!(token, "[REDACTED]");
    let transcript = std::fs::read_to_string(ybs.path().join("ybs-out/t/transcript.json")).unwrap();
    assert!(!transcript.contains("tok-0perator-s3cret-value"));
    assert_eq!(survivors(&script), Vec::<String>::new());
}

#[test]
fn tools_serve_exports_a_span_per_call_when_opentelemetry_is_set() {
    use crate::support::server::{Reply, Server};
    let collector = Server::start((0..20).map(|_| Reply::json(200, &json!({}))).collect());
    let ybs = serve_dir()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    ybs.file("policy.yaml", "allow: [{read_file: {path: 'notes/**'}}]\n");
    ybs.file("notes/a.txt", "alpha\n");
    ybs.file("other.txt", "beta\n");
    let mut serve = RawServe::start(&ybs, &["--builtin"]);
    for (id, path) in [(2, "notes/a.txt"), (3, "other.txt")] {
        serve.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": path}}}));
        assert_eq!(serve.next()["id"], id);
    }
    drop(serve.stdin.take());
    assert!(serve.exits_within(Duration::from_secs(15)));
    let spans: Vec<Value> = collector
        .requests()
        .iter()
        .flat_map(|request| {
            request.json()["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let attribute = |span: &Value, key: &str| -> Value {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|attribute| attribute["key"] == key)
            .map(|attribute| attribute["value"].clone())
            .unwrap_or(Value::Null)
    };
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|span| span["name"] == "execute_tool read_file")
        .collect();
    assert_eq!(calls.len(), 2, "{spans:#?}");
    let verdicts: Vec<Value> = calls
        .iter()
        .map(|span| attribute(span, "ybs.tool.verdict")["stringValue"].clone())
        .collect();
    assert_eq!(verdicts, [json!("allow"), json!("deny")]);
    assert_eq!(
        attribute(calls[0], "gen_ai.tool.name")["stringValue"],
        "read_file"
    );
    // Names and verdicts only: no argument or file content.
    let all: String = collector.requests().iter().map(|r| r.text()).collect();
    assert!(
        !all.contains("alpha") && !all.contains("notes/a.txt"),
        "{all}"
    );
}

/// docs/security.md S1: a task file cannot widen what confined code sees
/// of the host's `/tmp` by naming a program there as an MCP server.
#[test]
fn a_task_files_server_under_the_hosts_tmp_does_not_make_its_directory_visible() {
    let outside = tempfile::Builder::new()
        .prefix("ybs-mcp-hidden")
        .tempdir_in("/tmp")
        .unwrap();
    let bin = outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "host tmp secret\n").unwrap();
    executable(&bin.join("srv"), "#!/bin/sh\nexit 1\n");
    let ybs = Ybs::new();
    let dir = outside.path().display();
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: p\ncommit: false\ntools:\n  builtin: [run_shell]\n  mcp:\n    - {{name: srv, command: '{dir}/bin/srv', timeout_seconds: 5}}\npolicy: {{ allow: [run_shell] }}\n"
        ),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "run_shell",
                json!({"command": format!("cat {dir}/secret.txt; ls {dir}/bin; echo end")}),
            ),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    let calls = tool_calls(&ybs, "t");
    let output = calls[0]["result"]["output"].as_str().unwrap_or_default();
    assert!(output.contains("end"), "{run:?} {calls:?}");
    assert!(!output.contains("host tmp secret"), "{output}");
    assert!(!output.contains("srv"), "{output}");
}

/// Drives `ybs tools serve --listen` with the Python SDK's Streamable
/// HTTP client: two sessions at once (list and call; a refused call and
/// ten concurrent ones), then a call that never ends, left running.
/// Prints one JSON document, then waits to be killed.
const HTTP_CLIENT: &str = r#"
import asyncio, json, os, sys, time
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def one(url, work):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)

async def first(session):
    listed = await session.list_tools()
    r = await session.call_tool("echo", {"message": "over http"})
    return {"tools": sorted(t.name for t in listed.tools), "echo": r.structuredContent, "isError": r.isError}

async def second(session):
    r = await session.call_tool("secret", {"message": "x"})
    refused = {"isError": r.isError, "text": r.content[0].text}
    started = time.monotonic()
    results = await asyncio.gather(*[session.call_tool("slow", {}) for _ in range(10)])
    return {"refused": refused, "slow": [r.content[0].text for r in results], "slow_s": time.monotonic() - started}

async def main():
    url = sys.argv[1]
    a, b = await asyncio.gather(one(url, first), one(url, second))
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            held = asyncio.create_task(session.call_tool("hold", {}))
            while not os.path.exists("hold.started"):
                await asyncio.sleep(0.05)
            print(json.dumps({"a": a, "b": b}), flush=True)
            await held

asyncio.run(main())
"#;

#[test]
fn tools_serve_listens_over_streamable_http_for_several_sessions_and_ends_every_child_on_sigterm() {
    use std::io::{BufRead, Read, Write};
    let Some(python) = python() else { return };
    let ybs = serve_dir();
    ybs.file("client.py", HTTP_CLIENT);
    let hold = ybs.path().join("tools/hold").to_string_lossy().into_owned();
    let mut serve = ybs
        .command()
        .args(["tools", "serve", "--policy", "policy.yaml"])
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(serve.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );

    let mut client = std::process::Command::new(&python)
        .arg("client.py")
        .arg(&url)
        .current_dir(ybs.path())
        .env("NO_PROXY", "*")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    std::io::BufReader::new(client.stdout.take().unwrap())
        .read_line(&mut out)
        .unwrap();
    let parsed: Result<Value, _> = serde_json::from_str(out.trim());
    let Ok(out) = parsed else {
        let _ = client.kill();
        let mut stderr = String::new();
        let _ = client.stderr.take().unwrap().read_to_string(&mut stderr);
        panic!("client: {out}\n{stderr}");
    };
    assert!(
        out["a"]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("echo"))
    );
    assert_eq!(
        out["a"]["echo"],
        json!({"success": true, "result": {"echo": {"message": "over http"}}})
    );
    assert_eq!(out["b"]["refused"]["isError"], true);
    assert!(
        out["b"]["refused"]["text"]
            .as_str()
            .unwrap()
            .contains("denied by policy")
    );
    assert_eq!(out["b"]["slow"], json!(vec!["slept"; 10]));
    assert!(out["b"]["slow_s"].as_f64().unwrap() < 5.0, "{out}");

    // Only /mcp, and only for a loopback Host (DNS rebinding).
    let authority = url
        .strip_prefix("http://")
        .unwrap()
        .strip_suffix("/mcp")
        .unwrap()
        .to_owned();
    let raw = |request: String| {
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply);
        reply
    };
    let other = raw(format!(
        "GET /other HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    ));
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let rebound = raw(format!(
        "POST /mcp HTTP/1.1\r\nHost: attacker.example:80\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");

    // The held call runs; SIGTERM ends the server and it.
    assert!(!survivors(&hold).is_empty(), "the held call runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
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
    assert_eq!(survivors(&hold), Vec::<String>::new());
    let _ = client.kill();
    let _ = client.wait();
}

#[test]
fn tools_serve_listens_on_loopback_only() {
    let ybs = serve_dir();
    let run = ybs.run([
        "tools",
        "serve",
        "--policy",
        "policy.yaml",
        "--listen",
        "0.0.0.0:0",
    ]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("not a loopback address") && run.stderr.contains("hint:"),
        "{}",
        run.stderr
    );
    let run = ybs.run(["tools", "serve", "--listen", "localhost:http"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("expected 127.0.0.1:PORT, [::1]:PORT or localhost:PORT"),
        "{}",
        run.stderr
    );
}

/// Issue 21 item 9: a task file's MCP server that cannot start is said on
/// the console and in the summary (the task goes on without it), and is an
/// error (`tool_unavailable`) when the task marks it `required: true`.
#[test]
fn an_mcp_server_that_cannot_start_is_said_and_fails_a_task_that_requires_it() {
    let ybs = Ybs::new();
    for (id, required) in [("opt", false), ("req", true)] {
        ybs.file(
            &format!("{id}.yaml"),
            &format!(
                "id: {id}\nprompt: p\ncommit: false\ntools:\n  builtin: [read_file]\n  mcp:\n    - {{name: gone, command: /nonexistent/ybs-mcp-server, timeout_seconds: 5, required: {required}}}\npolicy: {{ allow: [read_file] }}\n"
            ),
        );
        ybs.cassette(&format!("{id}.cassette.json"), vec![answer("done")]);
    }
    let said = "MCP server `gone` could not start";
    let run = ybs.run(["run", "opt.yaml"]);
    run.expect_code(0);
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(console.contains(&format!("warning: {said}")), "{console}");
    let summary = ybs.read("ybs-out/summary.md");
    // Escaped for Markdown there.
    assert!(
        summary.contains("## Warnings")
            && summary.contains("- ⚠ opt: MCP server \\`gone\\` could not start"),
        "{summary}"
    );

    let run = ybs.run(["run", "req.yaml"]);
    run.expect_code(4);
    let transcript = run.json("ybs-out/req/transcript.json");
    assert_eq!(transcript["status"], "error", "{transcript}");
    assert_eq!(transcript["reason"], "tool_unavailable", "{transcript}");
    assert!(
        transcript["message"].as_str().unwrap().contains(said),
        "{transcript}"
    );
    assert!(ybs.read("ybs-out/summary.md").contains("tool_unavailable"));
}

#[test]
fn a_call_that_breaks_the_servers_input_schema_is_refused_before_the_server_is_asked() {
    let Some(venv_python) = python() else { return };
    let ybs = with_venv_on_path(&venv_python);
    let python = PathBuf::from("python");
    let script = with_server(&ybs);
    ybs.file("notes.txt", "the notes\n");
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: read the notes\ncommit: false\ntools:\n  builtin: [read_file]\n  mcp:\n    - {}\npolicy:\n  allow: [files__read_file]\n",
            server_entry("files", &python, &script, "ok", 30)
        ),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("files__read_file", json!({"path": 5})),
            call("files__read_file", json!({"path": "notes.txt"})),
            answer("done"),
        ],
    );
    ybs.run(["run", "t.yaml"]).expect_code(0);
    let calls = tool_calls(&ybs, "t");
    let refused = calls[0]["result"]["output"].as_str().unwrap();
    assert_eq!(calls[0]["result"]["ok"], false, "{:?}", calls[0]);
    assert!(
        refused.contains("do not match the tool's input schema")
            && refused.contains("parameter `path`: 5 is not of type \"string\""),
        "{refused}"
    );
    assert_eq!(calls[1]["result"]["output"], "the notes\n");
    assert_eq!(ybs.read("calls.log"), "read_file\n");
    assert_eq!(survivors(&script), Vec::<String>::new());
}
