use super::*;

const LIMITS: HeadLimits = HeadLimits {
    max_bytes: 1024,
    max_fields: 8,
};

fn complete(wire: &[u8]) -> Head {
    match parse(wire, LIMITS) {
        Parsed::Complete(head) => head,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(wire)),
    }
}

fn handed_over(wire: &[u8]) -> bool {
    matches!(parse(wire, LIMITS), Parsed::HandOver)
}

#[test]
fn an_mcp_post_is_served_here_with_its_fields_as_slices_of_the_head() {
    let wire =
        b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nMcp-Session-Id: s1\r\n\r\n{}";
    let mut head = complete(wire);
    assert_eq!(head.len, wire.len() - 2);
    assert_eq!(head.content_length, 2);
    assert!(!head.close && !head.idempotency_key);
    let bytes = Bytes::copy_from_slice(&wire[..head.len]);
    let request = head.request(&bytes).unwrap();
    assert_eq!(request.method(), Method::POST);
    assert_eq!(request.uri(), "/mcp?x=1");
    assert_eq!(request.version(), Version::HTTP_11);
    let headers = request.headers();
    assert_eq!(headers.len(), 3);
    assert_eq!(headers["mcp-session-id"], "s1");
    assert_eq!(headers["content-length"], "2");
    // In the order sent, names lower-cased.
    let names: Vec<_> = headers.keys().map(|n| n.as_str()).collect();
    assert_eq!(names, ["host", "content-length", "mcp-session-id"]);
}

#[test]
fn get_and_delete_are_served_and_a_partial_head_waits() {
    assert_eq!(complete(b"GET / HTTP/1.1\r\n\r\n").content_length, 0);
    assert_eq!(complete(b"DELETE /mcp HTTP/1.1\r\nHost: a\r\n\r\n").len, 33);
    assert!(matches!(
        parse(b"POST /mcp HTTP/1.1\r\nHo", LIMITS),
        Parsed::Partial
    ));
}

#[test]
fn connection_close_and_idempotency_key_are_noted() {
    let head =
        complete(b"POST / HTTP/1.1\r\nConnection: keep-alive, Close\r\nIdempotency-Key: k\r\n\r\n");
    assert!(head.close);
    assert!(head.idempotency_key);
    assert!(!complete(b"POST / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n").close);
}

#[test]
fn what_hyper_answers_is_handed_over() {
    for wire in [
        &b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
        b"GET / HTTP/1.0\r\n\r\n",
        b"PUT / HTTP/1.1\r\n\r\n",
        b"HEAD / HTTP/1.1\r\n\r\n",
        b"OPTIONS * HTTP/1.1\r\n\r\n",
        b"GET http://a/ HTTP/1.1\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"\x16\x03\x01 not http",
    ] {
        assert!(handed_over(wire), "{:?}", String::from_utf8_lossy(wire));
    }
}

#[test]
fn heads_past_the_limits_are_handed_over_for_hyper_to_refuse() {
    // More fields than `limits.max_headers`.
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..9 {
        many.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(handed_over(&many));
    // A whole head over `limits.max_header_bytes`, and an unfinished one that reached it.
    let long = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "v".repeat(1100));
    assert!(handed_over(long.as_bytes()));
    assert!(handed_over(&long.as_bytes()[..1050]));
    assert!(matches!(
        parse(&long.as_bytes()[..1000], LIMITS),
        Parsed::Partial
    ));
}

#[test]
fn a_field_value_http_refuses_makes_no_request() {
    // httparse takes obs-text in a value; `HeaderValue` does too, so this one builds.
    let wire = b"GET / HTTP/1.1\r\nx: caf\xc3\xa9\r\n\r\n";
    let mut head = complete(wire);
    let bytes = Bytes::copy_from_slice(&wire[..head.len]);
    assert_eq!(
        head.request(&bytes).unwrap().headers()["x"].as_bytes(),
        b"caf\xc3\xa9"
    );
}

/// Read in pieces of any size, a head gives the answer it gives read whole (the fuzz target
/// `agent_h1` checks the same on any bytes).
#[test]
fn cuts_do_not_change_the_answer() {
    use super::super::{ReadRequest, read_request};
    let heads: [&[u8]; 5] = [
        b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
        b"GET / HTTP/1.1\r\nLast-Event-ID: 7\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a",
        b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
    ];
    for wire in heads {
        let whole = read_request(wire, wire.len(), 1024, 2);
        for step in 1..wire.len() {
            assert_eq!(read_request(wire, step, 1024, 2), whole, "step {step}");
        }
    }
    let served = read_request(heads[0], 3, 1024, 8);
    let ReadRequest::Served {
        method,
        target,
        fields,
        as_read,
        content_length,
        close,
    } = served
    else {
        panic!("{served:?}");
    };
    assert_eq!((method.as_str(), target.as_str()), ("POST", "/mcp"));
    assert_eq!(fields.len(), 3);
    assert_eq!(as_read, fields, "the same lines, here in the same order");
    assert_eq!((content_length, close), (2, true));
    assert_eq!(read_request(heads[2], 5, 1024, 8), ReadRequest::HandOver);
    assert_eq!(read_request(heads[3], 5, 1024, 8), ReadRequest::Partial);
    // Three fields past `max_headers` = 2: hyper's to refuse.
    assert_eq!(read_request(heads[4], 4, 1024, 2), ReadRequest::HandOver);
}
