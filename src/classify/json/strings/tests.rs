use super::*;

/// How the string states end some content, byte by byte: the reference for [`Wide::skip`]
/// followed as the scalar loop follows it. Stops at a quote, a control character, or a
/// backslash whose escape is not a whole short escape here; fails at a character that is
/// not UTF-8 before that. A character cut by the end runs to the end (see `utf8::run`).
fn reference(rest: &[u8]) -> Result<usize, Malformed> {
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'"' => return Ok(i),
            b if b < 0x20 => return Ok(i),
            b'\\' => match rest.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                _ => return Ok(i),
            },
            b if b >= 0x80 => match utf8::char_at(&rest[i..]) {
                utf8::Char::Whole(width) => i += width,
                utf8::Char::Cut => return Ok(rest.len()),
                utf8::Char::Bad => return Err(Malformed::Utf8),
            },
            _ => i += 1,
        }
    }
    Ok(rest.len())
}

/// `wide.skip` followed as `JsonScanner::string` follows it: from each stop, over a short
/// escape or a run of characters above ASCII, and ask again. Each answer must be at or
/// before the reference's stop, and a wide level stops early only in the bytes after its
/// last whole block (where the narrow run takes over), at the last block's unpaired
/// backslash or final character, or at a character above ASCII in the first 16 bytes.
fn follow(wide: Wide, rest: &[u8]) -> Result<usize, Malformed> {
    let want = reference(rest);
    let mut at = 0;
    loop {
        let got = at + wide.skip(&rest[at..])?;
        if let Ok(want) = want {
            assert!(got <= want, "{wide:?} ran past {want} to {got} in {rest:?}");
        }
        match rest.get(got) {
            None | Some(b'"') => return Ok(got),
            Some(&b) if b < 0x20 => return Ok(got),
            Some(&b) if b >= 0x80 => at = got + utf8::run(&rest[got..])?,
            Some(b'\\') => match rest.get(got + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => at = got + 2,
                _ => return Ok(got),
            },
            Some(_) => panic!("{wide:?} stopped at a plain byte {got} in {rest:?}"),
        }
    }
}

fn check(wide: Wide, rest: &[u8]) {
    assert_eq!(follow(wide, rest), reference(rest), "{wide:?} in {rest:?}");
}

