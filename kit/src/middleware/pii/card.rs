//! Payment card numbers: a digit run judged at word boundaries, grouped the way cards are
//! printed, from a real issuer range, with a valid Luhn check digit.
//!
//! One pass over the text collects the runs of decimal digits (any script: ASCII, full-width
//! `０-９`, Arabic-Indic, Devanagari, …) and how each is joined to the one before it. Then each
//! run that can start a card is tried with at most five runs after it, so the work per digit is
//! bounded and the whole detector is linear in the text.
//!
//! A candidate is a card when all of these hold:
//! - **Boundaries.** It does not touch a letter, `_` or another number: `ID4111111111111111x`
//!   is an identifier, `3.4111…` a decimal. A run next to a *word* is judged on its own:
//!   in `4111 1111 1111 1111 2nd attempt` the card is the sixteen digits. Letters of
//!   scripts written without spaces (Han, kana, Thai, …) do not glue: `番号は4111…です` has a
//!   card.
//! - **Grouping.** One run of 13–16 or 19 digits (17 and 18 contiguous digits are ids far
//!   more often than cards), or groups in a network's printed pattern: 4-4-4-4,
//!   4-4-4-4-1/2/3 (17–19 digits), 4-6-5 (Amex), 4-6-4 (14-digit Diners), 4-3-3-3 or 4-4-5
//!   (13-digit Visa). Between groups exactly one separator, the same one throughout, except that
//!   one of them may be a line break (a number wrapped at the end of a line).
//! - **Not a slice of a longer grouped code.** A grouped candidate whose neighbour, joined by the
//!   same separator, is another four-character token with a digit (`2024`, `DE89`) is a piece of
//!   a table row or an IBAN, not a card; so is one preceded by an IBAN head (`GB29 NWBK …`).
//! - **Issuer.** The prefix and the length of a major network (see [`issuer_accepts`]).
//! - **Luhn.** The check digit is right.

use std::collections::VecDeque;

/// Separators between digit groups: spaces (including the no-break, narrow no-break, figure,
/// thin and ideographic spaces) and dashes (including the Unicode hyphens, the minus sign and
/// the full-width hyphen-minus). `.` is not one: dotted digits are versions, addresses and
/// decimals far more often than cards.
pub(super) fn separator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t'
            | '\u{A0}'
            | '\u{2007}'
            | '\u{2009}'
            | '\u{202F}'
            | '\u{3000}'
            | '-'
            | '\u{2010}'
            | '\u{2011}'
            | '\u{2012}'
            | '\u{2013}'
            | '\u{2212}'
            | '\u{FF0D}'
    )
}

/// NUL is transparent: the stream's view of raw JSON pads decoded escapes with it, so
/// `4111\u00a01111…` reads as `4111`, a no-break space, `1111`, … (see `stream.rs`).
const NUL: char = '\0';

/// The most bytes a joint spans: a 6-byte escape such as `\u3000` in that view.
const MAX_JOINT_BYTES: usize = 12;

/// How a group is joined to the group before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Joint {
    /// Not joined: anything but exactly one separator lies between them.
    None,
    /// One separator character.
    Sep(char),
    /// One line break (`\n` or `\r\n`).
    LineBreak,
}

/// The joint between two groups from the text between them (NUL padding skipped).
fn joint(between: &str) -> Joint {
    let mut chars = between.chars().filter(|&c| c != NUL);
    match (chars.next(), chars.next(), chars.next()) {
        (Some('\n'), None, _) | (Some('\r'), Some('\n'), None) => Joint::LineBreak,
        (Some(c), None, _) if separator(c) => Joint::Sep(c),
        _ => Joint::None,
    }
}

/// The first code point of each block of ten Unicode decimal digits (general category `Nd`,
/// Unicode 16). Every `Nd` character belongs to one such block, in order 0–9.
const ND_ZEROS: [u32; 76] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x10D40, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0,
    0x11650, 0x116C0, 0x116D0, 0x116DA, 0x11730, 0x118E0, 0x11950, 0x11BF0, 0x11C50, 0x11D50,
    0x11DA0, 0x11F50, 0x16130, 0x16A60, 0x16AC0, 0x16B50, 0x16D70, 0x1CCF0, 0x1D7CE, 0x1D7D8,
    0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E4F0, 0x1E5F1, 0x1E950, 0x1FBF0,
];

