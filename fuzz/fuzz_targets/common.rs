//! Shared by the fuzz targets: cut points derived from the input, and fixed requests.
#![allow(dead_code)]

/// Splits a fuzz input into (cut points, payload). The first two bytes choose how the
/// payload is cut: a fixed step (1–16 bytes) or up to 8 pseudo-random cuts.
pub fn cuts_and_payload(data: &[u8]) -> (Vec<usize>, &[u8], u8) {
    if data.len() < 3 {
        return (Vec::new(), data, 0);
    }
    let (head, payload) = data.split_at(3);
    let mode = head[0];
    let mut state = u64::from(head[1]) << 8 | u64::from(head[0]) | 0x9E37_79B9_0000_0000;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let len = payload.len();
    let cuts = if mode & 1 == 0 {
        let step = 1 + usize::from(head[1] % 16);
        (1..len).step_by(step).collect()
    } else {
        let n = 1 + usize::from(head[1] % 8);
        let mut v: Vec<usize> = (0..n).map(|_| (next() as usize) % (len + 1)).collect();
        v.sort_unstable();
        v
    };
    (cuts, payload, head[2])
}

/// A few request bodies: a single tools/call, a batch of two, a tools/list with a string id.
pub const REQUESTS: [&[u8]; 4] = [
    br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
    br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#,
    br#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#,
    br#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"t","task":{}}}"#,
];
