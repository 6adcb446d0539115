//! Prices per million tokens for well-known models; `llm.price` and
//! `llm.pricing` in config add or override them. Unknown models cost
//! "unknown", never zero.

use std::collections::BTreeMap;

use crate::core::{Cost, Usage};

/// USD per million input and output tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// The rate of input served from the provider's prompt cache. Kept
    /// with the price; ybs prices every input token at `input_per_mtok`
    /// (the higher rate) while the providers' cached counts are not read,
    /// so a cost is never under-stated.
    pub cached_input_per_mtok: Option<f64>,
}

impl Price {
    const fn new(input: f64, cached: f64, output: f64) -> Self {
        Self {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: Some(cached),
        }
    }
}

/// Built-in prices in USD per million tokens: input, cached input,
/// output. Prices as of 2025-11-24, from the vendors' public price pages
/// (Gemini 2.5 Pro at its rate for prompts up to 200k tokens).
///
/// A name matches itself and its dated snapshots (`gpt-4.1-mini-2025-04-14`,
/// `claude-opus-4-20250514`) or `-latest`, nothing else: `claude-opus-4-5`
/// is its own entry, never `claude-opus-4` with a suffix.
const BUILTIN: &[(&str, Price)] = &[
    // OpenAI
    ("gpt-4o", Price::new(2.5, 1.25, 10.0)),
    ("gpt-4o-mini", Price::new(0.15, 0.075, 0.6)),
    ("gpt-4.1", Price::new(2.0, 0.5, 8.0)),
    ("gpt-4.1-mini", Price::new(0.4, 0.1, 1.6)),
    ("gpt-4.1-nano", Price::new(0.1, 0.025, 0.4)),
    ("gpt-5", Price::new(1.25, 0.125, 10.0)),
    ("gpt-5-mini", Price::new(0.25, 0.025, 2.0)),
    ("gpt-5-nano", Price::new(0.05, 0.005, 0.4)),
    ("o1", Price::new(15.0, 7.5, 60.0)),
    ("o3", Price::new(2.0, 0.5, 8.0)),
    ("o3-mini", Price::new(1.1, 0.55, 4.4)),
    ("o4-mini", Price::new(1.1, 0.275, 4.4)),
    // Anthropic (cached: cache reads)
    ("claude-opus-4", Price::new(15.0, 1.5, 75.0)),
    ("claude-opus-4-0", Price::new(15.0, 1.5, 75.0)),
    ("claude-opus-4-1", Price::new(15.0, 1.5, 75.0)),
    ("claude-opus-4-5", Price::new(5.0, 0.5, 25.0)),
    ("claude-sonnet-4", Price::new(3.0, 0.3, 15.0)),
    ("claude-sonnet-4-0", Price::new(3.0, 0.3, 15.0)),
    ("claude-sonnet-4-5", Price::new(3.0, 0.3, 15.0)),
    ("claude-3-7-sonnet", Price::new(3.0, 0.3, 15.0)),
    ("claude-3-5-sonnet", Price::new(3.0, 0.3, 15.0)),
    ("claude-3-5-haiku", Price::new(0.8, 0.08, 4.0)),
    ("claude-haiku-4-5", Price::new(1.0, 0.1, 5.0)),
    // Google
    ("gemini-2.5-pro", Price::new(1.25, 0.125, 10.0)),
    ("gemini-2.5-flash", Price::new(0.3, 0.03, 2.5)),
    ("gemini-2.5-flash-lite", Price::new(0.1, 0.01, 0.4)),
];

/// The price table in force: built-ins, `llm.price` over them,
/// `llm.pricing` per model over both.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    overrides: BTreeMap<String, Price>,
    every_model: Option<Price>,
}

impl PriceTable {
    pub fn new(overrides: BTreeMap<String, Price>) -> Self {
        Self {
            overrides,
            every_model: None,
        }
    }

