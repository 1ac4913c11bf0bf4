//! Detectors on tricky inputs and the exact output of every strategy.

use super::detect::luhn;
use super::*;

fn found(t: PiiType, text: &str) -> Vec<String> {
    t.detect(text).into_iter().map(|m| m.text).collect()
}

fn scrub(t: PiiType, strategy: PiiStrategy, text: &str) -> String {
    PiiMiddleware::new(t)
        .strategy(strategy)
        .apply(text)
        .unwrap()
}

#[test]
fn emails_in_punctuation_and_other_scripts() {
    assert_eq!(
        found(
            PiiType::Email,
            "(alice@example.com), <bob.smith+tag@mail.example.co.uk>; \"carol@x.org\". \
             End: dave@example.com."
        ),
        [
            "alice@example.com",
            "bob.smith+tag@mail.example.co.uk",
            "carol@x.org",
            "dave@example.com"
        ]
    );
    // Not emails: no domain dot, no TLD of two letters, a bare @.
    assert!(found(PiiType::Email, "x@y, me@host.c, @ alone, a@b.1").is_empty());
    // A local part does not start with dots.
    assert_eq!(found(PiiType::Email, "see...ann@ex.io"), ["ann@ex.io"]);
    // Accented and Cyrillic letters; CJK text around an address is not swallowed.
    assert_eq!(
        found(PiiType::Email, "Écrivez à élodie@exemple.fr, merci"),
        ["élodie@exemple.fr"]
    );
    assert_eq!(
        found(PiiType::Email, "почта иван@пример.рф!"),
        ["иван@пример.рф"]
    );
    assert_eq!(
        found(PiiType::Email, "連絡はtaro@example.jpまで"),
        ["taro@example.jp"]
    );
}

#[test]
fn luhn_checksum() {
    assert!(luhn(b"4111111111111111"));
    assert!(luhn(b"378282246310005"));
    assert!(!luhn(b"4111111111111112"));
    assert!(luhn(b"0"));
}

#[test]
fn credit_cards_of_every_length_and_grouping() {
    let text = "Visa 4111 1111 1111 1111, MC 5555-5555-5555-4444, Amex 3782 822463 10005, \
                plain 4012888888881881, 13-digit 4222222222222, 19 digits 1234 5678 9012 3456 789 \
                invalid 4111 1111 1111 1112, short 4111 1111 111.";
    let cards = found(PiiType::CreditCard, text);
    assert_eq!(
        cards,
        [
            "4111 1111 1111 1111",
            "5555-5555-5555-4444",
            "3782 822463 10005",
            "4012888888881881",
            "4222222222222",
        ],
        "the 19-digit number (and every run of its groups) fails Luhn, as do the invalid and \
         short ones"
    );
    // A valid 19-digit number.
    let mut nineteen = b"601100099013942412".to_vec();
    let check = (0..10u8)
        .find(|d| {
            let mut n = nineteen.clone();
            n.push(b'0' + d);
            luhn(&n)
        })
        .unwrap();
    nineteen.push(b'0' + check);
    let nineteen = String::from_utf8(nineteen).unwrap();
    assert_eq!(
        found(PiiType::CreditCard, &format!("n {nineteen}.")),
        std::slice::from_ref(&nineteen)
    );
    // A card next to other numbers is still found; digits glued to letters are not cards.
    assert_eq!(
        found(PiiType::CreditCard, "qty 2 4111 1111 1111 1111 ok"),
        ["4111 1111 1111 1111"]
    );
    assert_eq!(
        found(PiiType::CreditCard, "6011 0009 9013 9424 123"),
        ["6011 0009 9013 9424"]
    );
    assert!(
        found(
            PiiType::CreditCard,
            "id X4111111111111111 and 4111111111111111Z"
        )
        .is_empty()
    );
    // Double separators break a number.
    assert!(found(PiiType::CreditCard, "4111  1111  1111  1111").is_empty());
}

#[test]
fn ipv4_is_validated() {
    assert_eq!(
        found(
            PiiType::Ip,
            "hosts 192.168.1.100, 10.0.0.1; 0.0.0.0 and 255.255.255.255."
        ),
        ["192.168.1.100", "10.0.0.1", "0.0.0.0", "255.255.255.255"]
    );
    // Out of range, leading zeros, versions and longer dotted numbers are not addresses.
    assert!(
        found(
            PiiType::Ip,
            "999.1.1.1 256.0.0.1 01.2.3.4 1.02.3.4 v1.2.3.4 1.2.3.4.5 1.2.3"
        )
        .is_empty()
    );
}

