//! UTF-8 validation where string content is read, in the same pass (RFC 8259 §8.1: JSON
//! text is UTF-8; RFC 3629 §4 gives the byte ranges).
//!
//! Only string content may hold a byte above 0x7F: anywhere else the grammar allows none
//! ([`Malformed::Syntax`]). So the document is valid UTF-8 exactly when every string's content
//! is, and that is checked by whatever reads the content:
//! - the 64-byte block pass (`strings.rs`) checks its blocks with the lookup algorithm of
//!   Keiser and Lemire ("Validating UTF-8 in less than one instruction per byte", 2021):
//!   three nibble lookups on each byte and the one before it flag every bad pair
//!   ([`BYTE_1_HIGH`], [`BYTE_1_LOW`], [`BYTE_2_HIGH`]), and the leads two and three bytes
//!   back say which bytes must be continuations (a third or fourth byte);
//! - the narrow runs (`string_run`) stop at a non-ASCII byte, and [`run`] checks the
//!   characters from there one by one.
//!
//! A chunk is scanned as whole characters ([`whole_characters`] holds a cut one back for the
//! next chunk), so no character is split between two scans. There is no separate validation
//! pass: a SIMD validator run over the whole chunk first takes more time than the scan itself
//! on a 16 MiB text body, as the first to pull each chunk from memory.

use super::Malformed;

/// One character at the start of some bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Char {
    /// A valid character of this many bytes.
    Whole(usize),
    /// The bytes end inside a character that is valid as far as it goes.
    Cut,
    /// Not UTF-8.
    Bad,
}

/// What a lead byte says (RFC 3629 §4): the character's width, and the range its second
/// byte must be in (no overlong forms, no surrogates, nothing past U+10FFFF); later bytes
/// are any continuation. `None`: no character starts with this byte.
#[inline]
fn lead(byte: u8) -> Option<(usize, u8, u8)> {
    match byte {
        0xC2..=0xDF => Some((2, 0x80, 0xBF)),
        0xE0 => Some((3, 0xA0, 0xBF)),
        0xE1..=0xEC | 0xEE..=0xEF => Some((3, 0x80, 0xBF)),
        0xED => Some((3, 0x80, 0x9F)),
        0xF0 => Some((4, 0x90, 0xBF)),
        0xF1..=0xF3 => Some((4, 0x80, 0xBF)),
        0xF4 => Some((4, 0x80, 0x8F)),
        _ => None,
    }
}

/// The character `seg` starts with (its first byte is not ASCII).
#[inline]
pub(super) fn char_at(seg: &[u8]) -> Char {
    let Some(&first) = seg.first() else {
        return Char::Cut;
    };
    let Some((width, low, high)) = lead(first) else {
        return Char::Bad;
    };
    let Some(&second) = seg.get(1) else {
        return Char::Cut;
    };
    if !(low..=high).contains(&second) {
        return Char::Bad;
    }
    for k in 2..width {
        let Some(&b) = seg.get(k) else {
            return Char::Cut;
        };
        if b & 0xC0 != 0x80 {
            return Char::Bad;
        }
    }
    Char::Whole(width)
}

/// The length of the run of non-ASCII characters `seg` starts with, each checked. A
/// character cut by the end of `seg`, valid as far as it goes, runs to the end: only the
/// input's last bytes can be one (see [`whole_characters`]), and the string is then
/// unterminated.
#[inline(never)]
pub(super) fn run(seg: &[u8]) -> Result<usize, Malformed> {
    let mut i = 0;
    while seg.get(i).is_some_and(|&b| b >= 0x80) {
        match char_at(&seg[i..]) {
            Char::Whole(width) => i += width,
            Char::Cut => return Ok(seg.len()),
            Char::Bad => return Err(Malformed::Utf8),
        }
    }
    Ok(i)
}

/// The length of a character's lead byte says: 1 for anything that is not a lead (which
/// then fails validation).
pub(super) fn width(byte: u8) -> usize {
    lead(byte).map_or(1, |(width, _, _)| width)
}

/// The length of `chunk` without a character cut at its end: the start of a final sequence
/// of 1–3 bytes that a valid character begins but does not finish, or the whole length (also
/// whenever the end is invalid rather than cut: the scan then reports it).
#[inline]
pub(super) fn whole_characters(chunk: &[u8]) -> usize {
    let len = chunk.len();
    if chunk.last().is_none_or(u8::is_ascii) {
        return len;
    }
    // The lead byte is within the last 3 bytes when the end is cut.
    let from = len.saturating_sub(3);
    let Some(lead) = chunk[from..].iter().rposition(|&b| b & 0xC0 != 0x80) else {
        return len;
    };
    let lead = from + lead;
    if char_at(&chunk[lead..]) != Char::Cut {
        return len;
    }
    // The scan must not end on a character that looks cut only because this one was held
    // back (`C3` then the lead `E0`): that is an error, and it must see the lead to say so.
    let before = last_char_start(chunk, lead);
    if before < lead && char_at(&chunk[before..lead]) != Char::Whole(lead - before) {
        return len;
    }
    lead
}

