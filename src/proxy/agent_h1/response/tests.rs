use super::*;

use http::{HeaderValue, Response, Version};

fn head(
    response: Response<()>,
    body: BodySize,
    close: bool,
) -> (String, Result<Encoded, EncodeError>) {
    let (parts, ()) = response.into_parts();
    let mut out = Vec::new();
    let encoded = encode_head(&mut out, &parts, None, body, close);
    (String::from_utf8(out).unwrap(), encoded)
}

fn with(status: u16, headers: &[(&'static str, &'static str)]) -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    for &(name, value) in headers {
        response
            .headers_mut()
            .append(name, HeaderValue::from_static(value));
    }
    response
}

/// The head without its `date` line (the clock's), and whether it had one.
fn dateless(text: &str) -> (String, bool) {
    let mut dated = false;
    let kept: Vec<&str> = text
        .split("\r\n")
        .filter(|line| {
            let date = line.starts_with("date: ");
            dated |= date;
            !date
        })
        .collect();
    (kept.join("\r\n"), dated)
}

#[test]
fn a_json_answer_keeps_its_length_and_gains_a_date() {
    let response = with(
        200,
        &[
            ("content-type", "application/json"),
            ("content-length", "7"),
        ],
    );
    let (text, encoded) = head(response, BodySize::Known(7), false);
    let (text, dated) = dateless(&text);
    assert!(dated);
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n"
    );
    assert_eq!(
        encoded,
        Ok(Encoded {
            framing: Framing::Length(7),
            close: false
        })
    );
}

#[test]
fn an_answer_of_unknown_length_is_chunked_and_its_own_date_is_kept() {
    let response = with(
        200,
        &[
            ("date", "Tue, 01 Dec 2026 00:00:00 GMT"),
            ("content-type", "text/event-stream"),
        ],
    );
    let (text, encoded) = head(response, BodySize::Unknown, false);
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 00:00:00 GMT\r\ncontent-type: text/event-stream\r\n\
         transfer-encoding: chunked\r\n\r\n"
    );
    assert_eq!(encoded.unwrap().framing, Framing::Chunked);
}

#[test]
fn lengths_follow_hypers_rules() {
    // A known length without the header: written.
    let (text, encoded) = head(with(200, &[]), BodySize::Known(12), false);
    assert!(text.contains("content-length: 12\r\n"));
    assert_eq!(encoded.unwrap().framing, Framing::Length(12));
    // An ended body: `content-length: 0`, whatever the header said.
    let (text, encoded) = head(with(502, &[("content-length", "5")]), BodySize::None, false);
    let (text, _) = dateless(&text);
    assert_eq!(
        text,
        "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n"
    );
    assert_eq!(encoded.unwrap().framing, Framing::Empty);
    // A stated length on a body of unknown length frames it; two that disagree are refused.
    let (_, encoded) = head(
        with(200, &[("content-length", "3")]),
        BodySize::Unknown,
        false,
    );
    assert_eq!(encoded.unwrap().framing, Framing::Length(3));
    let two = with(200, &[("content-length", "3"), ("content-length", "4")]);
    assert_eq!(
        head(two, BodySize::Unknown, false).1,
        Err(EncodeError::ContentLength)
    );
    let bad = with(200, &[("content-length", "x")]);
    assert_eq!(
        head(bad, BodySize::Unknown, false).1,
        Err(EncodeError::ContentLength)
    );
}

#[test]
fn no_content_and_not_modified_have_no_body_nor_implicit_length() {
    for status in [204, 304] {
        let (text, encoded) = head(with(status, &[]), BodySize::Unknown, false);
        assert!(
            !text.contains("content-length") && !text.contains("transfer-encoding"),
            "{text}"
        );
        assert_eq!(encoded.unwrap().framing, Framing::Empty);
    }
    assert_eq!(
        head(with(103, &[]), BodySize::None, false).1,
        Err(EncodeError::Informational)
    );
}

#[test]
fn closing_adds_connection_close_once() {
    let (text, encoded) = head(with(200, &[]), BodySize::None, true);
    assert!(text.contains("connection: close\r\n"));
    assert!(encoded.unwrap().close);
    let (text, _) = head(
        with(200, &[("connection", "keep-alive")]),
        BodySize::None,
        true,
    );
    assert!(text.contains("connection: keep-alive, close\r\n"), "{text}");
    let (text, _) = head(with(200, &[("connection", "close")]), BodySize::None, true);
    assert_eq!(text.matches("close").count(), 1, "{text}");
    // The answer's own `close` ends the connection too.
    let (_, encoded) = head(with(200, &[("connection", "close")]), BodySize::None, false);
    assert!(encoded.unwrap().close);
}

