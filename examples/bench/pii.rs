//! PII: precision and recall of the built-in detectors on the seeded corpus (the figures
//! `tests/pii_corpus.rs` asserts), and the release time of every detector and of the stream
//! filter on worst-case inputs at 256 KiB and 1 MiB, to show linear growth.
//!
//! ```text
//! cargo run --release --example bench -- pii
//! ```

use std::time::Instant;

use kit::middleware::pii::corpus;
use kit::middleware::pii::{PiiMiddleware, PiiType};

use crate::measure::header;

const KIB: usize = 1024;
const SIZES: [usize; 2] = [256 * KIB, 1024 * KIB];
const REPS: usize = 5;

/// `unit` repeated to `size` bytes (whole repetitions only, so the text stays valid).
fn fill(unit: &str, size: usize) -> String {
    unit.repeat(size / unit.len().max(1))
}

/// Builds an input of about `size` bytes.
type Make = fn(usize) -> String;

/// One input family: its name and how to build it at a size.
type Input = (&'static str, Make);

/// The candidate worst cases of each detector: dense matches, and long near-misses that make a
/// naive detector rescan.
fn inputs(t: PiiType) -> Vec<Input> {
    match t {
        PiiType::Email => vec![
            ("dense addresses", |n| {
                fill("ann.lee+x@mail.example.com ", n)
            }),
            ("local parts, no domain", |n| fill("a.b_c+d-e%f.g@", n)),
            ("glued addresses (a@b.ca@b.c…)", |n| fill("a@b.c", n)),
            ("ellipses before @", |n| fill("x...y..z@ex.io ", n)),
            ("one giant local part", |n| fill("ab.", n) + "@example.com"),
        ],
        PiiType::CreditCard => vec![
            ("dense valid cards", |n| fill("4111 1111 1111 1111, ", n)),
            ("row of 4-digit groups", |n| fill("4111 ", n)),
            ("1-digit groups", |n| fill("4 ", n)),
            ("full-width groups", |n| fill("４１１１ ", n)),
            ("one giant digit run", |n| fill("4111111111", n)),
            ("IBAN-like 4-char tokens", |n| fill("AB12 4111 ", n)),
        ],
        PiiType::Ip => vec![
            ("dense IPv4", |n| fill("10.0.0.1 ", n)),
            ("dotted chain", |n| fill("1.", n)),
            ("colon chain", |n| fill("1:", n)),
            ("dense ::1", |n| fill("::1 ", n)),
            ("slices", |n| fill("a[1::3] ", n)),
            ("zones", |n| fill("fe80::1%eth0 ", n)),
        ],
        PiiType::MacAddress => vec![
            ("dense MACs", |n| fill("00:1A:2B:3C:4D:5E ", n)),
            ("colon pair chain", |n| fill("0a:", n)),
            ("dash pair chain", |n| fill("0a-", n)),
        ],
        PiiType::Url => vec![
            ("URL + run of `)`", |n| {
                format!("http://x.org/a{}", ")".repeat(n.saturating_sub(14)))
            }),
            ("dense URLs", |n| fill("https://example.com/a?b=c ", n)),
            ("www chain", |n| fill("www.", n)),
            ("bare host/path chain", |n| fill("a.io/", n)),
            ("one giant URL", |n| {
                format!("https://example.com/{}", "a".repeat(n.saturating_sub(20)))
            }),
            ("parenthesised URLs", |n| {
                fill("(http://x.org/wiki/A_(b)) ", n)
            }),
        ],
    }
}

/// The best of `REPS` runs of `f`, in milliseconds.
fn time_ms(mut f: impl FnMut()) -> f64 {
    f();
    (0..REPS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// The stream filter's worst cases: text streamed in 4-byte deltas (a token is about 4 bytes).
fn stream_inputs() -> Vec<(&'static str, PiiType, Make)> {
    vec![
        ("one URL growing over every delta", PiiType::Url, |n| {
            format!("https://example.com/{}", "a".repeat(n.saturating_sub(20)))
        }),
        ("prose with an email every 64 bytes", PiiType::Email, |n| {
            fill(
                "Please write to ann.lee@example.com about it. Thanks! ..... ",
                n,
            )
        }),
        ("dense cards", PiiType::CreditCard, |n| {
            fill("4111 1111 1111 1111, ", n)
        }),
        ("text without matches", PiiType::Email, |n| {
            fill(
                "The quarterly report is ready and every figure was checked. ",
                n,
            )
        }),
    ]
}

/// The filter's time on `text` in 4-byte deltas, best of `REPS`, in milliseconds. Only the
/// filter calls are timed: the events are built untimed, a few thousand at a time, so the
/// measure is not one of the memory a megabyte of events takes.
fn stream_ms(mw: &PiiMiddleware, text: &str) -> f64 {
    const BATCH: usize = 4096;
    let deltas: Vec<&str> = text
        .as_bytes()
        .chunks(4)
        .filter_map(|c| std::str::from_utf8(c).ok())
        .collect();
    (0..=REPS)
        .map(|_| {
            let filter = corpus::stream_filter(mw);
            let mut elapsed = 0.0;
            let mut released = 0usize;
            for (k, batch) in deltas.chunks(BATCH).enumerate() {
                let mut events: Vec<_> = batch.iter().map(|d| corpus::delta_event(d)).collect();
                if (k + 1) * BATCH >= deltas.len() {
                    events.extend(corpus::end_event());
                }
                let mut out = Vec::with_capacity(events.len());
                let t = Instant::now();
                for event in events {
                    filter.filter(event, &mut out);
                }
                elapsed += t.elapsed().as_secs_f64() * 1e3;
                released += corpus::released_text(&out).len();
            }
            std::hint::black_box(released);
            elapsed
        })
        .skip(1)
        .fold(f64::INFINITY, f64::min)
}

pub(crate) fn pii() {
    header("PII detectors: precision and recall on the seeded corpus, linear time");
    let corpus = corpus::generate(corpus::SEED);
    let scores = corpus::score(&corpus);
    println!(
        "# corpus seed {:#x}: {} negatives, {} positives",
        corpus::SEED,
        corpus.negatives.len(),
        corpus.positives.len()
    );
    println!("#");
    println!("# | type | false positives | FP rate | found / positives | recall |");
    println!("# |---|---|---|---|---|");
    for s in &scores {
        println!(
            "# | {} | {} / {} | {:.3} % | {} / {} | {:.2} % |",
            s.pii_type.name(),
            s.false_positives.len(),
            s.negatives,
            100.0 * s.fp_rate(),
            s.found(),
            s.positives,
            100.0 * s.recall()
        );
    }
    for s in &scores {
        for (text, found) in s.false_positives.iter().take(3) {
            println!("#   {} false positive {found:?} in {text:?}", s.pii_type);
        }
        for (text, spelling, found) in s.misses.iter().take(3) {
            println!(
                "#   {} missed ({spelling}) in {text:?}, found {found:?}",
                s.pii_type
            );
        }
        println!(
            "RESULT pii_{} negatives={} false_positives={} fp_rate_pct={:.3} positives={} found={} recall_pct={:.2}",
            s.pii_type.name(),
            s.negatives,
            s.false_positives.len(),
            100.0 * s.fp_rate(),
            s.positives,
            s.found(),
            100.0 * s.recall()
        );
    }

    println!("#");
    println!(
        "# release time, best of {REPS}, on each detector's worst input (the slowest of its candidates at 1 MiB)"
    );
    println!("# | detector | worst input | 256 KiB ms | 1 MiB ms | growth ×(ideal 4.0) |");
    println!("# |---|---|---|---|---|");
    for t in PiiType::ALL {
        let mut rows = Vec::new();
        for (name, make) in inputs(t) {
            let matches = t.detect(&make(SIZES[0])).len();
            let times: Vec<f64> = SIZES
                .iter()
                .map(|&n| {
                    let text = make(n);
                    time_ms(|| {
                        std::hint::black_box(t.detect(std::hint::black_box(&text)));
                    })
                })
                .collect();
            println!(
                "RESULT pii_time detector={} input={:?} matches_256k={matches} ms_256k={:.2} ms_1m={:.2}",
                t.name(),
                name,
                times[0],
                times[1]
            );
            rows.push((name, times[0], times[1]));
        }
        if let Some((name, small, large)) = rows.iter().max_by(|a, b| a.2.total_cmp(&b.2)) {
            println!(
                "# | {} | {name} | {small:.2} | {large:.2} | {:.2} |",
                t.name(),
                large / small
            );
        }
    }
    let mut rows = Vec::new();
    for (name, t, make) in stream_inputs() {
        let mw = PiiMiddleware::new(t).apply_to_output(true);
        let times: Vec<f64> = SIZES.iter().map(|&n| stream_ms(&mw, &make(n))).collect();
        println!(
            "RESULT pii_time detector=stream/{} input={:?} ms_256k={:.2} ms_1m={:.2}",
            t.name(),
            name,
            times[0],
            times[1]
        );
        rows.push((name, t, times[0], times[1]));
    }
    if let Some((name, t, small, large)) = rows.iter().max_by(|a, b| a.3.total_cmp(&b.3)) {
        println!(
            "# | stream filter ({}, 4-byte deltas) | {name} | {small:.2} | {large:.2} | {:.2} |",
            t.name(),
            large / small
        );
    }
    // The floor: the same deltas through the filter with a detector that finds nothing, so
    // only buffering, the events and their envelopes cost anything.
    if let Ok(nothing) = PiiMiddleware::function("nothing", |_: &str| Vec::new()) {
        let mw = nothing.apply_to_output(true);
        let times: Vec<f64> = SIZES
            .iter()
            .map(|&n| stream_ms(&mw, &fill("The quarterly report is ready. ", n)))
            .collect();
        println!(
            "# | stream filter floor (a detector that finds nothing) | any text | {:.2} | {:.2} | {:.2} |",
            times[0],
            times[1],
            times[1] / times[0]
        );
    }
}
