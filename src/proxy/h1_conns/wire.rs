//! HTTP/1.1 heads on the upstream connection: the request head written from the forwarded
//! `http::request::Parts`, the response head parsed in place (RFC 9112).
//!
//! Written for strata's own upstream connections (`h1_conns.rs`), with hyper's client
//! behaviour where the RFC leaves a choice, so nothing an agent sees changes: names go out as
//! `http` spells them (lower case), values byte for byte; a body of known length gets a
//! `Content-Length` when the agent's head had none; interim (1xx) responses are skipped; a
//! non-canonical reason phrase is kept (hyper's `ReasonPhrase` extension, which its server
//! writes back out); obsolete line folding, a space before a colon, more than
//! [`MAX_HEADERS`] fields or a head past [`MAX_HEAD`] are errors (502 to the agent).

use std::mem::MaybeUninit;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode, Version};

use super::framing::{Framing, Lengths};
use crate::http::fields::{Field, HeadFields, line};
use crate::http::forward::{Hop, X_FORWARDED_FOR};
use crate::http::names::Known;
use crate::log::decimal;

/// Fields a response head may have (hyper's default).
pub(super) const MAX_HEADERS: usize = 100;

/// The longest header name `http` takes (its `MAX_HEADER_NAME_LEN`).
const MAX_NAME: usize = (1 << 16) - 1;

/// Bytes a response head may take (hyper's default read-buffer limit).
pub(super) const MAX_HEAD: usize = 8192 + 4096 * 100;

/// Why a response head could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("invalid response head: {0}")]
    Parse(#[from] httparse::Error),
    #[error("response head over {MAX_HEAD} bytes")]
    TooLarge,
    #[error("invalid response header {0:?}")]
    Header(String),
    #[error("invalid response status {0}")]
    Status(u16),
    #[error("conflicting or invalid Content-Length")]
    ContentLength,
    #[error("a switch of protocols (101) is not proxied")]
    Upgrade,
}

/// A parsed response head: what the agent gets, how its body is framed, and whether the
/// connection may carry another request afterwards.
pub(super) struct Head {
    /// Without a header map when the fields were kept as read (`fields`).
    pub response: Response<()>,
    pub fields: Option<HeadFields>,
    pub framing: Framing,
    pub keep_alive: bool,
}

/// A request head's fields: `http`'s map (hop-by-hop fields already removed, `Host` set), or
/// the agent's lines as read (both done as they are written: `http/fields.rs`).
pub(in crate::proxy) enum Fields<'a> {
    Map(&'a HeaderMap),
    AsRead(&'a HeadFields),
}

/// Writes the request head: `METHOD target HTTP/1.1`, every header as it is, this hop's
/// `Via` and `X-Forwarded-For` (the latter the sum of the head's own and the agent's).
///
/// The body's framing is this connection's: the body is known whole, so `Content-Length`
/// says `body_len`, where the agent's stood or at the end (its `Transfer-Encoding` was
/// removed as hop-by-hop). Never the agent's value as read: a length that is not the body's
/// would leave part of it to be read as another request.
pub(in crate::proxy) fn encode_request(
    out: &mut Vec<u8>,
    method: &Method,
    target: &str,
    fields: Fields<'_>,
    hop: &Hop<'_>,
    body_len: usize,
) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let wrote_length = match fields {
        Fields::Map(headers) => {
            let mut wrote_length = false;
            for (name, value) in headers {
                if name == X_FORWARDED_FOR {
                    continue;
                }
                if name == header::CONTENT_LENGTH {
                    if !wrote_length {
                        content_length(out, body_len);
                    }
                    wrote_length = true;
                    continue;
                }
                line(out, name.as_str().as_bytes(), value.as_bytes());
            }
            let prior = headers.get_all(X_FORWARDED_FOR);
            hop.write(prior.iter().map(HeaderValue::as_bytes), out);
            wrote_length
        }
        Fields::AsRead(fields) => {
            let wrote_length = fields.write_forwarded(out, body_len as u64);
            hop.write(fields.all(Known::XForwardedFor), out);
            wrote_length
        }
    };
    // RFC 9110 §8.6: a request whose method gives content a meaning says its length, even 0.
    if !wrote_length && (body_len > 0 || has_content(method)) {
        content_length(out, body_len);
    }
    out.extend_from_slice(b"\r\n");
}

/// `content-length: {len}`.
fn content_length(out: &mut Vec<u8>, len: usize) {
    line(out, b"content-length", decimal(len as u64, &mut [0; 20]));
}

