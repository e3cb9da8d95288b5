use super::*;

/// Where the scalar path takes over, byte by byte: the reference for [`Wide::skip`]. Walks
/// the content as the string states do; stops at a quote, a control character, or a
/// backslash whose escape is not a whole short escape here.
fn reference(rest: &[u8]) -> usize {
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'"' => return i,
            b if b < 0x20 => return i,
            b'\\' => match rest.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                _ => return i,
            },
            _ => i += 1,
        }
    }
    rest.len()
}

/// A level's answer is right when it stops at the reference's stop, or earlier at a byte the
/// scalar path handles the same way (the narrow run stops at every backslash; a wide level
/// at the backslash of each escape it leaves to the scalar path, which is the reference's).
fn check(wide: Wide, rest: &[u8]) {
    let want = reference(rest);
    let mut at = 0;
    // Follow the scalar loop: from each stop, step over a short escape and ask again.
    loop {
        let got = at + wide.skip(&rest[at..]);
        assert!(got <= want, "{wide:?} ran past {want} to {got} in {rest:?}");
        // A wide level stops early only in the bytes after its last whole block (where the
        // narrow run takes over) or at the last block's unpaired backslash.
        let blocks_end = at + (rest.len() - at) / BLOCK * BLOCK;
        if !matches!(wide, Wide::Narrow) && rest.len() - at >= BLOCK {
            assert!(
                got == want || got + 1 >= blocks_end,
                "{wide:?} stopped early at {got} (reference {want}) in {rest:?}"
            );
        }
        if got == want {
            return;
        }
        assert_eq!(
            rest[got], b'\\',
            "{wide:?} stopped at a plain byte {got} in {rest:?}"
        );
        at = got + 2;
    }
}

/// Wide levels must stop exactly at the reference when the stop is a quote, a control
/// character or an odd escape (they never stop at a valid short escape in a whole block).
fn check_exact_in_blocks(wide: Wide, rest: &[u8]) {
    if matches!(wide, Wide::Narrow) {
        return;
    }
    let want = reference(rest);
    let blocks_end = rest.len() / BLOCK * BLOCK;
    if want + 1 < blocks_end && rest.len() >= BLOCK {
        let head = rest[..16]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        if head.is_none_or(|h| rest[h] == b'\\') {
            assert_eq!(wide.skip(rest), want, "{wide:?} in {rest:?}");
        }
    }
}

fn filler(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"abcdefghij klmnopqrstuvwxyz0123456789.,;"[(x % 40) as usize]
        })
        .collect()
}

#[test]
fn escaped_positions_match_a_byte_walk() {
    // Every backslash pattern over 8 bytes, at several offsets in a block, with the carry.
    for pattern in 0u32..256 {
        for shift in [0, 7, 28, 31, 32, 56] {
            for carry_in in [0u64, 1] {
                let backslash = u64::from(pattern) << shift;
                let mut carry = carry_in;
                let got = escaped(backslash, &mut carry);
                // Byte walk.
                let mut want = 0u64;
                let mut esc = carry_in == 1;
                for k in 0..64 {
                    let is_bs = backslash >> k & 1 == 1;
                    if esc {
                        want |= 1 << k;
                        esc = false;
                    } else if is_bs {
                        esc = true;
                    }
                }
                assert_eq!(
                    got, want,
                    "pattern {pattern:08b} << {shift}, carry {carry_in}"
                );
                assert_eq!(carry, u64::from(esc), "carry out, {pattern:08b} << {shift}");
            }
        }
    }
}

/// The bit arithmetic alone, on masks made byte by byte: stops where the reference stops
/// whenever that is inside the whole blocks.
#[test]
fn block_logic_on_scalar_masks_matches_the_reference() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let alphabet = br#"\\\n"u/x "#;
    for _ in 0..20_000 {
        let len = 64 + (x % 200) as usize;
        let rest = sparse_text(&mut x, len, alphabet, 6);
        let got = skip_blocks(&rest, scalar_masks);
        let want = reference(&rest);
        assert!(got <= want, "ran past {want} to {got} in {rest:?}");
        if want < rest.len() / BLOCK * BLOCK {
            assert_eq!(got, want, "{rest:?}");
        }
    }
}

/// Text as tool output has it, with backslash runs of 1–5 and every kind of stop placed at
/// every offset around block boundaries.
#[test]
fn every_level_agrees_with_the_reference_at_every_position() {
    let inserts: &[&[u8]] = &[
        br"\n",
        br"\\",
        br"\\\n",
        br"\\\\",
        br"\\\\\n",
        br#"\""#,
        br#"\\""#,
        br#"\\\""#,
        br"\u00e9",
        br"\\u",
        br"\x",
        br"\",
        b"\x01",
        b"\\\x1f",
        b"\"",
        br"\/\b\f\r\t",
    ];
    for wide in Wide::all() {
        for len in [63, 64, 65, 127, 128, 129, 200] {
            let base = filler(len, len as u64);
            for insert in inserts {
                for at in 0..len {
                    let mut rest = base.clone();
                    rest.splice(at..(at + insert.len()).min(len), insert.iter().copied());
                    check(wide, &rest);
                    check_exact_in_blocks(wide, &rest);
                    // A second insert later on: the first one must not hide it.
                    for later in [at + 5, at + 33, at + 64] {
                        if later + 2 < rest.len() {
                            let mut two = rest.clone();
                            two[later] = b'\\';
                            two[later + 1] = b'n';
                            check(wide, &two);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn levels_agree_on_random_backslash_soup() {
    let alphabet = br#"\\\\\\n"u/x \x01"#;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for wide in Wide::all() {
        for _ in 0..20_000 {
            let len = 60 + (x % 140) as usize;
            // Mostly plain bytes, so that stops are sparse enough to reach far.
            let rest = sparse_text(&mut x, len, alphabet, 8);
            check(wide, &rest);
            check_exact_in_blocks(wide, &rest);
        }
    }
}

/// `len` bytes of `a`, about one in `one_in` drawn from `alphabet` instead (xorshift64 on
/// `x`, so every run sees the same bytes).
fn sparse_text(x: &mut u64, len: usize, alphabet: &[u8], one_in: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            if x.is_multiple_of(one_in) {
                alphabet[(*x >> 8) as usize % alphabet.len()]
            } else {
                b'a'
            }
        })
        .collect()
}
