//! PII detectors: the built-in types and custom ones (a regex, or a function returning byte
//! offsets).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use regex::Regex;

use super::PiiError;

/// A built-in kind of personal data.
///
/// | type | name | what is found |
/// |---|---|---|
/// | [`Email`](PiiType::Email) | `email` | `local@domain.tld`; Latin, Greek and Cyrillic letters allowed, surrounding punctuation left out |
/// | [`CreditCard`](PiiType::CreditCard) | `credit_card` | 13–19 digits, optionally grouped by single spaces or dashes, that pass the Luhn check (Visa, Mastercard, 15-digit Amex, ...) |
/// | [`Ip`](PiiType::Ip) | `ip` | IPv4 (no leading zeros, octets ≤ 255) and IPv6 (every form std parses: `::1`, `2001:db8::1`, `::ffff:192.0.2.1`, with a `%zone` suffix kept in the match); not version strings like `1.2.3.4.5` |
/// | [`MacAddress`](PiiType::MacAddress) | `mac_address` | six hex pairs separated by `:` or by `-` (one separator throughout) |
/// | [`Url`](PiiType::Url) | `url` | `http(s)://` URLs with a host, and bare ones that start with `www.` or have a path (`example.com/about`); bare `example.com` in prose is not a URL; trailing sentence punctuation is left out |
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
    /// Payment card numbers (Luhn-checked).
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
        let spans = match self {
            PiiType::Email => emails(text),
            PiiType::CreditCard => credit_cards(text),
            PiiType::Ip => ips(text),
            PiiType::MacAddress => macs(text),
            PiiType::Url => urls(text),
        };
        normalize(text, spans)
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

    /// Finds the data in `text`: sorted, on character boundaries, overlapping matches merged.
    pub fn find(&self, text: &str) -> Vec<PiiMatch> {
        match &self.kind {
            DetectorKind::Builtin(t) => t.detect(text),
            DetectorKind::Regex(r) => normalize(
                text,
                r.find_iter(text).map(|m| (m.start(), m.end())).collect(),
            ),
            DetectorKind::Function(f) => normalize(
                text,
                f(text).into_iter().map(|m| (m.start, m.end)).collect(),
            ),
        }
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
    let mut spans: Vec<(usize, usize)> = spans
        .into_iter()
        .map(|(s, e)| snap(text, s, e))
        .filter(|(s, e)| s < e)
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s < last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
        .into_iter()
        .map(|(start, end)| PiiMatch {
            start,
            end,
            text: text[start..end].to_string(),
        })
        .collect()
}

/// A compiled pattern, built once. The patterns are constants covered by tests, so a failure
/// to compile cannot happen in a released build; should it, the detector finds nothing
/// rather than panicking.
fn pattern(cell: &'static OnceLock<Option<Regex>>, source: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(source).ok()).as_ref()
}

fn before(text: &str, at: usize) -> Option<char> {
    text[..at].chars().next_back()
}

fn after(text: &str, at: usize) -> Option<char> {
    text[at..].chars().next()
}

fn is_word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

// ---------------------------------------------------------------------------------------------
// email

const EMAIL: &str = r"[\p{Latin}\p{Greek}\p{Cyrillic}\p{M}\p{Nd}._%+-]+@(?:[\p{Latin}\p{Greek}\p{Cyrillic}\p{M}\p{Nd}-]+\.)+[\p{Latin}\p{Greek}\p{Cyrillic}]{2,}";

