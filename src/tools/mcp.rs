//! MCP servers as tools (docs/mcp.md): each server of `tools.mcp` is a
//! confined child speaking MCP on its stdin and stdout (the official
//! SDK, `rmcp`, as client), and each of its tools joins the registry as
//! `SERVER__tool` with the server's JSON Schema.
//!
//! Lifecycle: a server starts eagerly when its task starts (its tools
//! must be known to be offered); start, `initialize` and `tools/list`
//! together get the server's timeout. It runs like every subprocess
//! ([`Service`]: own process group, scrubbed environment plus the
//! server's declared `env`, the task's sandbox) and is stopped, its whole
//! process tree killed, when the task ends ([`McpServer::stop`], and on
//! drop as a last resort).
//!
//! Failures never hang a task: every exchange is bounded by the server's
//! `timeout_seconds`. A call that times out or loses the server stops the
//! server (the next call starts it again); the model gets an error result
//! and the server keeps a note for the transcript ([`McpServer::take_notes`]).
//! A line that is not JSON-RPC is ignored by the SDK, so a server that
//! answers only garbage times out like a silent one.
//!
//! This module decides nothing: every call goes through the policy in
//! the agent like any tool.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError, ServiceExt};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;

use crate::core::text::truncate_middle;
use crate::tools::process::{ProcessSpec, Service};
use crate::tools::{ChildEnv, ToolCtx};

mod tool;
pub use tool::{InvalidToolName, McpTool};

/// The default of `timeout_seconds`: per call, and for the start.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Between a server's name and its tool's in the registry.
pub const SEPARATOR: &str = "__";
/// Bytes of a server's stderr kept for messages (the tail).
const STDERR_KEEP: usize = 4096;
/// The protocol version asked for in `initialize`: one every current SDK
/// (the Python SDK 1.x included) speaks.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// One `tools.mcp` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSpec {
    /// The prefix of its tools (`NAME__tool`).
    pub name: String,
    /// A program name (looked up in the child's `PATH`) or a path.
    pub command: String,
    pub args: Vec<String>,
    /// Set in the server's environment, over the scrubbed one.
    pub env: BTreeMap<String, String>,
    /// Per call, and for the start.
    pub timeout: Duration,
    /// A server that cannot start makes the task an error (else the task
    /// goes on without its tools, saying so).
    pub required: bool,
}

/// Returns true if `name` may name a server: letters, digits, `-` and
/// single `_`s (so `SERVER__tool` splits one way only), at most 32 bytes.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && !name.contains(SEPARATOR)
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// One server: its spec, where it runs, and the connection once started.
pub struct McpServer {
    spec: ServerSpec,
    cwd: std::path::PathBuf,
    env: ChildEnv,
    sandbox: Option<Arc<crate::tools::sandbox::Sandbox>>,
    output_cap: usize,
    state: tokio::sync::Mutex<State>,
    notes: StdMutex<Vec<String>>,
    /// Set once a process of the server could not be seen gone after
    /// `SIGKILL`: from then on [`McpServer::stop`] says so.
    unstoppable: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    running: Option<Running>,
    /// Counts starts, so a failure stops only the connection it saw.
    generation: u64,
}

struct Running {
    client: RunningService<RoleClient, ClientConfig>,
    process: Service,
    stderr: Arc<StdMutex<Vec<u8>>>,
}

/// What a server did wrong, said after its name (`MCP server `fs` did
/// not answer `initialize` within 5s`).
#[derive(Debug, thiserror::Error)]
pub enum Trouble {
    #[error("could not be started: {0}")]
    Spawn(std::io::Error),
    #[error("could not be started: its pipes are missing")]
    Pipes,
    #[error("internal error building `initialize`: {0}")]
    Initialize(serde_json::Error),
    /// `step`: `initialize` or the tool called.
    #[error("failed during `{step}`: {error}")]
    Failed {
        step: String,
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("did not answer `{step}` within {}", seconds(*.timeout))]
    Silent { step: String, timeout: Duration },
    #[error("`tools/list` failed: {0}")]
    List(ServiceError),
    #[error("is not running")]
    NotRunning,
}

/// A [`Trouble`], whether it stopped the server, and the server's
/// stderr tail when it printed any.
#[derive(Debug, thiserror::Error)]
#[error(
    "{trouble}{}{}",
    if *.stopped { "; the server was stopped (the next call starts it again)" } else { "" },
    if .stderr.is_empty() { String::new() } else { format!("\nstderr (tail):\n{}", .stderr) }
)]
pub struct ServerError {
    pub trouble: Trouble,
    pub stopped: bool,
    pub stderr: String,
}

