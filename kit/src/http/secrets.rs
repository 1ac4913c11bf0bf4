//! Scrubbing configured secrets out of the texts a peer sends back.
//!
//! A proxy or a provider may echo a request's credentials in its answer: as sent, or escaped
//! the way its format escapes text. [`Secrets::scrub`] finds each secret in every form a peer
//! can produce without kit noticing — as sent, JSON-escaped (`\u0073k-…`, `\/`, any subset of
//! the characters), percent-encoded (`%73k-…`), and those escapes applied twice (a JSON string
//! inside a JSON string) — and replaces the whole escaped span.

use std::fmt;
use std::ops::Range;

use super::REDACTED;

/// The credentials of a request (or of a configured client), to scrub from error texts.
///
/// Secrets shorter than [`Secrets::MIN_LEN`] characters are not kept: they would match by
/// accident. [`HttpRequest::secrets`](super::HttpRequest::secrets) collects a request's
/// (header values, the URL's password, secret-looking query values); [`HttpClient`](super::HttpClient)
/// scrubs every error it returns against them.
///
/// ```
/// use kit::http::Secrets;
///
/// let secrets = Secrets::new().with("sk-live-0123456789");
/// let echoed = r#"{"error":"bad key \u0073k-live-0123456789"} and sk-live%2D0123456789"#;
/// let clean = secrets.scrub(echoed);
/// assert!(!clean.contains("0123456789"), "{clean}");
/// assert_eq!(secrets.scrub("nothing here"), "nothing here");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    list: Vec<Box<str>>,
}

impl fmt::Debug for Secrets {
    /// Shows how many secrets there are, never the secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} redacted)", self.list.len())
    }
}

/// How many times escapes are undone when looking for a secret (JSON inside JSON inside a URL).
const MAX_DECODE_LEVELS: usize = 3;

/// One character of a decoded view, with the span of the original text it came from.
#[derive(Clone, Copy)]
struct Unit {
    c: char,
    start: usize,
    end: usize,
}

impl Secrets {
    /// The shortest secret kept, in characters.
    pub const MIN_LEN: usize = 8;

    /// No secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a secret (ignored when shorter than [`MIN_LEN`](Self::MIN_LEN) or already known).
    pub fn add(&mut self, secret: &str) {
        let secret = secret.trim();
        if secret.chars().count() < Self::MIN_LEN || self.list.iter().any(|s| &**s == secret) {
            return;
        }
        self.list.push(secret.into());
    }

    /// Adds a secret taken from a URL: as written (percent-encoded) and decoded.
    pub(crate) fn add_url_part(&mut self, part: &str) {
        self.add(part);
        let bytes = part.as_bytes();
        let mut decoded = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let byte = match (bytes[i], bytes.get(i + 1..i + 3)) {
                (b'%', Some(h)) => std::str::from_utf8(h)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok()),
                _ => None,
            };
            match byte {
                Some(b) => {
                    decoded.push(b);
                    i += 3;
                }
                None => {
                    decoded.push(bytes[i]);
                    i += 1;
                }
            }
        }
        self.add(&String::from_utf8_lossy(&decoded));
    }

    /// These secrets and `secret`.
    #[must_use]
    pub fn with(mut self, secret: &str) -> Self {
        self.add(secret);
        self
    }

    /// Adds every secret of `other`.
    pub fn extend(&mut self, other: &Secrets) {
        for s in &other.list {
            self.add(s);
        }
    }

    /// True when there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `text` with every secret, in any of the forms described in the module docs, replaced by
    /// [`REDACTED`]. Linear in the text for each secret and decoding level.
    pub fn scrub(&self, text: &str) -> String {
        match self.spans(text) {
            None => text.to_string(),
            Some(spans) => replace_spans(text, &spans),
        }
    }

    /// Scrubs `text` in place (no allocation when nothing is found).
    pub fn scrub_in_place(&self, text: &mut String) {
        if let Some(spans) = self.spans(text) {
            *text = replace_spans(text, &spans);
        }
    }

    /// The merged byte spans of `text` holding a secret, or `None` when there is none.
    fn spans(&self, text: &str) -> Option<Vec<Range<usize>>> {
        if self.list.is_empty() || text.is_empty() {
            return None;
        }
        let mut spans: Vec<Range<usize>> = Vec::new();
        for secret in &self.list {
            let mut from = 0;
            while let Some(i) = text[from..].find(&**secret) {
                let start = from + i;
                spans.push(start..start + secret.len());
                from = start + secret.len();
            }
        }
        if text.contains(['\\', '%']) {
            let mut view: Vec<Unit> = text
                .char_indices()
                .map(|(i, c)| Unit {
                    c,
                    start: i,
                    end: i + c.len_utf8(),
                })
                .collect();
            let secrets: Vec<Vec<char>> = self.list.iter().map(|s| s.chars().collect()).collect();
            for _ in 0..MAX_DECODE_LEVELS {
                let Some(decoded) = decode(&view) else { break };
                view = decoded;
                for secret in &secrets {
                    find_in_view(&view, secret, &mut spans);
                }
            }
        }
        if spans.is_empty() {
            return None;
        }
        spans.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
        for span in spans {
            match merged.last_mut() {
                Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
                _ => merged.push(span),
            }
        }
        Some(merged)
    }
}

