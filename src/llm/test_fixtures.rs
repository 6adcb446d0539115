//! Fixtures shared by the provider unit tests: configs, environments,
//! requests; stream bodies come from the integration tests' `wire`
//! helpers, so both kinds of test build them the same way.

// `wire` names its server `super::server`.
use super::test_server as server;

#[path = "../../tests/support/wire.rs"]
#[allow(dead_code)]
mod wire;

pub use wire::{sse_done, sse_events};

use std::time::Duration;

use serde_json::json;

use crate::core::{Message, ToolCall, ToolSpec};
use crate::llm::{ChatRequest, ProviderConfig};

/// A key that must never show up anywhere but in the request header.
pub const CANARY: &str = "sk-canary-7f3a9c1e5b";

/// A provider config for `name` at `endpoint`, with short deadlines.
pub fn config(name: &str, endpoint: &str) -> ProviderConfig {
    let mut config = ProviderConfig::new(name, "test-model");
    config.endpoint = Some(endpoint.to_owned());
    config.request_timeout = Duration::from_secs(5);
    config.idle_timeout = Duration::from_secs(2);
    config.total_timeout = Duration::from_secs(10);
    config
}

/// An environment with exactly these variables.
pub fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    move |name| {
        pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    }
}

pub fn read_file_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"]
        }),
    }
}

/// The first request of a task: system prompt, one user message, tools.
pub fn first_request() -> ChatRequest {
    ChatRequest {
        model: "test-model".into(),
        system: "You are ybs.".into(),
        messages: vec![Message::user("What does src/lib.rs say?")],
        tools: vec![read_file_tool()],
        temperature: Some(0.0),
        max_tokens: Some(512),
        deadline: None,
    }
}

/// The second request: the first plus the call and its result.
pub fn second_request(calls: &[ToolCall]) -> ChatRequest {
    let mut request = first_request();
    request.messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: calls.to_vec(),
    });
    for call in calls {
        request.messages.push(Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!("contents of {}", call.arguments["path"]),
            is_error: false,
        });
    }
    request
}
