//! Number-like and code-like texts with no personal data in them.

use super::Rng;
use crate::middleware::pii::card::{issuer_accepts, luhn_values};

fn number(rng: &mut Rng, digits: usize) -> String {
    let mut d = rng.digits(digits);
    if let Some(first) = d.first_mut()
        && digits > 1
    {
        *first = rng.range(1, 9) as u8;
    }
    to_ascii(&d)
}

fn to_ascii(digits: &[u8]) -> String {
    digits.iter().map(|d| char::from(b'0' + d)).collect()
}

/// A row of a table of small numbers.
pub(super) fn table_row(rng: &mut Rng) -> String {
    let cells = rng.range(3, 12) as usize;
    let sep = rng.pick(&[" ", "\t", "  ", " | ", ", ", "\t\t"]);
    let mut row: Vec<String> = Vec::new();
    if rng.chance(40) {
        row.push(format!(
            "{}:",
            rng.pick(&["row", "Q3", "total", "item", "week"])
        ));
    }
    for _ in 0..cells {
        // Digits per cell: mostly 1–3, sometimes 4 or 5.
        let digits = rng.pick(&[1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5]);
        row.push(number(rng, digits));
    }
    row.join(sep)
}

fn phone(rng: &mut Rng) -> String {
    match rng.below(10) {
        0 => format!("+1 {} 555 {}", number(rng, 3), number(rng, 4)),
        1 => format!("({}) 555-{}", number(rng, 3), number(rng, 4)),
        2 => format!("{}-555-{}", number(rng, 3), number(rng, 4)),
        3 => format!("{}.{}.{}", number(rng, 3), number(rng, 3), number(rng, 4)),
        4 => format!("+44 20 {} {}", number(rng, 4), number(rng, 4)),
        5 => format!(
            "0{} {} {} {} {}",
            rng.range(1, 7),
            number(rng, 2),
            number(rng, 2),
            number(rng, 2),
            number(rng, 2)
        ),
        6 => format!(
            "+49 15{} {} {}",
            rng.below(10),
            number(rng, 4),
            number(rng, 4)
        ),
        7 => format!("0{}", number(rng, 9)),
        8 => format!("+81 90-{}-{}", number(rng, 4), number(rng, 4)),
        _ => format!("0151 {} {}", number(rng, 4), number(rng, 4)),
    }
}

/// Two phone numbers side by side.
pub(super) fn phone_pair(rng: &mut Rng) -> String {
    let joiner = rng.pick(&[" ", ", ", " / ", " or ", "  "]);
    format!("call {}{joiner}{}", phone(rng), phone(rng))
}

fn date(rng: &mut Rng) -> (u64, u64, u64) {
    (rng.range(1990, 2035), rng.range(1, 12), rng.range(1, 28))
}

/// Two dates, in the formats of logs and documents.
pub(super) fn iso_dates(rng: &mut Rng) -> String {
    let (a, b) = (date(rng), date(rng));
    match rng.below(6) {
        0 => format!(
            "{}-{:02}-{:02} {}-{:02}-{:02}",
            a.0, a.1, a.2, b.0, b.1, b.2
        ),
        1 => format!(
            "{}-{:02}-{:02}T{:02}:{:02}:00Z {}-{:02}-{:02}T{:02}:30:00Z",
            a.0,
            a.1,
            a.2,
            rng.below(24),
            rng.below(60),
            b.0,
            b.1,
            b.2,
            rng.below(24)
        ),
        2 => format!(
            "from {}-{:02}-{:02} to {}-{:02}-{:02}",
            a.0, a.1, a.2, b.0, b.1, b.2
        ),
        3 => format!(
            "{}/{:02}/{:02} {}/{:02}/{:02}",
            a.0, a.1, a.2, b.0, b.1, b.2
        ),
        4 => format!("{}{:02}{:02} {}{:02}{:02}", a.0, a.1, a.2, b.0, b.1, b.2),
        _ => format!(
            "{:02}.{:02}.{} {:02}.{:02}.{}",
            a.2, a.1, a.0, b.2, b.1, b.0
        ),
    }
}

/// 13-digit epoch milliseconds (2001–2033), alone, in pairs or in JSON.
pub(super) fn epoch_ms(rng: &mut Rng) -> String {
    let a = rng.range(1_000_000_000_000, 1_999_999_999_999);
    let b = a + rng.below(10_000_000);
    match rng.below(4) {
        0 => format!("ts={a}"),
        1 => format!("{a} {b}"),
        2 => format!("{{\"created\": {a}, \"updated\": {b}}}"),
        _ => format!("[{a}, {b}, {}]", b + rng.below(1000)),
    }
}

