//! The 64-byte block masks of `strings.rs` with AVX2: two 32-byte halves, three byte masks
//! each. AVX2 is not in the x86-64 baseline, so the one entry point needs proof of run-time
//! detection ([`Avx2`]).

use core::arch::x86_64::{
    __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_min_epu8, _mm256_movemask_epi8,
    _mm256_or_si256, _mm256_set_epi64x, _mm256_set1_epi8, _mm256_setzero_si256,
    _mm256_shuffle_epi8, _mm256_srli_epi16,
};

use super::strings::{self, BLOCK, Masks};

/// Proof that this CPU runs AVX2: only [`Avx2::detect`] makes one.
#[derive(Clone, Copy, Debug)]
pub(in crate::classify::json) struct Avx2(());

impl Avx2 {
    pub(super) fn detect() -> Option<Avx2> {
        // std caches the CPUID answer: this is one atomic load after the first call.
        std::is_x86_feature_detected!("avx2").then_some(Avx2(()))
    }

    /// See [`strings::Wide::skip`].
    #[inline]
    pub(super) fn skip(self, rest: &[u8]) -> usize {
        // SAFETY: `run` needs AVX2, and an `Avx2` exists only where `detect` found it on this
        // CPU. `run` is safe code: it reads `rest` through slices and arrays, never through a
        // raw pointer.
        #[allow(unsafe_code)]
        unsafe {
            run(rest)
        }
    }
}

#[target_feature(enable = "avx2")]
fn run(rest: &[u8]) -> usize {
    strings::skip_blocks(rest, |block| masks(block))
}

#[inline]
#[target_feature(enable = "avx2")]
fn masks(block: &[u8; BLOCK]) -> Masks {
    let (lo, hi) = block.split_at(BLOCK / 2);
    let (a, b) = (half(lo), half(hi));
    let join = |a: u32, b: u32| u64::from(a) | (u64::from(b) << 32);
    Masks {
        quote_or_control: join(a.0, b.0),
        backslash: join(a.1, b.1),
        not_short_escape: join(a.2, b.2),
    }
}

/// One half: (quote or control, backslash, not a short escape's letter).
#[inline]
#[target_feature(enable = "avx2")]
fn half(bytes: &[u8]) -> (u32, u32, u32) {
    let v = load(bytes);
    let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
    // Unsigned `v <= 0x1F`: min(v, 0x1F) == v.
    let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v);
    let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
    // Short-escape letters by nibble lookup (one bit per high nibble that has any): a byte is
    // one when the bit its high nibble names is set for its low nibble.
    let nibble = _mm256_set1_epi8(0x0F);
    let low = _mm256_and_si256(v, nibble);
    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
    let by_low = _mm256_shuffle_epi8(table(strings::LOW_NIBBLES), low);
    let by_high = _mm256_shuffle_epi8(table(strings::HIGH_NIBBLES), high);
    let letter = _mm256_and_si256(by_low, by_high);
    let not_letter = _mm256_cmpeq_epi8(letter, _mm256_setzero_si256());
    (
        _mm256_movemask_epi8(_mm256_or_si256(quote, control)) as u32,
        _mm256_movemask_epi8(backslash) as u32,
        _mm256_movemask_epi8(not_letter) as u32,
    )
}

/// A 16-byte table in each 128-bit lane (`vpshufb` looks up within lanes).
#[inline]
#[target_feature(enable = "avx2")]
fn table(t: [u8; 16]) -> __m256i {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&t[..8]);
    hi.copy_from_slice(&t[8..]);
    let (lo, hi) = (i64::from_le_bytes(lo), i64::from_le_bytes(hi));
    _mm256_set_epi64x(hi, lo, hi, lo)
}

/// 32 bytes into a vector without a raw pointer (compiles to one unaligned load).
#[inline]
#[target_feature(enable = "avx2")]
fn load(bytes: &[u8]) -> __m256i {
    let word = |k: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[8 * k..8 * k + 8]);
        i64::from_le_bytes(w)
    };
    _mm256_set_epi64x(word(3), word(2), word(1), word(0))
}
