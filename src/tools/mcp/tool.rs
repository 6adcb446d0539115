//! One tool of an MCP server, as the registry offers it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::{McpServer, RemoteTool, SEPARATOR};
use crate::core::ToolSpec;
use crate::tools::external::discover::valid_tool_name;
use crate::tools::{Target, Tool, ToolCtx, ToolError, ToolOutput};

/// One tool of an MCP server, as the registry offers it.
pub struct McpTool {
    spec: ToolSpec,
    remote: String,
    server: Arc<McpServer>,
}

/// A server's tool that cannot be offered: its name joined to the
/// server's is no valid tool name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool `{tool}` of MCP server `{server}` is not offered: `{name}` is not a valid tool name (letters, digits, `_` and `-`, at most 64)"
)]
pub struct InvalidToolName {
    pub tool: String,
    pub server: String,
    pub name: String,
}

impl McpTool {
    /// `SERVER__tool`, or why the tool cannot be offered under that name.
    pub fn new(server: Arc<McpServer>, tool: RemoteTool) -> Result<Self, InvalidToolName> {
        let name = format!("{}{SEPARATOR}{}", server.name(), tool.name);
        if !valid_tool_name(&name) {
            return Err(InvalidToolName {
                tool: tool.name,
                server: server.name().to_owned(),
                name,
            });
        }
        let mut parameters = tool.input_schema;
        if !parameters.is_object() {
            parameters = json!({"type": "object"});
        }
        Ok(Self {
            spec: ToolSpec {
                name,
                description: tool.description,
                parameters,
            },
            remote: tool.name,
            server,
        })
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// A `path` argument, when the call has one, is what the call acts on
    /// for the policy (`fs__read_file: {path: "src/**"}`).
    fn target(&self, args: &Value, _ctx: &ToolCtx) -> Result<Target, ToolError> {
        let path = match args {
            Value::Object(map) => map.get("path").and_then(Value::as_str).map(str::to_owned),
            Value::Null => None,
            _ => {
                return Err(ToolError::Model(
                    "the arguments must be a JSON object".to_owned(),
                ));
            }
        };
        Ok(Target {
            path,
            command: None,
        })
    }

    fn call<'a>(
        &'a self,
        args: Value,
        _ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments = match args {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            // The server's `inputSchema`, checked here: a call that breaks
            // it goes back to the model with the validator's message, and
            // the server is not asked.
            let value = Value::Object(arguments);
            if let Some(why) =
                super::super::external::schema::violations(&self.spec.parameters, &value)
            {
                return Err(ToolError::Model(format!(
                    "the arguments do not match the tool's input schema: {why}"
                )));
            }
            let Value::Object(arguments) = value else {
                return Err(ToolError::Model(
                    "the arguments must be a JSON object".to_owned(),
                ));
            };
            match self.server.call(&self.remote, arguments).await {
                Ok(content) => Ok(ToolOutput {
                    content,
                    changed: Vec::new(),
                }),
                Err(error) => Err(ToolError::Model(error.to_string())),
            }
        })
    }
}
