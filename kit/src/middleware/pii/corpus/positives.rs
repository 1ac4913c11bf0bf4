//! Texts holding one value of one type, in the spellings people use.

use super::{Positive, Rng};
use crate::middleware::pii::PiiType;
use crate::middleware::pii::card::luhn_values;

/// A network: its name, prefixes (as digit strings) and lengths.
struct Network {
    name: &'static str,
    prefixes: &'static [&'static str],
    lengths: &'static [usize],
}

const NETWORKS: &[Network] = &[
    Network {
        name: "visa",
        prefixes: &["4"],
        lengths: &[13, 16, 19],
    },
    Network {
        name: "mastercard",
        prefixes: &["51", "52", "53", "54", "55", "2221", "2720", "23", "26"],
        lengths: &[16],
    },
    Network {
        name: "amex",
        prefixes: &["34", "37"],
        lengths: &[15],
    },
    Network {
        name: "discover",
        prefixes: &["6011", "644", "649", "65"],
        lengths: &[16, 19],
    },
    Network {
        name: "diners",
        prefixes: &["36", "38", "300", "305"],
        lengths: &[14, 16],
    },
    Network {
        name: "jcb",
        prefixes: &["3528", "3566", "3589"],
        lengths: &[16, 19],
    },
    Network {
        name: "unionpay",
        prefixes: &["62"],
        lengths: &[16, 17, 18, 19],
    },
    Network {
        name: "maestro",
        prefixes: &["6759", "5018", "6304"],
        lengths: &[13, 16, 19],
    },
];

/// A valid card number of a network: its digit values.
fn card_number(rng: &mut Rng, network: &Network) -> (usize, Vec<u8>) {
    let prefix = rng.pick(network.prefixes);
    let len = rng.pick(network.lengths);
    let mut d: Vec<u8> = prefix.bytes().map(|b| b - b'0').collect();
    while d.len() < len {
        d.push(rng.below(10) as u8);
    }
    for check in 0..10 {
        if let Some(last) = d.last_mut() {
            *last = check;
        }
        if luhn_values(&d) {
            break;
        }
    }
    (len, d)
}

/// The printed groupings of a length.
fn groupings(len: usize) -> &'static [&'static [usize]] {
    match len {
        13 => &[&[4, 3, 3, 3], &[4, 4, 5]],
        14 => &[&[4, 6, 4]],
        15 => &[&[4, 6, 5]],
        16 => &[&[4, 4, 4, 4]],
        17 => &[&[4, 4, 4, 4, 1]],
        18 => &[&[4, 4, 4, 4, 2]],
        _ => &[&[4, 4, 4, 4, 3]],
    }
}

/// Digits of other scripts: full-width, Arabic-Indic, Devanagari, Bengali, Thai.
const SCRIPTS: &[(&str, u32)] = &[
    ("fullwidth", 0xFF10),
    ("arabic-indic", 0x660),
    ("devanagari", 0x966),
    ("thai", 0xE50),
];

pub(super) fn card(rng: &mut Rng) -> Positive {
    let network = &NETWORKS[rng.index(NETWORKS.len())];
    let (len, digits) = card_number(rng, network);
    // The digits' script.
    let (script, zero) = if rng.chance(20) {
        rng.pick(SCRIPTS)
    } else {
        ("ascii", 0x30)
    };
    let chars: Vec<char> = digits
        .iter()
        .map(|&d| char::from_u32(zero + u32::from(d)).unwrap_or('0'))
        .collect();
    // The grouping and separator; 17 and 18 digits are only found grouped.
    let contiguous = rng.chance(25) && !matches!(len, 17 | 18);
    let (sep_name, sep) = rng.pick(&[
        ("space", " "),
        ("space", " "),
        ("dash", "-"),
        ("tab", "\t"),
        ("nbsp", "\u{A0}"),
        ("nnbsp", "\u{202F}"),
        ("thin", "\u{2009}"),
        ("ideographic", "\u{3000}"),
        ("fullwidth-dash", "\u{FF0D}"),
    ]);
    let pattern = rng.pick(groupings(len));
    let mut value = String::new();
    let grouping;
    if contiguous {
        value = chars.iter().collect();
        grouping = "contiguous".to_string();
    } else {
        let wrap_at = rng.chance(15).then(|| rng.index(pattern.len() - 1) + 1);
        let mut at = 0;
        for (k, &n) in pattern.iter().enumerate() {
            if k > 0 {
                value.push_str(if wrap_at == Some(k) { "\n" } else { sep });
            }
            value.extend(&chars[at..at + n]);
            at += n;
        }
        let parts: Vec<String> = pattern.iter().map(|n| n.to_string()).collect();
        grouping = format!(
            "{} {sep_name}{}",
            parts.join("-"),
            if wrap_at.is_some() { " wrapped" } else { "" }
        );
    }
    let text = match rng.below(9) {
        0 => format!("Card: {value} exp 12/27"),
        1 => format!("pay with {value}."),
        2 => format!("{value} 2nd attempt"),
        3 => format!("v2 {value}"),
        4 => format!("(card {value})"),
        5 => format!("card number {value}, thanks"),
        6 => format!("カード番号は{value}です"),
        7 => format!("\"card\": \"{value}\""),
        _ => value.clone(),
    };
    Positive {
        pii_type: PiiType::CreditCard,
        spelling: format!("{} {len} {grouping} {script}", network.name),
        text,
        value,
    }
}

