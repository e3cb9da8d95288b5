//! Validating string content 64 bytes at a time, escapes included (simdjson's approach).
//!
//! Tool output is text with an escape every few dozen bytes (`\n` ends every line). A run
//! loop that stops at each backslash leaves its vector loop there, on a branch that cannot
//! be predicted; here each 64-byte block is judged whole from five bit masks (one bit per
//! byte) instead, and the loop leaves only where the string ends or something needs the
//! scalar path. The masks come from AVX-512BW or AVX2 (`avx512.rs`, `avx2.rs`, picked at run
//! time); the bit arithmetic on them is here, shared by both.
//!
//! UTF-8 is validated in the same pass, with lookups on each block's nibbles (`utf8.rs`), by
//! the same vector level: AVX-512 checks every block; AVX2 skips a block of ASCII after an
//! ASCII tail (its check takes twice the instructions: checking every block is slower on
//! the text bodies, measured with the level forced on an AVX-512 machine).
//!
//! Only content that is validated and not captured comes here (captured strings are short
//! and decode their escapes on the scalar path).

// Elsewhere only `Wide::Narrow` exists: the block arithmetic is then used by tests alone.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use super::{Malformed, utf8};
#[cfg(target_arch = "x86_64")]
use super::{avx2::Avx2, avx512::Avx512};

/// Bytes per block.
pub(super) const BLOCK: usize = 64;

/// One block's bytes by class, bit k for byte k.
#[derive(Clone, Copy, Debug)]
pub(super) struct Masks {
    /// `"` and raw control characters (below 0x20): unescaped, they end the fast path.
    pub(super) quote_or_control: u64,
    pub(super) backslash: u64,
    /// Bytes that may not follow a backslash in a short escape: anything but
    /// `" \ / b f n r t`. `u` is among them: `\uXXXX` goes to the scalar path (hex digits and
    /// the surrogate rules).
    pub(super) not_short_escape: u64,
    /// Bytes the UTF-8 check flags (`utf8.rs`): each error shows at the byte that reveals
    /// it, at most three bytes after the character's start — a cut character at the ASCII
    /// byte after it. Flagged bytes after the first stop belong to later content and are
    /// left to the pass that reads it.
    pub(super) bad_utf8: u64,
}

/// The short-escape letters `" \ / b f n r t` by nibble, for a `vpshufb` lookup: each high
/// nibble that has letters gets a bit (0x2_ → 1 for `"` `/`, 0x5_ → 2 for `\`, 0x6_ → 4 for
/// `b` `f` `n`, 0x7_ → 8 for `r` `t`); each low nibble lists the high nibbles that make a
/// letter with it. A byte is a letter when the two lookups share a bit (bytes from 0x80 look
/// up high nibbles 8–F: none).
pub(super) const HIGH_NIBBLES: [u8; 16] = [0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0];
pub(super) const LOW_NIBBLES: [u8; 16] = {
    let mut t = [0u8; 16];
    t[0x2] = 1 | 4 | 8; // " b r
    t[0x4] = 8; // t
    t[0x6] = 4; // f
    t[0xC] = 2; // \
    t[0xE] = 4; // n
    t[0xF] = 1; // /
    t
};

/// The bytes escaped by a backslash: those after an odd-length run of backslashes. `carry`
/// is 1 when the block's first byte is escaped by a run that ended the block before, and is
/// set the same way for the next block.
///
/// A run starting on an even bit escapes the byte after it when it ends on an odd bit, and
/// the other way round; adding the run's start bit to the run carries out of its end, which
/// gives that parity for all runs at once (simdjson, "Parsing Gigabytes of JSON per Second",
/// §3.1.1).
#[inline(always)]
pub(super) fn escaped(backslash: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    // A backslash escaped by the block before does not start a run.
    let backslash = backslash & !*carry;
    let follows_escape = (backslash << 1) | *carry;
    let odd_starts = backslash & !EVEN & !follows_escape;
    let (sum, overflow) = odd_starts.overflowing_add(backslash);
    *carry = u64::from(overflow);
    let invert = sum << 1;
    (EVEN ^ invert) & follows_escape
}

/// Where the scalar path takes over in a block, if anywhere: `Some(Ok((k, back)))` means at
/// byte `k - back` — an unescaped quote or control character at `k` (`back` 0), or the
/// backslash before an escaped byte `k` that is not a short escape (`back` 1; `k` may be 0,
/// the backslash then ends the block before). `Some(Err(_))`: a UTF-8 error comes first.
/// `None`: the whole block is valid content.
#[inline(always)]
pub(super) fn stop(m: Masks, carry: &mut u64) -> Option<Result<(u32, u32), Malformed>> {
    let escaped = escaped(m.backslash, carry);
    let odd_escape = escaped & m.not_short_escape;
    let stops = (m.quote_or_control & !escaped) | odd_escape;
    if stops | m.bad_utf8 == 0 {
        return None;
    }
    if stops == 0 {
        return Some(Err(Malformed::Utf8));
    }
    let k = stops.trailing_zeros();
    let back = ((odd_escape >> k) & 1) as u32;
    // A byte flagged at or before the one where the scalar path would take over is an error
    // in the content before it (that byte is ASCII: flagged, it ends a cut character).
    if m.bad_utf8.trailing_zeros() + back <= k {
        return Some(Err(Malformed::Utf8));
    }
    Some(Ok((k, back)))
}