#[test]
fn ipv6_forms() {
    assert_eq!(
        found(
            PiiType::Ip,
            "loopback ::1, doc 2001:db8::1, full 2001:0db8:0000:0000:0000:ff00:0042:8329, \
             mapped ::ffff:192.0.2.1, link fe80::1%eth0, bracketed [2001:db8::2]:8080."
        ),
        [
            "::1",
            "2001:db8::1",
            "2001:0db8:0000:0000:0000:ff00:0042:8329",
            "::ffff:192.0.2.1",
            "fe80::1%eth0",
            "2001:db8::2",
        ]
    );
    // Times, ratios, C++ paths, MAC addresses and hex words are not addresses.
    assert!(
        found(
            PiiType::Ip,
            "at 10:30:00, 1:2:3, std::vector, 00:1A:2B:3C:4D:5E, dead::beef, 2001:db8:::1"
        )
        .is_empty()
    );
    // A colon ending the sentence is not part of the address.
    assert_eq!(
        found(PiiType::Ip, "server 2001:db8::7: down"),
        ["2001:db8::7"]
    );
}

#[test]
fn mac_addresses() {
    assert_eq!(
        found(
            PiiType::MacAddress,
            "eth0 00:1A:2B:3C:4D:5E, wlan 00-1a-2b-3c-4d-5f."
        ),
        ["00:1A:2B:3C:4D:5E", "00-1a-2b-3c-4d-5f"]
    );
    // Mixed separators, seven pairs, too few pairs.
    assert!(
        found(
            PiiType::MacAddress,
            "00:1A-2B:3C:4D:5E 00:11:22:33:44:55:66 00:11:22:33:44"
        )
        .is_empty()
    );
}

#[test]
fn urls_with_and_without_scheme() {
    assert_eq!(
        found(
            PiiType::Url,
            "See https://example.com/a?b=1#c, (http://x.org/wiki/Rust_(language)) and \
             HTTPS://EXAMPLE.ORG. Also www.example.net, example.com/about and docs.rs/regex."
        ),
        [
            "https://example.com/a?b=1#c",
            "http://x.org/wiki/Rust_(language)",
            "HTTPS://EXAMPLE.ORG",
            "www.example.net",
            "example.com/about",
            "docs.rs/regex",
        ]
    );
    // Bare domains in prose, emails, version numbers and schemes without a host are not URLs.
    assert!(
        found(
            PiiType::Url,
            "I like example.com. Mail ann@example.com/x. Ratio 3.14/2. Broken http:// here."
        )
        .is_empty()
    );
}

#[test]
fn redact_output() {
    assert_eq!(
        scrub(PiiType::Email, PiiStrategy::Redact, "mail a@b.com now"),
        "mail [REDACTED_EMAIL] now"
    );
    assert_eq!(
        scrub(PiiType::CreditCard, PiiStrategy::Redact, "4111111111111111"),
        "[REDACTED_CREDIT_CARD]"
    );
    assert_eq!(
        scrub(
            PiiType::MacAddress,
            PiiStrategy::Redact,
            "00:1A:2B:3C:4D:5E"
        ),
        "[REDACTED_MAC_ADDRESS]"
    );
    let keys = PiiMiddleware::regex("api_key", r"sk-[a-z]+").unwrap();
    assert_eq!(keys.apply("k=sk-abc;").unwrap(), "k=[REDACTED_API_KEY];");
}

