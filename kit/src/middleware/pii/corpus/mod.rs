//! A seeded precision and recall corpus for the built-in detectors, shared by the integration
//! test `tests/pii_corpus.rs` and the benchmark program (`bench -- pii`). Not a stable API.
//!
//! **Negatives** are number-like and code-like text with no personal data: rows of a table,
//! phone numbers side by side, dates, epoch timestamps, snowflake ids, ISBN-13s, Luhn-valid
//! runs with no issuer prefix, IBANs, slices and paths from code, versions, hex hashes, UUIDs,
//! measures. A detector that finds anything in one is a false positive.
//!
//! **Positives** hold one value of one type in a sentence, in the spellings people use: every
//! card network in each printed grouping, with each separator, in full-width and other
//! scripts' digits, next to words; emails, IPv4 and IPv6 (`::1`, zones, brackets), MAC
//! addresses, URLs of every common scheme. A positive is found when its type's detector returns
//! exactly the value.
//!
//! Every sample comes from a small deterministic generator (SplitMix64), so a seed always gives
//! the same corpus.

mod negatives;
mod positives;
mod stream;

pub use stream::{
    delta_event, end_event, released_text, stream_events, stream_filter, stream_text,
};

use negatives::{
    code_path, code_slice, epoch_ms, hex_hash_uuid, iban, imei, isbn13, iso_dates, luhn_no_issuer,
    measures, phone_pair, snowflake_id, table_row, version,
};
use positives::{card, email, ip, mac, url};

use super::PiiType;

/// The seed the test and the benchmark use.
pub const SEED: u64 = 0x5EED_0001;

/// SplitMix64: small, fast, and good enough to vary test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// An index in `0..n` (0 when `n` is 0).
    fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).unwrap_or(0)
    }

    /// One of `items` (the default value when it is empty).
    pub fn pick<T: Clone + Default>(&mut self, items: &[T]) -> T {
        items
            .get(self.index(items.len()))
            .cloned()
            .unwrap_or_default()
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// `n` random decimal digits (values 0–9).
    fn digits(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.below(10) as u8).collect()
    }

    /// `n` random hex digits.
    fn hex(&mut self, n: usize, upper: bool) -> String {
        let alphabet: &[u8] = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        (0..n)
            .map(|_| char::from(alphabet[self.index(16)]))
            .collect()
    }

    /// A lowercase word of `lo..=hi` letters.
    fn word(&mut self, lo: usize, hi: usize) -> String {
        let n = self.range(lo as u64, hi as u64) as usize;
        (0..n)
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect()
    }
}

/// A text with no personal data in it.
#[derive(Debug, Clone)]
pub struct Negative {
    /// What kind of text it is (`table_row`, `phone_pair`, `code_slice`, …).
    pub kind: &'static str,
    /// The text.
    pub text: String,
}

/// A text holding one value of one type.
#[derive(Debug, Clone)]
pub struct Positive {
    /// The value's type.
    pub pii_type: PiiType,
    /// How it is written (`visa 4-4-4-4 nbsp`, `ipv6 loopback`, …).
    pub spelling: String,
    /// The text.
    pub text: String,
    /// The value, exactly as the detector should return it.
    pub value: String,
}

/// The corpus.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Texts without personal data.
    pub negatives: Vec<Negative>,
    /// Texts with one value each.
    pub positives: Vec<Positive>,
}

/// How one detector did on the corpus.
#[derive(Debug, Clone)]
pub struct TypeScore {
    /// The type.
    pub pii_type: PiiType,
    /// Negatives scanned.
    pub negatives: usize,
    /// Negatives in which the detector found something, with what it found.
    pub false_positives: Vec<(String, String)>,
    /// Positives of this type.
    pub positives: usize,
    /// Positives whose value was not found exactly, with the text and what was found.
    pub misses: Vec<(String, String, Vec<String>)>,
}

impl TypeScore {
    /// Positives found.
    pub fn found(&self) -> usize {
        self.positives - self.misses.len()
    }

    /// False positives / negatives.
    pub fn fp_rate(&self) -> f64 {
        self.false_positives.len() as f64 / self.negatives.max(1) as f64
    }

    /// Found / positives.
    pub fn recall(&self) -> f64 {
        self.found() as f64 / self.positives.max(1) as f64
    }
}

/// Scores every built-in detector on the corpus.
pub fn score(corpus: &Corpus) -> Vec<TypeScore> {
    PiiType::ALL
        .into_iter()
        .map(|t| {
            let false_positives = corpus
                .negatives
                .iter()
                .filter_map(|n| {
                    let found = t.detect(&n.text);
                    (!found.is_empty()).then(|| {
                        let what: Vec<String> = found.into_iter().map(|m| m.text).collect();
                        (n.text.clone(), what.join(" | "))
                    })
                })
                .collect();
            let mine: Vec<&Positive> = corpus
                .positives
                .iter()
                .filter(|p| p.pii_type == t)
                .collect();
            let misses = mine
                .iter()
                .filter_map(|p| {
                    let found: Vec<String> =
                        t.detect(&p.text).into_iter().map(|m| m.text).collect();
                    (!found.contains(&p.value)).then(|| (p.text.clone(), p.spelling.clone(), found))
                })
                .collect();
            TypeScore {
                pii_type: t,
                negatives: corpus.negatives.len(),
                false_positives,
                positives: mine.len(),
                misses,
            }
        })
        .collect()
}

/// Makes one sample.
type Maker = fn(&mut Rng) -> String;

/// Generates the corpus: 12,000 negatives and 2,600 positives.
pub fn generate(seed: u64) -> Corpus {
    let mut rng = Rng::new(seed);
    let mut negatives = Vec::new();
    let makers: &[(&'static str, Maker)] = &[
        ("table_row", table_row),
        ("phone_pair", phone_pair),
        ("iso_dates", iso_dates),
        ("epoch_ms", epoch_ms),
        ("snowflake_id", snowflake_id),
        ("isbn13", isbn13),
        ("luhn_no_issuer", luhn_no_issuer),
        ("imei", imei),
        ("iban", iban),
        ("code_slice", code_slice),
        ("code_path", code_path),
        ("version", version),
        ("hex_hash_uuid", hex_hash_uuid),
        ("measures", measures),
    ];
    let per_kind = 12_000usize.div_ceil(makers.len());
    for (kind, make) in makers {
        for _ in 0..per_kind {
            negatives.push(Negative {
                kind,
                text: make(&mut rng),
            });
        }
    }
    negatives.truncate(12_000);
    let mut positives = Vec::new();
    for _ in 0..1_200 {
        positives.push(card(&mut rng));
    }
    for _ in 0..350 {
        positives.push(email(&mut rng));
    }
    for _ in 0..400 {
        positives.push(ip(&mut rng));
    }
    for _ in 0..250 {
        positives.push(mac(&mut rng));
    }
    for _ in 0..400 {
        positives.push(url(&mut rng));
    }
    Corpus {
        negatives,
        positives,
    }
}