/// The value of a decimal digit of any script (`'7'`, `'７'`, `'٧'`, `'७'` are all 7).
pub(crate) fn decimal_value(c: char) -> Option<u8> {
    if c.is_ascii_digit() {
        return Some(c as u8 - b'0');
    }
    let cp = u32::from(c);
    if cp < 0x660 {
        return None;
    }
    let blocks = ND_ZEROS.partition_point(|&zero| zero <= cp);
    let zero = ND_ZEROS[..blocks].last()?;
    let value = cp - zero;
    // `value` < 10, so the cast is lossless.
    (value < 10).then_some(value as u8)
}

/// True for a decimal digit of any script.
pub(crate) fn is_decimal(c: char) -> bool {
    decimal_value(c).is_some()
}

/// The Luhn checksum over digit values (0–9).
pub(crate) fn luhn_values(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, &d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d);
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// True when a major network issues numbers with this prefix and this many digits.
///
/// | network | prefix | digits |
/// |---|---|---|
/// | Visa | 4 | 13, 16, 19 |
/// | Mastercard | 51–55, 2221–2720 | 16 |
/// | American Express | 34, 37 | 15 |
/// | Discover | 6011, 644–649, 65 | 16–19 |
/// | Diners Club | 36, 38, 39, 300–305, 3095 | 14–19 |
/// | JCB | 3528–3589 | 16–19 |
/// | UnionPay | 62 | 16–19 |
/// | Maestro | 5018, 5020, 5038, 5893, 6304, 6759, 6761–6763 | 13–19 |
/// | Mir | 2200–2204 | 16–19 |
pub(crate) fn issuer_accepts(digits: &[u8]) -> bool {
    let [a, b, c, d, ..] = *digits else {
        return false;
    };
    let len = digits.len();
    let p2 = u32::from(a) * 10 + u32::from(b);
    let p3 = p2 * 10 + u32::from(c);
    let p4 = p3 * 10 + u32::from(d);
    let visa = a == 4 && matches!(len, 13 | 16 | 19);
    let mastercard = ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && len == 16;
    let amex = matches!(p2, 34 | 37) && len == 15;
    let long = (16..=19).contains(&len);
    let discover = (p4 == 6011 || (644..=649).contains(&p3) || p2 == 65) && long;
    let diners = (matches!(p2, 36 | 38 | 39) || (300..=305).contains(&p3) || p4 == 3095)
        && (14..=19).contains(&len);
    let jcb = (3528..=3589).contains(&p4) && long;
    let unionpay = p2 == 62 && long;
    let maestro = matches!(
        p4,
        5018 | 5020 | 5038 | 5893 | 6304 | 6759 | 6761 | 6762 | 6763
    ) && (13..=19).contains(&len);
    let mir = (2200..=2204).contains(&p4) && long;
    visa || mastercard || amex || discover || diners || jcb || unionpay || maestro || mir
}

/// The group patterns cards are printed in (digits per group).
const PATTERNS: &[&[usize]] = &[
    &[4, 4, 4, 4],
    &[4, 4, 4, 4, 1],
    &[4, 4, 4, 4, 2],
    &[4, 4, 4, 4, 3],
    &[4, 6, 5],
    &[4, 6, 4],
    &[4, 3, 3, 3],
    &[4, 4, 5],
];

/// The most groups a printed pattern has.
const MAX_GROUPS: usize = 5;

/// The most digits a card has.
const MAX_DIGITS: usize = 19;

/// A maximal run of decimal digits.
struct Group {
    /// Byte range in the text.
    start: usize,
    end: usize,
    /// How many digits it has.
    len: usize,
    /// The values of its first `MAX_DIGITS` digits (a longer run is never part of a card).
    values: [u8; MAX_DIGITS],
    /// How it is joined to the group before it.
    joint: Joint,
    /// It touches a letter, `_` or another number on the left / on the right.
    glued_left: bool,
    glued_right: bool,
}

impl Group {
    fn len(&self) -> usize {
        self.len
    }

    fn values(&self) -> &[u8] {
        &self.values[..self.len.min(MAX_DIGITS)]
    }
}

