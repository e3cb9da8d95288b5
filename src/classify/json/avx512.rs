//! The 64-byte block masks of `strings.rs` with AVX-512BW: one vector per block, compares
//! straight into mask registers, and the UTF-8 check of `utf8.rs`. Needs run-time detection
//! ([`Avx512`]).

use core::arch::x86_64::{
    __m512i, _mm512_add_epi8, _mm512_alignr_epi8, _mm512_and_si512, _mm512_cmpeq_epi8_mask,
    _mm512_cmple_epu8_mask, _mm512_cmpneq_epi8_mask, _mm512_loadu_si512, _mm512_or_si512,
    _mm512_permutex2var_epi64, _mm512_set_epi64, _mm512_set1_epi8, _mm512_setzero_si512,
    _mm512_shuffle_epi8, _mm512_srli_epi16, _mm512_test_epi8_mask,
};

use super::Malformed;
use super::strings::{self, BLOCK, Masks};
use super::utf8;

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
    pub(super) fn skip(self, rest: &[u8]) -> Result<usize, Malformed> {
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
fn run(rest: &[u8]) -> Result<usize, Malformed> {
    // The block before, for the UTF-8 check (none before the first: content starts at a
    // character's start).
    let mut before = Nibbles::of(_mm512_setzero_si512());
    strings::skip_blocks(rest, |block| {
        let v = load(block);
        let nibbles = Nibbles::of(v);
        let mut m = masks(v, nibbles);
        m.bad_utf8 = bad_utf8(nibbles, &mut before);
        m
    })
}

/// Each byte's low and high nibble, for the lookups: the short-escape letters and the
/// UTF-8 check share them.
#[derive(Clone, Copy)]
struct Nibbles {
    low: __m512i,
    high: __m512i,
}

impl Nibbles {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn of(v: __m512i) -> Nibbles {
        let nibble = _mm512_set1_epi8(0x0F);
        Nibbles {
            low: _mm512_and_si512(v, nibble),
            high: _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble),
        }
    }
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn masks(v: __m512i, nibbles: Nibbles) -> Masks {
    let quote = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8));
    let control = _mm512_cmple_epu8_mask(v, _mm512_set1_epi8(0x1F));
    let backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
    // Short-escape letters by nibble lookup, as in `avx2.rs`.
    let by_low = _mm512_shuffle_epi8(table(strings::LOW_NIBBLES), nibbles.low);
    let by_high = _mm512_shuffle_epi8(table(strings::HIGH_NIBBLES), nibbles.high);
    let letter = _mm512_test_epi8_mask(by_low, by_high);
    Masks {
        quote_or_control: quote | control,
        backslash,
        not_short_escape: !letter,
        bad_utf8: 0,
    }
}

/// The bytes of `v` that the UTF-8 check flags (see `utf8.rs` for the tables and what each
/// bit means). Checked on every block, ASCII or not: a branch on "any byte above ASCII"
/// mispredicts on text that mixes scripts line by line, and costs more than it saves.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn bad_utf8(nibbles: Nibbles, before: &mut Nibbles) -> u64 {
    // The nibbles of the bytes 1, 2 and 3 before each byte: each 128-bit lane beside the lane
    // before it (the last lane of the block before for the first), then shifted in by
    // `alignr`.
    let lanes_before = |now: __m512i, then: __m512i| {
        _mm512_permutex2var_epi64(then, _mm512_set_epi64(13, 12, 11, 10, 9, 8, 7, 6), now)
    };
    let (low_before, high_before) = (
        lanes_before(nibbles.low, before.low),
        lanes_before(nibbles.high, before.high),
    );
    let prev1_low = _mm512_alignr_epi8::<15>(nibbles.low, low_before);
    let prev1_high = _mm512_alignr_epi8::<15>(nibbles.high, high_before);
    let prev2_high = _mm512_alignr_epi8::<14>(nibbles.high, high_before);
    let prev3_high = _mm512_alignr_epi8::<13>(nibbles.high, high_before);
    let byte_1_high = _mm512_shuffle_epi8(table(utf8::BYTE_1_HIGH), prev1_high);
    let byte_1_low = _mm512_shuffle_epi8(table(utf8::BYTE_1_LOW), prev1_low);
    let byte_2_high = _mm512_shuffle_epi8(table(utf8::BYTE_2_HIGH), nibbles.high);
    let special = _mm512_and_si512(_mm512_and_si512(byte_1_high, byte_1_low), byte_2_high);
    // A third byte (a lead `E_`/`F_` two back) or a fourth (`F_` three back) must be a
    // continuation: bit 7 (`TWO_CONTS`) is set for exactly those, by adding to the high
    // nibbles (and the check is one compare, so that the verdict leaves the vector unit as
    // one mask. The loop is bound by mask-to-register moves: keeping the leads as mask bits
    // and shifting them in registers takes two more moves, and `shrd` on AMD, and scans the
    // 16 MiB text body markedly slower; this way is close to no UTF-8 check at all.)
    let third = _mm512_add_epi8(prev2_high, _mm512_set1_epi8((0x80 - 0x0E) as i8));
    let fourth = _mm512_add_epi8(prev3_high, _mm512_set1_epi8((0x80 - 0x0F) as i8));
    let must_continue = _mm512_and_si512(
        _mm512_or_si512(third, fourth),
        _mm512_set1_epi8(utf8::TWO_CONTS as i8),
    );
    *before = nibbles;
    _mm512_cmpneq_epi8_mask(special, must_continue)
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

/// 64 bytes into a vector: one unaligned load. (Built from eight words instead, with no
/// raw pointer, it compiled to three instructions, and the block loop is bound by vector
/// instructions.)
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn load(block: &[u8; BLOCK]) -> __m512i {
    // SAFETY: `block` is 64 readable bytes, exactly one `__m512i`, and `loadu` has no
    // alignment requirement.
    #[allow(unsafe_code)]
    unsafe {
        _mm512_loadu_si512(block.as_ptr().cast())
    }
}