/// Whole blocks in `rest`, then whatever is left: the offset of the first byte the scalar
/// string loop must look at — a quote, a control character, a backslash that is not
/// escaped, a character above ASCII after the last whole block — or `rest.len()`; or a
/// UTF-8 error before any of them. `masks` classifies one block (it keeps the block before
/// for the UTF-8 check).
#[inline(always)]
pub(super) fn skip_blocks(
    rest: &[u8],
    mut masks: impl FnMut(&[u8; BLOCK]) -> Masks,
) -> Result<usize, Malformed> {
    let mut carry = 0;
    let mut base = 0;
    let mut blocks = rest.chunks_exact(BLOCK);
    for block in &mut blocks {
        let Ok(block) = <&[u8; BLOCK]>::try_from(block) else {
            break;
        };
        if let Some(stop) = stop(masks(block), &mut carry) {
            let (k, back) = stop?;
            // `back` is 1 with `k` 0 only after a block that set `carry`: base >= BLOCK.
            return Ok((base + k as usize).saturating_sub(back as usize));
        }
        base += BLOCK;
    }
    if carry != 0 {
        // The last block ended in an unpaired backslash: the scalar path takes its escape.
        return Ok(base - 1);
    }
    // The check has not seen what follows the last block's final character: from its start
    // (when it is not ASCII) the narrow run and `utf8::run` go on.
    let from = utf8::last_char_start(rest, base);
    if from < base {
        return Ok(from);
    }
    Ok(base + super::string_run(blocks.remainder()))
}

/// The widest block classifier this CPU has, decided once per scanner. Its variants hold
/// the proof of detection, so no code can reach a `target_feature` function without it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Wide {
    #[cfg(target_arch = "x86_64")]
    Avx512(Avx512),
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2),
    /// Runs only ([`super::string_run`]): escapes are taken one at a time.
    Narrow,
}

impl Wide {
    pub(super) fn detect() -> Wide {
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(avx512) = Avx512::detect() {
                return Wide::Avx512(avx512);
            }
            if let Some(avx2) = Avx2::detect() {
                return Wide::Avx2(avx2);
            }
        }
        Wide::Narrow
    }

    /// Every level this CPU runs, widest first (tests compare them).
    #[cfg(test)]
    pub(super) fn all() -> Vec<Wide> {
        let mut all = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            all.extend(Avx512::detect().map(Wide::Avx512));
            all.extend(Avx2::detect().map(Wide::Avx2));
        }
        all.push(Wide::Narrow);
        all
    }

    /// The offset in `rest` (string content at a character's start, not mid-escape) of the
    /// first byte the scalar string loop must look at: a quote, a control character, a
    /// backslash it must take itself, a byte above ASCII for `utf8::run`, or `rest.len()`.
    /// Short escapes and characters before it are valid; `Err` when one is not UTF-8.
    #[inline(always)]
    pub(super) fn skip(self, rest: &[u8]) -> Result<usize, Malformed> {
        // Most strings are short (names, types, enum values, a notification's method): when
        // the first 32 bytes hold the closing quote, the narrow run finds it for less than
        // one wide block costs. (16 bytes would send `notifications/progress` to the blocks,
        // and SSE progress events would cost more.)
        const HEAD: usize = 16;
        if rest.len() < BLOCK || matches!(self, Wide::Narrow) {
            return Ok(super::string_run(rest));
        }
        for from in [0, HEAD] {
            let Ok(head) = <&[u8; HEAD]>::try_from(&rest[from..from + HEAD]) else {
                return Ok(super::string_run(rest));
            };
            let k = from + super::head_run(head);
            // A backslash or a character above ASCII: text goes on, and the blocks take both.
            if k < from + HEAD {
                if rest[k] == b'"' || rest[k] < 0x20 {
                    return Ok(k);
                }
                break;
            }
        }
        match self {
            #[cfg(target_arch = "x86_64")]
            Wide::Avx512(avx512) => avx512.skip(rest),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx2(avx2) => avx2.skip(rest),
            Wide::Narrow => Ok(super::string_run(rest)),
        }
    }
}

/// The masks byte by byte: the reference the vector classifiers are tested against.
/// `before` holds the three bytes before the block (zeros before the first).
#[cfg(test)]
pub(super) fn scalar_masks(block: &[u8; BLOCK], before: &mut [u8; 3]) -> Masks {
    let mut m = Masks {
        quote_or_control: 0,
        backslash: 0,
        not_short_escape: 0,
        bad_utf8: 0,
    };
    for (k, &b) in block.iter().enumerate() {
        let bit = 1u64 << k;
        if utf8::flags(*before, b) {
            m.bad_utf8 |= bit;
        }
        *before = [before[1], before[2], b];
        if b == b'"' || b < 0x20 {
            m.quote_or_control |= bit;
        }
        if b == b'\\' {
            m.backslash |= bit;
        }
        if !matches!(b, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') {
            m.not_short_escape |= bit;
        }
    }
    m
}

#[cfg(test)]
mod tests;
