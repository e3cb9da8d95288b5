use bytes::{Bytes, BytesMut};
use http::header::HeaderMap;
use http::{Method, StatusCode, Version};

use super::*;

fn framing(method: Method, status: u16, version: Version, headers: &[(&str, &str)]) -> Framing {
    let values = |name: &'static str| {
        headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes())
    };
    let coding = values("transfer-encoding").next_back();
    let status = StatusCode::from_u16(status).unwrap();
    Framing::of_response(&method, status, version, coding, values("content-length"))
        .unwrap()
        .0
}

/// Feeds `wire` to a decoder in pieces cut at `cuts`, as reads would bring it, and collects
/// what comes out: the data joined, the trailers, and whether the end was reached.
fn decode_in_pieces(
    framing: Framing,
    wire: &[u8],
    cuts: &[usize],
) -> Result<(Vec<u8>, Option<HeaderMap>, bool), BodyError> {
    let mut decoder = framing.decoder();
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut trailers = None;
    let mut at = 0;
    let mut points: Vec<usize> = cuts.iter().copied().filter(|&c| c < wire.len()).collect();
    points.sort_unstable();
    points.push(wire.len());
    for point in points {
        buf.extend_from_slice(&wire[at..point.max(at)]);
        at = point.max(at);
        loop {
            match decoder.decode(&mut buf)? {
                Decoded::Data(d) => data.extend_from_slice(&d),
                Decoded::Trailers(t) => trailers = Some(t),
                Decoded::End => return Ok((data, trailers, true)),
                Decoded::More => break,
            }
            if decoder.is_done() {
                return Ok((data, trailers, true));
            }
        }
    }
    match decoder.at_eof()? {
        Decoded::End => Ok((data, trailers, true)),
        _ => Ok((data, trailers, false)),
    }
}

#[test]
fn framing_follows_rfc_9112_section_6_3() {
    use Framing::{Chunked, Close, Empty, Length};
    const HTTP_10: Version = Version::HTTP_10;
    const HTTP_11: Version = Version::HTTP_11;
    const CL: &str = "content-length";
    const TE: &str = "transfer-encoding";
    /// A request method, the response's status, version and headers; the framing they give.
    type Case = (
        Method,
        u16,
        Version,
        &'static [(&'static str, &'static str)],
        Framing,
    );
    let cases: &[Case] = &[
        (Method::HEAD, 200, HTTP_11, &[(CL, "5")], Empty),
        (Method::POST, 204, HTTP_11, &[], Empty),
        (Method::GET, 304, HTTP_11, &[(CL, "5")], Empty),
        (Method::POST, 200, HTTP_11, &[(CL, "0")], Empty),
        (Method::POST, 200, HTTP_11, &[(CL, "12")], Length(12)),
        // The same length twice, in one field or two, is one length.
        (Method::POST, 200, HTTP_11, &[(CL, "7, 7")], Length(7)),
        (
            Method::POST,
            200,
            HTTP_11,
            &[(CL, "7"), (CL, "7")],
            Length(7),
        ),
        (Method::POST, 200, HTTP_11, &[(TE, "chunked")], Chunked),
        (
            Method::POST,
            200,
            HTTP_11,
            &[(TE, "gzip, Chunked")],
            Chunked,
        ),
        // Chunked not last, or in HTTP/1.0: to the close.
        (Method::POST, 200, HTTP_11, &[(TE, "chunked, gzip")], Close),
        (Method::POST, 200, HTTP_10, &[(TE, "chunked")], Close),
        (Method::POST, 200, HTTP_11, &[], Close),
    ];
    for (method, status, version, headers, want) in cases {
        let got = framing(method.clone(), *status, *version, headers);
        assert_eq!(got, *want, "{method} {status} {version:?} {headers:?}");
    }
}

#[test]
fn transfer_encoding_wins_over_content_length_which_is_removed() {
    let f = Framing::of_response(
        &Method::POST,
        StatusCode::OK,
        Version::HTTP_11,
        Some(b"chunked"),
        [&b"3"[..]].into_iter(),
    );
    // Chunked, and the length is to be removed (`wire.rs` does, in either form).
    assert_eq!(f.unwrap(), (Framing::Chunked, Lengths::Coded));
}

#[test]
fn equal_lengths_listed_or_repeated_frame_by_that_length_and_are_made_one() {
    for values in [&["213, 213"][..], &["213", "213"]] {
        let f = Framing::of_response(
            &Method::POST,
            StatusCode::OK,
            Version::HTTP_11,
            None,
            values.iter().map(|v| v.as_bytes()),
        );
        assert_eq!(
            f.unwrap(),
            (Framing::Length(213), Lengths::Listed),
            "{values:?}"
        );
    }
}

#[test]
fn bad_or_conflicting_lengths_are_errors() {
    for values in [
        &["5", "6"][..],
        &["5, 6"],
        &["-1"],
        &["0x10"],
        &[""],
        &["99999999999999999999"],
    ] {
        let lengths = values.iter().map(|v| v.as_bytes());
        let f = Framing::of_response(
            &Method::POST,
            StatusCode::OK,
            Version::HTTP_11,
            None,
            lengths,
        );
        assert!(matches!(f, Err(HeadError::ContentLength)), "{values:?}");
    }
}