/// A character that makes digits next to it part of a word (`ID4111…`, `…1111x`).
fn word(c: char) -> bool {
    (c.is_alphanumeric() || c == '_') && !spaceless(c)
}

/// Letters of scripts written without spaces between words (Han, kana, Thai, Lao, Myanmar,
/// Khmer): a number next to them is next to a word, not inside one (`番号は4111…です`).
fn spaceless(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0E00..=0x0EFF
            | 0x1000..=0x109F
            | 0x1780..=0x17FF
            | 0x3040..=0x30FF
            | 0x3400..=0x4DBF
            | 0x4E00..=0x9FFF
            | 0xF900..=0xFAFF
            | 0xFF66..=0xFF9F
            | 0x20000..=0x3FFFF
    )
}

/// Punctuation inside numbers: `3.14`, `1,000`, `12:30`, `1/2`.
fn number_joiner(c: char) -> bool {
    matches!(c, '.' | ',' | ':' | '/')
}

/// Calls `each` with every digit group of the text, in order, in one pass.
fn for_each_group(text: &str, mut each: impl FnMut(Group)) {
    // The group being read: byte start, digit count, first digits.
    let mut current: Option<(usize, usize, [u8; MAX_DIGITS])> = None;
    // Where the previous group ended.
    let mut last_end: Option<usize> = None;
    let mut close = |start: usize, len: usize, values: [u8; MAX_DIGITS], end: usize| {
        let group = group(text, last_end, start, end, len, values);
        last_end = Some(end);
        each(group);
    };
    for (i, c) in text.char_indices() {
        match (decimal_value(c), &mut current) {
            (None, _) if c == NUL => {}
            (Some(v), None) => {
                let mut values = [0; MAX_DIGITS];
                values[0] = v;
                current = Some((i, 1, values));
            }
            (Some(v), Some((_, len, values))) => {
                if let Some(slot) = values.get_mut(*len) {
                    *slot = v;
                }
                *len += 1;
            }
            (None, Some(_)) => {
                if let Some((start, len, values)) = current.take() {
                    close(start, len, values, i);
                }
            }
            (None, None) => {}
        }
    }
    if let Some((start, len, values)) = current {
        close(start, len, values, text.len());
    }
}

/// The group at `start..end`, joined (or not) to the group that ended at `last_end`.
fn group(
    text: &str,
    last_end: Option<usize>,
    start: usize,
    end: usize,
    len: usize,
    values: [u8; MAX_DIGITS],
) -> Group {
    let joint = match last_end {
        Some(last) if start - last <= MAX_JOINT_BYTES => joint(&text[last..start]),
        _ => Joint::None,
    };
    let mut before = text[..start].chars().rev().filter(|&c| c != NUL);
    let (b1, b2) = (before.next(), before.next());
    let mut after = text[end..].chars().filter(|&c| c != NUL);
    let (a1, a2) = (after.next(), after.next());
    let glued = |near: Option<char>, far: Option<char>| {
        near.is_some_and(word) || (near.is_some_and(number_joiner) && far.is_some_and(is_decimal))
    };
    Group {
        start,
        end,
        len,
        values,
        joint,
        glued_left: glued(b1, b2),
        glued_right: glued(a1, a2),
    }
}

/// True when the candidate at `start..end`, grouped with `sep`, is a slice of a longer code
/// grouped the same way: a four-character token with a digit right before or after it
/// (`2019 4111 1111 1111 1111`, a row of a table), or an IBAN head (`DE89`, `GB29 NWBK`)
/// among the four-character tokens before it.
fn slice_of_longer_code(text: &str, start: usize, end: usize, sep: char) -> bool {
    let mut right = text[end..].chars().filter(|&c| c != NUL).peekable();
    if right.next() == Some(sep) {
        let token = token(&mut right);
        if token.len() == 4 && token.iter().any(|&c| is_decimal(c)) {
            return true;
        }
    }
    let mut left = text[..start].chars().rev().filter(|&c| c != NUL).peekable();
    for nearest in [true, false, false, false, false, false, false, false] {
        if left.next() != Some(sep) {
            return false;
        }
        let mut token = token(&mut left);
        if token.len() != 4 {
            return false;
        }
        token.reverse();
        let iban_head = token[..2].iter().all(char::is_ascii_uppercase)
            && token[2..].iter().all(char::is_ascii_digit);
        if iban_head || (nearest && token.iter().any(|&c| is_decimal(c))) {
            return true;
        }
    }
    false
}