#[test]
fn mask_output() {
    use PiiStrategy::Mask;
    assert_eq!(
        scrub(PiiType::Email, Mask, "john.doe@example.com"),
        "john.doe@****.com"
    );
    assert_eq!(
        scrub(PiiType::CreditCard, Mask, "5105-1051-0510-5100"),
        "****-****-****-5100"
    );
    assert_eq!(
        scrub(PiiType::CreditCard, Mask, "5105105105105100"),
        "************5100"
    );
    assert_eq!(
        scrub(PiiType::CreditCard, Mask, "3782 822463 10005"),
        "**** ****** *0005"
    );
    assert_eq!(scrub(PiiType::Ip, Mask, "192.168.1.100"), "*.*.*.100");
    assert_eq!(scrub(PiiType::Ip, Mask, "2001:db8::1"), "*:*::1");
    assert_eq!(scrub(PiiType::Ip, Mask, "fe80::1%eth0"), "*::1%eth0");
    assert_eq!(scrub(PiiType::Ip, Mask, "::ffff:192.0.2.1"), "::*:*.*.*.1");
    assert_eq!(
        scrub(PiiType::MacAddress, Mask, "00:1A:2B:3C:4D:5E"),
        "**:**:**:**:**:5E"
    );
    assert_eq!(
        scrub(PiiType::MacAddress, Mask, "00-1a-2b-3c-4d-5f"),
        "**-**-**-**-**-5f"
    );
    assert_eq!(
        scrub(PiiType::Url, Mask, "go to https://example.com/x"),
        "go to [MASKED_URL]"
    );
    let custom = PiiMiddleware::regex("api_key", r"#\w+")
        .unwrap()
        .strategy(Mask);
    assert_eq!(custom.apply("#abcdefgh").unwrap(), "****efgh");
    assert_eq!(custom.apply("#αβγδεζ").unwrap(), "****γδεζ");
    assert_eq!(
        custom.apply("(#ü12)").unwrap(),
        "(****)",
        "short values are fully hidden"
    );
}

#[test]
fn hash_output_is_stable() {
    let text = "alice@example.com wrote to alice@example.com";
    assert_eq!(
        scrub(PiiType::Email, PiiStrategy::Hash, text),
        "<email_hash:ff8d9819> wrote to <email_hash:ff8d9819>"
    );
    assert_eq!(
        scrub(PiiType::CreditCard, PiiStrategy::Hash, "4111111111111111"),
        "<credit_card_hash:9bbef194>"
    );
}

#[test]
fn block_reports_type_count_and_location() {
    let mw = PiiMiddleware::new(PiiType::Ip).strategy(PiiStrategy::Block);
    match mw.apply("1.2.3.4 and ::1 and 5.6.7.8") {
        Err(e) if e.pii_detected().is_some() => {
            let PiiDetected {
                pii_type,
                count,
                location,
                ..
            } = e.pii_detected().unwrap();
            assert_eq!(
                (pii_type.as_str(), *count, location.as_str()),
                ("ip", 3, "text")
            );
        }
        other => panic!("expected PiiDetected, got {other:?}"),
    }
    assert_eq!(mw.apply("nothing here").unwrap(), "nothing here");
}

#[test]
fn custom_functions_never_split_characters_and_overlaps_merge() {
    // Offsets inside multi-byte characters, out of range, reversed and overlapping.
    let text = "née à Zürich — 東京";
    let detector = Detector::function("place", |t: &str| {
        let z = t.find('Z').unwrap();
        let raw = |start, end| PiiMatch {
            start,
            end,
            text: String::new(),
        };
        vec![
            // "Zü", overlapping the next one.
            PiiMatch::new(t, z, z + 3),
            // Starts inside the two bytes of 'ü': snapped back to its first byte.
            raw(z + 2, z + 7),
            // Starts inside '東' and ends past the text.
            raw(t.len() - 4, t.len() + 10),
            // Reversed: dropped.
            raw(9, 3),
        ]
    })
    .unwrap();
    let found = detector.find(text);
    let spans: Vec<&str> = found.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(spans, ["Zürich", "東京"]);
    let mw = PiiMiddleware::with_detector(detector);
    assert_eq!(
        mw.apply(text).unwrap(),
        "née à [REDACTED_PLACE] — [REDACTED_PLACE]"
    );
    // Overlapping regex matches of built-ins (an IPv4 inside a mapped IPv6) are one.
    assert_eq!(
        scrub(PiiType::Ip, PiiStrategy::Redact, "ip ::ffff:192.0.2.1!"),
        "ip [REDACTED_IP]!"
    );
}

#[test]
fn multibyte_text_around_every_type() {
    let text = "Ünïcödé ✓ ann@example.com ✓ 4111 1111 1111 1111 ✓ 10.0.0.1 ✓ \
                00:1A:2B:3C:4D:5E ✓ https://exämple.com/päth ✓ 日本";
    let mut out = text.to_string();
    for t in PiiType::ALL {
        out = PiiMiddleware::new(t).apply(&out).unwrap();
    }
    assert_eq!(
        out,
        "Ünïcödé ✓ [REDACTED_EMAIL] ✓ [REDACTED_CREDIT_CARD] ✓ [REDACTED_IP] ✓ \
         [REDACTED_MAC_ADDRESS] ✓ [REDACTED_URL] ✓ 日本"
    );
}