fn emails(text: &str) -> Vec<(usize, usize)> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = pattern(&RE, EMAIL) else {
        return Vec::new();
    };
    re.find_iter(text)
        .filter_map(|m| {
            // A local part has no two dots in a row and does not start with one: in
            // "see...alice@x.com" the address is "alice@x.com".
            let at = m.start() + m.as_str().find('@')?;
            let mut start = m.start();
            if let Some(i) = text[start..at].rfind("..") {
                start += i + 2;
            }
            start += text[start..at].len() - text[start..at].trim_start_matches('.').len();
            (start < at).then_some((start, m.end()))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// credit_card

const DIGIT_GROUPS: &str = r"[0-9]+(?:[ -][0-9]+)*";

/// The Luhn checksum over ASCII digits.
pub(crate) fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

fn credit_cards(text: &str) -> Vec<(usize, usize)> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = pattern(&RE, DIGIT_GROUPS) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for m in re.find_iter(text) {
        if is_word(before(text, m.start())) || is_word(after(text, m.end())) {
            continue;
        }
        // The groups of digits, with their byte ranges.
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut start = None;
        for (i, b) in m.as_str().bytes().enumerate() {
            match (b.is_ascii_digit(), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    groups.push((m.start() + s, m.start() + i));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            groups.push((m.start() + s, m.end()));
        }
        // The longest run of whole groups that is a valid card, left to right: a card number
        // next to other numbers ("qty 2 4111 1111 1111 1111") is still found.
        let mut i = 0;
        while i < groups.len() {
            let mut best = None;
            let mut digits: Vec<u8> = Vec::with_capacity(19);
            for (j, &(s, e)) in groups.iter().enumerate().skip(i) {
                digits.extend_from_slice(&text.as_bytes()[s..e]);
                if digits.len() > 19 {
                    break;
                }
                if digits.len() >= 13 && luhn(&digits) {
                    best = Some(j);
                }
            }
            match best {
                Some(j) => {
                    found.push((groups[i].0, groups[j].1));
                    i = j + 1;
                }
                None => i += 1,
            }
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// ip

const IPV4: &str = r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}";
const IPV6: &str = r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,8}(?:\.[0-9]{1,3}){0,3}";
const ZONE: &str = r"^%[0-9A-Za-z_.-]+";

fn ips(text: &str) -> Vec<(usize, usize)> {
    static V4: OnceLock<Option<Regex>> = OnceLock::new();
    static V6: OnceLock<Option<Regex>> = OnceLock::new();
    static ZONE_RE: OnceLock<Option<Regex>> = OnceLock::new();
    let mut found = Vec::new();
    if let Some(re) = pattern(&V4, IPV4) {
        for m in re.find_iter(text) {
            let prev = before(text, m.start());
            let next = after(text, m.end());
            // Not part of a longer dotted number (a version such as 1.2.3.4.5).
            let dotted_next = next == Some('.')
                && text[m.end() + 1..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit());
            if is_word(prev) || prev == Some('.') || is_word(next) || dotted_next {
                continue;
            }
            if m.as_str().parse::<Ipv4Addr>().is_ok() {
                found.push((m.start(), m.end()));
            }
        }
    }
    if let Some(re) = pattern(&V6, IPV6) {
        for m in re.find_iter(text) {
            let prev = before(text, m.start());
            if is_word(prev) || prev == Some(':') || prev == Some('.') {
                continue;
            }
            // A colon or dot that ends a sentence is not part of the address.
            let candidate = m.as_str();
            let trimmed = candidate.trim_end_matches('.');
            let trimmed = if trimmed.ends_with("::") {
                trimmed
            } else {
                trimmed.trim_end_matches(':')
            };
            let end = m.start() + trimmed.len();
            let next = after(text, end);
            if is_word(next)
                || !trimmed.bytes().any(|b| b.is_ascii_digit())
                || trimmed.parse::<Ipv6Addr>().is_err()
            {
                continue;
            }
            let zone = if next == Some('%') {
                pattern(&ZONE_RE, ZONE)
                    .and_then(|z| z.find(&text[end..]))
                    .map_or(0, |z| z.end())
            } else {
                0
            };
            found.push((m.start(), end + zone));
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// mac_address

const MAC: &str = r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){5}";

fn macs(text: &str) -> Vec<(usize, usize)> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = pattern(&RE, MAC) else {
        return Vec::new();
    };
    re.find_iter(text)
        .filter(|m| {
            let prev = before(text, m.start());
            let next = after(text, m.end());
            let continues = matches!(next, Some(':' | '-'))
                && text[m.end() + 1..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_hexdigit());
            !is_word(prev) && prev != Some(':') && !is_word(next) && !continues
        })
        .map(|m| (m.start(), m.end()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// url

const URL_SCHEME: &str = r#"(?i)\bhttps?://[^\s<>"{}|\\^`\[\]]+"#;
const URL_BARE: &str = r#"(?i)(?:www\.)?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.[a-z]{2,}(?:/[^\s<>"{}|\\^`\[\]]*)?"#;

/// Leaves out sentence punctuation after a URL, and a closing parenthesis without an opening
/// one inside the URL.
fn trim_url(url: &str) -> &str {
    let mut url = url;
    loop {
        let Some(last) = url.chars().next_back() else {
            return url;
        };
        let strip = match last {
            '.' | ',' | ';' | ':' | '!' | '?' | '\'' | '"' => true,
            ')' => url.matches('(').count() < url.matches(')').count(),
            _ => false,
        };
        if !strip {
            return url;
        }
        url = &url[..url.len() - last.len_utf8()];
    }
}

fn urls(text: &str) -> Vec<(usize, usize)> {
    static SCHEME: OnceLock<Option<Regex>> = OnceLock::new();
    static BARE: OnceLock<Option<Regex>> = OnceLock::new();
    let mut found = Vec::new();
    if let Some(re) = pattern(&SCHEME, URL_SCHEME) {
        for m in re.find_iter(text) {
            let url = trim_url(m.as_str());
            let host = url
                .split_once("://")
                .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default())
                .unwrap_or_default();
            if !host.is_empty() && host.chars().any(|c| c.is_alphanumeric()) {
                found.push((m.start(), m.start() + url.len()));
            }
        }
    }
    if let Some(re) = pattern(&BARE, URL_BARE) {
        for m in re.find_iter(text) {
            let prev = before(text, m.start());
            if is_word(prev) || matches!(prev, Some('@' | '.' | '/' | '-')) {
                continue;
            }
            let url = trim_url(m.as_str());
            let next = after(text, m.start() + url.len());
            if next == Some('@') || is_word(next) {
                continue;
            }
            let www = url.len() > 4 && url[..4].eq_ignore_ascii_case("www.");
            if www || url.contains('/') {
                found.push((m.start(), m.start() + url.len()));
            }
        }
    }
    found
}