/// Where the block pass hands the bytes before `end` to the narrow run when it stops
/// without a stop byte (at the last whole block): the start of the last character if it is
/// not ASCII, else `end`. The block check flags a bad byte only with the byte after it, so a
/// final character — cut, or a lone lead byte — is checked again from its start by [`run`].
/// (Three continuations end a four-byte character the block check saw whole.)
#[inline]
pub(super) fn last_char_start(bytes: &[u8], end: usize) -> usize {
    for back in 1..=3.min(end) {
        let b = bytes[end - back];
        if b < 0x80 {
            return end;
        }
        if b >= 0xC0 {
            return end - back;
        }
    }
    end
}

// The block check's lookup tables (Keiser and Lemire, §5 and Table 8): one bit per kind of
// error. A pair of bytes (the byte before, this byte) is bad when the three lookups — the
// byte before's high and low nibble, this byte's high nibble — share a bit.

/// A lead byte followed by ASCII or another lead.
const TOO_SHORT: u8 = 1 << 0;
/// ASCII followed by a continuation.
const TOO_LONG: u8 = 1 << 1;
/// `E0` followed by `80..9F`.
const OVERLONG_3: u8 = 1 << 2;
/// `F4 90..BF` or a lead above `F4`: past U+10FFFF.
const TOO_LARGE: u8 = 1 << 3;
/// `ED A0..BF`: a UTF-16 surrogate.
const SURROGATE: u8 = 1 << 4;
/// `C0` or `C1`.
const OVERLONG_2: u8 = 1 << 5;
/// A lead above `F4` followed by `80..8F`.
const TOO_LARGE_1000: u8 = 1 << 6;
/// `F0` followed by `80..8F` (shares the bit: the leads differ in their low nibble).
const OVERLONG_4: u8 = 1 << 6;
/// A continuation after a continuation: an error unless it is a third or fourth byte, which
/// the subtractions flag with the same bit (and the two cancel).
pub(super) const TWO_CONTS: u8 = 1 << 7;
/// The kinds decided by the high nibbles alone.
const CARRY: u8 = TOO_SHORT | TOO_LONG | TWO_CONTS;

/// By the byte before's high nibble.
pub(super) const BYTE_1_HIGH: [u8; 16] = [
    // 0___: ASCII.
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    TOO_LONG,
    // 10__: a continuation.
    TWO_CONTS,
    TWO_CONTS,
    TWO_CONTS,
    TWO_CONTS,
    // 1100, 1101: two-byte leads.
    TOO_SHORT | OVERLONG_2,
    TOO_SHORT,
    // 1110: three-byte leads.
    TOO_SHORT | OVERLONG_3 | SURROGATE,
    // 1111: four-byte leads and above.
    TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4,
];

/// By the byte before's low nibble.
pub(super) const BYTE_1_LOW: [u8; 16] = [
    CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4,
    CARRY | OVERLONG_2,
    CARRY,
    CARRY,
    CARRY | TOO_LARGE,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
    CARRY | TOO_LARGE | TOO_LARGE_1000,
];

/// By this byte's high nibble.
pub(super) const BYTE_2_HIGH: [u8; 16] = [
    // 0___: ASCII.
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    // 1000, 1001, 101_: continuations, by range.
    TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4,
    TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE,
    TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
    TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
    // 11__: leads.
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
    TOO_SHORT,
];

/// The subtrahends that leave the high bit set only for a lead of three bytes or more two
/// bytes back (`0xE0..`), or of four bytes three back (`0xF0..`).
pub(super) const THIRD_BYTE: u8 = 0xE0 - 0x80;
pub(super) const FOURTH_BYTE: u8 = 0xF0 - 0x80;

/// The block check for one byte, without vectors: the reference the vector levels are
/// tested against. `before` holds the three bytes before `b`, nearest last.
#[cfg(test)]
pub(super) fn flags(before: [u8; 3], b: u8) -> bool {
    let [prev3, prev2, prev1] = before;
    let special = BYTE_1_HIGH[usize::from(prev1 >> 4)]
        & BYTE_1_LOW[usize::from(prev1 & 0x0F)]
        & BYTE_2_HIGH[usize::from(b >> 4)];
    let must = (prev2.saturating_sub(THIRD_BYTE) | prev3.saturating_sub(FOURTH_BYTE)) & 0x80;
    special ^ must != 0
}

#[cfg(test)]
mod tests;