#[test]
fn configuration_errors_are_clear() {
    let err = PiiMiddleware::from_name("ssn").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unknown PII type: ssn. Must be one of ['email', 'credit_card', 'ip', 'mac_address', \
         'url'] or provide a custom detector (PiiMiddleware::regex or PiiMiddleware::function)."
    );
    let err = PiiMiddleware::regex("ssn", r"(\d{3}").unwrap_err();
    assert!(matches!(err, PiiError::InvalidRegex { .. }), "{err}");
    assert!(err.to_string().contains("does not compile"), "{err}");
    let err = PiiMiddleware::regex("my type", r"x").unwrap_err();
    assert_eq!(err, PiiError::InvalidTypeName("my type".into()));
    let err = PiiMiddleware::function("", |_: &str| Vec::new()).unwrap_err();
    assert_eq!(err, PiiError::InvalidTypeName(String::new()));
    assert_eq!("mask".parse::<PiiStrategy>().unwrap(), PiiStrategy::Mask);
    assert!("scramble".parse::<PiiStrategy>().is_err());
    assert_eq!(
        PiiMiddleware::from_name("url").unwrap().name(),
        "PIIMiddleware[url]"
    );
}

// ---------------------------------------------------------------------------------------------
// Precision, keyed hashing, masking by type, large inputs

#[test]
fn masking_follows_the_detectors_type_not_its_name() {
    use PiiStrategy::Mask;
    let named_email = PiiMiddleware::regex("email", r"[a-z]+@[a-z]+")
        .unwrap()
        .strategy(Mask);
    assert_eq!(named_email.apply("to ann@host").unwrap(), "to ****host");
    let named_ip = PiiMiddleware::function("ip", |t: &str| vec![PiiMatch::new(t, 0, t.len())])
        .unwrap()
        .strategy(Mask);
    assert_eq!(named_ip.apply("10.1.2.3").unwrap(), "****.2.3");
    assert_eq!(
        Detector::builtin(PiiType::Ip).builtin_type(),
        Some(PiiType::Ip)
    );
    assert_eq!(named_ip.detector().builtin_type(), None);
}

#[test]
fn masking_always_changes_the_value() {
    use PiiStrategy::Mask;
    assert_eq!(scrub(PiiType::Ip, Mask, "::1"), "::*");
    assert_eq!(scrub(PiiType::Ip, Mask, "bind [::2]:80"), "bind [::*]:80");
    assert_eq!(scrub(PiiType::Ip, Mask, "::192.0.2.1"), "::*.*.*.1");
    assert_eq!(
        scrub(
            PiiType::CreditCard,
            Mask,
            "４１１１－１１１１－１１１１－１１１１"
        ),
        "****－****－****－１１１１"
    );
}

#[test]
fn the_whole_address_is_redacted_even_with_a_double_dot() {
    assert_eq!(
        scrub(
            PiiType::Email,
            PiiStrategy::Redact,
            "from john..doe@example.com!"
        ),
        "from [REDACTED_EMAIL]!"
    );
}

#[test]
fn the_keyed_hash_is_hmac_sha256_and_the_key_never_shows() {
    let key = HashKey::new("a secret of 32 bytes, not shown!").unwrap();
    let mw = PiiMiddleware::new(PiiType::Email).keyed_hash(key.clone());
    let out = mw.apply("ann@example.com and ann@example.com").unwrap();
    let (a, b) = out.split_once(" and ").unwrap();
    assert_eq!(a, b, "equal values, equal replacements");
    assert!(a.starts_with("<email_hmac:") && a.len() == "<email_hmac:>".len() + 32);
    assert_ne!(
        a,
        PiiMiddleware::new(PiiType::Email)
            .strategy(PiiStrategy::Hash)
            .apply("ann@example.com")
            .unwrap()
    );
    for shown in [format!("{mw:?}"), format!("{key:?}")] {
        assert!(!shown.contains("a secret"), "{shown}");
    }
    // The unkeyed hash is still LangChain's.
    assert_eq!(
        scrub(PiiType::Email, PiiStrategy::Hash, "alice@example.com"),
        "<email_hash:ff8d9819>"
    );
    // The stream filter uses the key too.
    let streamed = super::corpus::stream_text(
        &mw.clone().apply_to_output(true).stream_lookback(8),
        ["write to ann@exa", "mple.com now, thanks for all"],
    );
    assert_eq!(streamed, format!("write to {a} now, thanks for all"));
    assert_eq!(
        HashKey::new("short").unwrap_err(),
        PiiError::WeakHashKey { len: 5 }
    );
}