#[test]
fn a_reason_phrase_of_the_upstreams_is_kept() {
    let mut response = with(200, &[]);
    let phrase = hyper::ext::ReasonPhrase::try_from(&b"Fine"[..]).unwrap();
    response.extensions_mut().insert(phrase);
    assert!(
        head(response, BodySize::None, false)
            .0
            .starts_with("HTTP/1.1 200 Fine\r\n")
    );
    assert!(
        head(with(599, &[]), BodySize::None, false)
            .0
            .starts_with("HTTP/1.1 599 <none>\r\n")
    );
}

#[test]
fn chunk_sizes_are_lower_case_hex() {
    let mut out = Vec::new();
    for len in [1, 15, 16, 0x1a3, 0x8_0000] {
        chunk_size(&mut out, len);
    }
    assert_eq!(out, b"1\r\nf\r\n10\r\n1a3\r\n80000\r\n");
}

#[test]
fn the_date_is_an_imf_fixdate() {
    let mut out = Vec::new();
    date(&mut out);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.len(), DATE_LEN);
    assert!(httpdate::parse_http_date(&text).is_ok(), "{text}");
}

/// An upstream's answer head written from its fields as read gives the lines the map path
/// gives (hop-by-hop fields gone, `Via`, `strata-attempts` above one attempt), grouped by
/// name: HTTP gives no meaning to the order of fields with different names (RFC 9110 §5.3).
#[test]
fn fields_as_read_are_written_as_the_map_path_writes_them() {
    use crate::http::fields::HeadFields;
    use crate::http::forward::{add_via, apply_hop_rules, via};
    use crate::proxy::attempt::add_attempts;
    use std::collections::BTreeMap;

    let grouped = |text: &str| {
        let mut lines: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in text.split("\r\n").skip(1) {
            if let Some((name, value)) = line.split_once(": ")
                && name != "date"
            {
                lines.entry(name.into()).or_default().push(value.into());
            }
        }
        (text.lines().next().map(str::to_owned), lines)
    };
    let heads: [&'static [u8]; 7] = [
        b"Content-Type: application/json\r\nContent-Length: 12\r\nDate: Wed, 02 Dec 2026 04:00:00 GMT\r\n\r\n",
        b"content-type: text/event-stream\r\nCache-Control: no-cache\r\nMcp-Session-Id: s-1\r\n\r\n",
        b"Connection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\nX-Kept: 2\r\nx-kept: 3\r\n\r\n",
        b"Retry-After: 1\r\nStrata-Attempts: 9\r\nVia: 1.1 other\r\nContent-Length: 0\r\n\r\n",
        b"Trailer: x\r\nUpgrade: h2c\r\nProxy-Connection: close\r\nTE: trailers\r\nServer: up\r\n\r\n",
        b"Content-Length: 5\r\nContent-Length: 5\r\nX-Odd-Name: \x80\xff\r\n\r\n",
        b"Connection: Content-Length, x-hop\r\nContent-Length: 5\r\nX-Hop: 1\r\n\r\n",
    ];
    for head in heads {
        for (status, version) in [(200, Version::HTTP_11), (503, Version::HTTP_10)] {
            for attempts in [1, 3] {
                for (body, close) in [
                    (BodySize::Known(5), false),
                    (BodySize::Unknown, true),
                    (BodySize::None, false),
                ] {
                    let fields = HeadFields::of_field_lines(head);
                    let mut parts = with(status, &[]).into_parts().0;
                    parts.version = version;
                    let mut mapped = parts.clone();
                    mapped.headers = fields.to_map().unwrap();
                    apply_hop_rules(&mut mapped.headers).unwrap();
                    add_via(&mut mapped.headers, version);
                    add_attempts(&mut mapped.headers, attempts);
                    let mut by_map = Vec::new();
                    let map_encoded = encode_head(&mut by_map, &mapped, None, body, close);
                    let answer = AnswerFields {
                        fields,
                        via: via(version),
                        attempts,
                    };
                    let mut as_read = Vec::new();
                    let read_encoded =
                        encode_head(&mut as_read, &parts, Some(&answer), body, close);
                    let (by_map, as_read) = (
                        String::from_utf8_lossy(&by_map).into_owned(),
                        String::from_utf8_lossy(&as_read).into_owned(),
                    );
                    assert_eq!(read_encoded, map_encoded, "{as_read}");
                    assert_eq!(grouped(&as_read), grouped(&by_map), "{as_read}\n{by_map}");
                    assert_eq!(
                        as_read.matches("date: ").count(),
                        by_map.matches("date: ").count()
                    );
                }
            }
        }
    }
}
