//! Identifiers: time-ordered UUIDv7 for checkpoints and runs, random ids for messages.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Last (millisecond, counter) handed out, so ids made in the same millisecond still sort.
static LAST: Mutex<(u64, u64)> = Mutex::new((0, 0));

/// A new UUIDv7: time-ordered and strictly increasing within this process.
///
/// Checkpoint ids sort in creation order, both as strings and as UUIDs.
pub fn time_ordered() -> String {
    time_ordered_with_millis().0
}

/// A new [`time_ordered`] id and the millisecond it carries (the clock's, or the last id's
/// if the clock went back), so a checkpoint's time and id agree.
pub(crate) fn time_ordered_with_millis() -> (String, u64) {
    let now = now_millis();
    let (ms, counter) = {
        let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if now > last.0 {
            // Start each millisecond at a random point in the lower half so ids stay unguessable
            // while leaving room for many ids in the same millisecond.
            *last = (now, fastrand::u64(0..(1 << 40)));
        } else {
            last.1 += 1;
        }
        *last
    };
    // 48 bits of milliseconds, version 7, then 74 bits: a 62-bit counter and 12 random bits.
    let rand_a = ((counter >> 50) & 0x0fff) as u16;
    let rand_b = ((counter & ((1 << 50) - 1)) << 12) | fastrand::u64(0..(1 << 12));
    let value: u128 = ((ms as u128 & 0xffff_ffff_ffff) << 80)
        | (0x7u128 << 76)
        | ((rand_a as u128) << 64)
        | (0b10u128 << 62)
        | (rand_b as u128 & ((1u128 << 62) - 1));
    (uuid_string(uuid::Uuid::from_u128(value)), ms)
}

/// A UUID's lowercase hyphenated text, written straight into its string (not through
/// `Display`, which every checkpoint, message and run id would pay for).
pub(crate) fn uuid_string(u: uuid::Uuid) -> String {
    // `&mut str`'s `to_string` would go through `Display` after all: copy the bytes.
    String::from(
        &*u.hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer()),
    )
}

/// A new random id (UUIDv4 layout), for messages and tool calls.
pub fn random() -> String {
    let value = fastrand::u128(..);
    uuid_string(uuid::Builder::from_random_bytes(value.to_le_bytes()).into_uuid())
}

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The current UTC time as an RFC 3339 timestamp with second precision (`2026-11-21T09:48:00Z`).
pub fn now_rfc3339() -> String {
    rfc3339_from_millis(now_millis(), false)
}

/// The current UTC time as an RFC 3339 timestamp with millisecond precision.
pub fn now_rfc3339_millis() -> String {
    rfc3339_from_millis(now_millis(), true)
}

/// [`rfc3339_from_millis`] with milliseconds into `out` (replacing what it held), remembered
/// for the last millisecond written on this thread: a run stamps many checkpoints within one
/// millisecond, and a buffer kept from step to step takes it without allocating.
pub(crate) fn rfc3339_millis_cached_into(ms: u64, out: &mut String) {
    thread_local! {
        static LAST: std::cell::RefCell<(u64, String)> =
            const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != ms {
            *last = (ms, rfc3339_from_millis(ms, true));
        }
        out.clone_from(&last.1);
    })
}

/// Formats milliseconds since the epoch as an RFC 3339 UTC timestamp.
pub fn rfc3339_from_millis(ms: u64, with_millis: bool) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    if !(0..=9999).contains(&y) {
        // Outside what four digits hold: the general formatter (never on a real clock).
        return if with_millis {
            format!(
                "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:03}Z",
                ms % 1000
            )
        } else {
            format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
        };
    }
    // Every checkpoint is stamped: written digit by digit rather than through `format!`.
    let mut out = String::with_capacity(24);
    push_digits(&mut out, y as u64, 4);
    out.push('-');
    push_digits(&mut out, u64::from(m), 2);
    out.push('-');
    push_digits(&mut out, u64::from(d), 2);
    out.push('T');
    push_digits(&mut out, hh, 2);
    out.push(':');
    push_digits(&mut out, mm, 2);
    out.push(':');
    push_digits(&mut out, ss, 2);
    if with_millis {
        out.push('.');
        push_digits(&mut out, ms % 1000, 3);
    }
    out.push('Z');
    out
}

