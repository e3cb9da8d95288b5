//! How a response body is delimited on the upstream connection (RFC 9112 §6.3), and the
//! decoder that cuts it out of the read buffer as it arrives: no copy, each data frame is a
//! slice of what was read.

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};

use super::wire::{HeadError, MAX_HEADERS};
use crate::http::length::{Stated, stated_length};

/// A chunk line's extensions may take this much, all chunks together (hyper's limit, against
/// a server that sends extensions without end).
const MAX_EXTENSIONS: usize = 16 * 1024;

/// The trailer section may take this much.
const MAX_TRAILERS: usize = 16 * 1024;

/// How the body of one response is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body: a response to HEAD, 204, 304.
    Empty,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// Why a body could not be read whole.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("upstream closed the connection before the body's end")]
    Incomplete,
    #[error("invalid chunked framing from the upstream: {0}")]
    Chunked(&'static str),
    #[error("invalid trailers from the upstream")]
    Trailers,
    #[error("upstream connection: {0}")]
    Io(#[from] std::io::Error),
}

/// What the decoder found in the buffer.
#[derive(Debug)]
pub(super) enum Decoded {
    Data(Bytes),
    Trailers(HeaderMap),
    /// The body's end.
    End,
    /// Nothing more without another read.
    More,
}

/// Cuts one body out of the bytes read from the connection.
#[derive(Debug)]
pub(super) enum Decoder {
    Length(u64),
    Chunked(Chunked),
    Close,
    Done,
}

/// Where in the chunked coding the decoder is (RFC 9112 §7.1).
#[derive(Debug)]
pub(super) struct Chunked {
    state: State,
    /// The chunk's size, then what is left of its data.
    size: u64,
    digits: u8,
    extensions: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Size,
    SizeLws,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    Trailers,
}

// === impl Framing ===

impl Framing {
    /// The framing of a response to `method` (RFC 9112 §6.3), from its last
    /// `Transfer-Encoding` value and every `Content-Length` one, and what the
    /// `Content-Length` fields are to become.
    pub(super) fn of_response<'a>(
        method: &Method,
        status: StatusCode,
        version: Version,
        coding: Option<&[u8]>,
        lengths: impl Iterator<Item = &'a [u8]>,
    ) -> Result<(Framing, Lengths), HeadError> {
        if method == Method::HEAD
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            return Ok((Framing::Empty, Lengths::One));
        }
        if let Some(last) = coding {
            let chunked = last
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            // A final coding other than chunked, or any coding in HTTP/1.0 (§6.1: faulty
            // framing): the body runs to the connection's close.
            let framing = if chunked && version == Version::HTTP_11 {
                Framing::Chunked
            } else {
                Framing::Close
            };
            return Ok((framing, Lengths::Coded));
        }
        let stated = stated_length(lengths).map_err(|_| HeadError::ContentLength)?;
        let framing = match stated.length {
            Some(0) => Framing::Empty,
            Some(n) => Framing::Length(n),
            None => Framing::Close,
        };
        Ok((framing, Lengths::of(stated)))
    }

    pub(super) fn decoder(self) -> Decoder {
        match self {
            Framing::Empty => Decoder::Done,
            Framing::Length(n) => Decoder::Length(n),
            Framing::Chunked => Decoder::Chunked(Chunked {
                state: State::Size,
                size: 0,
                digits: 0,
                extensions: 0,
            }),
            Framing::Close => Decoder::Close,
        }
    }
}

/// What becomes of a response's `Content-Length` fields on the way to the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lengths {
    /// None, or one value: forwarded as they are.
    One,
    /// Stated more than once with equal values: forwarded as one (RFC 9110 §8.6).
    Listed,
    /// A transfer coding frames the body: removed (they do not describe it, and the agent's
    /// connection is framed anew).
    Coded,
}

impl Lengths {
    fn of(stated: Stated) -> Lengths {
        if stated.listed {
            Lengths::Listed
        } else {
            Lengths::One
        }
    }
}

// === impl Decoder ===

impl Decoder {
    /// The body's end was reached.
    pub(super) fn is_done(&self) -> bool {
        matches!(self, Decoder::Done)
    }

    /// Bytes still to come, when known.
    pub(super) fn remaining(&self) -> Option<u64> {
        match self {
            Decoder::Length(n) => Some(*n),
            Decoder::Done => Some(0),
            _ => None,
        }
    }

