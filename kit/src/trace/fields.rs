//! Rules for trace custom fields (spec §8.1).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::redact::{is_secret_key, redact_str};

/// Turns custom fields into indexed string dimensions: values become strings; nested values
/// (objects, arrays), blank values, private keys (starting with `_`) and keys that look secret
/// (`api_key`, `token`, `secret`, `password`, `authorization`, ...) are dropped; secrets inside
/// the values (bearer tokens, API-key-shaped strings) are redacted.
///
/// ```
/// use serde_json::json;
/// let fields = json!({"tenant": "acme", "tier": 2, "vip": true, "_internal": "x",
///                     "api_key": "k", "blank": " ", "nested": {"a": 1}, "none": null});
/// let clean = kit::trace::custom_fields(fields.as_object().unwrap());
/// assert_eq!(clean.len(), 3);
/// assert_eq!(clean["tier"], "2");
/// assert_eq!(clean["vip"], "true");
///
/// let planted = json!({"note": "call with Bearer abcdefghijkl"});
/// let clean = kit::trace::custom_fields(planted.as_object().unwrap());
/// assert_eq!(clean["note"], "call with Bearer [REDACTED]");
/// ```
pub fn custom_fields(fields: &Map<String, Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, value) in fields {
        let key = key.trim();
        if key.is_empty() || key.starts_with('_') || is_secret_key(key) {
            continue;
        }
        let text = match value {
            Value::String(s) => s.trim().to_string(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null | Value::Array(_) | Value::Object(_) => continue,
        };
        if text.is_empty() {
            continue;
        }
        out.insert(key.to_string(), redact_str(&text));
    }
    out
}