/// Methods whose request content has a defined meaning (RFC 9110 §9.3).
fn has_content(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

/// Parses a response head at the front of `buf`. `Ok(None)`: not whole yet (read more).
/// An interim (1xx) response is consumed and skipped; the head returned is the final one.
/// The head's bytes are taken off `buf`; header values are slices of them. `as_read`: the
/// fields are kept as read (`http/fields.rs`) rather than put in the response's map.
pub(super) fn parse_response(
    buf: &mut BytesMut,
    request_method: &Method,
    as_read: bool,
) -> Result<Option<Head>, HeadError> {
    loop {
        // Uninitialised slots: an initialised array of a hundred fields costs more to fill
        // than the whole parse.
        let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut []);
        let config = httparse::ParserConfig::default();
        let len = match config.parse_response_with_uninit_headers(&mut parsed, buf, &mut fields)? {
            httparse::Status::Complete(len) => len,
            httparse::Status::Partial if buf.len() > MAX_HEAD => return Err(HeadError::TooLarge),
            httparse::Status::Partial => return Ok(None),
        };
        let code = parsed.code.unwrap_or(0);
        if (100..200).contains(&code) {
            if code == 101 {
                return Err(HeadError::Upgrade);
            }
            // 100 Continue, 103 Early Hints: not the answer.
            buf.advance(len);
            continue;
        }
        let status = StatusCode::from_u16(code).map_err(|_| HeadError::Status(code))?;
        let version = match parsed.version {
            Some(0) => Version::HTTP_10,
            _ => Version::HTTP_11,
        };
        let reason = parsed.reason.unwrap_or("");
        let reason_differs = !reason.is_empty() && status.canonical_reason() != Some(reason);
        let reason = reason_differs.then(|| Bytes::copy_from_slice(reason.as_bytes()));
        let mut fields = Vec::with_capacity(parsed.headers.len());
        for field in parsed.headers.iter() {
            let name = field.name.as_bytes();
            // The one name `httparse` takes and `http` refuses.
            if name.len() > MAX_NAME {
                return Err(HeadError::Header(
                    String::from_utf8_lossy(name).into_owned(),
                ));
            }
            fields.push(Field::within(buf, name, field.value));
        }
        // The values are slices of the head, cut off the buffer (the offsets stay).
        let mut fields = HeadFields::new(buf.split_to(len).freeze(), fields);
        let coding = fields.all(Known::TransferEncoding).next_back();
        let lengths = fields.all(Known::ContentLength);
        let (framing, lengths) =
            Framing::of_response(request_method, status, version, coding, lengths)?;
        // A listed length is made one in the map (`forward::apply_hop_rules`): the fields as
        // read are forwarded as they came.
        let as_read = as_read && lengths != Lengths::Listed;
        if lengths == Lengths::Coded {
            fields.remove(Known::ContentLength);
        }
        let keep_alive = keeps_alive(version, fields.all(Known::Connection))
            && !matches!(framing, Framing::Close);
        let mut response = response_of(status, version, reason);
        let fields = if as_read {
            Some(fields)
        } else {
            // Room for what the proxy adds (`Via`, `strata-attempts`).
            let map = fields
                .to_map_with_room(2)
                .ok_or_else(|| HeadError::Header("a field the `http` types refuse".to_owned()))?;
            *response.headers_mut() = map;
            None
        };
        return Ok(Some(Head {
            response,
            fields,
            framing,
            keep_alive,
        }));
    }
}

/// A response without headers; a reason phrase other than the status's own is kept (hyper's
/// `ReasonPhrase`, which its server and strata's agent connection write back out).
fn response_of(status: StatusCode, version: Version, reason: Option<Bytes>) -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = status;
    *response.version_mut() = version;
    if let Some(reason) = reason
        && let Ok(phrase) = hyper::ext::ReasonPhrase::try_from(reason)
    {
        response.extensions_mut().insert(phrase);
    }
    response
}

/// HTTP/1.1 stays open unless `Connection: close`; HTTP/1.0 only with `keep-alive`
/// (RFC 9112 §9.3).
fn keeps_alive<'a>(version: Version, connection: impl Iterator<Item = &'a [u8]>) -> bool {
    let mut close = false;
    let mut keep = false;
    for value in connection {
        for token in value.split(|&b| b == b',') {
            let token = token.trim_ascii();
            close |= token.eq_ignore_ascii_case(b"close");
            keep |= token.eq_ignore_ascii_case(b"keep-alive");
        }
    }
    match version {
        Version::HTTP_10 => keep && !close,
        _ => !close,
    }
}

#[cfg(test)]
#[path = "wire/tests.rs"]
mod tests;
