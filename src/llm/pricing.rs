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
    /// The rate of input read from the provider's prompt cache; unknown:
    /// the input rate (a cost is never under-stated).
    pub cached_input_per_mtok: Option<f64>,
    /// The rate of input written to the prompt cache for five minutes
    /// (Anthropic: 1.25 times the input rate); unknown: 1.25 times the
    /// input rate.
    pub cache_write_per_mtok: Option<f64>,
    /// The rate of input written to the prompt cache for an hour
    /// (Anthropic: twice the input rate); unknown: twice the input rate.
    pub cache_write_1h_per_mtok: Option<f64>,
}

impl Price {
    /// A price with a cached rate and no cache write price (OpenAI,
    /// Google: writes are not billed apart).
    pub const fn new(input: f64, cached: f64, output: f64) -> Self {
        Self {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: Some(cached),
            cache_write_per_mtok: None,
            cache_write_1h_per_mtok: None,
        }
    }

    /// Anthropic's price: reads at a tenth of the input rate, five-minute
    /// writes at 1.25 times, one-hour writes at twice.
    const fn anthropic(input: f64, output: f64) -> Self {
        Self {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: Some(input / 10.0),
            cache_write_per_mtok: Some(input * 1.25),
            cache_write_1h_per_mtok: Some(input * 2.0),
        }
    }

    /// What `usage` cost at this price: uncached input at the input rate,
    /// cache reads and writes at theirs, output at the output rate.
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    pub fn dollars(&self, usage: Usage) -> f64 {
        let read = usage.cache_read_input_tokens.min(usage.input_tokens);
        let written = usage
            .cache_creation_input_tokens
            .min(usage.input_tokens - read);
        let written_1h = usage.cache_creation_1h_input_tokens.min(written);
        let plain = usage.input_tokens - read - written;
        let rate = |tokens: u64, per_mtok: f64| tokens as f64 * per_mtok / 1e6;
        let input = self.input_per_mtok;
        rate(plain, input)
            + rate(read, self.cached_input_per_mtok.unwrap_or(input))
            + rate(
                written - written_1h,
                self.cache_write_per_mtok.unwrap_or(input * 1.25),
            )
            + rate(
                written_1h,
                self.cache_write_1h_per_mtok.unwrap_or(input * 2.0),
            )
            + rate(usage.output_tokens, self.output_per_mtok)
    }
}

/// Built-in prices in USD per million tokens: input, cached input,
/// output (Anthropic's: input and output, the cache rates from them). Prices as of 2025-11-24, from the vendors' public price pages
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
    ("claude-opus-4", Price::anthropic(15.0, 75.0)),
    ("claude-opus-4-0", Price::anthropic(15.0, 75.0)),
    ("claude-opus-4-1", Price::anthropic(15.0, 75.0)),
    ("claude-opus-4-5", Price::anthropic(5.0, 25.0)),
    ("claude-sonnet-4", Price::anthropic(3.0, 15.0)),
    ("claude-sonnet-4-0", Price::anthropic(3.0, 15.0)),
    ("claude-sonnet-4-5", Price::anthropic(3.0, 15.0)),
    ("claude-3-7-sonnet", Price::anthropic(3.0, 15.0)),
    ("claude-3-5-sonnet", Price::anthropic(3.0, 15.0)),
    ("claude-3-5-haiku", Price::anthropic(0.8, 4.0)),
    ("claude-haiku-4-5", Price::anthropic(1.0, 5.0)),
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
        self.price(model)
            .map_or(Cost::Unknown, |price| Cost::Usd(price.dollars(usage)))
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

    const MTOK: Usage = Usage::new(1_000_000, 1_000_000);

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
    fn cache_reads_and_writes_are_priced_at_their_rates() {
        let table = PriceTable::default();
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 0,
            cache_read_input_tokens: 600_000,
            cache_creation_input_tokens: 300_000,
            cache_creation_1h_input_tokens: 100_000,
        };
        // Sonnet 4.5: 0.1 M at $3, 0.6 M at $0.30, 0.2 M at $3.75, 0.1 M at $6.
        let Cost::Usd(dollars) = table.cost("claude-sonnet-4-5", usage) else {
            panic!("unknown");
        };
        assert!(
            (dollars - (0.3 + 0.18 + 0.75 + 0.6)).abs() < 1e-9,
            "{dollars}"
        );
        // gpt-4.1: reads at $0.50, the rest at $2 (OpenAI reports no writes).
        let openai = Usage {
            cache_creation_input_tokens: 0,
            cache_creation_1h_input_tokens: 0,
            ..usage
        };
        let Cost::Usd(dollars) = table.cost("gpt-4.1", openai) else {
            panic!("unknown");
        };
        assert!((dollars - (0.8 + 0.3)).abs() < 1e-9, "{dollars}");
        // No cached rate known: reads at the input rate, never less.
        let price = Price {
            cached_input_per_mtok: None,
            ..Price::new(2.0, 0.0, 0.0)
        };
        assert!((price.dollars(openai) - 2.0).abs() < 1e-9);
        // Counts that claim more than the input are bounded by it.
        let absurd = Usage {
            cache_read_input_tokens: u64::MAX,
            ..usage
        };
        assert!((price.dollars(absurd) - 2.0).abs() < 1e-9);
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
