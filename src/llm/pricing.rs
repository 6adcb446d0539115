//! Prices per million tokens for well-known models; `llm.pricing` in config
//! adds or overrides entries. Unknown models cost "unknown", never zero.

use std::collections::BTreeMap;

use crate::core::{Cost, Usage};

/// USD per million input and output tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

/// Built-in prices (USD per million tokens), matched by exact model name
/// or by prefix for dated variants (`gpt-4.1-mini-2025-04-14`).
const BUILTIN: &[(&str, f64, f64)] = &[
    ("gpt-4.1", 2.0, 8.0),
    ("gpt-4.1-mini", 0.4, 1.6),
    ("gpt-4.1-nano", 0.1, 0.4),
    ("gpt-4o", 2.5, 10.0),
    ("gpt-4o-mini", 0.15, 0.6),
    ("o3", 2.0, 8.0),
    ("o4-mini", 1.1, 4.4),
    ("claude-opus-4", 15.0, 75.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("claude-3-5-sonnet", 3.0, 15.0),
];

/// The price table in force: built-ins plus configured overrides.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    overrides: BTreeMap<String, Price>,
}

impl PriceTable {
    pub fn new(overrides: BTreeMap<String, Price>) -> Self {
        Self { overrides }
    }

    /// The price of `model`: an exact override, an exact built-in, else the
    /// longest built-in prefix.
    pub fn price(&self, model: &str) -> Option<Price> {
        if let Some(price) = self.overrides.get(model) {
            return Some(*price);
        }
        BUILTIN
            .iter()
            .filter(|(name, _, _)| model == *name || model.starts_with(&format!("{name}-")))
            .max_by_key(|(name, _, _)| name.len())
            .map(|(_, input, output)| Price {
                input_per_mtok: *input,
                output_per_mtok: *output,
            })
    }

    /// What `usage` of `model` cost.
    pub fn cost(&self, model: &str, usage: Usage) -> Cost {
        self.price(model).map_or(Cost::Unknown, |price| {
            #[expect(
                clippy::cast_precision_loss,
                reason = "token counts are far below 2^52"
            )]
            let dollars = usage.input_tokens as f64 * price.input_per_mtok / 1e6
                + usage.output_tokens as f64 * price.output_per_mtok / 1e6;
            Cost::Usd(dollars)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_prefix_and_unknown() {
        let table = PriceTable::default();
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
        };
        assert_eq!(table.cost("gpt-4.1-mini", usage), Cost::Usd(2.0));
        assert_eq!(table.cost("gpt-4.1-mini-2025-04-14", usage), Cost::Usd(2.0));
        assert_eq!(table.cost("qwen2.5-coder:7b", usage), Cost::Unknown);
    }
}
