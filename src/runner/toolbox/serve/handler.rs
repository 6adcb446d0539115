//! The MCP requests the server answers: the tool list, calls, the
//! metrics resource.

use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

use super::status::write_status;
use super::{CallRecord, METRICS_URI, STATUS_INTERVAL, Server, describe};

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        self.0.info.clone()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self.0.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = self
            .0
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(describe)
            .collect();
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let name = request.name.to_string();
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let (envelope, verdict, ran) = {
            // Closed never: the semaphore lives as long as the server.
            let _permit = self.0.running.acquire().await.ok();
            self.call(&name, arguments).await
        };
        let result = self.result(&envelope);
        self.0
            .status_dirty
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let due = self
            .0
            .status_written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|at| at.elapsed() >= STATUS_INTERVAL);
        if due {
            write_status(&self.0);
        }
        if let Some(hook) = &self.0.on_call {
            hook(&CallRecord {
                tool: name,
                verdict,
                success: envelope["success"] == json!(true),
                ran,
                duration: started.elapsed(),
            });
        }
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        serde_json::from_value(json!({"resources": [{
            "uri": METRICS_URI,
            "name": "metrics",
            "description": "Per-tool call metrics of this server: calls, failures, p50/p95 duration.",
            "mimeType": "application/json",
        }]}))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != METRICS_URI {
            return Err(ErrorData::resource_not_found(
                format!("no resource `{}`", request.uri),
                None,
            ));
        }
        let result: ReadResourceResult = serde_json::from_value(json!({"contents": [{
            "uri": METRICS_URI,
            "mimeType": "application/json",
            "text": self.metrics_json().to_string(),
        }]}))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        Ok(result.into())
    }
}