#[test]
fn a_length_body_is_cut_at_its_length_in_any_pieces() {
    let wire = b"hello, world";
    for cut in 0..wire.len() {
        let (data, trailers, ended) = decode_in_pieces(Framing::Length(12), wire, &[cut]).unwrap();
        assert_eq!(data, wire);
        assert!(trailers.is_none() && ended);
    }
    // Bytes past the length stay in the buffer (they are not the body's).
    let mut decoder = Framing::Length(3).decoder();
    let mut buf = BytesMut::from(&b"abcdef"[..]);
    assert!(
        matches!(decoder.decode(&mut buf).unwrap(), Decoded::Data(d) if d == Bytes::from_static(b"abc"))
    );
    assert!(decoder.is_done());
    assert_eq!(&buf[..], b"def");
    // Closed early: incomplete.
    let err = decode_in_pieces(Framing::Length(20), wire, &[]).unwrap_err();
    assert!(matches!(err, BodyError::Incomplete));
}

#[test]
fn a_close_delimited_body_ends_at_the_close() {
    let (data, _, ended) = decode_in_pieces(Framing::Close, b"all of it", &[3]).unwrap();
    assert_eq!(data, b"all of it");
    assert!(ended);
}

#[test]
fn chunked_bodies_decode_whole_at_every_cut() {
    let wire: &[u8] = b"5\r\nhello\r\n1;name=value\r\n,\r\nA \r\n0123456789\r\n0\r\n\r\n";
    for a in 0..wire.len() {
        for b in a..wire.len() {
            let (data, trailers, ended) =
                decode_in_pieces(Framing::Chunked, wire, &[a, b]).unwrap();
            assert_eq!(data, b"hello,0123456789", "cuts {a} {b}");
            assert!(trailers.is_none());
            assert!(ended);
        }
    }
}

#[test]
fn chunked_trailers_come_out_as_a_trailers_frame() {
    let wire: &[u8] = b"3\r\nabc\r\n0\r\nx-digest: sha-256=abc\r\nx-other: 1\r\n\r\n";
    for cut in 0..wire.len() {
        let (data, trailers, ended) = decode_in_pieces(Framing::Chunked, wire, &[cut]).unwrap();
        assert_eq!(data, b"abc");
        let trailers = trailers.expect("trailers");
        assert_eq!(trailers["x-digest"], "sha-256=abc");
        assert_eq!(trailers["x-other"], "1");
        assert!(ended);
    }
}

#[test]
fn broken_chunked_framing_is_an_error_not_a_guess() {
    for wire in [
        &b"zz\r\nab\r\n0\r\n\r\n"[..],
        b"\r\n",
        b"2\r\nabX\r\n0\r\n\r\n",
        b"2\nab\r\n0\r\n\r\n",
        b"2;ext\nab\r\n0\r\n\r\n",
        b"11111111111111111\r\n",
    ] {
        let got = decode_in_pieces(Framing::Chunked, wire, &[]);
        assert!(
            matches!(got, Err(BodyError::Chunked(_))),
            "{:?}: {got:?}",
            String::from_utf8_lossy(wire)
        );
    }
    // Cut off before the last chunk: incomplete.
    let got = decode_in_pieces(Framing::Chunked, b"3\r\nabc\r\n", &[]);
    assert!(matches!(got, Err(BodyError::Incomplete)), "{got:?}");
    // Extensions without end are cut off.
    let mut wire = b"1;".to_vec();
    wire.extend(std::iter::repeat_n(b'x', MAX_EXTENSIONS + 1));
    let got = decode_in_pieces(Framing::Chunked, &wire, &[]);
    assert!(matches!(got, Err(BodyError::Chunked(_))), "{got:?}");
}

#[test]
fn trailers_past_their_limit_are_an_error() {
    let mut wire = b"0\r\nx-big: ".to_vec();
    wire.extend(std::iter::repeat_n(b'a', MAX_TRAILERS));
    // Unterminated: refused once the buffer passes the limit.
    let got = decode_in_pieces(Framing::Chunked, &wire, &[]);
    assert!(matches!(got, Err(BodyError::Trailers)), "{got:?}");
    // Terminated, but longer than the limit: refused too.
    wire.extend_from_slice(b"\r\n\r\n");
    let got = decode_in_pieces(Framing::Chunked, &wire, &[]);
    assert!(matches!(got, Err(BodyError::Trailers)), "{got:?}");
}

#[test]
fn data_frames_are_slices_of_the_read_buffer() {
    let mut decoder = Framing::Chunked.decoder();
    let mut buf = BytesMut::from(&b"4\r\nabcd\r\n0\r\n\r\n"[..]);
    let start = buf.as_ptr() as usize;
    let Decoded::Data(data) = decoder.decode(&mut buf).unwrap() else {
        panic!("data first")
    };
    assert_eq!(&data[..], b"abcd");
    assert_eq!(data.as_ptr() as usize, start + 3, "no copy");
    assert!(matches!(decoder.decode(&mut buf).unwrap(), Decoded::End));
    assert!(decoder.is_done() && buf.is_empty());
}