#[tokio::test]
async fn a_large_tool_result_is_scanned_on_the_blocking_pool_and_scrubbed() {
    let mw = PiiMiddleware::new(PiiType::Email).apply_to_tool_results(true);
    let filler = "x".repeat(super::OFFLOAD_BYTES);
    let content = Content::Text(format!("{filler} ann@example.com {filler}"));
    let (count, scrubbed) = mw.scrub_content_async(&content).await;
    assert_eq!(count, 1);
    assert_eq!(
        scrubbed.unwrap().text(),
        format!("{filler} [REDACTED_EMAIL] {filler}")
    );
    let message = Message::assistant(format!("{filler} bob@example.org"));
    let out = mw
        .scrub_message_async(&message, "output")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.text(), format!("{filler} [REDACTED_EMAIL]"));
    // Blocking still blocks.
    let block = mw.strategy(PiiStrategy::Block);
    let err = block
        .scrub_message_async(&message, "output")
        .await
        .unwrap_err();
    assert_eq!(err.pii_detected().unwrap().count, 1);
}

/// Hostile repeats for each detector, each with how many matches one repeat holds (`None`: one
/// match in the whole text, because the repeats join into one). Each was timed in a release
/// build at 1 KiB and 1 MiB: the cost per byte stays within 1.1×.
const HOSTILE_REPEATS: &[(PiiType, &str, Option<usize>)] = &[
    // A host continued by labels that can never end in a top-level domain.
    (PiiType::Url, "a.bb.1", Some(0)),
    (PiiType::Url, "www.", None),
    (PiiType::Url, "http://", None),
    (PiiType::Url, "x.com/a ", Some(1)),
    (PiiType::Url, "a.bb@", Some(0)),
    // Groups that could start a card at every step, NUL-padded digits, IBAN-like tokens.
    (PiiType::CreditCard, "4111 ", Some(0)),
    (PiiType::CreditCard, "4111\0", Some(0)),
    (PiiType::CreditCard, "DE89 ", Some(0)),
    (PiiType::CreditCard, "1.", Some(0)),
    // Colon runs, addresses followed by a zone, addresses inside code.
    (PiiType::Ip, "1::1::", Some(0)),
    (PiiType::Ip, "::1%", Some(1)),
    (PiiType::Ip, "f(::1)", Some(1)),
    (PiiType::Ip, "1.1.1.1.", Some(0)),
    (PiiType::MacAddress, "0a:0a-", Some(0)),
    // Domains ending in a digit label, a local part glued to the next address.
    (PiiType::Email, "a@b.ca@b.c", Some(1)),
    (PiiType::Email, "a@bb.cc.1", Some(1)),
    (PiiType::Email, "a@b-", Some(0)),
];

#[test]
fn every_detector_finds_the_same_per_repeat_at_a_kibibyte_and_a_mebibyte() {
    // No timing: a quadratic detector would not finish a mebibyte in a debug build, and the
    // count scaling with the size shows no match was lost or split at either size.
    for &(t, unit, per_repeat) in HOSTILE_REPEATS {
        for size in [1 << 10, 1 << 20] {
            let repeats = size / unit.len();
            let text = unit.repeat(repeats);
            let expected = per_repeat.map_or(1, |n| n * repeats);
            assert_eq!(
                t.detect(&text).len(),
                expected,
                "{t} on {unit:?} x {repeats}"
            );
        }
    }
}

#[test]
fn every_detector_stays_correct_on_a_megabyte_of_its_worst_input() {
    // No timing: a quadratic detector would not finish in a debug build.
    let mib = 1 << 20;
    let cases: [(PiiType, String, usize); 5] = [
        (
            PiiType::Url,
            format!("http://x.org/a{}", ")".repeat(mib)),
            1,
        ),
        (PiiType::CreditCard, "4111 ".repeat(mib / 5), 0),
        (PiiType::Email, "a.b_c+d-e%f.g@".repeat(mib / 14), 0),
        (PiiType::Ip, "1:".repeat(mib / 2), 0),
        (PiiType::MacAddress, "0a:".repeat(mib / 3), 0),
    ];
    for (t, text, expected) in cases {
        assert_eq!(t.detect(&text).len(), expected, "{t}");
    }
}
