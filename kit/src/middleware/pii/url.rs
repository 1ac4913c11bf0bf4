//! URLs: with a scheme (`https://`, `ftp://`, `wss://`, …) or bare (`www.example.com`,
//! `example.com/about`).

use std::sync::OnceLock;

use regex::Regex;

use super::detect::{after, before, is_word, merge_sorted, pattern};

/// A URL with a scheme, up to the first character URLs cannot hold unescaped. The scheme must
/// not be glued to a word (`xhttp://`), which is checked by hand: a Unicode `\b` would make
/// the regex engine give up its fast path on non-ASCII text.
const URL_SCHEME: &str = r#"(?i)(?:https?|ftps?|sftp|wss?)://[^\s<>"{}|\\^`\[\]]+"#;

/// A bare host name (`label.label.tld`) and an optional path.
const URL_BARE: &str = r#"(?i)(?:www\.)?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.[a-z]{2,}(?:/[^\s<>"{}|\\^`\[\]]*)?"#;

/// Top-level domains longer than two letters that a bare URL may end in (two-letter ones are
/// country codes and all accepted). Without a scheme or `www.`, `x.length/2` is code, not a
/// URL: the last label must be a real top-level domain.
const GENERIC_TLDS: &[&str] = &[
    "com",
    "net",
    "org",
    "edu",
    "gov",
    "mil",
    "int",
    "info",
    "biz",
    "name",
    "pro",
    "mobi",
    "app",
    "dev",
    "xyz",
    "online",
    "site",
    "tech",
    "store",
    "shop",
    "blog",
    "cloud",
    "page",
    "wiki",
    "news",
    "live",
    "life",
    "world",
    "today",
    "space",
    "website",
    "club",
    "agency",
    "email",
    "link",
    "top",
    "art",
    "design",
    "digital",
    "media",
    "network",
    "systems",
    "solutions",
    "services",
    "company",
    "center",
    "global",
    "group",
    "team",
    "works",
    "zone",
    "one",
    "run",
    "fun",
    "guru",
    "host",
    "press",
    "social",
    "studio",
    "travel",
    "museum",
    "aero",
    "coop",
    "jobs",
    "asia",
    "cat",
    "tel",
    "academy",
    "software",
    "tools",
    "codes",
    "chat",
    "bot",
    "ltd",
    "inc",
    "llc",
    "law",
    "bank",
    "money",
    "finance",
    "health",
    "care",
    "work",
];

/// Leaves out sentence punctuation after a URL, and closing parentheses without an opening one
/// inside the URL. The parentheses are counted once, so a URL followed by a long run of `)`
/// costs linear time.
fn trim_url(url: &str) -> &str {
    let opens = url.bytes().filter(|&b| b == b'(').count();
    let mut closes = url.bytes().filter(|&b| b == b')').count();
    let mut end = url.len();
    while let Some(last) = url[..end].chars().next_back() {
        let strip = match last {
            '.' | ',' | ';' | ':' | '!' | '?' | '\'' | '"' => true,
            ')' if opens < closes => {
                closes -= 1;
                true
            }
            _ => false,
        };
        if !strip {
            break;
        }
        end -= last.len_utf8();
    }
    &url[..end]
}

/// True when a bare URL's host ends in a known top-level domain.
fn known_tld(url: &str) -> bool {
    let host = url.split('/').next().unwrap_or_default();
    let tld = host.rsplit('.').next().unwrap_or_default();
    (tld.len() == 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()))
        || GENERIC_TLDS.iter().any(|t| t.eq_ignore_ascii_case(tld))
}

/// True when the path of a bare URL has a letter: `x.length/2` and `self.dx/2` are arithmetic.
fn path_has_letter(url: &str) -> bool {
    url.split_once('/')
        .is_some_and(|(_, path)| path.chars().any(char::is_alphabetic))
}

/// Byte ranges of the URLs in `text`.
pub(super) fn urls(text: &str) -> Vec<(usize, usize)> {
    static SCHEME: OnceLock<Option<Regex>> = OnceLock::new();
    static BARE: OnceLock<Option<Regex>> = OnceLock::new();
    let mut with_scheme = Vec::new();
    if let Some(re) = pattern(&SCHEME, URL_SCHEME) {
        for m in re.find_iter(text) {
            if is_word(before(text, m.start())) {
                continue;
            }
            let url = trim_url(m.as_str());
            let host = url
                .split_once("://")
                .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default())
                .unwrap_or_default();
            if host.chars().any(char::is_alphanumeric) {
                with_scheme.push((m.start(), m.start() + url.len()));
            }
        }
    }
    let mut bare = Vec::new();
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
            // Compared as bytes: with `(?i)`, `[a-z]` also matches `ſ` and the Kelvin sign, so
            // the fourth byte may sit inside a character.
            let www = url.len() > 4
                && url
                    .as_bytes()
                    .get(..4)
                    .is_some_and(|p| p.eq_ignore_ascii_case(b"www."));
            if www || (url.contains('/') && known_tld(url) && path_has_letter(url)) {
                bare.push((m.start(), m.start() + url.len()));
            }
        }
    }
    merge_sorted(with_scheme, bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        let mut spans = urls(text);
        spans.sort_unstable();
        spans.into_iter().map(|(s, e)| &text[s..e]).collect()
    }

    #[test]
    fn every_common_scheme_is_a_url() {
        for url in [
            "http://a.example/x",
            "https://a.example/x",
            "ftp://files.example.org/pub/a.tgz",
            "ftps://files.example.org/a",
            "sftp://user@host.example.com:22/home",
            "ws://chat.example.com/socket",
            "wss://chat.example.com/socket?x=1",
        ] {
            assert_eq!(found(&format!("see {url}.")), [url], "{url}");
        }
        assert!(found("xhttp://a.example/x gopher://a.example/x").is_empty());
    }

    #[test]
    fn a_run_of_closing_parentheses_is_trimmed_in_linear_time() {
        assert_eq!(trim_url("http://x.org/a)))"), "http://x.org/a");
        assert_eq!(trim_url("http://x.org/f(a))."), "http://x.org/f(a)");
        // A megabyte of `)`: the old recount made this quadratic.
        let text = format!("http://x.org/a{}", ")".repeat(1 << 20));
        assert_eq!(found(&text), ["http://x.org/a"]);
    }

    #[test]
    fn bare_urls_need_a_real_top_level_domain() {
        assert_eq!(
            found("docs.rs/regex, example.com/about, www.example.museum"),
            ["docs.rs/regex", "example.com/about", "www.example.museum"]
        );
        assert!(found("n = x.length/2; m = self.width/3; y = a.count/total; self.dx/2").is_empty());
    }

    /// `(?i)[a-z]` also matches `ſ` (two bytes) and the Kelvin sign `K` (three): a host whose
    /// fourth byte falls inside one of them is read without slicing the text there, is not
    /// taken for `www.`, and a megabyte of them is read in linear time.
    #[test]
    fn letters_that_fold_to_ascii_do_not_break_the_www_check() {
        for text in ["abcſ.de", "wwwſ.com", "abcK.io", "ſſſſ.de"] {
            assert!(found(text).is_empty(), "{text}: {:?}", found(text));
        }
        assert_eq!(found("see www.example.com or ſ"), ["www.example.com"]);
        for size in [1 << 10, 1 << 20] {
            let text = "abcſ.de ".repeat(size / 9);
            assert!(found(&text).is_empty());
        }
    }
}
