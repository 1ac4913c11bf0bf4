//! What happens to the personal data found: redact, mask, hash or block.

use sha2::{Digest, Sha256};

use super::detect::PiiMatch;

/// What the PII middleware does with what it finds.
///
/// | strategy | `alice@example.com` becomes | other types |
/// |---|---|---|
/// | [`Redact`](PiiStrategy::Redact) (default) | `[REDACTED_EMAIL]` | `[REDACTED_{TYPE}]`: `[REDACTED_CREDIT_CARD]`, `[REDACTED_API_KEY]` |
/// | [`Mask`](PiiStrategy::Mask) | `alice@****.com` | card `****-****-****-1111` (separators kept), IPv4 `*.*.*.100`, IPv6 `*:*::1`, MAC `**:**:**:**:**:5E`, URL `[MASKED_URL]`, custom `****` + last 4 characters (`****` alone when the value has 4 characters or fewer) |
/// | [`Hash`](PiiStrategy::Hash) | `<email_hash:ff8d9819>` | `<{type}_hash:{first 8 hex digits of SHA-256 of the value}>`: stable, so equal values stay recognisably equal |
/// | [`Block`](PiiStrategy::Block) | the run fails with [`PiiDetected`](super::PiiDetected) (type, count, location) | |
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
    /// Replace with a stable hash.
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
    pub fn apply(self, pii_type: &str, text: &str, matches: &[PiiMatch]) -> Option<String> {
        if self == PiiStrategy::Block {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for m in matches {
            // Matches from `Detector::find` are always valid; a hand-made list that is not is
            // skipped where it would overlap or split a character.
            let (Some(before), Some(value)) = (text.get(at..m.start), text.get(m.start..m.end))
            else {
                continue;
            };
            out.push_str(before);
            out.push_str(&self.replacement(pii_type, value));
            at = m.end;
        }
        out.push_str(text.get(at..).unwrap_or_default());
        Some(out)
    }

    /// The replacement of one value.
    pub fn replacement(self, pii_type: &str, value: &str) -> String {
        match self {
            PiiStrategy::Redact | PiiStrategy::Block => {
                format!("[REDACTED_{}]", pii_type.to_uppercase())
            }
            PiiStrategy::Hash => format!("<{pii_type}_hash:{}>", short_hash(value)),
            PiiStrategy::Mask => mask(pii_type, value),
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

fn mask(pii_type: &str, value: &str) -> String {
    match pii_type {
        "email" => mask_email(value),
        "credit_card" => mask_digits(value, 4),
        "ip" => mask_ip(value),
        "mac_address" => mask_mac(value),
        "url" => "[MASKED_URL]".to_string(),
        _ => {
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

/// Every digit but the last `keep` replaced by `*`; separators kept.
fn mask_digits(value: &str, keep: usize) -> String {
    let total = value.chars().filter(char::is_ascii_digit).count();
    let mut seen = 0;
    value
        .chars()
        .map(|c| {
            if c.is_ascii_digit() {
                seen += 1;
                if seen + keep <= total { '*' } else { c }
            } else {
                c
            }
        })
        .collect()
}

/// IPv4 `*.*.*.100`; IPv6 every group but the last as `*` (`2001:db8::1` → `*:*::1`), a
/// `%zone` suffix kept.
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
    let last = groups.iter().rposition(|g| !g.is_empty());
    let masked: Vec<String> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            if g.is_empty() {
                String::new()
            } else if Some(i) == last {
                // An embedded IPv4 tail (`::ffff:192.0.2.1`) is masked like IPv4.
                if g.contains('.') {
                    mask_ip(g)
                } else {
                    (*g).to_string()
                }
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
