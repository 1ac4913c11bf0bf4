//! Compact JSON for what a run writes at every step: state deltas, checkpoint bodies, `Send`
//! arguments, stream updates.
//!
//! The bytes are exactly `serde_json::to_writer`'s (the tests hold every shape serde has to
//! that), so what kit writes here reads back with serde_json and compares equal to what it
//! wrote before. What differs is the cost of strings: serde_json escapes one byte at a time
//! through `io::Write`, keys included, and that was a tenth of an agent round.

mod escape;
mod writer;

use serde::Serialize;

/// Appends `value` as a quoted JSON string, escaped exactly as serde_json escapes it.
pub(crate) fn write_str(out: &mut Vec<u8>, value: &str) {
    escape::write_str(out, value);
}

/// Appends `value`'s compact JSON to `out`. On an error, `out` may hold part of it.
pub(crate) fn write<T: ?Sized + Serialize>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    value.serialize(&mut writer::Writer { out })
}

/// `value`'s compact JSON.
pub(crate) fn to_vec<T: ?Sized + Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    write(&mut out, value)?;
    Ok(out)
}

/// `value`'s compact JSON as text.
#[cfg(all(feature = "server", any(feature = "sqlite", feature = "postgres")))]
pub(crate) fn to_string<T: ?Sized + Serialize>(value: &T) -> Result<String, serde_json::Error> {
    // The writer writes whole `str`s and ASCII only, so this never fails in practice.
    String::from_utf8(to_vec(value)?).map_err(serde::ser::Error::custom)
}

/// The deepest JSON kit keeps from a peer (a worker's answer, a request body). What it keeps
/// is saved a few levels deeper (in a thread's state) and wrapped again in event logs, and
/// serde_json reads no deeper than 128 levels: deeper JSON would be saved and then make its
/// thread unreadable.
pub(crate) const MAX_KEPT_DEPTH: usize = 64;

/// The most JSON objects and arrays kit parses from one request body a peer sent (see
/// [`containers_within`]): some 60 MB parsed at worst, far more than any request holds.
pub(crate) const MAX_PEER_CONTAINERS: usize = 100_000;

/// The most JSON objects and arrays kit parses from one answer of a worker it called (a
/// run's output holds a whole thread state, so ten times [`MAX_PEER_CONTAINERS`]).
pub(crate) const MAX_ANSWER_CONTAINERS: usize = 10 * MAX_PEER_CONTAINERS;

/// Whether `value` nests at most `levels` arrays or objects deep (recursion bounded by
/// `levels`, whatever the value's depth).
pub(crate) fn nests_within(value: &serde_json::Value, levels: usize) -> bool {
    use serde_json::Value;
    match value {
        Value::Array(items) => levels > 0 && items.iter().all(|v| nests_within(v, levels - 1)),
        Value::Object(map) => levels > 0 && map.values().all(|v| nests_within(v, levels - 1)),
        _ => true,
    }
}

/// Whether the JSON text `bytes` holds at most `max` objects and arrays (brackets inside
/// strings do not count). One pass, stopping at the first one past `max`; not a validation.
///
/// Parsed into a [`serde_json::Value`], every non-empty object costs a B-tree node of about
/// 600 bytes: `{"a":0}` takes 90 times its 7 bytes. Counting first bounds what a peer's
/// payload may cost to parse.
pub(crate) fn containers_within(bytes: &[u8], max: usize) -> bool {
    let mut count = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'{' || b == b'[' {
            count += 1;
            if count > max {
                return false;
            }
        }
    }
    true
}

/// About the bytes of `value` as JSON text: its strings' and keys' lengths, and a few bytes
/// for everything else. One walk, nothing written or escaped: the cheap measure for bounds
/// on memory and budgets, within a small factor of the real length.
pub(crate) fn approx_len(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    let mut bytes = 0usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        let here = match value {
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                stack.extend(items);
                2
            }
            Value::Object(map) => {
                stack.extend(map.values());
                2 + map.keys().map(|k| k.len() + 4).sum::<usize>()
            }
            _ => 8,
        };
        bytes = bytes.saturating_add(here);
    }
    bytes
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