/// Wide levels must stop exactly at the reference when the stop is a quote, a control
/// character or an odd escape in ASCII content (they never stop at a valid short escape in
/// a whole block).
fn check_exact_in_blocks(wide: Wide, rest: &[u8]) {
    if matches!(wide, Wide::Narrow) || !rest.is_ascii() {
        return;
    }
    let Ok(want) = reference(rest) else {
        return;
    };
    let blocks_end = rest.len() / BLOCK * BLOCK;
    if want + 1 < blocks_end && rest.len() >= BLOCK {
        let head = rest[..16]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        if head.is_none_or(|h| rest[h] == b'\\') {
            assert_eq!(wide.skip(rest), Ok(want), "{wide:?} in {rest:?}");
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
/// whenever that is inside the whole blocks, and fails where it fails.
#[test]
fn block_logic_on_scalar_masks_matches_the_reference() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for pieces in [&ASCII_STOPS[..], &UTF8_PIECES[..]] {
        for _ in 0..20_000 {
            let len = 64 + (x % 200) as usize;
            let rest = sparse_pieces(&mut x, len, pieces, 6);
            let mut before = [0; 3];
            let got = skip_blocks(&rest, |block| scalar_masks(block, &mut before));
            let want = reference(&rest);
            match (got, want) {
                (Ok(got), Ok(want)) => {
                    assert!(got <= want, "ran past {want} to {got} in {rest:?}");
                    if want + 1 < rest.len() / BLOCK * BLOCK {
                        assert_eq!(got, want, "{rest:?}");
                    }
                }
                // An error the blocks did not reach is left to the narrow run.
                (Ok(_), Err(_)) => {}
                (got, want) => assert_eq!(got, want, "{rest:?}"),
            }
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

/// Characters above ASCII, valid and not, at every offset around block boundaries: in ASCII
/// text, and in text full of them (where the insert also cuts characters).
#[test]
fn every_level_checks_utf8_at_every_position() {
    let inserts: &[&[u8]] = &[
        "é".as_bytes(),
        "東".as_bytes(),
        "🙂".as_bytes(),
        b"\xff",
        b"\xc3",
        b"\xe6\x9d",
        b"\xf0\x9f\x99",
        b"\x80",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xc0\xaf",
        b"\xe0\x80\x80",
        b"\xf0\x8f\xbf\xbf",
        b"\xf5\x80\x80\x80",
        "\\é".as_bytes(),
        "é\"".as_bytes(),
        b"\xc3\"",
        b"\xe6\\n",
    ];
    let text = "naïve café, 東京の天気 🙂 ok\\n ".repeat(12);
    for wide in Wide::all() {
        for len in [63, 64, 65, 127, 128, 129, 200] {
            for base in [filler(len, len as u64), text.as_bytes()[..len].to_vec()] {
                for insert in inserts {
                    for at in 0..len {
                        let mut rest = base.clone();
                        rest.splice(at..(at + insert.len()).min(len), insert.iter().copied());
                        check(wide, &rest);
                    }
                }
            }
        }
    }
}

/// Valid characters of every lead range — the first and last of each, two to four bytes —
/// at every offset around block boundaries, alone, in runs and beside each other: no level
/// may flag one. (A wrong threshold for "a lead two bytes back" passed every other test:
/// their two-byte characters all had `C_` leads.)
#[test]
fn every_level_passes_every_kind_of_valid_character() {
    let chars = [
        '\u{80}',
        '\u{7FF}',
        'é',
        'Ж',
        'ש',
        'ߐ',
        '\u{800}',
        '\u{FFF}',
        '\u{1000}',
        '東',
        '\u{CFFF}',
        '\u{D000}',
        '\u{D7FF}',
        '\u{E000}',
        '\u{FFFD}',
        '\u{FFFF}',
        '\u{10000}',
        '🙂',
        '\u{3FFFF}',
        '\u{40000}',
        '\u{FFFFF}',
        '\u{100000}',
        '\u{10FFFF}',
    ];
    for wide in Wide::all() {
        for c in chars {
            let mut buf = [0u8; 4];
            let c_bytes = c.encode_utf8(&mut buf).as_bytes();
            for len in [64, 128, 131] {
                for at in 0..len {
                    // In ASCII text.
                    let mut rest = filler(len, at as u64);
                    rest.splice(at..at, c_bytes.iter().copied());
                    check(wide, &rest);
                    // A run of it, with one ASCII byte at `at`.
                    let run: String = std::iter::repeat_n(c, len / c.len_utf8() + 1).collect();
                    let mut rest = run.into_bytes();
                    let at = at / c.len_utf8() * c.len_utf8();
                    rest.insert(at, b'a');
                    check(wide, &rest);
                }
            }
            // Beside every other kind, both ways, across a block boundary.
            for d in chars {
                for at in 56..66 {
                    let mut rest = filler(140, 7);
                    let pair: String = [c, d, c].iter().collect();
                    rest.splice(at..at, pair.bytes());
                    check(wide, &rest);
                }
            }
        }
    }
}

#[test]
fn levels_agree_on_random_utf8_soup() {
    let mut x = 0x6A09_E667_F3BC_C909u64;
    for wide in Wide::all() {
        for one_in in [3, 12] {
            for _ in 0..10_000 {
                let len = 60 + (x % 200) as usize;
                let rest = sparse_pieces(&mut x, len, &UTF8_PIECES, one_in);
                check(wide, &rest);
            }
        }
    }
}

/// Stops and escapes in ASCII.
const ASCII_STOPS: [&[u8]; 8] = [b"\\", b"\\\\", b"\\n", b"\"", b"u", b"/", b"x", b" "];

/// Characters above ASCII (mostly valid), with stops and escapes among them.
const UTF8_PIECES: [&[u8]; 14] = [
    "é".as_bytes(),
    "東".as_bytes(),
    "🙂".as_bytes(),
    "é".as_bytes(),
    "東".as_bytes(),
    "🙂".as_bytes(),
    b"\\n",
    b"\"",
    b"\xff",
    b"\xe6\x9d",
    b"\x80",
    b"\xed\xa0\x80",
    b"\x01",
    b"\\",
];

/// About `len` bytes of `a`, with about one piece in `one_in` drawn from `pieces` instead
/// (xorshift64 on `x`, so every run sees the same bytes).
fn sparse_pieces(x: &mut u64, len: usize, pieces: &[&[u8]], one_in: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 4);
    while out.len() < len {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        if x.is_multiple_of(one_in) {
            out.extend_from_slice(pieces[(*x >> 8) as usize % pieces.len()]);
        } else {
            out.push(b'a');
        }
    }
    out
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
