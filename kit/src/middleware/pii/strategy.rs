//! What happens to the personal data found: redact, mask, hash or block.

use sha2::{Digest, Sha256};

use super::card::decimal_value;
use super::detect::{Detector, PiiMatch, PiiType};
use super::hash::HashKey;

/// What the PII middleware does with what it finds.
///
/// | strategy | `alice@example.com` becomes | other types |
/// |---|---|---|
/// | [`Redact`](PiiStrategy::Redact) (default) | `[REDACTED_EMAIL]` | `[REDACTED_{TYPE}]`: `[REDACTED_CREDIT_CARD]`, `[REDACTED_API_KEY]` |
/// | [`Mask`](PiiStrategy::Mask) | `alice@****.com` | card `****-****-****-1111` (separators kept), IPv4 `*.*.*.100`, IPv6 `*:*::1` (`::1` → `::*`), MAC `**:**:**:**:**:5E`, URL `[MASKED_URL]`, custom `****` + last 4 characters (`****` alone when the value has 4 characters or fewer) |
/// | [`Hash`](PiiStrategy::Hash) | `<email_hash:ff8d9819>` | `<{type}_hash:{first 8 hex digits of SHA-256 of the value}>`: stable, so equal values stay recognisably equal |
/// | keyed hash ([`PiiMiddleware::keyed_hash`](super::PiiMiddleware::keyed_hash)) | `<email_hmac:…>` (32 hex digits) | HMAC-SHA-256 under a [`HashKey`] you supply |
/// | [`Block`](PiiStrategy::Block) | the run fails with [`PiiDetected`](super::PiiDetected) (type, count, location) | |
///
/// **The mask follows the type, not the name.** A built-in detector's values are masked in
/// that type's format; a custom detector's values get the custom mask even when the detector
/// is named `email` or `ip`. [`apply_for`](Self::apply_for) takes the detector;
/// [`apply`](Self::apply), which only has a name, reads the names of the built-in types as
/// those types.
///
/// **`Hash` is LangChain's hash, and it is weak.** 32 bits of an unkeyed SHA-256 match
/// LangChain's output byte for byte, so replacements can be joined across the two; but anyone
/// can hash all card numbers of an issuer range, or a list of known addresses, and read the
/// values back. Use the keyed hash unless that compatibility is what you need.
///
/// ```
/// use kit::middleware::pii::{PiiStrategy, PiiType};
///
/// let text = "Card 4111 1111 1111 1111.";
/// let found = PiiType::CreditCard.detect(text);
/// assert_eq!(
///     PiiStrategy::Mask.apply("credit_card", text, &found).as_deref(),
///     Some("Card **** **** **** 1111.")
/// );
/// assert_eq!(PiiStrategy::Block.apply("credit_card", text, &found), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PiiStrategy {
    /// Replace with `[REDACTED_{TYPE}]`.
    #[default]
    Redact,
    /// Hide all but the informative tail.
    Mask,
    /// Replace with a stable, unkeyed hash (LangChain's format; see the type's docs, and
    /// prefer [`PiiMiddleware::keyed_hash`](super::PiiMiddleware::keyed_hash)).
    Hash,
    /// Stop the run with an error.
    Block,
}