pub(super) fn email(rng: &mut Rng) -> Positive {
    let (first, last) = (rng.word(2, 8), rng.word(2, 10));
    let (local, spelling) = match rng.below(7) {
        0 => (format!("{first}.{last}"), "first.last"),
        1 => (
            format!("{first}_{last}{}", rng.below(100)),
            "underscore digits",
        ),
        2 => (format!("{first}+{}", rng.word(2, 6)), "plus tag"),
        3 => (format!("{first}..{last}"), "double dot"),
        4 => (format!("{}{last}", &first[..1]), "initial"),
        5 => (format!("{first}-{last}%{}", rng.below(10)), "dash percent"),
        _ => ("élodie.durand".to_string(), "accented"),
    };
    let domain = match rng.below(5) {
        0 => format!("{}.com", rng.word(3, 10)),
        1 => format!("mail.{}.co.uk", rng.word(3, 8)),
        2 => format!("{}.{}.org", rng.word(2, 6), rng.word(3, 8)),
        3 => format!("{}-{}.io", rng.word(2, 6), rng.word(2, 6)),
        _ => format!("{}.fr", rng.word(3, 8)),
    };
    let value = format!("{local}@{domain}");
    let text = match rng.below(7) {
        0 => format!("Email: {value}."),
        1 => format!("<{value}>"),
        2 => format!("({value})"),
        3 => format!("write to {value}, thanks"),
        4 => format!("連絡は{value}まで"),
        5 => format!("cc: \"{value}\";"),
        _ => value.clone(),
    };
    Positive {
        pii_type: PiiType::Email,
        spelling: spelling.to_string(),
        text,
        value,
    }
}

fn ipv6(rng: &mut Rng) -> (String, &'static str) {
    let group = |rng: &mut Rng| format!("{:x}", rng.range(1, 0xffff));
    match rng.below(7) {
        0 => {
            let groups: Vec<String> = (0..8).map(|_| group(rng)).collect();
            (groups.join(":"), "full")
        }
        1 => (format!("2001:db8::{}", group(rng)), "compressed"),
        2 => ("::1".to_string(), "loopback"),
        3 => (format!("fe80::{}%eth{}", group(rng), rng.below(4)), "zone"),
        4 => (
            format!(
                "::ffff:{}.{}.{}.{}",
                rng.range(1, 223),
                rng.below(256),
                rng.below(256),
                rng.range(1, 254)
            ),
            "mapped",
        ),
        5 => (
            format!(
                "2001:db8:{}:{}::{}",
                group(rng),
                group(rng),
                rng.range(1, 9)
            ),
            "compressed middle",
        ),
        _ => (format!("{}::{}", group(rng), rng.range(1, 99)), "short"),
    }
}

pub(super) fn ip(rng: &mut Rng) -> Positive {
    let (value, spelling) = if rng.chance(45) {
        let v4 = format!(
            "{}.{}.{}.{}",
            rng.range(1, 223),
            rng.below(256),
            rng.below(256),
            rng.range(1, 254)
        );
        (v4, "ipv4")
    } else {
        ipv6(rng)
    };
    let v6 = value.contains(':');
    let text = match rng.below(6) {
        0 => format!("host {value}"),
        1 if v6 => format!("http://[{value}]:8080/"),
        1 => format!("{value}:8080"),
        2 if v6 => format!("connect [{value}]:443"),
        2 => format!("from {value}."),
        3 => format!("server {value} is down"),
        4 => format!("({value})"),
        _ => value.clone(),
    };
    Positive {
        pii_type: PiiType::Ip,
        spelling: spelling.to_string(),
        text,
        value,
    }
}

pub(super) fn mac(rng: &mut Rng) -> Positive {
    let upper = rng.chance(50);
    let sep = rng.pick(&[":", "-"]);
    let pairs: Vec<String> = (0..6).map(|_| rng.hex(2, upper)).collect();
    let value = pairs.join(sep);
    let text = match rng.below(4) {
        0 => format!("eth0 {value}"),
        1 => format!("MAC address: {value}."),
        2 => format!("({value})"),
        _ => value.clone(),
    };
    Positive {
        pii_type: PiiType::MacAddress,
        spelling: format!("{} {}", if upper { "upper" } else { "lower" }, sep),
        text,
        value,
    }
}

pub(super) fn url(rng: &mut Rng) -> Positive {
    let host = format!(
        "{}.{}",
        rng.word(3, 10),
        rng.pick(&["com", "org", "net", "io", "de", "co.uk"])
    );
    let path = rng.pick(&["", "/", "/a/b", "/search?q=x&n=1", "/file.tar.gz", "/#top"]);
    let (value, spelling) = match rng.below(10) {
        0 => (format!("http://{host}{path}"), "http"),
        1 => (format!("https://{host}{path}"), "https"),
        2 => (format!("ftp://files.{host}/pub{path}"), "ftp"),
        3 => (format!("ftps://files.{host}/x{path}"), "ftps"),
        4 => (format!("sftp://user@{host}:22/home"), "sftp"),
        5 => (format!("ws://{host}/socket"), "ws"),
        6 => (format!("wss://{host}/socket?token=1"), "wss"),
        7 => (format!("www.{host}"), "www"),
        8 => (format!("{host}/about"), "bare path"),
        _ => (
            format!(
                "https://en.wikipedia.org/wiki/{}_(disambiguation)",
                rng.word(3, 8)
            ),
            "parentheses",
        ),
    };
    let text = match rng.below(5) {
        0 => format!("see {value}."),
        1 => format!("({value})"),
        2 => format!("link: {value}, then"),
        3 => format!("\"{value}\""),
        _ => value.clone(),
    };
    Positive {
        pii_type: PiiType::Url,
        spelling: spelling.to_string(),
        text,
        value,
    }
}
