//! PII detectors: the built-in types and custom ones (a regex, or a function returning byte
//! offsets).

use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use regex::Regex;

use super::PiiError;
use super::{card, email, ip, url};

/// A built-in kind of personal data.
///
/// | type | name | what is found |
/// |---|---|---|
/// | [`Email`](PiiType::Email) | `email` | `local@domain.tld`; Latin, Greek and Cyrillic letters allowed, surrounding punctuation left out; `john..doe@example.com` whole |
/// | [`CreditCard`](PiiType::CreditCard) | `credit_card` | a plausible card: 13–19 digits of any script (`４１１１…`), contiguous or grouped in the network's printed pattern (4-4-4-4, Amex 4-6-5, …) with one kind of separator (space, tab, no-break space, dash, one line break), from a real issuer range with that network's length, passing the Luhn check; judged at word boundaries (`4111 1111 1111 1111 2nd try` finds the card, `ID4111111111111111x` is an identifier) |
/// | [`Ip`](PiiType::Ip) | `ip` | IPv4 (no leading zeros, octets ≤ 255) and IPv6 (every form std parses: `::1`, `2001:db8::1`, `::ffff:192.0.2.1`, with a `%zone` suffix kept in the match); not version strings like `1.2.3.4.5`, not code such as `arr[::2]`, `a[1::3]`, `f(x)::2`, `std::vec` |
/// | [`MacAddress`](PiiType::MacAddress) | `mac_address` | six hex pairs separated by `:` or by `-` (one separator throughout) |
/// | [`Url`](PiiType::Url) | `url` | `http`, `https`, `ftp`, `ftps`, `sftp`, `ws` and `wss` URLs with a host, and bare ones that start with `www.` or have a path and a real top-level domain (`example.com/about`, not `x.length/2`); bare `example.com` in prose is not a URL; trailing sentence punctuation is left out |
///
/// Every detector is linear in the length of the text.
///
/// ```
/// use kit::middleware::pii::PiiType;
///
/// let found = PiiType::CreditCard.detect("Amex 3782 822463 10005, Visa 4111-1111-1111-1112");
/// assert_eq!(found.len(), 1, "the Visa number fails the Luhn check");
/// assert_eq!(found[0].text, "3782 822463 10005");
/// assert_eq!("mac_address".parse::<PiiType>().unwrap(), PiiType::MacAddress);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PiiType {
    /// Email addresses.
    Email,
    /// Payment card numbers (issuer, length, grouping and Luhn checked).
    CreditCard,
    /// IPv4 and IPv6 addresses.
    Ip,
    /// MAC addresses.
    MacAddress,
    /// URLs.
    Url,
}

impl PiiType {
    /// Every built-in type.
    pub const ALL: [PiiType; 5] = [
        PiiType::Email,
        PiiType::CreditCard,
        PiiType::Ip,
        PiiType::MacAddress,
        PiiType::Url,
    ];

    /// The type's name: `email`, `credit_card`, `ip`, `mac_address` or `url`.
    pub fn name(self) -> &'static str {
        match self {
            PiiType::Email => "email",
            PiiType::CreditCard => "credit_card",
            PiiType::Ip => "ip",
            PiiType::MacAddress => "mac_address",
            PiiType::Url => "url",
        }
    }

    /// Finds this type in `text`: byte ranges on character boundaries, sorted, overlapping
    /// matches merged.
    pub fn detect(self, text: &str) -> Vec<PiiMatch> {
        normalize(text, self.raw_spans(text))
    }

    /// The byte ranges this type's detector finds, before sorting and merging.
    fn raw_spans(self, text: &str) -> Vec<(usize, usize)> {
        match self {
            PiiType::Email => email::emails(text),
            PiiType::CreditCard => card::credit_cards(text),
            PiiType::Ip => ip::ips(text),
            PiiType::MacAddress => ip::macs(text),
            PiiType::Url => url::urls(text),
        }
    }
}

impl std::fmt::Display for PiiType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PiiType {
    type Err = PiiError;