    /// Takes what `buf` holds of the body: a data frame, the trailers, or the end.
    pub(super) fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, BodyError> {
        match self {
            Decoder::Done => Ok(Decoded::End),
            Decoder::Length(left) => {
                if buf.is_empty() {
                    return Ok(Decoded::More);
                }
                let n = usize::try_from(*left).map_or(buf.len(), |left| left.min(buf.len()));
                *left -= n as u64;
                if *left == 0 {
                    *self = Decoder::Done;
                }
                Ok(Decoded::Data(buf.split_to(n).freeze()))
            }
            Decoder::Close => {
                if buf.is_empty() {
                    return Ok(Decoded::More);
                }
                Ok(Decoded::Data(buf.split().freeze()))
            }
            Decoder::Chunked(chunked) => {
                let decoded = chunked.decode(buf)?;
                if matches!(decoded, Decoded::End | Decoded::Trailers(_)) {
                    *self = Decoder::Done;
                }
                Ok(decoded)
            }
        }
    }

    /// The connection closed: the end, for a body that runs to the close; an error for one
    /// that was not whole.
    pub(super) fn at_eof(&mut self) -> Result<Decoded, BodyError> {
        match self {
            Decoder::Close | Decoder::Done => {
                *self = Decoder::Done;
                Ok(Decoded::End)
            }
            Decoder::Length(_) | Decoder::Chunked(_) => Err(BodyError::Incomplete),
        }
    }
}

// === impl Chunked ===

impl Chunked {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, BodyError> {
        loop {
            if self.state == State::Data {
                if buf.is_empty() {
                    return Ok(Decoded::More);
                }
                let n = usize::try_from(self.size).map_or(buf.len(), |s| s.min(buf.len()));
                self.size -= n as u64;
                if self.size == 0 {
                    self.state = State::DataCr;
                }
                return Ok(Decoded::Data(buf.split_to(n).freeze()));
            }
            if self.state == State::Trailers {
                return self.trailers(buf);
            }
            let Some(&b) = buf.first() else {
                return Ok(Decoded::More);
            };
            buf.advance(1);
            self.state = match (self.state, b) {
                (State::Size, _) if b.is_ascii_hexdigit() => {
                    if self.digits >= 16 {
                        return Err(BodyError::Chunked("chunk size too large"));
                    }
                    self.digits += 1;
                    self.size = self.size << 4 | u64::from(hex(b));
                    State::Size
                }
                (State::Size, b' ' | b'\t') if self.digits > 0 => State::SizeLws,
                (State::Size, b';') if self.digits > 0 => State::Extension,
                (State::Size, b'\r') if self.digits > 0 => State::SizeLf,
                (State::SizeLws, b' ' | b'\t') => State::SizeLws,
                (State::SizeLws, b';') => State::Extension,
                (State::SizeLws, b'\r') => State::SizeLf,
                (State::Extension, b'\r') => State::SizeLf,
                (State::Extension, b'\n') => {
                    return Err(BodyError::Chunked("bare LF in a chunk extension"));
                }
                (State::Extension, _) => {
                    self.extensions += 1;
                    if self.extensions > MAX_EXTENSIONS {
                        return Err(BodyError::Chunked("chunk extensions too long"));
                    }
                    State::Extension
                }
                (State::SizeLf, b'\n') if self.size == 0 => State::Trailers,
                (State::SizeLf, b'\n') => State::Data,
                (State::DataCr, b'\r') => State::DataLf,
                (State::DataLf, b'\n') => {
                    self.digits = 0;
                    State::Size
                }
                _ => return Err(BodyError::Chunked("unexpected byte")),
            };
        }
    }

    /// After the last chunk: an empty line, or trailer fields and an empty line.
    fn trailers(&mut self, buf: &mut BytesMut) -> Result<Decoded, BodyError> {
        if buf.starts_with(b"\r\n") {
            buf.advance(2);
            return Ok(Decoded::End);
        }
        if buf.len() < 2 {
            return Ok(Decoded::More);
        }
        let Some(end) = memchr::memmem::find(buf, b"\r\n\r\n") else {
            if buf.len() > MAX_TRAILERS {
                return Err(BodyError::Trailers);
            }
            return Ok(Decoded::More);
        };
        if end + 4 > MAX_TRAILERS {
            return Err(BodyError::Trailers);
        }
        let section = buf.split_to(end + 4);
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let parsed = httparse::parse_headers(&section, &mut fields);
        let Ok(httparse::Status::Complete((_, fields))) = parsed else {
            return Err(BodyError::Trailers);
        };
        let mut trailers = HeaderMap::with_capacity(fields.len());
        for field in fields.iter() {
            let name = HeaderName::from_bytes(field.name.as_bytes());
            let value = HeaderValue::from_bytes(field.value);
            let (Ok(name), Ok(value)) = (name, value) else {
                return Err(BodyError::Trailers);
            };
            trailers.append(name, value);
        }
        Ok(Decoded::Trailers(trailers))
    }
}

fn hex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
#[path = "framing/tests.rs"]
mod tests;