/// Appends `n` as exactly `width` decimal digits (leading zeros).
fn push_digits(out: &mut String, n: u64, width: u32) {
    for i in (0..width).rev() {
        out.push(char::from(b'0' + ((n / 10u64.pow(i)) % 10) as u8));
    }
}

/// Reads back a timestamp that [`rfc3339_from_millis`] wrote with milliseconds
/// (`2026-11-21T09:48:00.123Z`); `None` for any other text, so callers can keep it as text.
pub(crate) fn millis_from_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 24 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[19] != b'.' || b[23] != b'Z' {
        return None;
    }
    // Every checkpoint's time is read back on the write path: digits by hand, no `parse`.
    let num = |range: std::ops::Range<usize>| -> Option<u64> {
        b[range].iter().try_fold(0u64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u64::from(c - b'0'))
        })
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    // Only in-range fields come back the same (no 25:00, no 31 February): others stay text.
    if y < 1970 || d == 0 || d > month_days || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = u64::try_from(days_from_civil(y as i64, m as u32, d as u32)).ok()?;
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000 + ms)
}

/// Howard Hinnant's civil-to-days algorithm (the inverse of `civil_from_days`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// 64-bit FNV-1a hash; stable across processes and versions (used for interrupt ids).
pub const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_ordered_ids_increase() {
        let ids: Vec<String> = (0..1000).map(|_| time_ordered()).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} !< {}", pair[0], pair[1]);
        }
        assert_eq!(&ids[0][14..15], "7", "version nibble");
    }

    #[test]
    fn the_remembered_timestamp_is_the_one_asked_for() {
        let mut out = String::from("stale");
        for ms in [
            5,
            5,
            1_709_164_800_000,
            5,
            1_709_164_800_001,
            1_709_164_800_001,
        ] {
            // Into a buffer that held the last one (what a run's buffer does).
            rfc3339_millis_cached_into(ms, &mut out);
            assert_eq!(out, rfc3339_from_millis(ms, true));
        }
    }

    #[test]
    fn millisecond_timestamps_read_back_exactly() {
        let spread = (0..5_000u64).map(|i| i * 1_123_456_789_013 % 4_102_444_800_000);
        for ms in [0, 951_782_400_123, 1_709_164_800_000, 4_102_444_800_000]
            .into_iter()
            .chain(spread)
        {
            let text = rfc3339_from_millis(ms, true);
            assert_eq!(millis_from_rfc3339(&text), Some(ms), "{text}");
        }
        for other in [
            "2026-11-21T09:48:00Z",
            "2026-02-31T00:00:00.000Z",
            "2026-11-21T25:00:00.000Z",
            "2026-11-21 09:48:00.000Z",
            "2026-11-21T09:48:00.000+01:00",
            "１９７０-01-01T00:00:00.000Z",
            "2025-02-29T00:00:00.000Z",
            "2026-11-21T23:60:00.000Z",
        ] {
            assert_eq!(millis_from_rfc3339(other), None, "{other}");
        }
    }

    #[test]
    fn formats_known_dates() {
        assert_eq!(rfc3339_from_millis(0, false), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_from_millis(1_795_252_080_123, true),
            "2026-11-21T09:08:00.123Z"
        );
        assert_eq!(
            rfc3339_from_millis(951_782_400_000, false),
            "2000-02-29T00:00:00Z"
        );
        // The digit writer agrees with `format!` everywhere, and past year 9999 the general
        // formatter takes over.
        for ms in (0..2_000u64).map(|i| i * 4_294_967_291_137 % 253_402_300_800_000) {
            let secs = ms / 1000;
            let (y, m, d) = civil_from_days((secs / 86_400) as i64);
            let rem = secs % 86_400;
            let expected = format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                rem / 3600,
                (rem % 3600) / 60,
                rem % 60,
                ms % 1000
            );
            assert_eq!(rfc3339_from_millis(ms, true), expected);
        }
        assert!(rfc3339_from_millis(u64::MAX, true).ends_with('Z'));
    }

    #[test]
    fn random_ids_are_distinct() {
        assert_ne!(random(), random());
        assert_eq!(random().len(), 36);
    }
}
