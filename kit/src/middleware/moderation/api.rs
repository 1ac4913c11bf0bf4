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
    /// The flagged categories, by their API names, in the API's documented order.
    pub fn flagged_categories(&self) -> Vec<String> {
        let mut flagged: Vec<String> = CATEGORIES
            .iter()
            .filter(|c| self.categories.get(**c) == Some(&true))
            .map(|c| c.to_string())
            .collect();
        flagged.extend(
            self.categories
                .iter()
                .filter(|(name, on)| **on && !CATEGORIES.contains(&name.as_str()))
                .map(|(name, _)| name.clone()),
        );
        flagged
    }
}
