//! [`string_run`](super::string_run), and the SSE framer's search for a line's end
//! ([`super::line_break`]), with SSE2 compares: 16 bytes per compare, the exact position from
//! a byte mask. SSE2 is part of the x86-64 baseline, so this needs no runtime
//! feature detection; the compiler would not produce `pmovmskb` from portable code on its own
//! (it widens and shifts instead, several times slower).

use core::arch::x86_64::{
    __m128i, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi64x,
    _mm_set1_epi8,
};

/// See [`super::string_run`].
#[inline]
pub(super) fn string_run(seg: &[u8]) -> usize {
    // SAFETY: `run` only needs SSE2, and this module is compiled only where SSE2 is enabled
    // for the whole build (`cfg(target_feature = "sse2")`, always true on x86-64). `run`
    // itself is safe code: it reads `seg` through slices, never through a raw pointer.
    #[allow(unsafe_code)]
    unsafe {
        run(seg)
    }
}

/// [`super::string_run`] over exactly 16 bytes: 16 when none stops.
#[inline]
pub(super) fn head_run(head: &[u8; 16]) -> usize {
    // SAFETY: as in `string_run` (SSE2 is enabled for the whole build; `head_mask` reads the
    // array through safe code only).
    #[allow(unsafe_code)]
    let stops = unsafe { head_mask(head) };
    (stops | 1 << 16).trailing_zeros() as usize
}

#[inline]
#[target_feature(enable = "sse2")]
fn head_mask(head: &[u8; 16]) -> u32 {
    stop_mask(head)
}

#[target_feature(enable = "sse2")]
fn run(seg: &[u8]) -> usize {
    let mut base = 0;
    let mut blocks = seg.chunks_exact(16);
    for block in &mut blocks {
        let Ok(block) = <&[u8; 16]>::try_from(block) else {
            break;
        };
        let stops = stop_mask(block);
        if stops != 0 {
            return base + stops.trailing_zeros() as usize;
        }
        base += 16;
    }
    base + super::word_run(blocks.remainder())
}

/// See [`super::line_break`].
#[inline]
pub(super) fn line_break(seg: &[u8]) -> Option<usize> {
    // SAFETY: as in `string_run` (SSE2 is enabled for the whole build; `breaks` reads `seg`
    // through safe code only).
    #[allow(unsafe_code)]
    unsafe {
        breaks(seg)
    }
}

#[target_feature(enable = "sse2")]
fn breaks(seg: &[u8]) -> Option<usize> {
    let lf = _mm_set1_epi8(b'\n' as i8);
    let cr = _mm_set1_epi8(b'\r' as i8);
    let mut base = 0;
    let mut blocks = seg.chunks_exact(16);
    for block in &mut blocks {
        let Ok(block) = <&[u8; 16]>::try_from(block) else {
            break;
        };
        let v = load(block);
        let found = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
        if found != 0 {
            return Some(base + found.trailing_zeros() as usize);
        }
        base += 16;
    }
    let tail = blocks.remainder();
    tail.iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|k| base + k)
}

/// Bit k set: byte k of the block stops a string run (`"`, `\`, below 0x20 or above ASCII).
#[inline]
#[target_feature(enable = "sse2")]
fn stop_mask(block: &[u8; 16]) -> u32 {
    let v = load(block);
    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
    let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
    // Signed `v < 0x20`: the control characters, and every byte above ASCII (negative).
    let control_or_high = _mm_cmpgt_epi8(_mm_set1_epi8(0x20), v);
    _mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(quote, backslash),
        control_or_high,
    )) as u32
}

/// Sixteen bytes into a vector without a raw pointer (compiles to one unaligned load).
#[inline]
#[target_feature(enable = "sse2")]
fn load(block: &[u8; 16]) -> __m128i {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&block[..8]);
    hi.copy_from_slice(&block[8..]);
    _mm_set_epi64x(i64::from_le_bytes(hi), i64::from_le_bytes(lo))
}
