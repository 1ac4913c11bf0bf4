//! The moderation endpoint's answer: per-text results and their flagged categories.

use std::collections::BTreeMap;

use super::CATEGORIES;
use serde::{Deserialize, Serialize};

/// The moderation API's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModerationResponse {
    /// The request id (`modr-...`).
    #[serde(default)]
    pub id: String,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// One result per input, in order.
    pub results: Vec<ModerationResult>,
}

/// The verdict on one text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModerationResult {
    /// Whether any category is flagged.
    pub flagged: bool,
    /// Each category (`violence`, `self-harm/intent`, ...) and whether it is flagged.
    #[serde(default)]
    pub categories: BTreeMap<String, bool>,
    /// Each category's score.
    #[serde(default)]
    pub category_scores: BTreeMap<String, f64>,
    /// The input types (`text`, `image`) each score applies to.
    #[serde(default)]
    pub category_applied_input_types: BTreeMap<String, Vec<String>>,
}

impl ModerationResult {
    /// The flagged categories, by their API names, in the API's documented order. Names the
    /// API does not document come after, at most eight of them and only
    /// those shaped like category names: what the endpoint says reaches the conversation.
    pub fn flagged_categories(&self) -> Vec<String> {
        let mut flagged: Vec<String> = CATEGORIES
            .iter()
            .filter(|c| self.categories.get(**c) == Some(&true))
            .map(|c| c.to_string())
            .collect();
        flagged.extend(
            self.categories
                .iter()
                .filter(|(name, on)| {
                    **on && !CATEGORIES.contains(&name.as_str()) && category_shaped(name)
                })
                .take(MAX_EXTRA_CATEGORIES)
                .map(|(name, _)| name.clone()),
        );
        flagged
    }
}

/// The most categories an answer may add to the documented ones (a newer model's, say).
pub(super) const MAX_EXTRA_CATEGORIES: usize = 8;

/// A name shaped like a category (as every documented one is): 1 to 64 lower-case letters,
/// digits and `/`, `-` or `_`. Anything else an endpoint calls a category (a proxy's page,
/// megabytes of text) is left out of what is shown.
pub(super) fn category_shaped(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"/-_".contains(&b))
}
