//! Token usage and cost. An unknown price is reported as unknown, never as
//! zero (docs/agent-loop.md).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The context window budgeted when `context.max_tokens` is not set
/// (docs/agent-loop.md, "Context"): the agent compacts against it, and an
/// output schema may take at most a quarter of it.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 32_000;

/// Tokens one or more requests consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Every input token, cached or not (what token budgets count).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache
    /// (Anthropic's `cache_read_input_tokens`, OpenAI's
    /// `prompt_tokens_details.cached_tokens`), priced at the cached rate.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_input_tokens: u64,
    /// Of `input_tokens`, those written to the provider's prompt cache
    /// (Anthropic's `cache_creation_input_tokens`), priced at the cache
    /// write rate.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_input_tokens: u64,
    /// Of `cache_creation_input_tokens`, those written for an hour (the
    /// rest for five minutes), priced at the one-hour write rate.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_1h_input_tokens: u64,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// Counts come from the provider: an absurd one (`u64::MAX`) saturates
/// instead of overflowing into a panic, or, wrapped, into a small total
/// that would slip under `max_total_tokens`.
impl Usage {
    /// Input and output tokens, none of them cached.
    pub const fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
            cache_creation_1h_input_tokens: 0,
        }
    }

    /// The share of input tokens read from the cache, when there was
    /// input.
    pub fn cache_hit_share(&self) -> Option<f64> {
        #[expect(
            clippy::cast_precision_loss,
            reason = "token counts are far below 2^52"
        )]
        (self.input_tokens > 0)
            .then(|| self.cache_read_input_tokens as f64 / self.input_tokens as f64)
    }

    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    pub fn add(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
        self.cache_creation_1h_input_tokens = self
            .cache_creation_1h_input_tokens
            .saturating_add(other.cache_creation_1h_input_tokens);
    }
}

/// Money spent, in US dollars, or `"unknown"` when the model's price is not
/// known. Serialized as a number or the string `"unknown"`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Cost {
    #[default]
    Unknown,
    Usd(f64),
}

impl Cost {
    /// The sum; unknown if either side is unknown.
    pub fn plus(self, other: Cost) -> Cost {
        match (self, other) {
            (Cost::Usd(a), Cost::Usd(b)) => Cost::Usd(a + b),
            _ => Cost::Unknown,
        }
    }

    pub fn usd(self) -> Option<f64> {
        match self {
            Cost::Usd(value) => Some(value),
            Cost::Unknown => None,
        }
    }
}

impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cost::Unknown => f.write_str("unknown"),
            Cost::Usd(value) => write!(f, "${value:.4}"),
        }
    }
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cost::Unknown => serializer.serialize_str("unknown"),
            Cost::Usd(value) => serializer.serialize_f64(*value),
        }
    }
}

/// Written by hand: the derive cannot see the custom `Serialize`.
impl JsonSchema for Cost {
    fn schema_name() -> Cow<'static, str> {
        "Cost".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Money spent, in US dollars, or \"unknown\" when the model's price is not known (never reported as 0).",
            "anyOf": [
                { "type": "number", "minimum": 0 },
                { "const": "unknown" }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(value.as_f64().map_or(Cost::Unknown, Cost::Usd))
    }
}
