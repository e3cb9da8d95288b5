//! The response head as strata's own agent connection writes it, and the body's framing:
//! hyper's server encoding (hyper 1.x `proto/h1/role.rs`), kept wherever RFC 9112 leaves a
//! choice, so an agent sees the same bytes from either connection — lower-case names in the
//! map's order, `HTTP/1.1 200 OK`, a non-canonical reason phrase kept (`ReasonPhrase`),
//! `content-length` or `transfer-encoding: chunked` chosen from the body, `connection: close`
//! added when the connection ends after this exchange, and `date` when the answer has none.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use http::StatusCode;
use http::header;
use http::response::Parts;

use super::super::AnswerFields;
use super::super::attempt::ATTEMPTS_HEADER;
use super::has_close;
use crate::http::fields::{line, write_line};
use crate::http::length::parse_length;
use crate::http::names::Known;
use crate::log::decimal;

/// How the body goes on the wire (RFC 9112 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body: 204, 304, or an empty one.
    Empty,
    /// `Content-Length`: this many bytes are still owed.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What the body is known to be when the head is written (hyper's `BodyLength`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodySize {
    /// Ended already (`is_end_stream`).
    None,
    /// Exactly this long (`size_hint().exact()`).
    Known(u64),
    Unknown,
}

/// A head hyper would refuse to write, so this connection does not either: it closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::proxy) enum EncodeError {
    Informational,
    ContentLength,
}

/// The encoded head's consequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Encoded {
    pub framing: Framing,
    /// The connection ends after this exchange (`connection: close` was written).
    pub close: bool,
}

/// Writes the head of `parts` into `out`. `close`: the connection ends after this exchange
/// whatever the answer says (the request said so, or strata is shutting down).
///
/// `fields`: the upstream's fields as read (`http/fields.rs`), written after `parts`'
/// (empty then) as the map path would have put them in it — hop-by-hop ones and those
/// `Connection` names left out — with this hop's `Via` and `strata-attempts`.
pub(in crate::proxy) fn encode_head(
    out: &mut Vec<u8>,
    parts: &Parts,
    fields: Option<&AnswerFields>,
    body: BodySize,
    close: bool,
) -> Result<Encoded, EncodeError> {
    let status = parts.status;
    if status.is_informational() {
        return Err(EncodeError::Informational);
    }
    status_line(out, parts);
    let mut head = HeadWriter {
        out,
        body,
        close,
        framing: None,
        wrote_length: None,
        is_last: close,
        wrote_date: false,
        connection_open: false,
        wrote_close: false,
    };
    head.map_fields(parts)?;
    if let Some(answer) = fields {
        head.answer_fields(answer)?;
    }
    head.finish(status)
}

/// `HTTP/1.1 200 OK`, or the status with its reason (one the upstream sent kept).
fn status_line(out: &mut Vec<u8>, parts: &Parts) {
    let status = parts.status;
    let reason = parts.extensions.get::<hyper::ext::ReasonPhrase>();
    if status == StatusCode::OK && reason.is_none() {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        return;
    }
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    match reason {
        Some(reason) => out.extend_from_slice(reason.as_bytes()),
        // A reason must be written: many parsers expect one (hyper writes the same).
        None => out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes()),
    }
    out.extend_from_slice(b"\r\n");
}

/// A head being written, and what its fields said so far of the framing and the connection.
struct HeadWriter<'o> {
    out: &'o mut Vec<u8>,
    body: BodySize,
    close: bool,
    framing: Option<Framing>,
    wrote_length: Option<u64>,
    is_last: bool,
    wrote_date: bool,
    /// A `connection` line is being written (a name's values are joined on one line).
    connection_open: bool,
    wrote_close: bool,
}

