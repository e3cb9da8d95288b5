use super::*;

/// The value kept by a byte-at-a-time push: no block copy can happen.
fn pushed_bytewise<const N: usize>(bytes: &[u8]) -> Captured<N> {
    let mut want = Captured::<N>::new();
    want.start(Kind::String);
    for b in bytes {
        want.push(std::slice::from_ref(b));
    }
    want
}

#[test]
fn a_block_copied_prefix_keeps_exactly_the_bytes_pushed() {
    // Values around the 16-byte block, the cap (32) and the room left for a block, followed
    // by more input (the block copy reads past the value) or not.
    let input: Vec<u8> = (0..80u8).map(|k| b'a' + k % 26).collect();
    for len in 0..=48 {
        for tail in [0, 1, 15, 16, 32] {
            let bytes = &input[..(len + tail).min(input.len())];
            let want = pushed_bytewise::<32>(&bytes[..len]);
            // In two pieces cut anywhere, each passed with the rest of the input after it
            // (as the scanner passes a chunk's rest).
            for cut in 0..=len {
                let mut got = Captured::<32>::new();
                got.start(Kind::String);
                got.push_prefix(bytes, cut);
                got.push_prefix(&bytes[cut..], len - cut);
                assert_eq!(got.bytes(), want.bytes(), "len {len} tail {tail} cut {cut}");
                assert_eq!(got.total_len(), len);
                assert!(got.same_bytes(&want), "len {len} tail {tail} cut {cut}");
            }
        }
    }
}

#[test]
fn a_block_copy_never_writes_past_the_cap() {
    // 20 bytes kept of 32: 12 bytes of room, so a short value is copied by length, and the
    // value past the cap is hashed, not kept.
    let input = [b'x'; 64];
    let mut got = Captured::<32>::new();
    got.start(Kind::String);
    got.push_prefix(&input, 20);
    got.push_prefix(&input, 16);
    assert_eq!(got.bytes(), &input[..32]);
    assert_eq!(got.total_len(), 36);
    assert!(got.truncated());
    assert!(got.same_bytes(&pushed_bytewise::<32>(&input[..36])));
}