impl PiiStrategy {
    /// The strategy's name: `redact`, `mask`, `hash` or `block`.
    pub fn name(self) -> &'static str {
        match self {
            PiiStrategy::Redact => "redact",
            PiiStrategy::Mask => "mask",
            PiiStrategy::Hash => "hash",
            PiiStrategy::Block => "block",
        }
    }

    /// `text` with each match (as returned by a detector: sorted, not overlapping, on
    /// character boundaries) replaced; `None` for [`Block`](PiiStrategy::Block).
    ///
    /// `pii_type` is a type name; the names of the built-in types are read as those types
    /// when masking. With a [`Detector`] in hand, use [`apply_for`](Self::apply_for).
    pub fn apply(self, pii_type: &str, text: &str, matches: &[PiiMatch]) -> Option<String> {
        let kind = pii_type.parse::<PiiType>().ok();
        Replacer::new(self, None).apply(pii_type, kind, text, matches)
    }

    /// `text` with each of the detector's matches replaced; `None` for
    /// [`Block`](PiiStrategy::Block). The mask format follows the detector's built-in type;
    /// a custom detector gets the custom mask whatever its name.
    ///
    /// ```
    /// use kit::middleware::pii::{Detector, PiiStrategy};
    ///
    /// let custom = Detector::regex("email", r"[a-z]+@[a-z]+").unwrap();
    /// let text = "to ann@host";
    /// let found = custom.find(text);
    /// assert_eq!(PiiStrategy::Mask.apply_for(&custom, text, &found).as_deref(), Some("to ****host"));
    /// ```
    pub fn apply_for(
        self,
        detector: &Detector,
        text: &str,
        matches: &[PiiMatch],
    ) -> Option<String> {
        Replacer::new(self, None).apply(detector.pii_type(), detector.builtin_type(), text, matches)
    }

    /// The replacement of one value; `pii_type` is read as in [`apply`](Self::apply).
    pub fn replacement(self, pii_type: &str, value: &str) -> String {
        let kind = pii_type.parse::<PiiType>().ok();
        Replacer::new(self, None).replacement(pii_type, kind, value)
    }
}

/// What replaces a match: the strategy, and the key when the hash is keyed.
#[derive(Debug, Clone)]
pub(super) struct Replacer {
    strategy: PiiStrategy,
    key: Option<HashKey>,
}

impl Replacer {
    pub(super) fn new(strategy: PiiStrategy, key: Option<HashKey>) -> Self {
        Replacer { strategy, key }
    }

    /// The same, with `Block` turned into `Redact` (for streams, which cannot be refused).
    pub(super) fn never_block(&self) -> Self {
        let strategy = match self.strategy {
            PiiStrategy::Block => PiiStrategy::Redact,
            other => other,
        };
        Replacer {
            strategy,
            key: self.key.clone(),
        }
    }

    /// `text` with each of the detector's matches replaced; `None` to block.
    pub(super) fn apply_detector(
        &self,
        detector: &Detector,
        text: &str,
        matches: &[PiiMatch],
    ) -> Option<String> {
        let spans = matches.iter().map(|m| (m.start, m.end));
        self.apply_spans(detector.pii_type(), detector.builtin_type(), text, spans)
    }

    /// `text` with each of the detector's byte ranges replaced; `None` to block.
    pub(super) fn apply_detector_spans(
        &self,
        detector: &Detector,
        text: &str,
        spans: &[(usize, usize)],
    ) -> Option<String> {
        let spans = spans.iter().copied();
        self.apply_spans(detector.pii_type(), detector.builtin_type(), text, spans)
    }

    fn apply(
        &self,
        pii_type: &str,
        kind: Option<PiiType>,
        text: &str,
        matches: &[PiiMatch],
    ) -> Option<String> {
        let spans = matches.iter().map(|m| (m.start, m.end));
        self.apply_spans(pii_type, kind, text, spans)
    }

    fn apply_spans(
        &self,
        pii_type: &str,
        kind: Option<PiiType>,
        text: &str,
        spans: impl Iterator<Item = (usize, usize)>,
    ) -> Option<String> {
        if self.strategy == PiiStrategy::Block {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        // The redaction placeholder is the same for every match.
        let redacted =
            (self.strategy == PiiStrategy::Redact).then(|| self.replacement(pii_type, kind, ""));
        for (start, end) in spans {
            // Matches from `Detector::find` are always valid; a hand-made list that is not is
            // skipped where it would overlap or split a character.
            let (Some(before), Some(value)) = (text.get(at..start), text.get(start..end)) else {
                continue;
            };
            out.push_str(before);
            match &redacted {
                Some(placeholder) => out.push_str(placeholder),
                None => out.push_str(&self.replacement(pii_type, kind, value)),
            }
            at = end;
        }
        out.push_str(text.get(at..).unwrap_or_default());
        Some(out)
    }

    fn replacement(&self, pii_type: &str, kind: Option<PiiType>, value: &str) -> String {
        match (self.strategy, &self.key) {
            (PiiStrategy::Redact | PiiStrategy::Block, _) => {
                format!("[REDACTED_{}]", pii_type.to_uppercase())
            }
            (PiiStrategy::Hash, Some(key)) => key.replacement(pii_type, value),
            (PiiStrategy::Hash, None) => format!("<{pii_type}_hash:{}>", short_hash(value)),
            (PiiStrategy::Mask, _) => mask(kind, value),
        }
    }
}

impl std::fmt::Display for PiiStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PiiStrategy {
    type Err = super::PiiError;

