//! The conversation, provider-neutral. Providers translate it to their wire
//! formats; the transcript stores it as is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of the conversation. The system prompt is not a message: it
/// travels beside the messages in a request (Anthropic wants it apart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: String,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, tied to it by `call_id`.
    Tool {
        call_id: String,
        name: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
        }
    }

    /// Approximate size in characters, for context budgeting.
    pub fn approx_chars(&self) -> usize {
        match self {
            Self::User { content } => content.len(),
            Self::Assistant {
                content,
                tool_calls,
            } => {
                content.len()
                    + tool_calls
                        .iter()
                        .map(|call| call.name.len() + call.arguments.to_string().len())
                        .sum::<usize>()
            }
            Self::Tool { content, .. } => content.len(),
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments, normally a JSON object.
    #[serde(default)]
    pub arguments: Value,
    /// Set when the provider could not produce valid argument JSON (cut
    /// off, malformed). The call is not run; the model gets this as an error
    /// result. Never guessed or completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_arguments: Option<String>,
    /// True when the call was recovered from plain text content
    /// (`llm.text_tool_calls`), not a structured call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_text: bool,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
            invalid_arguments: None,
            from_text: false,
        }
    }

    /// The canonical `name(arguments)` key used by loop detection.
    pub fn signature(&self) -> String {
        format!("{}({})", self.name, self.arguments)
    }
}

/// A tool as offered to the model: name, description and the JSON Schema of
/// its parameters (an `object` schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}