/// The next alphanumeric token of `chars`, at most 5 characters (enough to tell 4 from more).
fn token(chars: &mut std::iter::Peekable<impl Iterator<Item = char>>) -> Vec<char> {
    let mut token = Vec::new();
    while let Some(&c) = chars.peek() {
        if token.len() == 5 || !word(c) {
            break;
        }
        token.push(c);
        chars.next();
    }
    token
}

/// Is `window` (groups joined one to the next) a card?
fn is_card(text: &str, window: &[Group]) -> bool {
    let (Some(first), Some(last)) = (window.first(), window.last()) else {
        return false;
    };
    if first.glued_left || last.glued_right {
        return false;
    }
    let len: usize = window.iter().map(Group::len).sum();
    if !(13..=MAX_DIGITS).contains(&len) {
        return false;
    }
    // A contiguous 17- or 18-digit run is an id (a Discord snowflake, say) far more often
    // than one of the rare cards that long; those are found when grouped.
    if window.len() == 1 && matches!(len, 17 | 18) {
        return false;
    }
    let mut digits = [0u8; MAX_DIGITS];
    let mut at = 0;
    for g in window {
        digits[at..at + g.len()].copy_from_slice(g.values());
        at += g.len();
    }
    let digits = &digits[..len];
    if window.len() == 1 {
        return issuer_accepts(digits) && luhn_values(digits);
    }
    // The printed pattern.
    let pattern_ok = PATTERNS
        .iter()
        .any(|p| p.len() == window.len() && p.iter().zip(window).all(|(&n, g)| n == g.len()));
    if !pattern_ok {
        return false;
    }
    // One separator throughout; at most one line break.
    let mut sep = None;
    let mut breaks = 0;
    for g in &window[1..] {
        match g.joint {
            Joint::None => return false,
            Joint::LineBreak => breaks += 1,
            Joint::Sep(c) if sep.is_none_or(|s| s == c) => sep = Some(c),
            Joint::Sep(_) => return false,
        }
    }
    let Some(sep) = sep else {
        return false;
    };
    breaks <= 1
        && issuer_accepts(digits)
        && luhn_values(digits)
        && !slice_of_longer_code(text, first.start, last.end, sep)
}

/// The longest card starting with the first group of `run` (joined groups): how many groups
/// it takes. 4-4-4-4-3 wins over its first 16 digits.
fn card_at(text: &str, run: &[Group]) -> Option<usize> {
    let first = run.first()?;
    if first.len() >= 13 {
        return is_card(text, &run[..1]).then_some(1);
    }
    if first.len() != 4 {
        return None;
    }
    let mut best = None;
    let mut digits = 0;
    for n in 1..=run.len().min(MAX_GROUPS) {
        digits += run[n - 1].len();
        if digits > MAX_DIGITS {
            break;
        }
        if n > 1 && digits >= 13 && is_card(text, &run[..n]) {
            best = Some(n);
        }
    }
    best
}

