//! An agent's HTTP/1.1 request head, parsed in place (`httparse`, as hyper does), and whether
//! strata's own connection serves it or hands the connection to hyper.
//!
//! Served here: the requests an MCP agent sends — `POST`, `GET` and `DELETE` in HTTP/1.1, in
//! origin form, whose body is framed by one `Content-Length` or absent. Everything else is
//! handed over before a byte of it is consumed, and hyper answers it as it did before this
//! connection existed: `Transfer-Encoding` (a chunked request body), `Expect`, `Upgrade`,
//! HTTP/1.0, other methods, absolute-form targets, repeated `Content-Length` fields, a head
//! over `limits.max_header_bytes` or `limits.max_headers` (hyper's 431), and anything
//! malformed (hyper's 400).

use std::mem::MaybeUninit;

use bytes::Bytes;
use http::{Method, Request, Uri, Version};

use super::has_close;
use crate::http::fields::{Field, HeadFields, Span};
use crate::http::length::parse_length;
use crate::http::names::Known;

/// Most header fields parsed in place; a head with more (and a larger `limits.max_headers`)
/// is hyper's.
pub(super) const MAX_FIELDS: usize = 100;

/// The limits a head is checked against (`limits.*`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadLimits {
    pub max_bytes: usize,
    pub max_fields: usize,
}

/// A complete head this connection serves, as offsets into the read buffer: the buffer may
/// move while the body is read.
#[derive(Debug)]
pub(in crate::proxy) struct Head {
    /// The head's length, blank line included.
    pub len: usize,
    method: Method,
    target: Span,
    fields: Vec<Field>,
    /// The body's length (0 without `Content-Length`).
    pub content_length: u64,
    /// `Connection: close`: the connection ends after this exchange (RFC 9112 §9.6).
    pub close: bool,
    /// An `Idempotency-Key` field is present (its body goes into the replay buffer).
    pub idempotency_key: bool,
}

/// What the buffer holds.
#[derive(Debug)]
pub(in crate::proxy) enum Parsed {
    Complete(Head),
    /// More bytes needed.
    Partial,
    /// Not one this connection serves: hyper takes the connection from here.
    HandOver,
}

/// Parses the head at the start of `buf`.
pub(in crate::proxy) fn parse(buf: &[u8], limits: HeadLimits) -> Parsed {
    // Uninitialised slots, as for the upstream's heads (`h1_conns/wire.rs`).
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let slots = &mut slots[..limits.max_fields.clamp(1, MAX_FIELDS)];
    let mut parsed = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut parsed,
        buf,
        slots,
    ) {
        Ok(httparse::Status::Complete(len)) if len <= limits.max_bytes => len,
        Ok(httparse::Status::Partial) if buf.len() < limits.max_bytes => return Parsed::Partial,
        // Too large, too many fields (hyper's limit may be higher), or malformed.
        Ok(_) | Err(_) => return Parsed::HandOver,
    };
    let method = match parsed.method.map(str::as_bytes) {
        Some(b"POST") => Method::POST,
        Some(b"GET") => Method::GET,
        Some(b"DELETE") => Method::DELETE,
        _ => return Parsed::HandOver,
    };
    let (Some(1), Some(path)) = (parsed.version, parsed.path) else {
        return Parsed::HandOver;
    };
    if !path.starts_with('/') {
        return Parsed::HandOver;
    }
    let mut head = Head {
        len,
        method,
        target: Span::within(buf, path.as_bytes()),
        fields: Vec::with_capacity(parsed.headers.len()),
        content_length: 0,
        close: false,
        idempotency_key: false,
    };
    let mut content_length = None;
    for field in parsed.headers.iter() {
        let name = field.name.as_bytes();
        let read = Field::within(buf, name, field.value);
        match read.known {
            Some(Known::ContentLength) => {
                if content_length.is_some() {
                    return Parsed::HandOver;
                }
                let Some(length) = parse_length(field.value) else {
                    return Parsed::HandOver;
                };
                content_length = Some(length);
            }
            Some(Known::TransferEncoding | Known::Upgrade) => return Parsed::HandOver,
            None if name.eq_ignore_ascii_case(b"expect") => return Parsed::HandOver,
            Some(Known::Connection) => head.close |= has_close(field.value),
            Some(Known::IdempotencyKey) => head.idempotency_key = true,
            _ => {}
        }
        head.fields.push(read);
    }
    head.content_length = content_length.unwrap_or(0);
    Parsed::Complete(head)
}

impl Head {
    /// The request, its header values slices of `head` (the head's bytes, cut off the
    /// buffer). `None` for a target or a field the `http` types refuse: hyper then answers.
    /// The fields are taken from this head (the rest of it stays).
    pub(super) fn request(&mut self, head: &Bytes) -> Option<Request<()>> {
        let mut request = self.request_line(head)?;
        *request.headers_mut() = self.fields(head.clone()).to_map()?;
        Some(request)
    }

    /// The request without its header map, and its fields as read (`http/fields.rs`), taken
    /// from this head, which they keep (moved: a clone is a reference count up and down);
    /// the head back when the `http` types refuse its target.
    pub(in crate::proxy) fn request_and_fields(
        &mut self,
        head: Bytes,
    ) -> Result<(Request<()>, HeadFields), Bytes> {
        match self.request_line(&head) {
            Some(request) => Ok((request, self.fields(head))),
            None => Err(head),
        }
    }

    pub(super) fn method(&self) -> &Method {
        &self.method
    }

    fn request_line(&self, head: &Bytes) -> Option<Request<()>> {
        let target =
            head.slice(self.target.at as usize..(self.target.at + self.target.len) as usize);
        let uri = Uri::from_maybe_shared(target).ok()?;
        let mut request = Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = uri;
        *request.version_mut() = Version::HTTP_11;
        Some(request)
    }

    fn fields(&mut self, head: Bytes) -> HeadFields {
        HeadFields::new(head, std::mem::take(&mut self.fields))
    }
}

#[cfg(test)]
#[path = "request/tests.rs"]
mod tests;