/// Snowflake ids (Twitter's and Discord's layout) for dates from 2015 to 2026.
pub(super) fn snowflake_id(rng: &mut Rng) -> String {
    let mut id = || {
        let ms = rng.range(1_420_070_400_000, 1_798_761_600_000);
        let epoch = if rng.chance(50) {
            1_288_834_974_657u64
        } else {
            1_420_070_400_000u64
        };
        ((ms - epoch) << 22) | (rng.below(1 << 22))
    };
    let (a, b) = (id(), id());
    match rng.below(3) {
        0 => format!("id {a}"),
        1 => format!("{a} {b}"),
        _ => format!("{{\"id\": \"{a}\", \"parent\": \"{b}\"}}"),
    }
}

/// ISBN-13s, plain and hyphenated.
pub(super) fn isbn13(rng: &mut Rng) -> String {
    let mut d = vec![9, 7, rng.pick(&[8, 9])];
    d.extend(rng.digits(9));
    let sum: u32 = d
        .iter()
        .enumerate()
        .map(|(i, &v)| u32::from(v) * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    d.push(((10 - sum % 10) % 10) as u8);
    let s = to_ascii(&d);
    match rng.below(3) {
        0 => format!("ISBN {s}"),
        1 => format!(
            "ISBN {}-{}-{}-{}-{}",
            &s[..3],
            &s[3..4],
            &s[4..7],
            &s[7..12],
            &s[12..]
        ),
        _ => format!("ISBN-13: {s}"),
    }
}

/// A Luhn-valid digit run whose prefix no network issues.
pub(super) fn luhn_no_issuer(rng: &mut Rng) -> String {
    loop {
        let len = rng.range(13, 19) as usize;
        let mut d = rng.digits(len);
        if let Some(last) = d.last_mut() {
            *last = 0;
        }
        for check in 0..10 {
            if let Some(last) = d.last_mut() {
                *last = check;
            }
            if luhn_values(&d) {
                break;
            }
        }
        if issuer_accepts(&d) {
            continue;
        }
        let s = to_ascii(&d);
        return if len == 16 && rng.chance(50) {
            format!("{} {} {} {}", &s[..4], &s[4..8], &s[8..12], &s[12..])
        } else {
            s
        };
    }
}

/// IMEIs: 15 Luhn-valid digits from a reporting body's prefix.
pub(super) fn imei(rng: &mut Rng) -> String {
    let mut d: Vec<u8> = rng
        .pick(&["35", "86", "01", "99", "49", "45", "33"])
        .bytes()
        .map(|b| b - b'0')
        .collect();
    d.extend(rng.digits(13));
    for check in 0..10 {
        if let Some(last) = d.last_mut() {
            *last = check;
        }
        if luhn_values(&d) {
            break;
        }
    }
    format!("IMEI {}", to_ascii(&d))
}

/// IBANs printed in groups of four.
pub(super) fn iban(rng: &mut Rng) -> String {
    // Country, length, letters of the bank code after the check digits.
    let (country, len, letters) = rng.pick(&[
        ("DE", 22, 0),
        ("FR", 27, 0),
        ("IT", 27, 1),
        ("NL", 18, 4),
        ("GB", 22, 4),
        ("ES", 24, 0),
    ]);
    let mut body = format!("{country}{}", number(rng, 2));
    body.push_str(&rng.word(letters, letters).to_uppercase());
    while body.len() < len {
        body.push(char::from(b'0' + rng.below(10) as u8));
    }
    let grouped: Vec<String> = body
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    format!("IBAN {}", grouped.join(" "))
}

/// Slices and paths from code that look like IPv6 (`arr[::2]`, `f(x)::2`).
pub(super) fn code_slice(rng: &mut Rng) -> String {
    let name = rng.word(1, 6);
    let (a, b) = (rng.range(1, 9), rng.range(1, 99));
    match rng.below(10) {
        0 => format!("{name}[::{a}]"),
        1 => format!("{name}[{a}::{b}]"),
        2 => format!("{name}[:, ::{a}]"),
        3 => format!("f({name})::{a}"),
        4 => format!("{name}[{a}::{b}, ::{a}]"),
        5 => format!("np.arange({b})[{a}::{a}]"),
        6 => format!("{name}[::-{a}]"),
        7 => format!("s = {name}[{a}:{b}:{a}]"),
        8 => format!("Vec::<u{}>::with_capacity({b})", rng.pick(&[8, 16, 32, 64])),
        _ => format!("x = {name}(y)[{a}::]"),
    }
}

/// Paths and member accesses from code, and handles that are not emails.
pub(super) fn code_path(rng: &mut Rng) -> String {
    let (a, b, c) = (rng.word(1, 8), rng.word(1, 8), rng.word(1, 8));
    match rng.below(10) {
        0 => format!("std::{a}::{b}"),
        1 => format!("{a}::{b}::{c}()"),
        2 => format!(
            "u{}::MAX - i32::from({})",
            rng.pick(&[8, 16, 32, 64]),
            rng.below(99)
        ),
        3 => format!("n = {a}.length/{}", rng.range(2, 9)),
        4 => format!("m = self.{a}/{} + {b}.count/total", rng.range(2, 9)),
        5 => format!("see src/{a}/{b}.rs and ./{c}/config.yaml"),
        6 => format!("@{a} def {b}(self): return {c}@{a}"),
        7 => format!(
            "npm i @types/{a} {b}@{}.{}.{}",
            rng.below(20),
            rng.below(20),
            rng.below(20)
        ),
        8 => format!("HashMap::<String, u{}>::new()", rng.pick(&[8, 32])),
        _ => format!("{a}: {b}:{c}:{}", rng.below(99)),
    }
}

/// Version strings.
pub(super) fn version(rng: &mut Rng) -> String {
    let (a, b, c, d) = (rng.below(30), rng.below(30), rng.below(200), rng.below(20));
    match rng.below(8) {
        0 => format!("v{a}.{b}.{c}"),
        1 => format!("{a}.{b}.{c}-beta.{d}"),
        2 => format!("version {a}.{b}.{c}"),
        3 => format!("v{a}.{b}.{c}.{d}"),
        4 => format!("{a}.{b}.{c}.{d}.{}", rng.below(10)),
        5 => format!("Python {a}.{b}.{c}"),
        6 => format!(
            "rustc 1.{b}.{d} ({} 2026-0{}-1{})",
            rng.hex(9, false),
            rng.range(1, 9),
            rng.below(10)
        ),
        _ => format!("OID 1.3.6.1.4.1.{c}.{d}"),
    }
}

/// Hex hashes, commit ids and UUIDs.
pub(super) fn hex_hash_uuid(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => format!("sha256:{}", rng.hex(64, false)),
        1 => format!("commit {}", rng.hex(40, false)),
        2 => format!("fixed in {}", rng.hex(7, false)),
        3 => format!(
            "{}-{}-4{}-a{}-{}",
            rng.hex(8, false),
            rng.hex(4, false),
            rng.hex(3, false),
            rng.hex(3, false),
            rng.hex(12, false)
        ),
        4 => format!("md5 {}", rng.hex(32, true)),
        _ => {
            // A UUID whose groups happen to be all digits.
            let d = |rng: &mut Rng, n| to_ascii(&rng.digits(n));
            format!(
                "{}-{}-{}-{}-{}",
                d(rng, 8),
                d(rng, 4),
                d(rng, 4),
                d(rng, 4),
                d(rng, 12)
            )
        }
    }
}

