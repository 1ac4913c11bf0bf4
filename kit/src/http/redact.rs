//! Redaction of secrets in URLs and headers, for logs, traces and error messages.
//!
//! kit never logs request headers or bodies. URLs are logged through [`redact_url`], which
//! hides the password of the user-info part and the value of every query parameter whose name
//! looks secret (`key`, `api-key`, `token`, `sig`, ...).

use reqwest::Url;
use reqwest::header::HeaderMap;

/// The text that replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// True when a header or query-parameter name looks like it carries a secret.
///
/// Matches `authorization`, `proxy-authorization`, `cookie`, `set-cookie`, `x-api-key`,
/// `api-key`, and any name containing `key`, `token`, `secret`, `password`, `passwd`, `auth`,
/// `credential`, `session` or `signature` (case-insensitive), plus the short `sig` and `code`.
/// Over-redacting is harmless; leaking is not.
///
/// ```
/// use kit::http::is_sensitive_name;
/// assert!(is_sensitive_name("Authorization"));
/// assert!(is_sensitive_name("x-api-key"));
/// assert!(is_sensitive_name("api-key"));
/// assert!(is_sensitive_name("access_token"));
/// assert!(!is_sensitive_name("api-version"));
/// assert!(!is_sensitive_name("content-type"));
/// ```
pub fn is_sensitive_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    const PARTS: &[&str] = &[
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "auth",
        "credential",
        "cookie",
        "session",
        "signature",
    ];
    PARTS.iter().any(|p| n.contains(p)) || n == "sig" || n == "code"
}

/// The URL with its secrets replaced: the user-info password (by `REDACTED`) and the values of
/// sensitive query parameters (by [`REDACTED`]; see [`is_sensitive_name`]).
///
/// ```
/// let url = reqwest::Url::parse("https://u:pw@example.com/v1/x?api-version=1&key=sk-123").unwrap();
/// assert_eq!(
///     kit::http::redact_url(&url),
///     "https://u:REDACTED@example.com/v1/x?api-version=1&key=[REDACTED]"
/// );
/// ```
pub fn redact_url(url: &Url) -> String {
    let mut out = url.clone();
    if out.password().is_some() {
        // Brackets would be percent-encoded in the user-info part, hence the bare word. Only
        // fails for URLs that cannot have credentials, which then have none.
        let _ = out.set_password(Some("REDACTED"));
    }
    if out.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_sensitive_name(&k) {
                    REDACTED.to_string()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        out.set_query(None);
        if !pairs.is_empty() {
            let query = pairs
                .iter()
                .map(|(k, v)| format!("{}={}", encode(k), encode_keep_redacted(v)))
                .collect::<Vec<_>>()
                .join("&");
            out.set_query(Some(&query));
        }
    }
    out.to_string()
}

/// A URL given as text, its secrets hidden as [`redact_url`] hides them (a URL without secrets
/// comes back exactly as given); text that does not
/// parse as a URL still loses every `user:password@` part, so a misspelt URL in an error or a
/// `Debug` output never shows a password.
///
/// ```
/// use kit::http::redact_url_text;
/// assert_eq!(
///     redact_url_text("https://bot:hunter22@example.com/x?token=abc"),
///     "https://bot:REDACTED@example.com/x?token=[REDACTED]"
/// );
/// assert_eq!(redact_url_text("htp:/ /u:pw@host x"), "htp:/ /u:REDACTED@host x");
/// assert_eq!(redact_url_text("postgres://app:s3cret@db/kit"), "postgres://app:REDACTED@db/kit");
/// ```
pub fn redact_url_text(text: &str) -> String {
    if let Ok(url) = Url::parse(text.trim()) {
        let secret_query = url.query_pairs().any(|(k, _)| is_sensitive_name(&k));
        if url.password().is_some() || secret_query {
            return redact_url(&url);
        }
        // Nothing to hide for the URL parser; the text as given (not normalised), still
        // without a `user:password@` a misspelt scheme hid in the path.
    }
    // Not a URL: hide whatever sits between `:` and `@` in each word that has both.
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        match (word.rfind('@'), word.find("//")) {
            (Some(at), slashes) => {
                let from = slashes.map_or(0, |s| s + 2);
                let colon = if from <= at {
                    word[from..at].find(':')
                } else {
                    None
                };
                match colon {
                    Some(colon) => {
                        out.push_str(&word[..from + colon + 1]);
                        out.push_str("REDACTED");
                        out.push_str(&word[at..]);
                    }
                    _ => out.push_str(word),
                }
            }
            _ => out.push_str(word),
        }
    }
    out
}

/// Header names and values for display, secrets replaced by [`REDACTED`].
///
/// ```
/// use reqwest::header::{HeaderMap, HeaderValue};
/// let mut h = HeaderMap::new();
/// h.insert("x-api-key", HeaderValue::from_static("sk-ant-secret"));
/// h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
/// let shown = kit::http::redact_headers(&h);
/// assert!(shown.contains(&("x-api-key".to_string(), "[REDACTED]".to_string())));
/// assert!(shown.contains(&("anthropic-version".to_string(), "2023-06-01".to_string())));
/// ```
pub fn redact_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            let shown = if is_sensitive_name(name.as_str()) {
                REDACTED.to_string()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            };
            (name.as_str().to_string(), shown)
        })
        .collect()
}

/// Replaces every occurrence of each secret in `text` (used on error bodies that might echo a
/// key back). Secrets shorter than 8 characters are left alone: they would match by accident.
pub fn redact_secrets(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.len() >= 8 {
            out = out.replace(s, REDACTED);
        }
    }
    out
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn encode_keep_redacted(s: &str) -> String {
    if s == REDACTED {
        s.to_string()
    } else {
        encode(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_of_secret_names_are_hidden() {
        let url =
            Url::parse("http://127.0.0.1:8/v1?access_token=abc&model=gpt&Signature=zz").unwrap();
        let shown = redact_url(&url);
        assert!(!shown.contains("abc") && !shown.contains("zz"), "{shown}");
        assert!(shown.contains("model=gpt"), "{shown}");
    }

    #[test]
    fn secrets_in_text_are_replaced() {
        let t = redact_secrets("bad key sk-1234567890 given", &["sk-1234567890", "x"]);
        assert_eq!(t, "bad key [REDACTED] given");
    }
}
