use super::*;

/// Bytes at every boundary of RFC 3629's ranges, and a few between.
const EDGES: [u8; 28] = [
    0x00, 0x22, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xC3, 0xDF, 0xE0,
    0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF8, 0xFF,
];

/// `char_at` as std sees it.
fn reference(seg: &[u8]) -> Char {
    match std::str::from_utf8(seg) {
        Ok(s) => Char::Whole(s.chars().next().map_or(0, char::len_utf8)),
        Err(e) if e.valid_up_to() > 0 => {
            let s = std::str::from_utf8(&seg[..e.valid_up_to()]).unwrap_or_default();
            Char::Whole(s.chars().next().map_or(0, char::len_utf8))
        }
        Err(e) if e.error_len().is_none() => Char::Cut,
        Err(_) => Char::Bad,
    }
}

fn sequences(len: usize) -> Vec<Vec<u8>> {
    let mut all = vec![vec![]];
    for _ in 0..len {
        all = all
            .into_iter()
            .flat_map(|s| {
                EDGES.iter().map(move |&b| {
                    let mut s = s.clone();
                    s.push(b);
                    s
                })
            })
            .collect();
    }
    all
}

#[test]
fn char_at_agrees_with_std_on_every_edge_sequence() {
    // Every lead with every second byte, then the edge bytes up to four.
    for lead in 0x80..=0xFFu8 {
        for second in 0..=0xFFu8 {
            let seg = [lead, second, 0x80, 0x80];
            for n in 1..=4 {
                assert_eq!(
                    char_at(&seg[..n]),
                    reference(&seg[..n]),
                    "{:02x?}",
                    &seg[..n]
                );
            }
        }
    }
    for seq in sequences(4) {
        if seq[0] >= 0x80 {
            assert_eq!(char_at(&seq), reference(&seq), "{seq:02x?}");
        }
    }
}

/// The block check's verdict on some bytes, byte by byte: valid exactly when no byte is
/// flagged, ASCII before and after (the ASCII after flags a character cut at the end).
fn flagged(bytes: &[u8]) -> bool {
    let padded: Vec<u8> = [&[0u8; 3][..], bytes, &[b' '; 3]].concat();
    padded.windows(4).any(|w| flags([w[0], w[1], w[2]], w[3]))
}

#[test]
fn the_lookup_tables_flag_exactly_the_invalid_sequences() {
    for len in 1..=4 {
        for seq in sequences(len) {
            assert_eq!(
                flagged(&seq),
                std::str::from_utf8(&seq).is_err(),
                "{seq:02x?}"
            );
        }
    }
    for a in 0..=0xFFu8 {
        for b in 0..=0xFFu8 {
            let seq = [a, b];
            assert_eq!(
                flagged(&seq),
                std::str::from_utf8(&seq).is_err(),
                "{seq:02x?}"
            );
        }
    }
}

#[test]
fn run_checks_each_character_up_to_ascii() {
    let text = "héllo wörld 東京 🙂";
    let bytes = text.as_bytes();
    // From every non-ASCII character start: its run ends at the next ASCII byte.
    for (i, _) in text.char_indices().filter(|(_, c)| !c.is_ascii()) {
        let want = bytes[i..]
            .iter()
            .position(|&b| b < 0x80)
            .unwrap_or(bytes.len() - i);
        assert_eq!(run(&bytes[i..]), Ok(want), "from {i}");
        // Cut anywhere inside the run: valid as far as it goes.
        for cut in i + 1..i + want {
            let got = run(&bytes[i..cut]);
            assert_eq!(got, Ok(cut - i), "from {i} cut at {cut}");
        }
    }
    for bad in [
        &b"\xff"[..],
        b"\xc3\x41",
        b"\xe6\x9d\x41",
        b"\xed\xa0\x80",
        b"\xc0\xaf",
        b"\x80",
    ] {
        assert_eq!(run(bad), Err(Malformed::Utf8), "{bad:02x?}");
        let mut after = "é".as_bytes().to_vec();
        after.extend_from_slice(bad);
        assert_eq!(run(&after), Err(Malformed::Utf8), "é then {bad:02x?}");
    }
}

/// Found by proptest: `C3` then the lead of a cut character, the chunk ending between them.
/// Holding the lead back would leave the scan to end on `C3`, which then looks cut rather
/// than bad.
#[test]
fn a_cut_character_is_not_held_after_a_bad_one() {
    assert_eq!(whole_characters(b"a\xc3\xe0"), 3);
    assert_eq!(whole_characters(b"a\xf0\x9f\xe0\xb7"), 5);
    assert_eq!(whole_characters(b"a\xc3\xa9\xe0"), 3);
    assert_eq!(whole_characters(b"\xe0"), 0);
}

#[test]
fn last_char_start_backs_up_to_a_final_lead() {
    let kanji = "東".as_bytes();
    assert_eq!(last_char_start(b"abc", 3), 3);
    assert_eq!(last_char_start(&[b'a', kanji[0], kanji[1]], 3), 1);
    assert_eq!(last_char_start(&[b'a', kanji[0], kanji[1], kanji[2]], 4), 1);
    assert_eq!(last_char_start(b"a\xff", 2), 1);
    assert_eq!(last_char_start(b"\xf0\x9f\x99\x82", 4), 4);
    assert_eq!(last_char_start(b"\xc3", 1), 0);
}
