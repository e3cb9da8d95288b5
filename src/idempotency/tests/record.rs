use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::super::*;
use crate::http::fields::{HeadFields, Headers};

fn head(content_type: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_str(content_type).unwrap());
    h.insert("content-length", HeaderValue::from_static("10"));
    h.insert("mcp-session-id", HeaderValue::from_static("s-1"));
    h.insert("connection", HeaderValue::from_static("x-hop"));
    h.insert("x-hop", HeaderValue::from_static("1"));
    h.insert("x-custom", HeaderValue::from_static("kept"));
    h.append("set-cookie", HeaderValue::from_static("lb=1"));
    h.insert(
        "date",
        HeaderValue::from_static("Mon, 01 Jan 2024 00:00:00 GMT"),
    );
    h
}

#[test]
fn records_end_to_end_headers_only() {
    let r = Record::new(
        StatusCode::OK,
        &head("application/json"),
        Bytes::new(),
        vec![],
    );
    let names: Vec<&str> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["content-type", "x-custom"]);
    assert!(!r.sse);
    let map = r.header_map();
    assert_eq!(map.get("x-custom").unwrap(), "kept");
    let r = Record::new(
        StatusCode::OK,
        &head("Text/Event-Stream; charset=utf-8"),
        Bytes::new(),
        vec![],
    );
    assert!(r.sse);
}

/// The answer's fields as strata's own connection read them give the record their map gives:
/// the same headers kept (names lower-cased, a `Connection`-named one dropped, in any case),
/// the same SSE reading.
#[test]
fn fields_as_read_record_as_their_map() {
    for lines in [
        &b"Content-Type: application/json\r\nContent-Length: 10\r\nMcp-Session-Id: s-1\r\nConnection: X-Hop, close\r\nx-hop: 1\r\nX-Custom: kept\r\nSet-Cookie: lb=1\r\nX-Custom: again\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n"[..],
        b"content-type: Text/Event-Stream ; charset=utf-8\r\nTransfer-Encoding: chunked\r\nVia: 1.1 up\r\nETag: \"x\"\r\n\r\n",
    ] {
        let fields = HeadFields::of_field_lines(lines);
        let map = fields.to_map().unwrap();
        let from_fields = Recording::new(StatusCode::OK, Headers::Own(&fields), vec![], 1 << 20);
        let from_map = Recording::new(StatusCode::OK, Headers::Map(&map), vec![], 1 << 20);
        let (a, b) = (from_fields.finish().unwrap(), from_map.finish().unwrap());
        assert!(!a.headers.is_empty());
        assert_eq!(a, b, "{}", String::from_utf8_lossy(lines));
    }
}

#[test]
fn recordable_statuses() {
    for s in [200, 201, 202, 204, 500] {
        assert!(recordable_status(s), "{s}");
    }
    for s in [400, 401, 403, 404, 408, 409, 422, 429, 501, 502, 503, 504] {
        assert!(!recordable_status(s), "{s}");
    }
}

#[test]
fn recording_stops_at_its_cap() {
    let h = head("application/json");
    let empty = Record::new(StatusCode::OK, &h, Bytes::new(), vec!["1".into()]).size();
    let mut r = Recording::new(
        StatusCode::OK,
        Headers::Map(&h),
        vec!["1".into()],
        empty + 10,
    );
    r.push(b"0123");
    r.push(b"456789");
    assert!(!r.is_over());
    let record = r.finish().unwrap();
    assert_eq!(&record.body[..], b"0123456789");
    assert_eq!(record.size(), empty + 10);

    let mut r = Recording::new(
        StatusCode::OK,
        Headers::Map(&h),
        vec!["1".into()],
        empty + 10,
    );
    r.push(b"0123456789");
    r.push(b"x");
    assert!(r.is_over());
    r.push(b"");
    assert_eq!(r.finish(), None);

    // A head alone over the cap.
    let r = Recording::new(StatusCode::OK, Headers::Map(&h), vec![], 8);
    assert!(r.is_over());
}

#[test]
fn replay_body_pairs_ids_in_request_order() {
    let body = r#"[{"jsonrpc":"2.0","id":"b","result":{}},{"jsonrpc":"2.0","id":"a","result":{}}]"#;
    let record = Record {
        status: 200,
        headers: vec![],
        body: Bytes::from(body),
        sse: false,
        ids: vec!["\"a\"".into(), "\"b\"".into()],
    };
    let out = record.replay_body(&["1".into(), "2".into()]);
    assert_eq!(
        &out[..],
        br#"[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]"#
    );
    let one = Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    assert_eq!(
        &replace_id(&one, false, "1", "\"n\"")[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":\"n\",\"result\":{}}"
    );
}
