//! Redaction of secrets before anything is stored or exported.
//!
//! * values under keys that look secret — containing `api_key`, `apikey`, `token`, `secret`,
//!   `password`, `passwd`, `authorization`, `credential`, `cookie` or `private_key`, in any
//!   case, at any depth — become `"[REDACTED]"` (token *counts* such as `max_tokens` and
//!   `input_tokens` are kept; see [`is_secret_key`]);
//! * in every string: `Bearer <token>` and `Basic <credentials>` lose the credential, and
//!   strings shaped like API keys (`sk-…`, `sk-ant-…`, `pk-lf-…`/`sk-lf-…`, `ghp_…`, `AKIA…`,
//!   `xoxb-…`) are replaced.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

/// The replacement text.
pub const REDACTED: &str = "[REDACTED]";

const SECRET_KEY_PARTS: &[&str] = &[
    "api_key",
    "apikey",
    "api-key",
    "secret",
    "password",
    "passwd",
    "authorization",
    "credential",
    "cookie",
    "private_key",
];

/// True for a key whose value must never be stored.
///
/// `token` names a credential (`token`, `access_token`, `x-auth-token`), but token *counts and
/// settings* are not secret: `max_tokens`, `input_tokens`, `token_count`, `tokenizer` are kept
/// (plural `…tokens` stays secret next to `access`, `refresh`, `auth`, `bearer`, `session`).
///
/// ```
/// use kit::trace::redact::is_secret_key;
/// assert!(is_secret_key("Authorization"));
/// assert!(is_secret_key("access_token"));
/// assert!(is_secret_key("refresh_tokens"));
/// assert!(!is_secret_key("max_tokens"));
/// assert!(!is_secret_key("input_tokens"));
/// assert!(!is_secret_key("token_count"));
/// ```
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    if SECRET_KEY_PARTS.iter().any(|p| key.contains(p)) {
        return true;
    }
    let credential_context = ["access", "refresh", "auth", "bearer", "session", "csrf"]
        .iter()
        .any(|c| key.contains(c));
    key.match_indices("token").any(|(i, _)| {
        let rest = &key[i + "token".len()..];
        let count_like = rest.starts_with("izer")
            || rest.starts_with("_count")
            || rest.starts_with("count")
            || rest.starts_with("_limit")
            || rest.starts_with("_budget")
            || rest.starts_with('s');
        !count_like || (rest.starts_with('s') && credential_context)
    })
}

fn patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let specs: [(&str, &str); 4] = [
            (r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}", "$1 [REDACTED]"),
            (
                r"\b(sk-ant-[A-Za-z0-9_\-]{8,}|sk-[A-Za-z0-9_\-]{16,}|[ps]k-lf-[A-Za-z0-9\-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,})",
                "[REDACTED]",
            ),
            (r"\bAKIA[0-9A-Z]{16}\b", "[REDACTED]"),
            (
                r#"(?i)\b(api[_-]?key|token|secret|password)(["']?\s*[:=]\s*["']?)[^\s"',;&]{4,}"#,
                "$1$2[REDACTED]",
            ),
        ];
        specs
            .iter()
            .filter_map(|(p, r)| Regex::new(p).ok().map(|re| (re, *r)))
            .collect()
    })
}

/// Redacts secrets inside a string.
pub fn redact_str(text: &str) -> String {
    let mut out = text.to_string();
    for (re, replacement) in patterns() {
        if re.is_match(&out) {
            out = re.replace_all(&out, *replacement).into_owned();
        }
    }
    out
}

/// Redacts a JSON value in place: secret-looking keys and secret-shaped strings.
pub fn redact_value(value: &mut Value) {
    redact_at_depth(value, 0);
}

fn redact_at_depth(value: &mut Value, depth: usize) {
    if depth > 64 {
        *value = Value::String(REDACTED.to_string());
        return;
    }
    match value {
        Value::String(s) => {
            let clean = redact_str(s);
            if clean != *s {
                *s = clean;
            }
        }
        Value::Array(items) => {
            for item in items {
                redact_at_depth(item, depth + 1);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if is_secret_key(k) && !v.is_null() {
                    *v = Value::String(REDACTED.to_string());
                } else {
                    redact_at_depth(v, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_keys_and_shapes_at_any_depth() {
        let mut v = json!({
            "headers": {"Authorization": "Bearer abc.def.ghi", "x-api-key": "k"},
            "nested": [{"password": "hunter2"}, "call with sk-proj-ABCDEFGHIJKLMNOPQRSTUV"],
            "text": "use Bearer eyJhbGciOiJIUzI1NiJ9.x and api_key=supersecret1",
            "ok": "nothing to see"
        });
        redact_value(&mut v);
        let s = v.to_string();
        for leak in [
            "abc.def",
            "hunter2",
            "sk-proj",
            "eyJhbG",
            "supersecret1",
            "\"k\"",
        ] {
            assert!(!s.contains(leak), "{leak} leaked: {s}");
        }
        assert_eq!(v["ok"], "nothing to see");

        let mut usage = json!({"usage": {"input_tokens": 12, "output_tokens": 3},
                               "params": {"max_tokens": 256, "token": "t0ps3cret"}});
        redact_value(&mut usage);
        assert_eq!(usage["usage"]["input_tokens"], 12);
        assert_eq!(usage["params"]["max_tokens"], 256);
        assert_eq!(usage["params"]["token"], REDACTED);
        assert_eq!(v["headers"]["Authorization"], REDACTED);
    }
}
