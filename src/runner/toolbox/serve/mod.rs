//! `ybs tools serve` (docs/mcp.md): the tool registry as an MCP server on
//! stdio, or with `--listen` over Streamable HTTP on a loopback address,
//! for other agents.
//!
//! - `tools/list`: every external tool discovery finds (the places and
//!   trust of `ybs tools list`; a repository tool is enabled only by an
//!   allow rule of `--policy`), with its input schema, the output schema
//!   of the envelope and its status (`ready`, `schema-unknown`,
//!   `missing-binary`, ...) in `_meta.status`; with `--builtin`, the
//!   built-in file tools too.
//! - `tools/call`: arguments checked, the call decided by `--policy`
//!   (without one, every call is denied), run confined with the tool's
//!   timeout, output redacted and capped; the envelope is the structured
//!   content, its text the content.
//! - The discovery directories are scanned again every
//!   [`RESCAN_INTERVAL`]; when the list changed the client gets
//!   `notifications/tools/list_changed`.
//! - Per-tool metrics (calls, failures, p50/p95) are the resource
//!   `ybs://metrics`, and are written (at most every
//!   [`STATUS_INTERVAL`], and by the rescan loop) to a status file read by
//!   `ybs tools status` while the server runs.
//! - EOF on stdin (stdio only), SIGTERM or SIGINT end it: in-flight calls
//!   are dropped, which kills their process groups, and stray children
//!   are reaped.
//! - `--listen ADDR`: one endpoint, `http://ADDR/mcp`, many sessions (each
//!   its own `Mcp-Session-Id`) sharing the tools, the policy and the
//!   metrics. Only loopback addresses are accepted, and requests whose
//!   `Host` is not a loopback name are refused (DNS rebinding): the
//!   server runs programs, it is not for the network.

mod handler;
mod status;
mod transport;

pub(super) use status::status;
use status::{status_path, write_status};
use transport::{serve_http, serve_stdio};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ServerConfig};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Value, json};

use super::{Toolbox, ToolsError, ToolsOutcome};
use crate::core::redact::Redactor;
use crate::core::text::truncate_middle;
use crate::policy::{CallView, Policy, Verdict};
use crate::runner::RunError;
use crate::tools::external::{Catalog, Entry, ExternalTool, Metrics, Outcome};
use crate::tools::{Tool, ToolCtx, ToolError, builtin};

/// How often the discovery directories are scanned for added, changed
/// or removed tools.
pub const RESCAN_INTERVAL: Duration = Duration::from_secs(2);
/// The longest the status file lags behind the calls (about: the
/// rescan loop writes it when calls came since).
pub const STATUS_INTERVAL: Duration = Duration::from_secs(1);
/// The metrics resource.
pub const METRICS_URI: &str = "ybs://metrics";
/// The built-in tools `--builtin` serves: the file tools (not
/// `run_shell`).
pub const SERVED_BUILTINS: [&str; 5] = [
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "search_files",
];
/// The metrics key of built-in tools.
const BUILTIN_KEY: &str = "builtin";
/// The most worker threads the server runs (one a core, up to this).
pub use crate::runner::session::MAX_WORKERS;
/// The most calls running at once, all sessions together; more wait
/// their turn, first come first served. Bounds the tool processes, their
/// pipes and their buffered output.
pub const MAX_CONCURRENT_CALLS: usize = 64;
/// The most HTTP connections served at once (`--listen`); more wait in
/// the listen backlog. Bounds the sockets and the sessions' buffers.
pub const MAX_CONNECTIONS: usize = 512;

/// What one served call did, for a caller's hook (tracing, say).
#[derive(Debug, Clone)]
pub struct CallRecord {
    pub tool: String,
    /// `allow`, `deny` or `ask` (`ask` is refused: nobody can approve).
    pub verdict: &'static str,
    /// Ran and succeeded.
    pub success: bool,
    /// Whether the tool ran at all.
    pub ran: bool,
    pub duration: Duration,
}

/// Called after every served call.
pub type CallHook = Arc<dyn Fn(&CallRecord) + Send + Sync>;

/// `ybs tools serve` options.
#[derive(Clone, Default)]
pub struct ServeOptions {
    /// Serve the built-in file tools too.
    pub builtin: bool,
    /// Called after every call (OpenTelemetry plugs in here).
    pub on_call: Option<CallHook>,
    /// Streamable HTTP on this loopback address instead of stdio.
    pub listen: Option<std::net::SocketAddr>,
}

/// The one path `--listen` serves.
pub const HTTP_PATH: &str = "/mcp";