    fn from_str(s: &str) -> Result<Self, super::PiiError> {
        match s {
            "redact" => Ok(PiiStrategy::Redact),
            "mask" => Ok(PiiStrategy::Mask),
            "hash" => Ok(PiiStrategy::Hash),
            "block" => Ok(PiiStrategy::Block),
            other => Err(super::PiiError::UnknownStrategy(other.to_string())),
        }
    }
}

/// The first 8 hex digits of the SHA-256 of `value`.
fn short_hash(value: &str) -> String {
    let digest = Sha256::digest(value.as_bytes());
    digest[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// The mask of a value of a built-in type (`Some`) or a custom one (`None`).
fn mask(kind: Option<PiiType>, value: &str) -> String {
    match kind {
        Some(PiiType::Email) => mask_email(value),
        Some(PiiType::CreditCard) => mask_digits(value, 4),
        Some(PiiType::Ip) => mask_ip(value),
        Some(PiiType::MacAddress) => mask_mac(value),
        Some(PiiType::Url) => "[MASKED_URL]".to_string(),
        None => {
            let chars: Vec<char> = value.chars().collect();
            if chars.len() <= 4 {
                "****".to_string()
            } else {
                let tail: String = chars[chars.len() - 4..].iter().collect();
                format!("****{tail}")
            }
        }
    }
}

/// `local@****.tld`: the local part kept, the domain hidden but for its last label.
fn mask_email(value: &str) -> String {
    match value.rsplit_once('@') {
        Some((local, domain)) => match domain.rsplit_once('.') {
            Some((_, tld)) => format!("{local}@****.{tld}"),
            None => format!("{local}@****"),
        },
        None => "****".to_string(),
    }
}

/// Every digit (of any script) but the last `keep` replaced by `*`; separators kept.
fn mask_digits(value: &str, keep: usize) -> String {
    let is_digit = |c: &char| decimal_value(*c).is_some();
    let total = value.chars().filter(is_digit).count();
    let mut seen = 0;
    value
        .chars()
        .map(|c| {
            if is_digit(&c) {
                seen += 1;
                if seen + keep <= total { '*' } else { c }
            } else {
                c
            }
        })
        .collect()
}

/// IPv4 `*.*.*.100`; IPv6 every group but the last as `*` (`2001:db8::1` → `*:*::1`), and
/// the last too when it is the only one (`::1` → `::*`), a `%zone` suffix kept.
fn mask_ip(value: &str) -> String {
    let (addr, zone) = match value.split_once('%') {
        Some((a, z)) => (a, format!("%{z}")),
        None => (value, String::new()),
    };
    if !addr.contains(':') {
        let parts: Vec<&str> = addr.split('.').collect();
        let mut out: Vec<&str> = vec!["*"; parts.len().saturating_sub(1)];
        out.extend(parts.last());
        return out.join(".") + &zone;
    }
    let groups: Vec<&str> = addr.split(':').collect();
    // The last group stays visible only when another one is hidden.
    let shown = groups.iter().filter(|g| !g.is_empty()).count() > 1;
    let last = groups.iter().rposition(|g| !g.is_empty()).filter(|_| shown);
    let masked: Vec<String> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            if g.is_empty() {
                String::new()
            } else if g.contains('.') {
                // An embedded IPv4 tail (`::ffff:192.0.2.1`) is masked like IPv4.
                mask_ip(g)
            } else if Some(i) == last {
                (*g).to_string()
            } else {
                "*".to_string()
            }
        })
        .collect();
    masked.join(":") + &zone
}

/// `**:**:**:**:**:5E`.
fn mask_mac(value: &str) -> String {
    let sep = if value.contains('-') { '-' } else { ':' };
    let parts: Vec<&str> = value.split(sep).collect();
    let mut out: Vec<&str> = vec!["**"; parts.len().saturating_sub(1)];
    out.extend(parts.last());
    out.join(&sep.to_string())
}