    /// Parses a built-in type's name; any other name is [`PiiError::UnknownType`].
    fn from_str(s: &str) -> Result<Self, PiiError> {
        PiiType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| PiiError::UnknownType(s.to_string()))
    }
}

/// One piece of personal data found in a text: the byte range `start..end` and the text there.
///
/// Custom detector functions return these; the middleware snaps each range outwards to
/// character boundaries (so a redaction never splits a UTF-8 character), drops empty or
/// out-of-range ones, re-reads `text` from the range, and merges overlapping ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiiMatch {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset just past the last byte.
    pub end: usize,
    /// The matched text.
    pub text: String,
}

impl PiiMatch {
    /// A match of `text[start..end]` (the text is filled in from the range, snapped to
    /// character boundaries).
    pub fn new(text: &str, start: usize, end: usize) -> Self {
        let (start, end) = snap(text, start, end);
        PiiMatch {
            start,
            end,
            text: text.get(start..end).unwrap_or_default().to_string(),
        }
    }
}

type DetectFn = dyn Fn(&str) -> Vec<PiiMatch> + Send + Sync;

/// Finds one type of personal data: a built-in [`PiiType`], a regular expression, or a
/// function returning [`PiiMatch`]es with byte offsets.
///
/// ```
/// use kit::middleware::pii::{Detector, PiiMatch};
///
/// let api_keys = Detector::regex("api_key", r"sk-[A-Za-z0-9]{8,}").unwrap();
/// assert_eq!(api_keys.find("key: sk-abcdef123456.")[0].text, "sk-abcdef123456");
///
/// // A function: every word written in capitals is a "shouted" name.
/// let shouted = Detector::function("name", |text: &str| {
///     let mut found = Vec::new();
///     let mut offset = 0;
///     for word in text.split(' ') {
///         if word.len() > 1 && word.chars().all(|c| c.is_uppercase()) {
///             found.push(PiiMatch::new(text, offset, offset + word.len()));
///         }
///         offset += word.len() + 1;
///     }
///     found
/// })
/// .unwrap();
/// assert_eq!(shouted.find("ask ÉLODIE now")[0].text, "ÉLODIE");
/// ```
#[derive(Clone)]
pub struct Detector {
    pii_type: String,
    kind: DetectorKind,
}

#[derive(Clone)]
enum DetectorKind {
    Builtin(PiiType),
    Regex(Regex),
    Function(Arc<DetectFn>),
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            DetectorKind::Builtin(_) => "builtin".to_string(),
            DetectorKind::Regex(r) => format!("regex {:?}", r.as_str()),
            DetectorKind::Function(_) => "function".to_string(),
        };
        f.debug_struct("Detector")
            .field("pii_type", &self.pii_type)
            .field("kind", &kind)
            .finish()
    }
}

impl Detector {
    /// The detector of a built-in type.
    pub fn builtin(pii_type: PiiType) -> Self {
        Detector {
            pii_type: pii_type.name().to_string(),
            kind: DetectorKind::Builtin(pii_type),
        }
    }

    /// A custom type found by a regular expression (every match counts).
    ///
    /// Fails with [`PiiError::InvalidRegex`] when the pattern does not compile, or
    /// [`PiiError::InvalidTypeName`] when the type name is empty or not made of letters,
    /// digits and `_`.
    pub fn regex(pii_type: impl Into<String>, pattern: &str) -> Result<Self, PiiError> {
        let pii_type = checked_name(pii_type.into())?;
        let regex = Regex::new(pattern).map_err(|e| PiiError::InvalidRegex {
            pii_type: pii_type.clone(),
            message: e.to_string(),
        })?;
        Ok(Detector {
            pii_type,
            kind: DetectorKind::Regex(regex),
        })
    }

    /// A custom type found by a function returning byte ranges.
    ///
    /// Fails with [`PiiError::InvalidTypeName`] when the type name is empty or not made of
    /// letters, digits and `_`.
    pub fn function<F>(pii_type: impl Into<String>, find: F) -> Result<Self, PiiError>
    where
        F: Fn(&str) -> Vec<PiiMatch> + Send + Sync + 'static,
    {
        Ok(Detector {
            pii_type: checked_name(pii_type.into())?,
            kind: DetectorKind::Function(Arc::new(find)),
        })
    }

