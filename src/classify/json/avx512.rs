//! The 64-byte block masks of `strings.rs` with AVX-512BW: one vector per block, compares
//! straight into mask registers. Needs run-time detection ([`Avx512`]).

use core::arch::x86_64::{
    __m512i, _mm512_and_si512, _mm512_cmpeq_epi8_mask, _mm512_cmple_epu8_mask, _mm512_set_epi64,
    _mm512_set1_epi8, _mm512_shuffle_epi8, _mm512_srli_epi16, _mm512_test_epi8_mask,
};

use super::strings::{self, BLOCK, Masks};

/// Proof that this CPU runs AVX-512F and BW: only [`Avx512::detect`] makes one.
#[derive(Clone, Copy, Debug)]
pub(in crate::classify::json) struct Avx512(());

impl Avx512 {
    pub(super) fn detect() -> Option<Avx512> {
        // std caches the CPUID answer: this is an atomic load after the first call.
        (std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw"))
            .then_some(Avx512(()))
    }

    /// See [`strings::Wide::skip`].
    #[inline]
    pub(super) fn skip(self, rest: &[u8]) -> usize {
        // SAFETY: `run` needs AVX-512F and BW, and an `Avx512` exists only where `detect`
        // found both on this CPU. `run` is safe code: it reads `rest` through slices and
        // arrays, never through a raw pointer.
        #[allow(unsafe_code)]
        unsafe {
            run(rest)
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
fn run(rest: &[u8]) -> usize {
    strings::skip_blocks(rest, |block| masks(block))
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn masks(block: &[u8; BLOCK]) -> Masks {
    let v = load(block);
    let quote = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8));
    let control = _mm512_cmple_epu8_mask(v, _mm512_set1_epi8(0x1F));
    let backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
    // Short-escape letters by nibble lookup, as in `avx2.rs`.
    let nibble = _mm512_set1_epi8(0x0F);
    let low = _mm512_and_si512(v, nibble);
    let high = _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
    let by_low = _mm512_shuffle_epi8(table(strings::LOW_NIBBLES), low);
    let by_high = _mm512_shuffle_epi8(table(strings::HIGH_NIBBLES), high);
    let letter = _mm512_test_epi8_mask(by_low, by_high);
    Masks {
        quote_or_control: quote | control,
        backslash,
        not_short_escape: !letter,
    }
}

/// A 16-byte table in each 128-bit lane (`vpshufb` looks up within lanes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn table(t: [u8; 16]) -> __m512i {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&t[..8]);
    hi.copy_from_slice(&t[8..]);
    let (lo, hi) = (i64::from_le_bytes(lo), i64::from_le_bytes(hi));
    _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo)
}

/// 64 bytes into a vector without a raw pointer (compiles to one unaligned load).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn load(block: &[u8; BLOCK]) -> __m512i {
    let word = |k: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&block[8 * k..8 * k + 8]);
        i64::from_le_bytes(w)
    };
    _mm512_set_epi64(
        word(7),
        word(6),
        word(5),
        word(4),
        word(3),
        word(2),
        word(1),
        word(0),
    )
}
