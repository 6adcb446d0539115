//! Token usage and cost. An unknown price is reported as unknown, never as
//! zero (docs/agent-loop.md).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Tokens one or more requests consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Counts come from the provider: an absurd one (`u64::MAX`) saturates
/// instead of overflowing into a panic, or, wrapped, into a small total
/// that would slip under `max_total_tokens`.
impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    pub fn add(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
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