    /// The name of the type this detector finds (`email`, `api_key`, ...).
    pub fn pii_type(&self) -> &str {
        &self.pii_type
    }

    /// The built-in type this detector finds, `None` for a custom one. The mask strategy
    /// formats values by this type, never by the name: a custom detector named `email` is
    /// masked like any custom type.
    pub fn builtin_type(&self) -> Option<PiiType> {
        match self.kind {
            DetectorKind::Builtin(t) => Some(t),
            _ => None,
        }
    }

    /// Finds the data in `text`: sorted, on character boundaries, overlapping matches merged.
    pub fn find(&self, text: &str) -> Vec<PiiMatch> {
        self.spans(text)
            .into_iter()
            .map(|(start, end)| PiiMatch {
                start,
                end,
                text: text[start..end].to_string(),
            })
            .collect()
    }

    /// [`find`](Self::find) without the texts: sorted, merged byte ranges.
    pub(crate) fn spans(&self, text: &str) -> Vec<(usize, usize)> {
        let raw = match &self.kind {
            DetectorKind::Builtin(t) => t.raw_spans(text),
            DetectorKind::Regex(r) => r.find_iter(text).map(|m| (m.start(), m.end())).collect(),
            DetectorKind::Function(f) => f(text).into_iter().map(|m| (m.start, m.end)).collect(),
        };
        merge_spans(text, raw)
    }
}

fn checked_name(name: String) -> Result<String, PiiError> {
    if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        Ok(name)
    } else {
        Err(PiiError::InvalidTypeName(name))
    }
}

/// Snaps a byte range outwards to character boundaries, within the text.
fn snap(text: &str, start: usize, end: usize) -> (usize, usize) {
    let mut end = end.min(text.len());
    let mut start = start.min(end);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    (start, end)
}

/// Sorted, snapped, non-empty, merged matches.
pub(crate) fn normalize(text: &str, spans: Vec<(usize, usize)>) -> Vec<PiiMatch> {
    merge_spans(text, spans)
        .into_iter()
        .map(|(start, end)| PiiMatch {
            start,
            end,
            text: text[start..end].to_string(),
        })
        .collect()
}

/// Byte ranges snapped outwards to character boundaries, without empty ones, sorted, with
/// overlapping ones merged.
pub(crate) fn merge_spans(text: &str, spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = spans
        .into_iter()
        .map(|(s, e)| snap(text, s, e))
        .filter(|(s, e)| s < e)
        .collect();
    // The built-in detectors return their spans in order: no sort needed then.
    if !spans.is_sorted() {
        spans.sort_unstable();
    }
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s < last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// A compiled pattern, built once. The patterns are constants covered by tests, so a failure
/// to compile cannot happen in a released build; should it, the detector finds nothing
/// rather than panicking.
pub(super) fn pattern(
    cell: &'static OnceLock<Option<Regex>>,
    source: &str,
) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(source).ok()).as_ref()
}

pub(super) fn before(text: &str, at: usize) -> Option<char> {
    text[..at].chars().next_back()
}

pub(super) fn after(text: &str, at: usize) -> Option<char> {
    text[at..].chars().next()
}

pub(super) fn is_word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// The Luhn checksum over ASCII digits (anything else counts as 0).
#[cfg(test)]
pub(crate) fn luhn(digits: &[u8]) -> bool {
    let values: Vec<u8> = digits
        .iter()
        .map(|d| d.wrapping_sub(b'0'))
        .map(|v| if v > 9 { 0 } else { v })
        .collect();
    super::card::luhn_values(&values)
}

/// Two lists of spans, each sorted, merged into one sorted list in linear time.
pub(super) fn merge_sorted(a: Vec<(usize, usize)>, b: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x <= y => a.next(),
            (Some(_), Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, _) => b.next(),
        };
        match next {
            Some(span) => out.push(span),
            None => return out,
        }
    }
}