impl ServerError {
    fn new(trouble: Trouble, stderr: &StdMutex<Vec<u8>>) -> Self {
        Self {
            trouble,
            stopped: false,
            stderr: stderr_tail(stderr),
        }
    }
}

impl From<Trouble> for ServerError {
    fn from(trouble: Trouble) -> Self {
        Self {
            trouble,
            stopped: false,
            stderr: String::new(),
        }
    }
}

/// Why a call has no result; its text is what the model sees.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The tool's own error result, as it wrote it.
    #[error("{0}")]
    Tool(String),
    #[error("MCP server `{server}` {error}")]
    Server { server: String, error: ServerError },
    #[error("internal error building the call: {0}")]
    Build(serde_json::Error),
    /// A JSON-RPC error: the server is still fine.
    #[error("MCP server `{server}` refused `{tool}`: {message}")]
    Refused {
        server: String,
        tool: String,
        message: String,
    },
}

/// A tool the server listed.
#[derive(Debug, Clone)]
pub struct RemoteTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

impl McpServer {
    /// A server that runs in `ctx`'s workdir, environment and sandbox.
    pub fn new(spec: ServerSpec, ctx: &ToolCtx) -> Self {
        Self {
            spec,
            cwd: ctx.workdir.clone(),
            env: ctx.env.clone(),
            sandbox: ctx.sandbox.clone(),
            output_cap: ctx.output_cap_bytes,
            state: tokio::sync::Mutex::new(State::default()),
            notes: StdMutex::new(Vec::new()),
            unstoppable: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn timeout(&self) -> Duration {
        self.spec.timeout
    }

    /// Starts the server and lists its tools, all within its timeout.
    pub async fn start(&self) -> Result<Vec<RemoteTool>, ServerError> {
        let mut state = self.state.lock().await;
        let running = self.connect().await?;
        let listed = tokio::time::timeout(self.spec.timeout, running.client.list_all_tools()).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(error)) => {
                let error = ServerError::new(Trouble::List(error), &running.stderr);
                self.reap(running.process).await;
                return Err(error);
            }
            Err(_) => {
                let trouble = Trouble::Silent {
                    step: "tools/list".to_owned(),
                    timeout: self.spec.timeout,
                };
                let error = ServerError::new(trouble, &running.stderr);
                self.reap(running.process).await;
                return Err(error);
            }
        };
        state.generation += 1;
        state.running = Some(running);
        Ok(tools
            .into_iter()
            .map(|tool| RemoteTool {
                name: tool.name.to_string(),
                description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*tool.input_schema).clone()),
            })
            .collect())
    }

    /// Spawns the process and runs `initialize`.
    async fn connect(&self) -> Result<Running, ServerError> {
        let mut env = self.env.clone();
        for (name, value) in &self.spec.env {
            env.set(name, value);
        }
        let spec = ProcessSpec {
            program: OsString::from(&self.spec.command),
            args: self.spec.args.iter().map(OsString::from).collect(),
            cwd: self.cwd.clone(),
            env: &env,
            stdin: None,
            timeout: self.spec.timeout,
            output_cap: self.output_cap,
            sandbox: self.sandbox.clone(),
        };
        let mut process = Service::spawn(&spec).map_err(Trouble::Spawn)?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            process.stdin.take(),
            process.stdout.take(),
            process.stderr.take(),
        ) else {
            self.reap(process).await;
            return Err(Trouble::Pipes.into());
        };
        let tail = Arc::new(StdMutex::new(Vec::new()));
        let reader = tokio::spawn(keep_tail(stderr, tail.clone()));
        let info: ClientConfig = serde_json::from_value(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "ybs", "version": env!("CARGO_PKG_VERSION")},
        }))
        .map_err(Trouble::Initialize)?;
        let handshake = tokio::time::timeout(self.spec.timeout, info.serve((stdout, stdin))).await;
        let failure = match handshake {
            Ok(Ok(client)) => {
                return Ok(Running {
                    client,
                    process,
                    stderr: tail,
                });
            }
            Ok(Err(error)) => Trouble::Failed {
                step: "initialize".to_owned(),
                error: Box::new(error),
            },
            Err(_) => Trouble::Silent {
                step: "initialize".to_owned(),
                timeout: self.spec.timeout,
            },
        };
        // Let the last words of a dying server reach the tail.
        let _ = tokio::time::timeout(Duration::from_millis(200), process.wait()).await;
        let _ = tokio::time::timeout(Duration::from_millis(200), reader).await;
        let error = ServerError::new(failure, &tail);
        self.reap(process).await;
        Err(error)
    }

    /// The connection's peer, starting the server again if a failure
    /// stopped it.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), ServerError> {
        let mut state = self.state.lock().await;
        if state.running.is_none() {
            let running = self.connect().await?;
            state.generation += 1;
            state.running = Some(running);
            self.note(format!("MCP server `{}` was started again", self.spec.name));
        }
        let Some(running) = &state.running else {
            return Err(Trouble::NotRunning.into());
        };
        Ok((running.client.peer().clone(), state.generation))
    }

    /// Calls `tool` with `arguments`; the error is the model's result.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<String, CallError> {
        let server = || self.spec.name.clone();
        let (peer, generation) = self.peer().await.map_err(|error| CallError::Server {
            server: server(),
            error,
        })?;
        let params: CallToolRequestParams =
            serde_json::from_value(json!({"name": tool, "arguments": arguments}))
                .map_err(CallError::Build)?;
        match tokio::time::timeout(self.spec.timeout, peer.call_tool(params)).await {
            Ok(Ok(result)) => {
                let text = self.result_text(&result);
                if result.is_error == Some(true) {
                    Err(CallError::Tool(text))
                } else {
                    Ok(text)
                }
            }
            Ok(Err(ServiceError::McpError(error))) => Err(CallError::Refused {
                server: server(),
                tool: tool.to_owned(),
                message: error.message.to_string(),
            }),
            Ok(Err(error)) => {
                let why = Trouble::Failed {
                    step: tool.to_owned(),
                    error: Box::new(error),
                };
                Err(self.fail(generation, why).await)
            }
            Err(_) => {
                let why = Trouble::Silent {
                    step: tool.to_owned(),
                    timeout: self.spec.timeout,
                };
                Err(self.fail(generation, why).await)
            }
        }
    }

    /// Stops the connection `generation` (if still current) after `why`;
    /// returns the error for the model and notes it for the transcript.
    async fn fail(&self, generation: u64, why: Trouble) -> CallError {
        let mut state = self.state.lock().await;
        let mut error = ServerError::from(why);
        if state.generation == generation
            && let Some(running) = state.running.take()
        {
            error.stopped = true;
            error.stderr = stderr_tail(&running.stderr);
            self.reap(running.process).await;
        }
        let error = CallError::Server {
            server: self.spec.name.clone(),
            error,
        };
        self.note(error.to_string());
        error
    }

    /// Stops the server and its whole process tree; `false` when a
    /// process of it (now or earlier) could not be seen gone. A later
    /// call starts it again.
    pub async fn stop(&self) -> bool {
        let running = self.state.lock().await.running.take();
        if let Some(running) = running {
            let Running {
                client, process, ..
            } = running;
            drop(client);
            self.reap(process).await;
        }
        !self.unstoppable.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops `process`, remembering when it would not go.
    async fn reap(&self, process: Service) {
        if !process.stop().await {
            self.unstoppable
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Notes for the transcript gathered since the last call.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn note(&self, note: String) {
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(note);
    }

    /// What the model sees of a result: text blocks as they are, other
    /// blocks as JSON, the structured content when there is nothing else;
    /// capped at the task's output cap.
    fn result_text(&self, result: &CallToolResult) -> String {
        let mut parts = Vec::new();
        for block in &result.content {
            let value = serde_json::to_value(block).unwrap_or(Value::Null);
            match value.get("text").and_then(Value::as_str) {
                Some(text) if value.get("type") == Some(&json!("text")) => {
                    parts.push(text.to_owned());
                }
                _ => parts.push(value.to_string()),
            }
        }
        if parts.is_empty()
            && let Some(structured) = &result.structured_content
        {
            parts.push(structured.to_string());
        }
        let text = parts.join("\n");
        if text.len() > self.output_cap {
            truncate_middle(&text, self.output_cap).0
        } else {
            text
        }
    }
}

/// `12s`, `1.5s`.
fn seconds(duration: Duration) -> String {
    format!("{}s", duration.as_secs_f64())
}

/// Reads `stderr` to its end, keeping the last [`STDERR_KEEP`] bytes.
async fn keep_tail(mut stderr: impl tokio::io::AsyncRead + Unpin, tail: Arc<StdMutex<Vec<u8>>>) {
    let mut buffer = vec![0u8; 4096];
    loop {
        match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                let mut kept = tail.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend_from_slice(&buffer[..read]);
                if kept.len() > STDERR_KEEP {
                    let cut = kept.len() - STDERR_KEEP;
                    kept.drain(..cut);
                }
            }
        }
    }
}