/// One served tool.
#[derive(Clone)]
enum Served {
    External {
        entry: Box<Entry>,
        tool: Option<Arc<ExternalTool>>,
    },
    Builtin(Arc<dyn Tool>),
}

struct Shared {
    tools: RwLock<BTreeMap<String, Served>>,
    /// What the last scan listed: name → (status, schema), to tell changes.
    fingerprint: Mutex<Vec<(String, String)>>,
    policy: Option<Policy>,
    ctx: ToolCtx,
    metrics: Metrics,
    redactor: Redactor,
    /// Every initialized client (one on stdio; one per HTTP session), told
    /// when the tool list changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    status_file: Option<PathBuf>,
    /// When the status file was last written (`None`: never); it is
    /// written at most every [`STATUS_INTERVAL`] by calls, and by the
    /// rescan loop when calls came since.
    status_written: Mutex<Option<Instant>>,
    status_dirty: std::sync::atomic::AtomicBool,
    started: Instant,
    on_call: Option<CallHook>,
    info: ServerConfig,
    /// [`MAX_CONCURRENT_CALLS`] permits: one per running call.
    running: tokio::sync::Semaphore,
}

#[derive(Clone)]
struct Server(Arc<Shared>);

/// Runs the server until stdin ends or SIGTERM; returns the exit code.
pub(super) fn serve(session: &Toolbox, options: &ServeOptions) -> Result<ToolsOutcome, ToolsError> {
    let exporter = otel_exporter(session);
    let on_call = options.on_call.clone().or_else(|| {
        let exporter = exporter.clone()?;
        let calls = std::sync::atomic::AtomicU64::new(0);
        let hook: CallHook = Arc::new(move |call: &CallRecord| {
            let number = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            exporter.record_tool_call(&crate::report::otel::ToolCallSpan {
                name: call.tool.clone(),
                call_id: format!("serve-{number}"),
                verdict: call.verdict.to_owned(),
                ok: call.success,
                ran: call.ran,
                exit_code: None,
                started: std::time::SystemTime::now()
                    .checked_sub(call.duration)
                    .unwrap_or(std::time::UNIX_EPOCH),
                duration: call.duration,
            });
        });
        Some(hook)
    });
    let code = serve_with(session, options, on_call);
    if let Some(warning) = exporter.and_then(|exporter| exporter.shutdown()) {
        session.printer.error(&format!("warning: {warning}"));
    }
    code
}

/// The OpenTelemetry exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the
/// traces endpoint) is set: every served call becomes an `execute_tool`
/// span (docs/observability.md).
fn otel_exporter(session: &Toolbox) -> Option<Arc<crate::report::otel::Exporter>> {
    match crate::report::otel::Exporter::from_env(&|name: &str| session.environ().var(name)) {
        Ok(exporter) => exporter.map(Arc::new),
        Err(error) => {
            session
                .printer
                .error(&format!("warning: OpenTelemetry disabled: {error}"));
            None
        }
    }
}

/// The envelope and verdict of a call the policy does not let run
/// (nobody can approve one here); `None` when it runs.
fn refusal(policy: Option<&Policy>, view: &CallView<'_>) -> Option<(Value, &'static str)> {
    let Some(policy) = policy else {
        return Some((
            failure(
                "denied: `ybs tools serve` was started without --policy; the call was not run"
                    .to_owned(),
            ),
            "deny",
        ));
    };
    let decision = policy.decide(view);
    if decision.verdict == Verdict::Allow {
        return None;
    }
    let how = if decision.verdict == Verdict::Deny {
        "denied"
    } else {
        "needs approval, which nobody can give here,"
    };
    let detail = decision
        .detail
        .as_deref()
        .map(|detail| format!(": {detail}"))
        .unwrap_or_default();
    Some((
        failure(format!(
            "{how} by policy (rule `{}`){detail}; the call was not run",
            decision.rule
        )),
        decision.verdict.as_str(),
    ))
}

