//! strata's own agent-facing HTTP/1.1 request reader (`proxy/agent_h1/request.rs`; issue
//! "Reliability and security", fuzzing at the edges): any bytes from an agent, cut anywhere,
//! end in a request strata serves, a hand-over to hyper, or a wait for more — never a panic —
//! and the cuts do not change which. A served request is what its bytes say: its fields are
//! the head's lines, in order, and its length is its one `Content-Length`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::proxy::agent_h1::{ReadRequest, read_request};

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, wire)) = data.split_first() else {
        return;
    };
    // The first byte: the read size (1–16 bytes) and the limits (small ones, so they are hit).
    let step = usize::from(knobs & 0x0f) + 1;
    let max_bytes = if knobs & 0x10 != 0 { 64 } else { 8192 };
    let max_fields = if knobs & 0x20 != 0 { 2 } else { 100 };
    let split = read_request(wire, step, max_bytes, max_fields);
    let whole = read_request(wire, wire.len().max(1), max_bytes, max_fields);
    assert_eq!(split, whole, "read {step} bytes at a time, and whole");
    if let ReadRequest::Served {
        method,
        target,
        fields,
        as_read,
        content_length,
        ..
    } = &whole
    {
        // The fields as read for forwarding are the map's, each name's values in order.
        let by_name = |fields: &[(String, Vec<u8>)]| {
            let mut sorted = fields.to_vec();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            sorted
        };
        assert_eq!(by_name(fields), by_name(as_read), "fields as read");
        assert!(["POST", "GET", "DELETE"].contains(&method.as_str()), "{method}");
        assert!(target.starts_with('/'), "{target}");
        assert!(fields.len() <= max_fields);
        let lengths: Vec<_> = fields
            .iter()
            .filter(|(name, _)| name == "content-length")
            .collect();
        assert!(lengths.len() <= 1, "one Content-Length at most");
        match lengths.first() {
            Some((_, value)) => {
                let stated: u64 = String::from_utf8_lossy(value).parse().unwrap_or(u64::MAX);
                assert_eq!(stated, *content_length);
            }
            None => assert_eq!(*content_length, 0),
        }
        for (name, _) in fields {
            assert!(
                !["transfer-encoding", "expect", "upgrade"].contains(&name.as_str()),
                "{name} is hyper's to serve"
            );
        }
    }
});
