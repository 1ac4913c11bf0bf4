//! What a call costs: a per-model price table (USD per million tokens) that users can extend.
//!
//! Models are matched by name prefix, the longest known prefix winning, so dated snapshots
//! (`gpt-4o-mini-2024-07-18`, `claude-sonnet-4-5-20250929`) find their family's price. A
//! `provider:` prefix (`openai:gpt-4o`) and a vendor path (`openai/gpt-4o` on OpenRouter) are
//! ignored. The built-in prices are list prices at the time of writing; override them with
//! [`set_price`] when they change or when you pay something else.
//!
//! ```
//! use kit::model::pricing::{self, Price};
//! use kit::Usage;
//!
//! let usage = Usage { input_tokens: 1_000_000, output_tokens: 1_000_000, ..Usage::default() };
//! let cost = pricing::cost("gpt-4o-mini", &usage).unwrap_or_default();
//! assert!((cost - (0.15 + 0.60)).abs() < 1e-9);
//!
//! // A local model is free; a fine-tune has its own price.
//! pricing::set_price("llama3.1", Price::new(0.0, 0.0));
//! pricing::set_price("ft:gpt-4o-mini", Price::new(0.30, 1.20).cached_input(0.15));
//! assert_eq!(pricing::cost("ollama:llama3.1", &usage), Some(0.0));
//! assert_eq!(pricing::cost("unknown-model", &usage), None);
//! ```

use std::collections::BTreeMap;
use std::sync::{OnceLock, RwLock};

use crate::message::Usage;

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Uncached input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the provider's cache (defaults to `input`).
    pub cached_input: Option<f64>,
    /// Input tokens written to the provider's cache (Anthropic's five-minute lifetime;
    /// defaults to `input`).
    pub cache_write: Option<f64>,
    /// Input tokens written to the cache with Anthropic's one-hour lifetime (defaults to
    /// `cache_write`).
    pub cache_write_1h: Option<f64>,
}

impl Price {
    /// A price for input and output tokens.
    pub const fn new(input: f64, output: f64) -> Self {
        Price {
            input,
            output,
            cached_input: None,
            cache_write: None,
            cache_write_1h: None,
        }
    }

    /// Sets the price of cached input tokens.
    #[must_use]
    pub const fn cached_input(mut self, price: f64) -> Self {
        self.cached_input = Some(price);
        self
    }

    /// Sets the price of cache writes.
    #[must_use]
    pub const fn cache_write(mut self, price: f64) -> Self {
        self.cache_write = Some(price);
        self
    }

    /// Sets the price of one-hour cache writes.
    #[must_use]
    pub const fn cache_write_1h(mut self, price: f64) -> Self {
        self.cache_write_1h = Some(price);
        self
    }

    /// The cost of `usage` at this price. `usage.input_tokens` includes cached tokens (kit's
    /// convention); they are billed at their own prices, one-hour cache writes at theirs.
    /// Reasoning tokens are output tokens and billed as such.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cache_read_tokens;
        let written = usage.cache_creation_tokens;
        let written_1h = usage.cache_creation_1h_tokens.min(written);
        // Saturating: the counts are a provider's numbers.
        let plain = usage
            .input_tokens
            .saturating_sub(cached.saturating_add(written));
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        let write = self.cache_write.unwrap_or(self.input);
        per(plain, self.input)
            + per(cached, self.cached_input.unwrap_or(self.input))
            + per(written - written_1h, write)
            + per(written_1h, self.cache_write_1h.unwrap_or(write))
            + per(usage.output_tokens, self.output)
    }
}

