//! The two ways agree on generated request heads (a fixed seed: the same cases every run);
//! the fuzz target `forwarded_framing` explores further.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::*;

/// Names a `Connection` value may list: framing ones, hop-by-hop ones, end-to-end ones the
/// request carries, and unknown ones.
const NAMED: [&str; 14] = [
    "content-length",
    "Content-Length",
    "host",
    "HOST",
    "transfer-encoding",
    "keep-alive",
    "close",
    "te",
    "x-a",
    "X-B",
    "mcp-session-id",
    "authorization",
    "x-unknown",
    "upgrade",
];

/// One generated field line (without CRLF).
fn field() -> impl Strategy<Value = String> {
    let connection = proptest::collection::vec(0..NAMED.len(), 1..4).prop_map(|picked| {
        let names: Vec<&str> = picked.iter().map(|&i| NAMED[i]).collect();
        format!("Connection: {}", names.join(", "))
    });
    prop_oneof![
        3 => connection,
        1 => Just("X-A: 1".to_owned()),
        1 => Just("x-a:2".to_owned()),
        1 => Just("X-B: \t spaced \t".to_owned()),
        1 => Just("Mcp-Session-Id: s-1".to_owned()),
        1 => Just("Authorization: Bearer t".to_owned()),
        1 => Just("Keep-Alive: timeout=5".to_owned()),
        1 => Just("TE: trailers".to_owned()),
        1 => Just("Host: second.example".to_owned()),
        1 => Just("X-Forwarded-For: 10.0.0.1".to_owned()),
        1 => Just("Content-Length: 999".to_owned()),
        1 => Just("Transfer-Encoding: chunked".to_owned()),
    ]
}

/// A request: a method, `Host`, generated fields in any order, and a body framed by one
/// `Content-Length` (or chunked, when a generated field says so) that is itself a request.
fn request() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just("POST"), Just("GET"), Just("DELETE")],
        proptest::collection::vec(field(), 0..6),
        any::<bool>(),
        0usize..3,
    )
        .prop_map(|(method, mut fields, host_first, length_at)| {
            let body = b"GET /smuggled HTTP/1.1\r\nHost: probe.local\r\n\r\n".to_vec();
            let chunked = fields.iter().any(|f| f.starts_with("Transfer-Encoding"));
            // The generated `Content-Length: 999` stands for a second, conflicting one.
            let length = format!("Content-Length: {}", body.len());
            fields.insert(length_at.min(fields.len()), length);
            let host = "Host: probe.local".to_owned();
            if host_first {
                fields.insert(0, host);
            } else {
                fields.push(host);
            }
            let mut wire = format!("{method} /mcp HTTP/1.1\r\n").into_bytes();
            for f in &fields {
                wire.extend_from_slice(f.as_bytes());
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"\r\n");
            if chunked {
                wire.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
                wire.extend_from_slice(&body);
                wire.extend_from_slice(b"\r\n0\r\n\r\n");
            } else {
                wire.extend_from_slice(&body);
            }
            wire
        })
}

#[test]
fn strata_and_hyper_forward_the_same_message() {
    let config = Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let both = std::cell::Cell::new(0u32);
    runner
        .run(&(request(), any::<bool>()), |(wire, rewrite)| {
            let forwarded = forward_both_ways(&wire, rewrite);
            both.set(both.get() + u32::from(forwarded.own.is_some() && forwarded.hyper.is_some()));
            prop_assert!(
                same_message(&forwarded).is_ok(),
                "{}\n{:?}",
                String::from_utf8_lossy(&wire),
                same_message(&forwarded)
            );
            Ok(())
        })
        .unwrap();
    // Most cases go both ways (the rest are chunked, or repeat a length: hyper's alone).
    assert!(both.get() > 64, "only {} cases went both ways", both.get());
}

#[test]
fn the_attack_is_one_request_both_ways() {
    let wire = b"POST /mcp HTTP/1.1\r\nHost: probe.local\r\nConnection: content-length\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: probe.local\r\n\r\n";
    let forwarded = forward_both_ways(wire, false);
    assert!(forwarded.own.is_some() && forwarded.hyper.is_some());
    assert_eq!(same_message(&forwarded), Ok(()));
}

#[test]
fn a_message_whose_length_leaves_a_request_behind_is_caught() {
    let smuggled = b"POST /mcp HTTP/1.1\r\nhost: probe.local\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: probe.local\r\n\r\n".to_vec();
    let forwarded = Forwarded {
        own: Some(smuggled),
        hyper: None,
    };
    assert!(
        same_message(&forwarded)
            .unwrap_err()
            .contains("another request")
    );
}
