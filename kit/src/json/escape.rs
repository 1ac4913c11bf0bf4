//! Writing a JSON string: what serde_json writes, found a word at a time.
//!
//! serde_json looks every byte of a string up in a table and writes through `io::Write`, so a
//! ten-byte key costs about a hundred instructions. Most strings a run writes (ids, names, keys,
//! text) need no escape at all: eight bytes are checked at once and copied as they are checked,
//! and a string shorter than eight bytes is checked and written whole, quotes included. The
//! escapes themselves are serde_json's: `\"`, `\\`, the five short forms, `\u00xx` with
//! lowercase hex for the other control characters, and nothing else (`/`, DEL and non-ASCII
//! are written as they are).

/// One in every byte of a word.
const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
/// The high bit of every byte of a word.
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Flags in the high bits (`& HIGHS`) for the bytes of `word` that need an escape (a control
/// character, `"` or `\\`), and maybe for bytes after the first: none exactly when no byte
/// needs one. Exact, not a heuristic: below the first such byte nothing borrows, and a byte of
/// 128 or more never sets its flag.
#[inline]
const fn escape_flags(word: u64) -> u64 {
    let quote = word ^ (ONES * b'"' as u64);
    let backslash = word ^ (ONES * b'\\' as u64);
    (word.wrapping_sub(ONES * 0x20) & !word)
        | (quote.wrapping_sub(ONES) & !quote)
        | (backslash.wrapping_sub(ONES) & !backslash)
}

/// The first of the eight bytes that needs an escape. The word is read little-endian, so the
/// lowest flag is the first byte, and below the first byte that needs an escape no flag is
/// false.
#[inline]
pub(super) fn first_escape_in_word(word: &[u8; 8]) -> Option<usize> {
    let flags = escape_flags(u64::from_le_bytes(*word)) & HIGHS;
    (flags != 0).then(|| (flags.trailing_zeros() / 8) as usize)
}

/// The letter after the backslash for each byte that needs an escape (`u` for `\u00xx`), 0 for
/// the rest.
static ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Writes the escape of `byte`, one that needs it.
fn write_escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match ESCAPES[usize::from(byte)] {
        b'u' => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xf)],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
}

/// Writes `value` as a quoted JSON string, escaped as serde_json escapes it.
#[inline]
pub(super) fn write_str(out: &mut Vec<u8>, value: &str) {
    let bytes = value.as_bytes();
    if let Some(quoted) = quoted_short(bytes) {
        // Most keys and names: one store of a whole buffer, cut back to the string's length.
        out.extend_from_slice(&quoted);
        out.truncate(out.len() - (quoted.len() - bytes.len() - 2));
    } else {
        write_long(out, bytes);
    }
}

/// [`write_str`] for a string of a word or more, or one that needs an escape (kept out of line
/// so the short case inlined at every caller stays small).
#[inline(never)]
fn write_long(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let clean = copy_clean_prefix(out, bytes);
    if clean < bytes.len() {
        write_escaped(out, bytes, clean);
    }
    out.push(b'"');
}

/// A string shorter than a word that needs no escape, quoted, at the start of nine bytes; `None`
/// for any other string.
#[inline]
fn quoted_short(bytes: &[u8]) -> Option<[u8; 9]> {
    let len = bytes.len();
    if len >= 8 {
        return None;
    }
    let word = short_word(bytes);
    // Only the string's own bytes count: the zeros above it would need escapes.
    let inside = (1u64 << (len * 8)) - 1;
    if escape_flags(word) & HIGHS & inside != 0 {
        return None;
    }
    let mut quoted = [b'"'; 9];
    let closed = word | u64::from(b'"') << (len * 8);
    quoted[1..].copy_from_slice(&closed.to_le_bytes());
    Some(quoted)
}

/// Above this many bytes a string's clean run is copied in one `memcpy`, below it word by word.
const LONG: usize = 64;

/// Copies a prefix of `bytes` that needs no escape and returns its length: all of `bytes`
/// unless some byte needs an escape. From a word up to [`LONG`] bytes each word is copied as it
/// is checked, in one store: most strings need none, and a `memcpy` call per string cost more
/// than the check.
#[inline]
fn copy_clean_prefix(out: &mut Vec<u8>, bytes: &[u8]) -> usize {
    let Some(last) = bytes.last_chunk::<8>() else {
        // Shorter than a word: `quoted_short` wrote it unless it needs an escape, and
        // `write_escaped` takes it from the start.
        return 0;
    };
    if bytes.len() > LONG {
        // Long text: found first, then copied in one piece (memcpy's wide stores win here).
        let clean = next_escape(bytes, 0).unwrap_or(bytes.len());
        out.extend_from_slice(&bytes[..clean]);
        return clean;
    }
    let (words, tail) = bytes.as_chunks::<8>();
    for (i, word) in words.iter().enumerate() {
        if first_escape_in_word(word).is_some() {
            return i * 8;
        }
        out.extend_from_slice(word);
    }
    if tail.is_empty() {
        return bytes.len();
    }
    // The tail is read as the string's last word, which overlaps bytes already found clean: a
    // flag can only come from the tail.
    let copied = bytes.len() - tail.len();
    if first_escape_in_word(last).is_some() {
        return copied;
    }
    out.truncate(out.len() - (8 - tail.len()));
    out.extend_from_slice(last);
    bytes.len()
}

/// The bytes of a string shorter than a word, little-endian, with zeros above: read as two
/// overlapping halves (or quarters), whose shared bytes are the same.
#[inline]
fn short_word(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let halves = |first: u64, last: u64, half: usize| first | last << ((len - half) * 8);
    match (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        (Some(first), Some(last)) => halves(
            u64::from(u32::from_le_bytes(*first)),
            u64::from(u32::from_le_bytes(*last)),
            4,
        ),
        _ => match (bytes.first_chunk::<2>(), bytes.last_chunk::<2>()) {
            (Some(first), Some(last)) => halves(
                u64::from(u16::from_le_bytes(*first)),
                u64::from(u16::from_le_bytes(*last)),
                2,
            ),
            _ => bytes.first().map_or(0, |&byte| u64::from(byte)),
        },
    }
}

/// Writes `bytes[clean..]`, where some byte needs an escape.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8], mut clean: usize) {
    // `clean` is where the run not yet written starts; each escape ends one.
    while let Some(at) = next_escape(bytes, clean) {
        out.extend_from_slice(&bytes[clean..at]);
        write_escape(out, bytes[at]);
        clean = at + 1;
    }
    out.extend_from_slice(&bytes[clean..]);
}

/// Where the first byte at or after `from` that needs an escape is: eight bytes at a time, the
/// last few one by one.
#[inline]
fn next_escape(bytes: &[u8], mut from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let (words, tail) = rest.as_chunks::<8>();
    for word in words {
        if let Some(i) = first_escape_in_word(word) {
            return Some(from + i);
        }
        from += 8;
    }
    tail.iter()
        .position(|&byte| ESCAPES[usize::from(byte)] != 0)
        .map(|i| from + i)
}
