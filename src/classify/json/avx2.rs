//! The 64-byte block masks of `strings.rs` with AVX2: two 32-byte halves, three byte masks
//! each, and the UTF-8 check of `utf8.rs`. AVX2 is not in the x86-64 baseline, so the one
//! entry point needs proof of run-time detection ([`Avx2`]).

use core::arch::x86_64::{
    __m256i, _mm256_alignr_epi8, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_min_epu8,
    _mm256_movemask_epi8, _mm256_or_si256, _mm256_permute2x128_si256, _mm256_set_epi64x,
    _mm256_set1_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8, _mm256_srli_epi16,
    _mm256_subs_epu8, _mm256_xor_si256,
};

use super::Malformed;
use super::strings::{self, BLOCK, Masks};
use super::utf8;

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
    pub(super) fn skip(self, rest: &[u8]) -> Result<usize, Malformed> {
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
fn run(rest: &[u8]) -> Result<usize, Malformed> {
    // The half before, for the UTF-8 check (none before the first block: content starts at
    // a character's start), and whether its last three bytes were all ASCII.
    let mut before = _mm256_setzero_si256();
    let mut ascii_tail = true;
    strings::skip_blocks(rest, |block| {
        let (lo, hi) = block.split_at(BLOCK / 2);
        let (lo, hi) = (load(lo), load(hi));
        let (a, b) = (half(lo), half(hi));
        let mut m = Masks {
            quote_or_control: join(a.0, b.0),
            backslash: join(a.1, b.1),
            not_short_escape: join(a.2, b.2),
            bad_utf8: 0,
        };
        let high = join(
            _mm256_movemask_epi8(lo) as u32,
            _mm256_movemask_epi8(hi) as u32,
        );
        // An ASCII block after an ASCII tail cannot hold an error: most text skips the check.
        if high != 0 || !ascii_tail {
            m.bad_utf8 = join(bad_utf8(lo, before), bad_utf8(hi, lo));
        }
        before = hi;
        ascii_tail = high >> (BLOCK - 3) == 0;
        m
    })
}

/// Two halves' bits as one block's.
#[inline(always)]
fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// One half: (quote or control, backslash, not a short escape's letter).
#[inline]
#[target_feature(enable = "avx2")]
fn half(v: __m256i) -> (u32, u32, u32) {
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

/// The bytes of half `v` that the UTF-8 check flags, `before` being the half before (see
/// `utf8.rs` for the tables and what each bit means).
#[inline]
#[target_feature(enable = "avx2")]
fn bad_utf8(v: __m256i, before: __m256i) -> u32 {
    // Each 128-bit lane beside the lane before it: `alignr` then shifts bytes in from it.
    let lanes_before = _mm256_permute2x128_si256::<0x21>(before, v);
    let prev1 = _mm256_alignr_epi8::<15>(v, lanes_before);
    let prev2 = _mm256_alignr_epi8::<14>(v, lanes_before);
    let prev3 = _mm256_alignr_epi8::<13>(v, lanes_before);
    let nibble = _mm256_set1_epi8(0x0F);
    let high_nibble = |x: __m256i| _mm256_and_si256(_mm256_srli_epi16::<4>(x), nibble);
    let byte_1_high = _mm256_shuffle_epi8(table(utf8::BYTE_1_HIGH), high_nibble(prev1));
    let byte_1_low = _mm256_shuffle_epi8(table(utf8::BYTE_1_LOW), _mm256_and_si256(prev1, nibble));
    let byte_2_high = _mm256_shuffle_epi8(table(utf8::BYTE_2_HIGH), high_nibble(v));
    let special = _mm256_and_si256(_mm256_and_si256(byte_1_high, byte_1_low), byte_2_high);
    let third = _mm256_subs_epu8(prev2, _mm256_set1_epi8(utf8::THIRD_BYTE as i8));
    let fourth = _mm256_subs_epu8(prev3, _mm256_set1_epi8(utf8::FOURTH_BYTE as i8));
    let must_continue = _mm256_and_si256(
        _mm256_or_si256(third, fourth),
        _mm256_set1_epi8(0x80u8 as i8),
    );
    let error = _mm256_xor_si256(must_continue, special);
    !(_mm256_movemask_epi8(_mm256_cmpeq_epi8(error, _mm256_setzero_si256())) as u32)
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
