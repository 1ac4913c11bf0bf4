//! Email addresses.

use std::sync::OnceLock;

use regex::Regex;

use super::detect::pattern;

/// `local@domain.tld`: letters of the Latin, Greek and Cyrillic scripts, digits of any script,
/// and `._%+-` in the local part; labels joined by dots in the domain; a top-level domain of
/// at least two letters.
const EMAIL: &str = r"[\p{Latin}\p{Greek}\p{Cyrillic}\p{M}\p{Nd}._%+-]+@(?:[\p{Latin}\p{Greek}\p{Cyrillic}\p{M}\p{Nd}-]+\.)+[\p{Latin}\p{Greek}\p{Cyrillic}]{2,}";

/// Byte ranges of the email addresses in `text`.
///
/// The local part is the whole run before `@`, double dots included: `john..doe@example.com`
/// is not valid RFC 5322, but it is how the address was written (some mobile carriers issued
/// such addresses), and leaving `john..` visible would leak half of it. An ellipsis (three
/// dots or more) ends a sentence rather than belonging to an address, so in
/// `see...alice@x.com` the address is `alice@x.com`; leading dots are left out too.
pub(super) fn emails(text: &str) -> Vec<(usize, usize)> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = pattern(&RE, EMAIL) else {
        return Vec::new();
    };
    re.find_iter(text)
        .filter_map(|m| {
            let at = m.start() + m.as_str().find('@')?;
            let mut start = m.start();
            if let Some(i) = text[start..at].rfind("...") {
                start += i + 3;
            }
            start += text[start..at].len() - text[start..at].trim_start_matches('.').len();
            (start < at).then_some((start, m.end()))
        })
        .collect()
}
