//! L2: talking to models. The `Provider` trait, the wire protocols, the
//! `replay` provider, recording, retries and pricing.
//!
//! Providers know nothing of tasks, tools or policy: they turn one
//! `ChatRequest` into one complete `ChatResponse`. Streaming, reassembly of
//! tool-call fragments and protocol quirks stay inside each provider, so the
//! agent only ever sees whole turns (tools run only after a complete turn).

pub mod cassette;
pub mod error;
pub mod pricing;
pub mod record;
pub mod replay;
pub mod retry;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::core::{Message, ToolCall, ToolSpec, Usage};

pub use error::ProviderError;

/// One request to a model: the whole conversation so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// Why the model stopped producing this turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    #[default]
    Stop,
    ToolCalls,
    /// Cut off by the output token limit.
    Length,
    Other,
}

/// One complete model turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    #[serde(default)]
    pub finish_reason: FinishReason,
}

/// A model endpoint. One required method: produce one complete turn.
pub trait Provider: Send + Sync {
    /// The provider's name as configured (`openai`, `anthropic`, `ollama`, `replay`).
    fn name(&self) -> &str;

    /// Sends one request and returns the complete turn. A provider that
    /// streams collects the stream before returning. No retries here:
    /// `retry::complete` wraps this.
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>>;
}
