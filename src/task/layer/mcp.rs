//! A `tools.mcp` list, in task files and operator config (docs/mcp.md).

use std::collections::BTreeMap;
use std::time::Duration;

use super::scalar_text;
use crate::core::decode::yaml::{Node, NodeKind};
use crate::core::decode::{Decoder, Spanned, positive_duration};

pub(super) const MCP_FIELDS: &[&str] = &[
    "name",
    "command",
    "args",
    "env",
    "timeout_seconds",
    "required",
];

/// A `tools.mcp` list (task files and operator config): `name`,
/// `command`, `args`, `env`, `timeout_seconds` (docs/mcp.md).
pub fn decode_mcp_servers(
    decoder: &mut Decoder<'_>,
    node: &Node,
    context: &str,
) -> Vec<crate::tools::mcp::ServerSpec> {
    use crate::tools::mcp::{DEFAULT_TIMEOUT, ServerSpec, valid_server_name};
    let mut servers: Vec<ServerSpec> = Vec::new();
    let items = match &node.kind {
        NodeKind::Seq(items) => items.as_slice(),
        NodeKind::Null => &[],
        _ => {
            decoder.expected(node, context, "a list of MCP servers");
            return servers;
        }
    };
    for item in items {
        let Some(fields) = decoder.fields(item, &format!("`{context}` entry"), MCP_FIELDS) else {
            continue;
        };
        let before = decoder.error_count();
        for key in ["name", "command"] {
            if !fields.has(key) {
                decoder.error(
                    fields.span,
                    format!("missing required field `{key}` in a `{context}` entry"),
                );
            }
        }
        let name: Option<Spanned<String>> = fields.get(decoder, "name");
        let command: Option<Spanned<String>> = fields.get(decoder, "command");
        let args: Option<Vec<String>> = fields.get(decoder, "args");
        let env = fields
            .node("env")
            .map(|env| decode_vars_map(decoder, env))
            .unwrap_or_default();
        let timeout: Option<Spanned<Duration>> = fields.get(decoder, "timeout_seconds");
        let timeout = timeout.and_then(|t| positive_duration(decoder, t, "timeout_seconds"));
        let required: Option<bool> = fields.get(decoder, "required");
        if let Some(name) = &name {
            if !valid_server_name(&name.value) {
                decoder.error_with_hint(
                    name.span,
                    format!("invalid MCP server name `{}`", name.value),
                    "use letters, digits, `-` and single `_`s (at most 32): its tools are named NAME__tool",
                );
            } else if servers.iter().any(|server| server.name == name.value) {
                decoder.error(name.span, format!("duplicate MCP server `{}`", name.value));
            }
        }
        if let Some(command) = &command
            && command.value.trim().is_empty()
        {
            decoder.error(command.span, "`command` is empty");
        }
        let (Some(name), Some(command)) = (name, command) else {
            continue;
        };
        if decoder.error_count() != before {
            continue;
        }
        servers.push(ServerSpec {
            name: name.value,
            command: command.value,
            args: args.unwrap_or_default(),
            env,
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
            required: required.unwrap_or(false),
        });
    }
    servers
}

/// `env:` of an MCP server: names to string values.
pub(super) fn decode_vars_map(decoder: &mut Decoder<'_>, node: &Node) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let entries = match &node.kind {
        NodeKind::Map(entries) => entries,
        NodeKind::Null => return env,
        _ => {
            decoder.expected(node, "env", "a mapping of variable names to values");
            return env;
        }
    };
    for (key, value) in entries {
        let Some(text) = scalar_text(decoder, value, &key.name) else {
            continue;
        };
        env.insert(key.name.clone(), text);
    }
    env
}