impl HeadWriter<'_> {
    /// The map's fields, in its order.
    fn map_fields(&mut self, parts: &Parts) -> Result<(), EncodeError> {
        let mut last_name = None;
        for (name, value) in &parts.headers {
            let same = last_name == Some(name);
            if !same {
                self.end_connection();
            }
            last_name = Some(name);
            match *name {
                header::CONTENT_LENGTH => self.content_length(value.as_bytes())?,
                // Hop-by-hop (RFC 9110 §7.6.1): the proxy removes both from the upstream's
                // answer and its own answers carry neither, so the framing is always this
                // connection's.
                header::TRANSFER_ENCODING | header::TRAILER => {}
                header::CONNECTION => self.connection(value.as_bytes(), same),
                _ => {
                    self.wrote_date |= *name == header::DATE;
                    line(self.out, name.as_str().as_bytes(), value.as_bytes());
                }
            }
        }
        Ok(())
    }

    /// The upstream's fields as read: as the map path leaves them, `Connection` and the other
    /// hop-by-hop fields gone (so nothing here joins the `connection` line),
    /// `strata-attempts` replaced; then this hop's `Via` and `strata-attempts`.
    fn answer_fields(&mut self, answer: &AnswerFields) -> Result<(), EncodeError> {
        self.end_connection();
        let mut failed = Ok(());
        answer
            .fields
            .each_forwarded(|name, known, value| match known {
                Some(Known::ContentLength) => {
                    if failed.is_ok() {
                        failed = self.content_length(value);
                    }
                }
                None if answer.attempts > 1
                    && name.eq_ignore_ascii_case(ATTEMPTS_HEADER.as_bytes()) => {}
                _ => {
                    self.wrote_date |= known == Some(Known::Date);
                    write_line(self.out, name, known, value);
                }
            });
        failed?;
        line(self.out, b"via", answer.via.as_bytes());
        if answer.attempts > 1 {
            let mut digits = [0; 20];
            let attempts = decimal(u64::from(answer.attempts), &mut digits);
            line(self.out, ATTEMPTS_HEADER.as_bytes(), attempts);
        }
        Ok(())
    }

    fn content_length(&mut self, value: &[u8]) -> Result<(), EncodeError> {
        content_length(
            self.out,
            value,
            self.body,
            &mut self.wrote_length,
            &mut self.framing,
        )
    }

    /// A `connection` value, joined to the line open for the name's earlier values.
    fn connection(&mut self, tokens: &[u8], same: bool) {
        let closes = has_close(tokens);
        self.is_last |= closes;
        self.wrote_close |= closes;
        if same {
            self.out.extend_from_slice(b", ");
        } else {
            self.out.extend_from_slice(b"connection: ");
        }
        self.out.extend_from_slice(tokens);
        self.connection_open = true;
    }

    /// Ends an open `connection` line.
    fn end_connection(&mut self) {
        if self.connection_open {
            end_connection(self.out, self.close, self.wrote_close);
            self.connection_open = false;
        }
    }

    /// The connection's own lines — `connection: close`, the body's framing, `date` — and
    /// the blank line.
    fn finish(mut self, status: StatusCode) -> Result<Encoded, EncodeError> {
        if self.connection_open {
            self.end_connection();
        } else if self.close {
            self.out.extend_from_slice(b"connection: close\r\n");
        }
        // 204 and 304 carry no body, nor a length of their own (RFC 9110 §8.6, §15.3.5).
        let can_have_body = !matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED);
        let framing = match self.framing {
            Some(framing) => framing,
            None => body_framing(self.out, self.body, can_have_body),
        };
        let framing = match framing {
            _ if !can_have_body => Framing::Empty,
            Framing::Length(0) => Framing::Empty,
            framing => framing,
        };
        if !self.wrote_date {
            self.out.extend_from_slice(b"date: ");
            date(self.out);
            self.out.extend_from_slice(b"\r\n");
        }
        self.out.extend_from_slice(b"\r\n");
        Ok(Encoded {
            framing,
            close: self.is_last,
        })
    }
}

/// The framing the body itself decides, written, when the answer stated none: chunked for
/// a body of unknown length, its length when known, else empty.
fn body_framing(out: &mut Vec<u8>, body: BodySize, can_have_body: bool) -> Framing {
    match body {
        BodySize::Unknown if can_have_body => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            Framing::Chunked
        }
        BodySize::Known(length) if length > 0 && can_have_body => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(decimal(length, &mut [0; 20]));
            out.extend_from_slice(b"\r\n");
            Framing::Length(length)
        }
        _ => {
            if can_have_body {
                out.extend_from_slice(b"content-length: 0\r\n");
            }
            Framing::Empty
        }
    }
}

/// A `Content-Length` field: the first value is written and frames the body (checked against
/// the others when the body's size is unknown).
fn content_length(
    out: &mut Vec<u8>,
    value: &[u8],
    body: BodySize,
    wrote_length: &mut Option<u64>,
    framing: &mut Option<Framing>,
) -> Result<(), EncodeError> {
    match body {
        BodySize::Known(known) => {
            // The first value is written; the body's own length frames it (hyper trusts the
            // two to agree).
            if wrote_length.is_none() {
                line(out, b"content-length", value);
                *wrote_length = Some(known);
                *framing = Some(Framing::Length(known));
            }
        }
        BodySize::Unknown => {
            let length = parse_length(value).ok_or(EncodeError::ContentLength)?;
            match *wrote_length {
                Some(prior) if prior != length => return Err(EncodeError::ContentLength),
                Some(_) => {}
                None => {
                    line(out, b"content-length", value);
                    *wrote_length = Some(length);
                    *framing = Some(Framing::Length(length));
                }
            }
        }
        // An ended body: the length written below (`content-length: 0`) is the one.
        BodySize::None => {}
    }
    Ok(())
}

/// Ends the `connection` line, with `close` added when the connection ends here and the
/// answer did not say so itself (hyper's `enforce_version`).
fn end_connection(out: &mut Vec<u8>, close: bool, wrote_close: bool) {
    if close && !wrote_close {
        out.extend_from_slice(b", close");
    }
    out.extend_from_slice(b"\r\n");
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`: the IMF-fixdate (RFC 9110 §5.6.7).
const DATE_LEN: usize = 29;

thread_local! {
    /// The date of the second last written, and its text: formatted once a second per thread,
    /// as hyper caches it.
    static DATE: Cell<(u64, [u8; DATE_LEN])> = const { Cell::new((u64::MAX, [0; DATE_LEN])) };
}

/// Appends the current date.
fn date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (cached, mut text) = DATE.get();
    if cached != second {
        let formatted = httpdate::fmt_http_date(now);
        if formatted.len() == DATE_LEN {
            text.copy_from_slice(formatted.as_bytes());
            DATE.set((second, text));
        } else {
            out.extend_from_slice(formatted.as_bytes());
            return;
        }
    }
    out.extend_from_slice(&text);
}

/// Appends a chunk-size line (`1a3\r\n`, RFC 9112 §7.1).
pub(super) fn chunk_size(out: &mut Vec<u8>, len: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut n = len;
    loop {
        at -= 1;
        digits[at] = HEX[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
#[path = "response/tests.rs"]
mod tests;
