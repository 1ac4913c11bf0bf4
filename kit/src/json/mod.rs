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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