/// The server's stderr tail as text, trimmed (empty when it printed
/// nothing).
fn stderr_tail(tail: &StdMutex<Vec<u8>>) -> String {
    let kept = tail.lock().unwrap_or_else(|e| e.into_inner());
    String::from_utf8_lossy(&kept).trim().to_owned()
}

/// What [`start_all`] started, and what it could not.
pub struct Started {
    pub servers: Vec<Arc<McpServer>>,
    pub tools: Vec<McpTool>,
    /// A note per tool that is not offered.
    pub notes: Vec<String>,
    /// Each server that could not start, with the message saying why.
    pub failed: Vec<(ServerSpec, String)>,
}

/// Starts every server (concurrently); returns the servers that started,
/// their tools, a note per tool that is not offered, and the servers
/// that could not start.
pub async fn start_all(specs: &[ServerSpec], ctx: &ToolCtx) -> Started {
    let servers: Vec<Arc<McpServer>> = specs
        .iter()
        .map(|spec| Arc::new(McpServer::new(spec.clone(), ctx)))
        .collect();
    let started = futures_util::future::join_all(servers.iter().map(|server| server.start())).await;
    let mut tools = Vec::new();
    let mut notes = Vec::new();
    let mut running = Vec::new();
    let mut failed = Vec::new();
    for (server, result) in servers.into_iter().zip(started) {
        match result {
            Ok(listed) => {
                for tool in listed {
                    match McpTool::new(server.clone(), tool) {
                        Ok(tool) => tools.push(tool),
                        Err(note) => notes.push(note.to_string()),
                    }
                }
                running.push(server);
            }
            Err(error) => failed.push((
                server.spec.clone(),
                format!(
                    "MCP server `{}` could not start; the task goes on without its tools: it {error}",
                    server.name()
                ),
            )),
        }
    }
    Started {
        servers: running,
        tools,
        notes,
        failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool;
    use crate::tools::testing::Fixture;

    fn server(fixture: &Fixture, command: &str, args: &[&str]) -> Arc<McpServer> {
        let spec = ServerSpec {
            name: "fs".to_owned(),
            command: command.to_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            env: BTreeMap::from([("MARK".to_owned(), "declared".to_owned())]),
            timeout: Duration::from_secs(2),
            required: false,
        };
        Arc::new(McpServer::new(spec, &fixture.ctx))
    }

    fn remote(name: &str, input_schema: Value) -> RemoteTool {
        RemoteTool {
            name: name.to_owned(),
            description: String::new(),
            input_schema,
        }
    }

    #[test]
    fn server_names_split_one_way_only() {
        for good in ["fs", "git-hub", "my_db", "a1"] {
            assert!(valid_server_name(good), "{good}");
        }
        for bad in ["", "a__b", "a.b", "a b", &"x".repeat(33)] {
            assert!(!valid_server_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_tool_name_that_is_not_a_valid_tool_name_is_not_offered() {
        let fixture = Fixture::new();
        let server = server(&fixture, "true", &[]);
        let offered = McpTool::new(server.clone(), remote("read_file", json!("x"))).unwrap();
        assert_eq!(offered.spec().name, "fs__read_file");
        assert_eq!(offered.spec().parameters, json!({"type": "object"}));
        let error = McpTool::new(server, remote("read.file", json!({})))
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("`fs__read.file` is not a valid tool name"),
            "{error}"
        );
    }

    #[test]
    fn the_path_argument_is_the_target() {
        let fixture = Fixture::new();
        let tool = McpTool::new(
            server(&fixture, "true", &[]),
            remote("read_file", json!({"type": "object"})),
        )
        .unwrap();
        let target = tool
            .target(&json!({"path": "src/a.rs"}), &fixture.ctx)
            .unwrap();
        assert_eq!(target.path.as_deref(), Some("src/a.rs"));
        assert!(tool.target(&json!([1]), &fixture.ctx).is_err());
    }

    #[tokio::test]
    async fn a_server_that_dies_at_start_fails_with_its_stderr_and_declared_env() {
        let fixture = Fixture::new();
        let server = server(
            &fixture,
            "sh",
            &["-c", "echo \"no luck $MARK\" >&2; exit 3"],
        );
        let error = server.start().await.unwrap_err();
        assert!(
            matches!(&error.trouble, Trouble::Failed { step, .. } if step == "initialize"),
            "{error}"
        );
        let error = error.to_string();
        assert!(error.contains("failed during `initialize`"), "{error}");
        assert!(error.contains("no luck declared"), "{error}");
    }

    #[tokio::test]
    async fn a_silent_server_times_out_at_start() {
        let fixture = Fixture::new();
        let server = server(&fixture, "sleep", &["30"]);
        let started = std::time::Instant::now();
        let error = server.start().await.unwrap_err().to_string();
        assert!(
            error.contains("did not answer `initialize` within 2s"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
