//! The violation message: what a flagged text is replaced with or ends the run with.

use super::ModerationResult;
use serde_json::{Value, json};

pub(super) enum Flagged {
    End(String),
    Replace(String),
}

/// The categories as the anchor lists them: "violence, self harm intent".
pub(super) fn category_label(result: &ModerationResult) -> String {
    let names: Vec<String> = result
        .flagged_categories()
        .iter()
        .map(|c| c.replace(['-', '/', '_'], " "))
        .collect();
    if names.is_empty() {
        "OpenAI's safety policies".to_string()
    } else {
        names.join(", ")
    }
}

/// Fills a template the way Python's `str.format` would; an unknown placeholder or a lone
/// brace makes the template be used as is (the anchor falls back the same way).
pub(super) fn format_violation(
    template: &str,
    result: &ModerationResult,
    original: &str,
) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for n in chars.by_ref() {
                    if n == '}' {
                        closed = true;
                        break;
                    }
                    name.push(n);
                }
                if !closed {
                    return template.to_string();
                }
                match name.as_str() {
                    "categories" => out.push_str(&category_label(result)),
                    "category_scores" => {
                        // Every documented score, then at most a few others shaped like names.
                        let scores: serde_json::Map<String, Value> = result
                            .category_scores
                            .iter()
                            .filter(|(k, _)| super::CATEGORIES.contains(&k.as_str()))
                            .chain(
                                result
                                    .category_scores
                                    .iter()
                                    .filter(|(k, _)| {
                                        !super::CATEGORIES.contains(&k.as_str())
                                            && super::api::category_shaped(k)
                                    })
                                    .take(super::api::MAX_EXTRA_CATEGORIES),
                            )
                            .map(|(k, v)| (k.replace(['-', '/'], "_"), json!(v)))
                            .collect();
                        out.push_str(&crate::middleware::python::py_json(&Value::Object(scores)));
                    }
                    "original_content" => out.push_str(original),
                    _ => return template.to_string(),
                }
            }
            '}' => return template.to_string(),
            c => out.push(c),
        }
    }
    out
}
