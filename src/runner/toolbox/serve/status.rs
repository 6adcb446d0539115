//! `ybs tools status`: the status file a running server keeps, and what
//! it says.

use super::{Server, Shared};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::super::{Toolbox, ToolsOutcome};

/// Where a serving process writes its metrics: one file per process.
pub(super) fn status_path(cache_dir: &std::path::Path) -> PathBuf {
    cache_dir
        .join("serve")
        .join(format!("{}.json", std::process::id()))
}

/// Rewrites the status file `ybs tools status` reads.
pub(super) fn write_status(shared: &Arc<Shared>) {
    let Some(file) = &shared.status_file else {
        return;
    };
    shared
        .status_dirty
        .store(false, std::sync::atomic::Ordering::Relaxed);
    *shared
        .status_written
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    let server = Server(shared.clone());
    let text = server.metrics_json().to_string();
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let temp = file.with_extension("tmp");
    if std::fs::write(&temp, text).is_ok() {
        let _ = std::fs::rename(&temp, file);
    }
}

/// `ybs tools status`: the metrics of every `ybs tools serve` running
/// for this user (their status files), as a table or JSON.
pub(in crate::runner::toolbox) fn status(session: &Toolbox, json_output: bool) -> ToolsOutcome {
    let mut servers = Vec::new();
    if let Some(dir) = session.cache_dir().map(|dir| dir.join("serve"))
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "json") {
                continue;
            }
            let Some(doc) = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            else {
                continue;
            };
            let alive = doc["pid"]
                .as_u64()
                .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
            if alive {
                servers.push(doc);
            } else {
                // Left by a server that was killed: gone.
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    servers.sort_by_key(|doc| doc["pid"].as_u64());
    if json_output {
        session
            .printer
            .result(&json!({ "servers": servers }).to_string());
        return ToolsOutcome::Done;
    }
    if servers.is_empty() {
        session
            .printer
            .result("no `ybs tools serve` is running (totals of past calls: `ybs tools list`)");
        return ToolsOutcome::Done;
    }
    let mut lines = Vec::new();
    for server in &servers {
        lines.push(format!(
            "ybs tools serve, pid {}, up {}s",
            server["pid"], server["uptime_s"]
        ));
        lines.push(format!(
            "  {:<24} {:>6} {:>8} {:>8} {:>8}",
            "TOOL", "CALLS", "FAILED", "P50", "P95"
        ));
        for tool in server["tools"].as_array().into_iter().flatten() {
            lines.push(format!(
                "  {:<24} {:>6} {:>8} {:>6}ms {:>6}ms",
                crate::report::log::neutralize(tool["name"].as_str().unwrap_or("?")),
                tool["calls"],
                tool["failures"],
                tool["p50_ms"],
                tool["p95_ms"],
            ));
        }
    }
    session.printer.result(&lines.join("\n"));
    ToolsOutcome::Done
}
