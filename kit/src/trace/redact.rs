//! Redaction of secrets before anything is stored or exported.
//!
//! * values under keys that look secret — containing `api_key`, `apikey`, `token`, `secret`,
//!   `password`, `passwd`, `passphrase`, `authorization`, `credential`, `cookie`,
//!   `private_key`, `privateKey` or `private-key`, in any case, at any depth — become
//!   `"[REDACTED]"` (token *counts* such as `max_tokens` and
//!   `input_tokens` are kept; see [`is_secret_key`]);
//! * in every string: `Bearer <token>` and `Basic <credentials>` lose the credential, as does
//!   `Authorization: <any scheme> <credential>`; `key=value` and `"key": "value"` pairs whose
//!   key ends in a secret word (`api_key`, `access_token`, `client_secret`,
//!   `aws_secret_access_key`, `password`, `passphrase`, `private_key`, ...) lose the value;
//!   the password of a URL or DSN (`postgres://user:password@host`) is replaced; and strings
//!   shaped like API keys (`sk-…`, `sk-ant-…`, `pk-lf-…`/`sk-lf-…`, `ghp_…`, `AKIA…`,
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
    "passphrase",
    "authorization",
    "credential",
    "cookie",
    "private_key",
    "privatekey",
    "private-key",
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
    // Keys are short: lowercase them on the stack (this runs for every key of every input).
    let mut buf = [0u8; 64];
    let owned;
    let key: &str = if key.len() <= buf.len() {
        let b = &mut buf[..key.len()];
        b.copy_from_slice(key.as_bytes());
        b.make_ascii_lowercase();
        std::str::from_utf8(b).unwrap_or_default()
    } else {
        owned = key.to_ascii_lowercase();
        &owned
    };
    if SECRET_KEY_PARTS.iter().any(|p| key.contains(p)) {
        return true;
    }
    if !key.contains("token") {
        return false;
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

/// The string patterns and their replacements, and their union that tells in one pass whether any
/// occurs (almost all strings hold no secret: they cost one scan and no allocation).
struct Patterns {
    any: Option<Regex>,
    rules: Vec<(Regex, &'static str)>,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        // `(?-u:\b)`: ASCII word boundaries keep the fast DFA engines (secrets are ASCII).
        let specs: [(&str, &str); 6] = [
            // `Authorization: <scheme> <credential>` whatever the scheme (`Token`, `Digest`, ...).
            (
                r#"(?i)(authorization["']?\s*[:=]\s*["']?)(?:[A-Za-z][A-Za-z0-9_\-]*\s+)?[^\s"',;&]{4,}"#,
                "$1[REDACTED]",
            ),
            (
                r"(?i)(?-u:\b)(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}",
                "$1 [REDACTED]",
            ),
            // The password of a URL or DSN: `scheme://user:password@host`.
            (
                r"(?i)([a-z][a-z0-9+.\-]*://[^\s:/@]*:)[^\s/@]+@",
                "${1}[REDACTED]@",
            ),
            (
                r"(?-u:\b)(sk-ant-[A-Za-z0-9_\-]{8,}|sk-[A-Za-z0-9_\-]{16,}|[ps]k-lf-[A-Za-z0-9\-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,})",
                "[REDACTED]",
            ),
            (r"(?-u:\b)AKIA[0-9A-Z]{16}(?-u:\b)", "[REDACTED]"),
            // `key=value` and `"key": "value"` pairs whose key names a secret, also at the
            // end of a longer name (`access_token=`, `client_secret=`,
            // `aws_secret_access_key=`): no word boundary is needed before the key word.
            (
                r#"(?i)([A-Za-z0-9_\-]*(?:api[_-]?key|access[_-]?key|private[_-]?key|token|secret|password|passwd|passphrase))(["']?\s*[:=]\s*["']?)[^\s"',;&]{4,}"#,
                "$1$2[REDACTED]",
            ),
        ];
        let rules: Vec<(Regex, &'static str)> = specs
            .iter()
            .filter_map(|(p, r)| Regex::new(p).ok().map(|re| (re, *r)))
            .collect();
        let any = Regex::new(
            &rules
                .iter()
                .map(|(re, _)| format!("(?:{})", re.as_str()))
                .collect::<Vec<_>>()
                .join("|"),
        )
        .ok();
        Patterns { any, rules }
    })
}

/// The redacted text, or `None` when there is nothing to redact.
fn redacted(text: &str) -> Option<String> {
    let p = patterns();
    if p.any.as_ref().is_some_and(|any| !any.is_match(text)) {
        return None;
    }
    let mut out: Option<String> = None;
    for (re, replacement) in &p.rules {
        let current = out.as_deref().unwrap_or(text);
        if let std::borrow::Cow::Owned(changed) = re.replace_all(current, *replacement) {
            out = Some(changed);
        }
    }
    out
}

/// Compiles the patterns now (tracers do it when they get an exporter), so the first trace
/// does not pay for it.
pub(crate) fn warm_up() {
    let _ = patterns();
}

/// Redacts secrets inside a string.
pub fn redact_str(text: &str) -> String {
    redacted(text).unwrap_or_else(|| text.to_string())
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
            if let Some(clean) = redacted(s) {
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

    #[test]
    fn every_string_pattern() {
        let planted = [
            ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpw"),
            ("keys pk-lf-1234abcd and sk-lf-5678efgh", "1234abcd"),
            ("keys pk-lf-1234abcd and sk-lf-5678efgh", "5678efgh"),
            ("token ghp_ABCDEFGHIJKLMNOPQRSTUVWX here", "ghp_ABCD"),
            ("slack xoxb-1234567890-abcdef", "xoxb-1234"),
            ("aws AKIAABCDEFGHIJKLMNOP!", "AKIAABCD"),
            ("anthropic sk-ant-api03-abcdefgh", "api03"),
            ("é Bearer abcdefghij é", "abcdefghij"),
            ("{\"password\": \"hunter22\"}", "hunter22"),
        ];
        for (text, secret) in planted {
            let clean = redact_str(text);
            assert!(!clean.contains(secret), "{secret} survived in {clean}");
            assert!(clean.contains(REDACTED), "{clean}");
        }
        let plain = "nothing here: max_tokens 256, a task-id, sk-short";
        assert_eq!(redact_str(plain), plain);
    }
}
