//! Writing a JSON string: what serde_json writes, found a word at a time.
//!
//! serde_json looks every byte of a string up in a table and writes through `io::Write`, so a
//! ten-byte key costs about a hundred instructions. Most strings a run writes (ids, names, keys,
//! text) need no escape at all: eight bytes are checked at once, and clean runs are copied in one
//! piece. The escapes themselves are serde_json's: `\"`, `\\`, the five short forms, `\u00xx`
//! with lowercase hex for the other control characters, and nothing else (`/`, DEL and non-ASCII
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
pub(super) fn write_str(out: &mut Vec<u8>, value: &str) {
    let bytes = value.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `clean` is where the run not yet written starts; each escape ends one.
    let mut clean = 0;
    while let Some(at) = next_escape(bytes, clean) {
        out.extend_from_slice(&bytes[clean..at]);
        write_escape(out, bytes[at]);
        clean = at + 1;
    }
    out.extend_from_slice(&bytes[clean..]);
    out.push(b'"');
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