/// Money, coordinates, times, sizes and other measures.
pub(super) fn measures(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 => format!(
            "${},{:03}.{:02}",
            rng.range(1, 999),
            rng.below(1000),
            rng.below(100)
        ),
        1 => format!(
            "€ {} {:03},{:02}",
            rng.range(1, 999),
            rng.below(1000),
            rng.below(100)
        ),
        2 => format!(
            "{}.{:04}, {}.{:04}",
            rng.range(1, 89),
            rng.below(10000),
            rng.range(1, 179),
            rng.below(10000)
        ),
        3 => format!(
            "{:02}:{:02}:{:02}.{:03}",
            rng.below(24),
            rng.below(60),
            rng.below(60),
            rng.below(1000)
        ),
        4 => format!(
            "{}x{} at {} fps",
            rng.pick(&[1920, 1280, 3840]),
            rng.pick(&[1080, 720, 2160]),
            rng.pick(&[30, 60])
        ),
        5 => format!(
            "tc {:02}:{:02}:{:02}:{:02}",
            rng.below(24),
            rng.below(60),
            rng.below(60),
            rng.below(30)
        ),
        6 => format!(
            "{} {} {} {}",
            rng.range(2000, 2030),
            rng.range(2000, 2030),
            rng.range(2000, 2030),
            rng.range(2000, 2030)
        ),
        _ => format!(
            "{}.{}e-{}",
            rng.range(1, 9),
            rng.below(1000),
            rng.range(1, 20)
        ),
    }
}