fn replace_spans(text: &str, spans: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in spans {
        out.push_str(&text[at..span.start]);
        out.push_str(REDACTED);
        at = span.end;
    }
    out.push_str(&text[at..]);
    out
}

fn find_in_view(view: &[Unit], secret: &[char], spans: &mut Vec<Range<usize>>) {
    let (Some(&first), n) = (secret.first(), secret.len()) else {
        return;
    };
    if view.len() < n {
        return;
    }
    let mut i = 0;
    while i + n <= view.len() {
        if view[i].c == first && view[i..i + n].iter().zip(secret).all(|(u, c)| u.c == *c) {
            spans.push(view[i].start..view[i + n - 1].end);
            i += n;
        } else {
            i += 1;
        }
    }
}

fn hex(units: &[Unit]) -> Option<u32> {
    let mut v = 0u32;
    for u in units {
        v = v * 16 + u.c.to_digit(16)?;
    }
    Some(v)
}

/// One level of JSON and percent escapes undone, each decoded character spanning the escape it
/// came from; `None` when there was nothing to undo.
fn decode(units: &[Unit]) -> Option<Vec<Unit>> {
    let mut out = Vec::with_capacity(units.len());
    let mut changed = false;
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        let span = |last: usize| (u.start, units[last].end);
        let decoded: Option<(char, usize)> = match u.c {
            '\\' => match units.get(i + 1).map(|n| n.c) {
                Some('u') if units.len() >= i + 6 => match hex(&units[i + 2..i + 6]) {
                    Some(high @ 0xD800..=0xDBFF)
                        if units.len() >= i + 12
                            && units[i + 6].c == '\\'
                            && units[i + 7].c == 'u' =>
                    {
                        match hex(&units[i + 8..i + 12]) {
                            Some(low @ 0xDC00..=0xDFFF) => {
                                let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                                char::from_u32(code).map(|c| (c, i + 11))
                            }
                            _ => None,
                        }
                    }
                    Some(code) => char::from_u32(code).map(|c| (c, i + 5)),
                    None => None,
                },
                Some(c @ ('/' | '\\' | '"' | '\'')) => Some((c, i + 1)),
                Some('n') => Some(('\n', i + 1)),
                Some('t') => Some(('\t', i + 1)),
                Some('r') => Some(('\r', i + 1)),
                _ => None,
            },
            '%' if units.len() >= i + 3 => match hex(&units[i + 1..i + 3]) {
                Some(b) if b < 0x80 => char::from_u32(b).map(|c| (c, i + 2)),
                _ => None,
            },
            _ => None,
        };
        match decoded {
            Some((c, last)) => {
                let (start, end) = span(last);
                out.push(Unit { c, start, end });
                changed = true;
                i = last + 1;
            }
            None => {
                out.push(u);
                i += 1;
            }
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_is_found() {
        let s = Secrets::new().with("sk-abc/DEF_123456");
        for text in [
            "key sk-abc/DEF_123456 here",
            r#"{"k":"sk-abc\/DEF_123456"}"#,
            r"\u0073\u006b-abc/DEF_123456",
            "sk%2Dabc%2FDEF_123456",
            r#"{"outer":"{\"inner\":\"\\u0073k-abc/DEF_123456\"}"}"#,
        ] {
            let clean = s.scrub(text);
            assert!(!clean.contains("DEF_123456"), "{text} -> {clean}");
            assert!(clean.contains(REDACTED), "{clean}");
        }
        assert_eq!(s.scrub("sk-abc other"), "sk-abc other");
    }

    #[test]
    fn short_and_duplicate_secrets_are_not_kept() {
        let mut s = Secrets::new().with("short").with("longer-secret");
        s.add("longer-secret");
        assert_eq!(format!("{s:?}"), "Secrets(1 redacted)");
        assert_eq!(s.scrub("short"), "short");
    }

    #[test]
    fn broken_escapes_are_left_alone() {
        let s = Secrets::new().with("abcdefgh12");
        for text in [r"\u12", "%", "%G1", r"\", r"\ud800\u0041", "abc\\udfff"] {
            assert_eq!(s.scrub(text), text);
        }
    }
}
