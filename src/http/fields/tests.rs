use std::collections::BTreeMap;

use http::{Uri, uri::Authority};

use super::*;
use crate::http::forward::{X_FORWARDED_FOR, apply_hop_rules, set_host};
use crate::http::length::parse_length;

/// The fields of `head` (a request head, blank line included), as `agent_h1` reads them.
fn read(head: &'static [u8]) -> HeadFields {
    let line_end = head.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    HeadFields::of_field_lines(&head[line_end..])
}

/// Lines as `name: value`, grouped by name (each name's values in order): what HTTP says
/// is the same message whatever the order of fields with different names (RFC 9110 §5.3).
fn by_name(lines: &[u8]) -> BTreeMap<String, Vec<String>> {
    let mut grouped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8(lines.to_vec()).unwrap().split("\r\n") {
        if let Some((name, value)) = line.split_once(": ") {
            grouped.entry(name.into()).or_default().push(value.into());
        }
    }
    grouped
}

/// What the map path forwards for the same head (`forward.rs`, then the map's lines as
/// `h1_conns/wire.rs` writes them, `X-Forwarded-For` left to the hop).
fn through_the_map(fields: &HeadFields, rewrite: bool) -> Vec<u8> {
    let mut map = fields.to_map().unwrap();
    let upstream = Authority::from_static("up.example:8000");
    set_host(&mut map, &Uri::from_static("/mcp"), &upstream, rewrite);
    apply_hop_rules(&mut map).unwrap();
    let mut out = Vec::new();
    for (name, value) in &map {
        if name != X_FORWARDED_FOR {
            line(&mut out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    out
}

const HEADS: [&[u8]; 9] = [
    b"POST /mcp HTTP/1.1\r\nHost: a.example\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 2\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nhost: a.example\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nMcp-Session-Id: s-1\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: a.example\r\nConnection: close, X-Secret, authorization\r\nX-Secret: 1\r\nAuthorization: Bearer t\r\nX-Kept: 2\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nTE: trailers\r\nTrailer: x\r\nUpgrade: h2c\r\nProxy-Connection: keep-alive\r\nX-Custom-Name: v\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: a.example\r\nX-Forwarded-For: 1.1.1.1\r\nX-A: 1\r\nx-a: 2\r\nX-B: 3\r\nX-A: 4\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nAuthorization: Bearer x\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nContent-Length: 0\r\nLast-Event-ID: 7\r\nOrigin: http://localhost:6274\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: probe.local\r\nConnection: content-length\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nConnection: Host, TRANSFER-ENCODING, Content-Length, x-a\r\nHost: probe.local\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n",
];

/// The head's own length: what the agent connection read its body by.
fn length_of(fields: &HeadFields) -> u64 {
    fields
        .get(Known::ContentLength)
        .and_then(parse_length)
        .unwrap_or(0)
}

#[test]
fn forwards_what_the_map_path_forwards() {
    for head in HEADS {
        for rewrite in [false, true] {
            let mut fields = read(head);
            let expected = by_name(&through_the_map(&fields, rewrite));
            fields.set_host(rewrite, "up.example:8000");
            let mut out = Vec::new();
            let wrote_length = fields.write_forwarded(&mut out, length_of(&fields));
            assert_eq!(wrote_length, expected.contains_key("content-length"));
            assert_eq!(
                by_name(&out),
                expected,
                "{} (rewrite {rewrite})",
                String::from_utf8_lossy(head)
            );
        }
    }
}

#[test]
fn keeps_the_agents_order_and_lower_cases_names() {
    let mut fields = read(HEADS[4]);
    fields.set_host(false, "up.example:8000");
    let mut out = Vec::new();
    fields.write_forwarded(&mut out, 0);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "host: a.example\r\nx-a: 1\r\nx-a: 2\r\nx-b: 3\r\nx-a: 4\r\n"
    );
}

#[test]
fn reads_values_as_the_map_does() {
    for head in HEADS {
        let fields = read(head);
        let map = fields.to_map().unwrap();
        let own = Headers::Own(&fields);
        let mapped = Headers::Map(&map);
        for known in [
            Known::Host,
            Known::McpSessionId,
            Known::McpProtocolVersion,
            Known::LastEventId,
            Known::Origin,
            Known::XForwardedFor,
            Known::IdempotencyKey,
        ] {
            assert_eq!(own.get(known), mapped.get(known), "{known:?}");
            assert_eq!(own.get_str(known), mapped.get_str(known), "{known:?}");
            assert_eq!(own.contains(known), mapped.contains(known), "{known:?}");
            assert_eq!(own.repeats(known), mapped.repeats(known), "{known:?}");
            let from_map: Vec<&[u8]> = map
                .get_all(known.header_name())
                .iter()
                .map(HeaderValue::as_bytes)
                .collect();
            assert_eq!(fields.all(known).collect::<Vec<_>>(), from_map, "{known:?}");
            assert!(own.all(known, |_| true));
            assert_eq!(
                own.all(known, |v| v.starts_with(b"http")),
                mapped.all(known, |v| v.starts_with(b"http")),
                "{known:?}"
            );
        }
    }
}

#[test]
fn a_value_that_is_not_visible_ascii_is_no_text() {
    let fields = read(b"POST / HTTP/1.1\r\nMcp-Session-Id: caf\xc3\xa9\r\n\r\n");
    let map = fields.to_map().unwrap();
    assert_eq!(Headers::Own(&fields).get_str(Known::McpSessionId), None);
    assert_eq!(Headers::Map(&map).get_str(Known::McpSessionId), None);
    assert!(Headers::Own(&fields).contains(Known::McpSessionId));
}

#[test]
fn connection_never_takes_the_length_or_host_away() {
    let mut fields = read(HEADS[7]);
    fields.set_host(false, "up.example:8000");
    let mut out = Vec::new();
    assert!(fields.write_forwarded(&mut out, 45));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "host: probe.local\r\ncontent-type: application/json\r\ncontent-length: 45\r\n"
    );
}

#[test]
fn the_length_written_is_the_body_this_hop_writes() {
    // The agent's value is never copied: the length is the body's.
    let mut fields = read(b"POST /mcp HTTP/1.1\r\nContent-Length: 045\r\nX-A: 1\r\n\r\n");
    fields.set_host(false, "up.example:8000");
    let mut out = Vec::new();
    assert!(fields.write_forwarded(&mut out, 45));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "content-length: 45\r\nx-a: 1\r\nhost: up.example:8000\r\n"
    );
}

#[test]
fn a_repeated_host_is_seen_either_way() {
    let fields = read(HEADS[5]);
    let map = fields.to_map().unwrap();
    assert!(Headers::Own(&fields).repeats(Known::Host));
    assert!(Headers::Map(&map).repeats(Known::Host));
    assert!(!Headers::Own(&read(HEADS[0])).repeats(Known::Host));
}

#[test]
fn visible_agrees_with_the_maps_text_rule_at_every_byte_and_place() {
    // The oracle: `http`'s own `HeaderValue::to_str` (a value it refuses is no text either).
    let oracle = |v: &[u8]| HeaderValue::from_bytes(v).is_ok_and(|h| h.to_str().is_ok());
    for byte in 0..=u8::MAX {
        for len in [1, 7, 16, 31, 33, 64, 100] {
            for at in [0, len / 2, len - 1] {
                let mut value = vec![b'a'; len];
                value[at] = byte;
                assert_eq!(
                    visible(&value),
                    oracle(&value),
                    "{byte:#x} at {at} of {len}"
                );
            }
        }
    }
    assert!(visible(b""));
}