fn serve_with(
    session: &Toolbox,
    options: &ServeOptions,
    on_call: Option<CallHook>,
) -> Result<ToolsOutcome, ToolsError> {
    let shared = Arc::new(Shared {
        tools: RwLock::new(BTreeMap::new()),
        fingerprint: Mutex::new(Vec::new()),
        policy: session.policy.clone(),
        ctx: super::tool_ctx(session),
        metrics: Metrics::new(),
        redactor: session.session.redactor.clone(),
        peers: Mutex::new(Vec::new()),
        status_file: session.cache_dir().map(|dir| status_path(&dir)),
        status_written: Mutex::new(None),
        status_dirty: std::sync::atomic::AtomicBool::new(false),
        started: Instant::now(),
        on_call,
        info: server_info(),
        running: tokio::sync::Semaphore::new(MAX_CONCURRENT_CALLS),
    });
    if shared.policy.is_none() {
        session
            .printer
            .error("warning: no --policy given: every call is denied");
    }
    if let Some(addr) = options.listen
        && !addr.ip().is_loopback()
    {
        return Err(RunError::usage(
            format!("--listen {addr}: not a loopback address"),
            Some("the server runs programs for whoever connects: listen on 127.0.0.1:PORT or [::1]:PORT"),
        )
        .into());
    }
    let code = session.session.runtime()?.block_on(async {
        let catalog = session.discover_async(&[]).await;
        refresh(&shared, &catalog, options.builtin);
        write_status(&shared);
        let rescan = async {
            loop {
                tokio::time::sleep(RESCAN_INTERVAL).await;
                if shared
                    .status_dirty
                    .load(std::sync::atomic::Ordering::Relaxed)
                {
                    write_status(&shared);
                }
                let catalog = session.discover_async(&[]).await;
                if refresh(&shared, &catalog, options.builtin) {
                    notify_list_changed(&shared).await;
                }
            }
        };
        let stopped = async {
            let mut term = signal(tokio::signal::unix::SignalKind::terminate());
            let mut int = signal(tokio::signal::unix::SignalKind::interrupt());
            tokio::select! {
                () = received(term.as_mut()) => {}
                () = received(int.as_mut()) => {}
            }
        };
        let served = match options.listen {
            Some(addr) => serve_http(session, &shared, addr, rescan, stopped).await,
            None => serve_stdio(&shared, rescan, stopped).await,
        };
        served
            .map(|()| ToolsOutcome::Done)
            .map_err(ToolsError::from)
    });
    finish(&shared, session);
    code
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind).ok()
}

/// Waits for the signal (forever when it could not be installed).
async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Tells every client still connected that the tool list changed.
async fn notify_list_changed(shared: &Shared) {
    let peers: Vec<Peer<RoleServer>> = {
        let mut peers = shared.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.retain(|peer| !peer.is_transport_closed());
        peers.clone()
    };
    for peer in peers {
        let _ = peer.notify_tool_list_changed().await;
    }
}

/// Persists the metrics and removes the status file.
fn finish(shared: &Shared, session: &Toolbox) {
    // Started before the server ran: nothing to reap otherwise.
    if let Ok(runtime) = session.session.runtime() {
        runtime.block_on(crate::tools::process::reap_escapees());
    }
    if let Some(dir) = session.cache_dir() {
        let _ = crate::tools::external::cache::record_metrics(&dir, &shared.metrics.snapshot());
    }
    if let Some(file) = &shared.status_file {
        let _ = std::fs::remove_file(file);
    }
}

fn server_info() -> ServerConfig {
    serde_json::from_value(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": true}, "resources": {}},
        "serverInfo": {"name": "ybs", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "ybs tools: every call is decided by the operator's policy and runs confined.",
    }))
    .unwrap_or_default()
}

/// Replaces the served tools with `catalog`'s (and the built-ins);
/// returns true if the list changed.
fn refresh(shared: &Shared, catalog: &Catalog, with_builtin: bool) -> bool {
    let mut tools = BTreeMap::new();
    if with_builtin {
        for name in SERVED_BUILTINS {
            if let Some(tool) = builtin::get(name) {
                tools.insert(name.to_owned(), Served::Builtin(tool));
            }
        }
    }
    for entry in &catalog.entries {
        if tools.contains_key(&entry.name) {
            continue;
        }
        let tool = ExternalTool::new(entry, shared.metrics.clone()).map(Arc::new);
        tools.insert(
            entry.name.clone(),
            Served::External {
                entry: Box::new(entry.clone()),
                tool,
            },
        );
    }
    let fingerprint: Vec<(String, String)> = tools
        .iter()
        .map(|(name, served)| (name.clone(), describe(served).to_string()))
        .collect();
    let mut last = shared.fingerprint.lock().unwrap_or_else(|e| e.into_inner());
    let changed = *last != fingerprint;
    *last = fingerprint;
    drop(last);
    *shared.tools.write().unwrap_or_else(|e| e.into_inner()) = tools;
    changed
}

