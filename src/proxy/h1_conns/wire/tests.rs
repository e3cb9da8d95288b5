use bytes::BytesMut;
use http::header::HeaderMap;
use http::{Method, StatusCode, Version};

use super::*;

fn agent() -> crate::proxy::Peer {
    crate::proxy::Peer::new(([10, 0, 0, 7], 4000).into())
}

fn parse(wire: &[u8], method: &Method) -> Result<Option<Head>, HeadError> {
    parse_response(&mut BytesMut::from(wire), method, false)
}

#[test]
fn the_request_head_is_the_forwarded_parts_byte_for_byte() {
    let mut headers = HeaderMap::new();
    headers.insert("host", "up.example:8000".parse().unwrap());
    headers.insert("mcp-session-id", "s-1".parse().unwrap());
    headers.append("x-multi", "a".parse().unwrap());
    headers.append("x-multi", "b".parse().unwrap());
    headers.append("x-forwarded-for", "192.0.2.1".parse().unwrap());
    let mut out = Vec::new();
    encode_request(
        &mut out,
        &Method::POST,
        "/mcp?x=1",
        Fields::Map(&headers),
        &Hop::new(Version::HTTP_11, &agent()),
        17,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "POST /mcp?x=1 HTTP/1.1\r\nhost: up.example:8000\r\nmcp-session-id: s-1\r\n\
         x-multi: a\r\nx-multi: b\r\nvia: 1.1 strata\r\n\
         x-forwarded-for: 192.0.2.1, 10.0.0.7\r\ncontent-length: 17\r\n\r\n"
    );
    // The agent's own Content-Length is kept, not doubled.
    headers.insert("content-length", "17".parse().unwrap());
    let mut out = Vec::new();
    encode_request(
        &mut out,
        &Method::POST,
        "/",
        Fields::Map(&headers),
        &Hop::new(Version::HTTP_11, &agent()),
        17,
    );
    assert_eq!(
        String::from_utf8_lossy(&out)
            .matches("content-length")
            .count(),
        1
    );
    // GET without a body says nothing of a length; POST says 0.
    let mut out = Vec::new();
    let hop_lines = "via: 1.1 strata\r\nx-forwarded-for: 10.0.0.7\r\n";
    encode_request(
        &mut out,
        &Method::GET,
        "/mcp",
        Fields::Map(&HeaderMap::new()),
        &Hop::new(Version::HTTP_11, &agent()),
        0,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("GET /mcp HTTP/1.1\r\n{hop_lines}\r\n")
    );
    let mut out = Vec::new();
    encode_request(
        &mut out,
        &Method::POST,
        "/mcp",
        Fields::Map(&HeaderMap::new()),
        &Hop::new(Version::HTTP_11, &agent()),
        0,
    );
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("POST /mcp HTTP/1.1\r\n{hop_lines}content-length: 0\r\n\r\n")
    );
}

#[test]
fn a_response_head_is_parsed_at_any_cut_and_leaves_the_body() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
                 Mcp-Session-Id: abc\r\n\r\n{}";
    let head_len = wire.len() - 2;
    for cut in 0..head_len {
        assert!(
            parse(&wire[..cut], &Method::POST).unwrap().is_none(),
            "cut {cut}"
        );
    }
    let mut buf = BytesMut::from(&wire[..]);
    let head = parse_response(&mut buf, &Method::POST, false)
        .unwrap()
        .unwrap();
    assert_eq!(&buf[..], b"{}");
    assert_eq!(head.response.status(), StatusCode::OK);
    assert_eq!(head.response.version(), Version::HTTP_11);
    assert_eq!(head.response.headers()["content-type"], "application/json");
    assert_eq!(head.response.headers()["mcp-session-id"], "abc");
    assert_eq!(head.framing, Framing::Length(2));
    assert!(head.keep_alive);
    assert!(
        head.response
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .is_none()
    );
}

#[test]
fn interim_responses_are_skipped() {
    let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
                 HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";
    let head = parse(wire, &Method::POST).unwrap().unwrap();
    assert_eq!(head.response.status(), StatusCode::ACCEPTED);
    assert!(!head.response.headers().contains_key("link"));
    assert_eq!(head.framing, Framing::Empty);
    // Only the interim one so far: wait for more.
    assert!(
        parse(b"HTTP/1.1 100 Continue\r\n\r\n", &Method::POST)
            .unwrap()
            .is_none()
    );
}

#[test]
fn keep_alive_follows_the_version_and_connection() {
    let head = |wire: &[u8]| parse(wire, &Method::GET).unwrap().unwrap().keep_alive;
    assert!(!head(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    ));
    assert!(!head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
    assert!(head(
        b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"
    ));
    // A body to the close cannot leave the connection open.
    assert!(!head(b"HTTP/1.1 200 OK\r\n\r\n"));
}

#[test]
fn an_unusual_reason_phrase_is_kept_for_the_agent() {
    let head = parse(
        b"HTTP/1.1 503 Back Soon\r\nContent-Length: 0\r\n\r\n",
        &Method::POST,
    )
    .unwrap()
    .unwrap();
    let reason = head
        .response
        .extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .unwrap();
    assert_eq!(reason.as_bytes(), b"Back Soon");
}

#[test]
fn heads_that_are_not_http_are_errors() {
    for wire in [
        &b"garbage garbage\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    ] {
        assert!(
            parse(wire, &Method::POST).is_err(),
            "{:?}",
            String::from_utf8_lossy(wire)
        );
    }
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(parse(&many, &Method::POST).is_err());
    let endless = vec![b'a'; MAX_HEAD + 1];
    let mut long = b"HTTP/1.1 200 OK\r\nx-long: ".to_vec();
    long.extend_from_slice(&endless);
    assert!(matches!(
        parse(&long, &Method::POST),
        Err(HeadError::TooLarge)
    ));
}

#[test]
fn header_values_are_slices_of_the_head() {
    let mut buf =
        BytesMut::from(&b"HTTP/1.1 200 OK\r\nX-A: value\r\nContent-Length: 0\r\n\r\n"[..]);
    let range = buf.as_ptr_range();
    let head = parse_response(&mut buf, &Method::POST, false)
        .unwrap()
        .unwrap();
    let value = &head.response.headers()["x-a"];
    assert_eq!(value, "value");
    assert!(range.contains(&value.as_bytes().as_ptr()), "no copy");
}

/// A `Content-Length` beside `Transfer-Encoding` is removed (RFC 9112 §6.3), whether the
/// fields go into a map or are kept as read.
#[test]
fn a_length_beside_a_transfer_coding_is_removed_in_either_form() {
    let wire =
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n";
    let mapped = parse_response(&mut BytesMut::from(&wire[..]), &Method::POST, false)
        .unwrap()
        .unwrap();
    assert!(!mapped.response.headers().contains_key("content-length"));
    assert!(mapped.response.headers().contains_key("x-a"));
    let read = parse_response(&mut BytesMut::from(&wire[..]), &Method::POST, true)
        .unwrap()
        .unwrap();
    let fields = read.fields.unwrap();
    assert!(!fields.contains(Known::ContentLength));
    assert!(fields.contains(Known::TransferEncoding));
    assert_eq!(
        (mapped.framing, read.framing),
        (Framing::Chunked, Framing::Chunked)
    );
}