    /// With `llm.price`: the price of every model without its own
    /// `llm.pricing` entry.
    #[must_use]
    pub fn with_price(mut self, price: Option<Price>) -> Self {
        self.every_model = price;
        self
    }

    /// The price of `model`: an exact `llm.pricing` entry, else
    /// `llm.price`, else a built-in entry (exact, or a dated snapshot).
    pub fn price(&self, model: &str) -> Option<Price> {
        if let Some(price) = self.overrides.get(model) {
            return Some(*price);
        }
        if let Some(price) = self.every_model {
            return Some(price);
        }
        BUILTIN
            .iter()
            .find(|(name, _)| same_model(name, model))
            .map(|(_, price)| *price)
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

/// `model` is `name` or one of its snapshots: `name-YYYYMMDD`,
/// `name-YYYY-MM-DD` or `name-latest`.
fn same_model(name: &str, model: &str) -> bool {
    let Some(rest) = model.strip_prefix(name) else {
        return false;
    };
    let Some(suffix) = rest.strip_prefix('-') else {
        return rest.is_empty();
    };
    let digits = |text: &str, n: usize| text.len() == n && text.bytes().all(|b| b.is_ascii_digit());
    if suffix == "latest" || digits(suffix, 8) {
        return true;
    }
    let parts: Vec<&str> = suffix.split('-').collect();
    matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTOK: Usage = Usage {
        input_tokens: 1_000_000,
        output_tokens: 1_000_000,
    };

    #[test]
    fn known_snapshot_and_unknown() {
        let table = PriceTable::default();
        assert_eq!(table.cost("gpt-4.1-mini", MTOK), Cost::Usd(2.0));
        assert_eq!(table.cost("gpt-4.1-mini-2025-04-14", MTOK), Cost::Usd(2.0));
        assert_eq!(table.cost("qwen2.5-coder:7b", MTOK), Cost::Unknown);
        assert_eq!(table.cost("gpt-5", MTOK), Cost::Usd(11.25));
        assert_eq!(table.cost("gpt-5-nano", MTOK), Cost::Usd(0.45));
        assert_eq!(table.cost("o3-mini-2025-01-31", MTOK), Cost::Usd(5.5));
        assert_eq!(table.cost("gemini-2.5-flash-lite", MTOK), Cost::Usd(0.5));
        assert_eq!(table.cost("claude-3-5-haiku-latest", MTOK), Cost::Usd(4.8));
    }

    #[test]
    fn a_newer_model_never_takes_an_older_ones_price() {
        let table = PriceTable::default();
        assert_eq!(table.cost("claude-opus-4-5", MTOK), Cost::Usd(30.0));
        assert_eq!(
            table.cost("claude-opus-4-5-20251101", MTOK),
            Cost::Usd(30.0)
        );
        assert_eq!(table.cost("claude-opus-4-20250514", MTOK), Cost::Usd(90.0));
        assert_eq!(
            table.cost("claude-haiku-4-5-20251001", MTOK),
            Cost::Usd(6.0)
        );
        // Not in the table: unknown, not Opus 4's or gpt-5's price.
        assert_eq!(table.cost("claude-opus-4-6", MTOK), Cost::Unknown);
        assert_eq!(table.cost("gpt-5-pro", MTOK), Cost::Unknown);
        assert_eq!(table.cost("gpt-4o-mini-tts", MTOK), Cost::Unknown);
    }

    #[test]
    fn configured_prices_come_first() {
        let pricing = [("gpt-5".to_owned(), Price::new(1.0, 0.1, 1.0))].into();
        let table = PriceTable::new(pricing).with_price(Some(Price::new(2.0, 0.0, 2.0)));
        assert_eq!(table.cost("gpt-5", MTOK), Cost::Usd(2.0));
        assert_eq!(table.cost("my-local-model", MTOK), Cost::Usd(4.0));
        assert_eq!(table.cost("gpt-4o", MTOK), Cost::Usd(4.0));
    }
}
