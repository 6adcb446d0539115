//! A small MCP client over Streamable HTTP, for driving `ybs tools serve
//! --listen` from the tests and from `benches/serve_load.rs`: `initialize`
//! (its `Mcp-Session-Id` kept), `notifications/initialized`, `tools/call`,
//! and `DELETE` to end the session. Each request is one POST whose answer
//! is a JSON body or an SSE stream carrying it.
// The tests use some parts, the bench others.
#![allow(dead_code)]

use serde_json::{Value, json};

/// The protocol version asked for: one with sessions.
pub const PROTOCOL: &str = "2025-06-18";

/// One MCP session.
pub struct Session {
    http: reqwest::Client,
    url: String,
    id: Option<String>,
    next: u64,
}

impl Session {
    /// Opens a session on `url` (`http://127.0.0.1:PORT/mcp`) with `http`.
    pub async fn open(http: reqwest::Client, url: &str) -> Result<Self, String> {
        let mut session = Self {
            http,
            url: url.to_owned(),
            id: None,
            next: 1,
        };
        let answer = session
            .request(
                "initialize",
                json!({"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "ybs-tests", "version": "1"}}),
            )
            .await?;
        if answer.get("result").is_none() {
            return Err(format!("initialize: {answer}"));
        }
        session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(session)
    }

    /// `tools/call NAME ARGUMENTS`: the JSON-RPC result (`content`,
    /// `structuredContent`, `isError`).
    pub async fn call(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        let answer = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await?;
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| format!("tools/call {name}: {answer}"))
    }

    /// Ends the session (`DELETE`).
    pub async fn close(self) {
        let mut request = self.http.delete(&self.url);
        if let Some(id) = &self.id {
            request = request.header("mcp-session-id", id);
        }
        let _ = request.send().await;
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next;
        self.next += 1;
        let answer = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        answer.ok_or_else(|| format!("{method}: no answer"))
    }

    /// One POST; the JSON-RPC answer in it, if any.
    async fn post(&mut self, body: &Value) -> Result<Option<Value>, String> {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(id) = &self.id {
            request = request
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", PROTOCOL);
        }
        let response = request.send().await.map_err(|error| error.to_string())?;
        let status = response.status();
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
        {
            self.id = Some(id.to_owned());
        }
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        let text = response.text().await.map_err(|error| error.to_string())?;
        if !status.is_success() {
            return Err(format!("HTTP {status}: {text}"));
        }
        if text.trim().is_empty() {
            return Ok(None);
        }
        if !sse {
            return serde_json::from_str(&text)
                .map(Some)
                .map_err(|error| format!("{error}: {text}"));
        }
        // The event carrying the answer: the one with an `id`.
        Ok(text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some()))
    }
}