/// The tool as `tools/list` shows it.
fn describe(served: &Served) -> Value {
    let (name, description, input, status, detail) = match served {
        Served::Builtin(tool) => {
            let spec = tool.spec();
            (
                spec.name.clone(),
                spec.description.clone(),
                spec.parameters.clone(),
                "ready",
                None,
            )
        }
        Served::External { entry, tool } => {
            let input = match (&entry.schema, tool) {
                (Some(schema), _) => schema.json_schema(),
                _ => json!({"type": "object"}),
            };
            (
                entry.name.clone(),
                entry.description(),
                input,
                entry.status.as_str(),
                entry.detail.clone(),
            )
        }
    };
    let description = if status == "ready" {
        description
    } else {
        format!("[{status}] {description}")
    };
    json!({
        "name": name,
        "description": description,
        "inputSchema": input,
        "outputSchema": {
            "type": "object",
            "properties": {
                "success": {"type": "boolean"},
                "result": {},
                "error": {"type": "string"},
                "metadata": {"type": "object"},
            },
            "required": ["success"],
        },
        "_meta": {"status": status, "detail": detail},
    })
}

impl Server {
    /// Decides and runs one call; the envelope and whether it ran.
    async fn call(&self, name: &str, arguments: Value) -> (Value, &'static str, bool) {
        let shared = &self.0;
        let served = shared
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned();
        let Some(served) = served else {
            return (
                failure(format!("unknown tool `{name}`; see tools/list")),
                "deny",
                false,
            );
        };
        // What the call acts on, for the policy; a tool that cannot run
        // is still decided first, so a refusal reads the same for all.
        let tool: Option<Arc<dyn Tool>> = match &served {
            Served::Builtin(tool) => Some(tool.clone()),
            Served::External {
                tool: Some(tool), ..
            } => Some(tool.clone()),
            Served::External { tool: None, .. } => None,
        };
        let target = match &tool {
            Some(tool) => match tool.target(&arguments, &shared.ctx) {
                Ok(target) => target,
                Err(error) => return (failure(error.to_string()), "deny", false),
            },
            None => crate::tools::Target::default(),
        };
        let (path, cwd) = match target.command {
            Some(_) => (None, target.path.as_deref()),
            None => (target.path.as_deref(), None),
        };
        let view = CallView {
            tool: name,
            path,
            command: target.command.as_deref(),
            cwd,
        };
        if let Some((envelope, verdict)) = refusal(shared.policy.as_ref(), &view) {
            return (envelope, verdict, false);
        }
        let Some(tool) = tool else {
            let detail = match &served {
                Served::External { entry, .. } => format!(
                    "{}{}",
                    entry.status.as_str(),
                    entry
                        .detail
                        .as_deref()
                        .map(|detail| format!(": {detail}"))
                        .unwrap_or_default()
                ),
                Served::Builtin(_) => String::new(),
            };
            return (
                failure(format!("`{name}` cannot run: {detail}")),
                "allow",
                false,
            );
        };
        let envelope = match &served {
            Served::External {
                tool: Some(external),
                ..
            } => match external.check(&arguments) {
                Ok(params) => external.invoke(params, &shared.ctx).await.envelope,
                Err(error) => failure(error.to_string()),
            },
            _ => {
                let started = Instant::now();
                let result = tool.call(arguments, &shared.ctx).await;
                let outcome = if result.is_ok() {
                    Outcome::Success
                } else {
                    Outcome::Failure
                };
                shared
                    .metrics
                    .record(name, BUILTIN_KEY, outcome, started.elapsed());
                match result {
                    Ok(output) => json!({"success": true, "result": output.content}),
                    Err(ToolError::Model(message) | ToolError::Fatal(message)) => failure(message),
                }
            }
        };
        (envelope, "allow", true)
    }

    /// The envelope as an MCP result: redacted, capped.
    fn result(&self, envelope: &Value) -> CallToolResult {
        let shared = &self.0;
        let success = envelope["success"] == json!(true);
        let text = if success {
            match &envelope["result"] {
                Value::String(text) => text.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            }
        } else {
            match &envelope["error"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            }
        };
        let text = shared.redactor.redact(&text);
        let (text, _) = truncate_middle(&text, shared.ctx.output_cap_bytes);
        // Masked on its strings, never on its escaped text.
        let mut structured = envelope.clone();
        shared.redactor.redact_value(&mut structured);
        serde_json::from_value(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": !success,
        }))
        .unwrap_or_default()
    }

    fn metrics_json(&self) -> Value {
        let shared = &self.0;
        let tools: Vec<Value> = shared
            .metrics
            .summaries()
            .into_iter()
            .map(|m| {
                json!({
                    "name": m.name,
                    "calls": m.calls,
                    "successes": m.successes,
                    "failures": m.failures,
                    "timeouts": m.timeouts,
                    "p50_ms": m.p50_ms,
                    "p95_ms": m.p95_ms,
                })
            })
            .collect();
        json!({
            "pid": std::process::id(),
            "uptime_s": shared.started.elapsed().as_secs(),
            "tools": tools,
        })
    }
}

fn failure(message: String) -> Value {
    json!({"success": false, "error": message})
}
