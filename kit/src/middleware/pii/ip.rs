//! Network addresses: IPv4, IPv6 and MAC addresses.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use regex::Regex;

use super::detect::{after, before, is_word, merge_sorted, pattern};

const IPV4: &str = r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}";
const IPV6: &str = r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,8}(?:\.[0-9]{1,3}){0,3}";
const ZONE: &str = r"^%[0-9A-Za-z_.-]+";
const MAC: &str = r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{2}(?:-[0-9A-Fa-f]{2}){5}";

/// Byte ranges of the IPv4 and IPv6 addresses in `text`.
pub(super) fn ips(text: &str) -> Vec<(usize, usize)> {
    merge_sorted(ipv4s(text), ipv6s(text))
}

fn ipv4s(text: &str) -> Vec<(usize, usize)> {
    static V4: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = pattern(&V4, IPV4) else {
        return Vec::new();
    };
    let mut found = Vec::new();
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
    found
}

/// True when the IPv6-looking text at `start..end` is code: a slice (`arr[::2]`, `a[1::3]`,
/// `a[:, ::2]`) or a path after a call or a generic (`f(x)::2`, `Vec<T>::1`), or a path
/// continuing into a call or another segment (`A1::B2()`, `a1::b2::c`).
fn is_code(text: &str, start: usize, end: usize) -> bool {
    let prev = before(text, start);
    let next = after(text, end);
    if matches!(prev, Some(')' | ']' | '>' | '}')) || matches!(next, Some('(' | '<' | '{')) {
        return true;
    }
    // `[` and `]` are fine only around the address alone, as in `http://[::1]:8080`, and not
    // after a name (`arr[::1]`).
    let open = prev == Some('[');
    let close = next == Some(']');
    if open != close {
        return true;
    }
    if open {
        let before_bracket = before(text, start - 1);
        if is_word(before_bracket) || matches!(before_bracket, Some(')' | ']')) {
            return true;
        }
    }
    false
}

fn ipv6s(text: &str) -> Vec<(usize, usize)> {
    static V6: OnceLock<Option<Regex>> = OnceLock::new();
    static ZONE_RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = pattern(&V6, IPV6) else {
        return Vec::new();
    };
    let mut found = Vec::new();
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
        if is_code(text, m.start(), end + zone) {
            continue;
        }
        found.push((m.start(), end + zone));
    }
    found
}

/// Byte ranges of the MAC addresses in `text`: six hex pairs, one separator (`:` or `-`)
/// throughout, not part of a longer run of pairs.
pub(super) fn macs(text: &str) -> Vec<(usize, usize)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        ips(text).into_iter().map(|(s, e)| &text[s..e]).collect()
    }

    #[test]
    fn slices_and_paths_from_code_are_not_ipv6() {
        for code in [
            "arr[::2]",
            "arr[1::3]",
            "f(x)::2",
            "a[:, ::2]",
            "m[1::2, ::3]",
            "Vec<T>::1",
            "A1::B2()",
            "a1::b2::c",
            "std::vec::Vec",
            "a::b::c",
            "s[::-1]",
        ] {
            assert!(found(code).is_empty(), "{code}: {:?}", found(code));
        }
    }

    #[test]
    fn bracketed_addresses_are_still_found() {
        assert_eq!(found("http://[::1]:8080/"), ["::1"]);
        assert_eq!(found("connect [2001:db8::2]:443"), ["2001:db8::2"]);
        assert_eq!(found("([fe80::1%eth0])"), ["fe80::1%eth0"]);
        assert_eq!(found("loopback ::1."), ["::1"]);
    }
}