/// Byte ranges of the card numbers in `text`.
///
/// Groups arrive one by one; a run of joined groups is kept only as long as a card could
/// still start at its first group (five groups), so memory stays constant and time linear.
pub(super) fn credit_cards(text: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut run: VecDeque<Group> = VecDeque::with_capacity(MAX_GROUPS + 1);
    // Decides the first group of the run: a card starting there, or none.
    let decide = |run: &mut VecDeque<Group>, found: &mut Vec<(usize, usize)>| {
        let groups = run.make_contiguous();
        match card_at(text, groups) {
            Some(n) => {
                found.push((groups[0].start, groups[n - 1].end));
                run.drain(..n);
            }
            None => {
                run.pop_front();
            }
        }
    };
    for_each_group(text, |group| {
        if group.joint == Joint::None {
            // The run before it is complete.
            while !run.is_empty() {
                decide(&mut run, &mut found);
            }
        }
        run.push_back(group);
        while run.len() >= MAX_GROUPS {
            decide(&mut run, &mut found);
        }
    });
    while !run.is_empty() {
        decide(&mut run, &mut found);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cards(text: &str) -> Vec<&str> {
        credit_cards(text)
            .into_iter()
            .map(|(s, e)| &text[s..e])
            .collect()
    }

    #[test]
    fn decimal_digits_of_every_script_have_their_value() {
        assert_eq!(decimal_value('7'), Some(7));
        assert_eq!(decimal_value('７'), Some(7));
        assert_eq!(decimal_value('٧'), Some(7));
        assert_eq!(decimal_value('७'), Some(7));
        assert_eq!(decimal_value('𝟕'), Some(7));
        // Not decimal digits: superscripts, fractions, Roman numerals, letters.
        for c in ['²', '½', 'Ⅻ', 'a', ' ', '〇'] {
            assert_eq!(decimal_value(c), None, "{c}");
        }
        // Every block of ten maps onto 0-9 in order.
        for zero in ND_ZEROS {
            for v in 0..10u8 {
                let c = char::from_u32(zero + u32::from(v)).unwrap();
                assert_eq!(decimal_value(c), Some(v), "{c:?}");
            }
        }
    }

    #[test]
    fn a_card_next_to_a_word_is_found_but_one_glued_into_a_token_is_not() {
        assert_eq!(
            cards("4111 1111 1111 1111 2nd attempt"),
            ["4111 1111 1111 1111"]
        );
        assert_eq!(cards("v2 4111 1111 1111 1111"), ["4111 1111 1111 1111"]);
        assert_eq!(cards("Card:4111111111111111."), ["4111111111111111"]);
        assert!(cards("ID4111111111111111x 4111111111111111_ 3.4111111111111111").is_empty());
    }

    #[test]
    fn unicode_digits_and_real_separators_are_normalised() {
        for text in [
            "４１１１ １１１１ １１１１ １１１１",
            "４１１１１１１１１１１１１１１１",
            "4111\t1111\t1111\t1111",
            "4111\u{A0}1111\u{A0}1111\u{A0}1111",
            "4111\u{202F}1111\u{202F}1111\u{202F}1111",
            "4111\u{2009}1111\u{2009}1111\u{2009}1111",
            "4111 1111\n1111 1111",
            "4111 1111\r\n1111 1111",
            "4111－1111－1111－1111",
            "٤١١١ ١١١١ ١١١١ ١١١١",
        ] {
            assert_eq!(cards(&format!("pay {text} now")), [text], "{text:?}");
        }
        // Mixed separators, two line breaks, double separators: not one number.
        for text in [
            "4111 1111-1111 1111",
            "4111\n1111\n1111 1111",
            "4111  1111 1111 1111",
        ] {
            assert!(cards(text).is_empty(), "{text:?}");
        }
    }

    #[test]
    fn every_network_and_its_pattern() {
        for text in [
            "4111 1111 1111 1111", // Visa 16
            "4222222222222",       // Visa 13
            "4222 222 222 222",    // Visa 13, 4-3-3-3
            "5555 5555 5555 4444", // Mastercard
            "2223 0031 2200 3222", // Mastercard 2-series
            "3782 822463 10005",   // Amex 4-6-5
            "3056 930902 5904",    // Diners 14, 4-6-4
            "6011 1111 1111 1117", // Discover
            "3530 1113 3330 0000", // JCB
            "6200 0000 0000 0005", // UnionPay
            "6759 6498 2643 8453", // Maestro
            "2200 0000 0000 0004", // Mir
        ] {
            assert_eq!(cards(&format!("({text})")), [text], "{text}");
        }
    }

    #[test]
    fn number_like_text_is_not_a_card() {
        for text in [
            // Luhn-valid runs with no issuer prefix.
            "1234 5678 9012 3452",
            "0000000000000000",
            // A 16-digit 8-8 grouping, a phone pair, two ISO dates, an epoch-ms timestamp.
            "41111111 11111111",
            "415-555-2671 415-555-0132",
            "2024-01-15 2024-02-20",
            "1700000000000",
            // A slice of a row of four-digit numbers, and of an IBAN.
            "2019 4111 1111 1111 1111",
            "4111 1111 1111 1111 2019",
            "DE89 3704 0044 0532 0130 00",
            // An Amex length with a Visa prefix, a Visa prefix with 15 digits.
            "4111 111111 11111",
        ] {
            assert!(cards(text).is_empty(), "{text}: {:?}", cards(text));
        }
    }
}