/// The built-in prices (USD per million tokens; input, output, cached input, cache write).
const DEFAULTS: &[(&str, Price)] = &[
    // OpenAI
    ("gpt-5", Price::new(1.25, 10.0).cached_input(0.125)),
    ("gpt-5-mini", Price::new(0.25, 2.0).cached_input(0.025)),
    ("gpt-5-nano", Price::new(0.05, 0.40).cached_input(0.005)),
    ("gpt-4.1", Price::new(2.0, 8.0).cached_input(0.50)),
    ("gpt-4.1-mini", Price::new(0.40, 1.60).cached_input(0.10)),
    ("gpt-4.1-nano", Price::new(0.10, 0.40).cached_input(0.025)),
    ("gpt-4o", Price::new(2.50, 10.0).cached_input(1.25)),
    ("gpt-4o-mini", Price::new(0.15, 0.60).cached_input(0.075)),
    ("o1", Price::new(15.0, 60.0).cached_input(7.50)),
    ("o3", Price::new(2.0, 8.0).cached_input(0.50)),
    ("o3-mini", Price::new(1.10, 4.40).cached_input(0.55)),
    ("o4-mini", Price::new(1.10, 4.40).cached_input(0.275)),
    // Anthropic (cache reads 0.1×, 5-minute cache writes 1.25×, 1-hour cache writes 2× the
    // input price)
    (
        "claude-opus-4-5",
        Price::new(5.0, 25.0)
            .cached_input(0.50)
            .cache_write(6.25)
            .cache_write_1h(10.0),
    ),
    (
        "claude-opus-4",
        Price::new(15.0, 75.0)
            .cached_input(1.50)
            .cache_write(18.75)
            .cache_write_1h(30.0),
    ),
    (
        "claude-sonnet-4",
        Price::new(3.0, 15.0)
            .cached_input(0.30)
            .cache_write(3.75)
            .cache_write_1h(6.0),
    ),
    (
        "claude-haiku-4-5",
        Price::new(1.0, 5.0)
            .cached_input(0.10)
            .cache_write(1.25)
            .cache_write_1h(2.0),
    ),
    (
        "claude-3-7-sonnet",
        Price::new(3.0, 15.0)
            .cached_input(0.30)
            .cache_write(3.75)
            .cache_write_1h(6.0),
    ),
    (
        "claude-3-5-sonnet",
        Price::new(3.0, 15.0)
            .cached_input(0.30)
            .cache_write(3.75)
            .cache_write_1h(6.0),
    ),
    (
        "claude-3-5-haiku",
        Price::new(0.80, 4.0)
            .cached_input(0.08)
            .cache_write(1.0)
            .cache_write_1h(1.6),
    ),
    (
        "claude-3-opus",
        Price::new(15.0, 75.0)
            .cached_input(1.50)
            .cache_write(18.75)
            .cache_write_1h(30.0),
    ),
    (
        "claude-3-haiku",
        Price::new(0.25, 1.25)
            .cached_input(0.03)
            .cache_write(0.30)
            .cache_write_1h(0.5),
    ),
];

fn table() -> &'static RwLock<BTreeMap<String, Price>> {
    static TABLE: OnceLock<RwLock<BTreeMap<String, Price>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        RwLock::new(
            DEFAULTS
                .iter()
                .map(|(name, price)| (name.to_string(), *price))
                .collect(),
        )
    })
}

/// Adds or replaces the price of a model (or of every model whose name starts with `model`).
pub fn set_price(model: impl Into<String>, price: Price) {
    let mut t = table().write().unwrap_or_else(|p| p.into_inner());
    t.insert(model.into(), price);
}

/// The price of a model: the entry with the longest prefix of its name.
pub fn price(model: &str) -> Option<Price> {
    let name = bare_name(model);
    let t = table().read().unwrap_or_else(|p| p.into_inner());
    t.iter()
        .filter(|(prefix, _)| name.starts_with(prefix.as_str()))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, p)| *p)
}

/// The cost in USD of a call with this usage, when the model's price is known.
pub fn cost(model: &str, usage: &Usage) -> Option<f64> {
    price(model).map(|p| p.cost(usage))
}

/// `openai:gpt-4o` → `gpt-4o`; `openai/gpt-4o` → `gpt-4o`.
fn bare_name(model: &str) -> &str {
    let model = match model.split_once(':') {
        Some((provider, rest)) if super::PROVIDERS.contains(&provider) => rest,
        _ => model,
    };
    model.rsplit('/').next().unwrap_or(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_and_cache_prices() {
        assert_eq!(price("gpt-4o-mini-2024-07-18").map(|p| p.input), Some(0.15));
        assert_eq!(price("gpt-4o-2024-08-06").map(|p| p.input), Some(2.50));
        assert_eq!(price("openai/o3-mini").map(|p| p.input), Some(1.10));
        assert_eq!(
            price("claude-opus-4-1-20250805").map(|p| p.input),
            Some(15.0)
        );
        assert_eq!(
            price("claude-opus-4-5-20251101").map(|p| p.input),
            Some(5.0)
        );
        let usage = Usage {
            input_tokens: 3_000_000,
            output_tokens: 0,
            cache_read_tokens: 1_000_000,
            cache_creation_tokens: 1_000_000,
            ..Usage::default()
        };
        let c = cost("anthropic:claude-sonnet-4-5", &usage).unwrap();
        assert!((c - (3.0 + 0.30 + 3.75)).abs() < 1e-9, "{c}");
        // Half of the writes with the one-hour lifetime: billed at 2× instead of 1.25×.
        let usage = Usage {
            cache_creation_1h_tokens: 500_000,
            ..usage
        };
        let c = cost("claude-sonnet-4-5", &usage).unwrap();
        assert!(
            (c - (3.0 + 0.30 + 3.75 / 2.0 + 6.0 / 2.0)).abs() < 1e-9,
            "{c}"
        );
        // A provider's nonsense (more 1h writes than writes) is clamped, never negative.
        let odd = Usage {
            cache_creation_1h_tokens: u64::MAX,
            ..usage
        };
        assert!(cost("claude-sonnet-4-5", &odd).unwrap() > 0.0);
    }
}
