//! A head's header fields as strata's own HTTP/1.1 connections read them — the agent's
//! request (`agent_h1`), the upstream's answer to it (`h1_conns/wire.rs`): the head's bytes
//! and where each field is, its name looked up once (`http/names.rs`). A call's header reads
//! are then a scan of a few small entries, and the next hop's head is written from these
//! lines — no `http::HeaderMap` is built, searched or dropped, which would cost a name parse,
//! a value check and a hash per field, then a slice's count dropped per value, for the
//! request and again for the answer (measured in bench/README.md).
//!
//! Passed on as the map path passes them on (`forward.rs`): every field in the order it
//! came, names in lower case, values byte for byte; hop-by-hop fields (and those
//! `Connection` names) left out. A request's `X-Forwarded-For` is summed with this hop's
//! entry and its `Host` added or rewritten per `host_header`; an answer gets `Via` and
//! `strata-attempts` (`agent_h1/response.rs`). Fields as read are used for a POST that
//! strata's own agent connection read, with retries on and no `Idempotency-Key`
//! (`proxy/read_plan.rs`), and for that call's answer; a map is still built everywhere else:
//! hyper's server and client (h2 and TLS agents, streamed bodies), the idempotency path, a GET
//! or DELETE.

use bytes::Bytes;
use http::HeaderMap;
use http::header::{self, HeaderName, HeaderValue};

use super::hop;
use super::names::Known;
use crate::log::decimal;

/// Where a name or value lies in the head.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub at: u32,
    pub len: u32,
}

/// One field line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    pub name: Span,
    pub value: Span,
    pub known: Option<Known>,
}

impl Span {
    /// Where `part`, a slice of `head` (a parser's view of it), lies in `head`.
    pub(crate) fn within(head: &[u8], part: &[u8]) -> Span {
        Span {
            at: (part.as_ptr() as usize - head.as_ptr() as usize) as u32,
            len: part.len() as u32,
        }
    }
}

impl Field {
    /// The field a parser found at `name` and `value`, slices of `head`; its name looked up.
    pub(crate) fn within(head: &[u8], name: &[u8], value: &[u8]) -> Field {
        Field {
            name: Span::within(head, name),
            value: Span::within(head, value),
            known: Known::of(name),
        }
    }
}

/// A head's fields, over its bytes.
#[derive(Clone, Debug)]
pub(crate) struct HeadFields {
    head: Bytes,
    fields: Vec<Field>,
    /// For a request: the `Host` to send instead of the agent's (`forward::set_host`'s choice).
    host: Option<HeaderValue>,
}

/// A head's header fields, however they were read: `http`'s map, or the lines as read.
#[derive(Clone, Copy)]
pub(crate) enum Headers<'a> {
    Map(&'a HeaderMap),
    Own(&'a HeadFields),
}

impl<'a> Headers<'a> {
    /// The first value of a listed name.
    pub(crate) fn get(self, name: Known) -> Option<&'a [u8]> {
        match self {
            Headers::Map(map) => map.get(name.header_name()).map(HeaderValue::as_bytes),
            Headers::Own(fields) => fields.get(name),
        }
    }

    /// The first value of a listed name as text (`None` when it is not visible ASCII).
    pub(crate) fn get_str(self, name: Known) -> Option<&'a str> {
        match self {
            Headers::Map(map) => map.get(name.header_name()).and_then(|v| v.to_str().ok()),
            Headers::Own(fields) => fields.get_str(name),
        }
    }

    pub(crate) fn contains(self, name: Known) -> bool {
        self.get(name).is_some()
    }

    /// Whether a listed name appears more than once.
    pub(crate) fn repeats(self, name: Known) -> bool {
        match self {
            Headers::Map(map) => map.get_all(name.header_name()).iter().nth(1).is_some(),
            Headers::Own(fields) => fields.all(name).nth(1).is_some(),
        }
    }

    /// Whether every value of a listed name passes `f` (true when there is none).
    pub(crate) fn all(self, name: Known, f: impl Fn(&[u8]) -> bool) -> bool {
        match self {
            Headers::Map(map) => map
                .get_all(name.header_name())
                .iter()
                .all(|v| f(v.as_bytes())),
            Headers::Own(fields) => fields.all(name).all(f),
        }
    }

    /// Each field a proxy passes on, name and value, in order: the hop rules (`http/hop.rs`)
    /// applied to either form alike.
    pub(crate) fn each_forwarded(self, mut f: impl FnMut(&'a [u8], &'a [u8])) {
        let map = match self {
            Headers::Own(fields) => return fields.each_forwarded(|name, _, value| f(name, value)),
            Headers::Map(map) => map,
        };
        let values = map.get_all(header::CONNECTION).iter();
        let named: Vec<&[u8]> =
            hop::named_by_connection(values.map(HeaderValue::as_bytes)).collect();
        for (name, value) in map {
            let name = name.as_str().as_bytes();
            if hop::is_hop_by_hop(name) || named.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            f(name, value.as_bytes());
        }
    }
}

impl HeadFields {
    pub(crate) fn new(head: Bytes, fields: Vec<Field>) -> Self {
        HeadFields {
            head,
            fields,
            host: None,
        }
    }

    /// The fields of a block of field lines (each ending in CRLF, then a blank line). For
    /// tests: strata's connections build theirs as they parse a head.
    #[cfg(test)]
    pub(crate) fn of_field_lines(lines: &'static [u8]) -> Self {
        let mut slots = [httparse::EMPTY_HEADER; 32];
        let parsed = match httparse::parse_headers(lines, &mut slots) {
            Ok(httparse::Status::Complete((_, parsed))) => parsed,
            other => panic!("not whole field lines: {other:?}"),
        };
        let fields = parsed
            .iter()
            .map(|f| Field::within(lines, f.name.as_bytes(), f.value))
            .collect();
        HeadFields::new(Bytes::from_static(lines), fields)
    }

    /// The length of the head the fields were read from: room enough to write them again.
    pub(crate) fn head_len(&self) -> usize {
        self.head.len()
    }

    /// `Host` as `forward::set_host` would set it: the upstream's authority when `rewrite`,
    /// else the agent's own, or `fallback` when it sent none.
    pub(crate) fn set_host(&mut self, rewrite: bool, fallback: &str) {
        if rewrite || !self.contains(Known::Host) {
            self.host = HeaderValue::from_str(fallback).ok();
        }
    }

    fn bytes(&self, span: Span) -> &[u8] {
        &self.head[span.at as usize..(span.at + span.len) as usize]
    }

    /// Every field as read: its name as sent, its value.
    pub(crate) fn lines(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|f| (self.bytes(f.name), self.bytes(f.value)))
    }

    /// Every value of a listed name, in order.
    pub(crate) fn all(&self, name: Known) -> impl DoubleEndedIterator<Item = &[u8]> {
        self.fields
            .iter()
            .filter(move |f| f.known == Some(name))
            .map(|f| self.bytes(f.value))
    }

    /// The first value of a listed name.
    pub(crate) fn get(&self, name: Known) -> Option<&[u8]> {
        self.all(name).next()
    }

    /// The first value of a listed name, as text (`None` when it is not visible ASCII).
    pub(crate) fn get_str(&self, name: Known) -> Option<&str> {
        self.get(name).and_then(text)
    }

    pub(crate) fn contains(&self, name: Known) -> bool {
        self.get(name).is_some()
    }

    /// The fields as `http`'s map, for code that needs one. `None` for a field the `http`
    /// types refuse (never, for what `httparse` accepted: same name and value rules, and a
    /// name within `http`'s length, which the answer's parser checks).
    pub(crate) fn to_map(&self) -> Option<HeaderMap> {
        self.to_map_with_room(0)
    }

    /// [`to_map`](Self::to_map), with room for `more` fields: a full map grows by rehashing
    /// every entry.
    pub(crate) fn to_map_with_room(&self, more: usize) -> Option<HeaderMap> {
        let mut map = HeaderMap::with_capacity(self.fields.len() + more);
        for field in &self.fields {
            let name = match field.known {
                Some(known) => known.header_name(),
                None => HeaderName::from_bytes(self.bytes(field.name)).ok()?,
            };
            let value = self
                .head
                .slice(field.value.at as usize..(field.value.at + field.value.len) as usize);
            map.append(name, HeaderValue::from_maybe_shared(value).ok()?);
        }
        Some(map)
    }

    /// Writes the fields to forward as `name: value` lines: all but hop-by-hop ones, those
    /// `Connection` names and `X-Forwarded-For` (the hop writes the sum); `Host` as
    /// [`set_host`](Self::set_host) chose (where the agent's first was, or last); the first
    /// `Content-Length` as `length`, the body this hop writes, and no other. Whether a
    /// `Content-Length` was written.
    pub(crate) fn write_forwarded(&self, out: &mut Vec<u8>, length: u64) -> bool {
        // A replaced `Host` takes the first one's place; any other goes.
        let replacing = self.host.is_some();
        let mut host = self.host.as_ref().map(HeaderValue::as_bytes);
        let mut wrote_length = false;
        self.each_forwarded(|name, known, value| match known {
            Some(Known::XForwardedFor) => {}
            Some(Known::Host) if replacing => {
                if let Some(value) = host.take() {
                    line(out, b"host", value);
                }
            }
            Some(Known::ContentLength) => {
                if !wrote_length {
                    line(out, b"content-length", decimal(length, &mut [0; 20]));
                }
                wrote_length = true;
            }
            _ => write_line(out, name, known, value),
        });
        if let Some(value) = host {
            line(out, b"host", value);
        }
        wrote_length
    }

    /// `f(name as sent, its entry, value)` for each field a proxy passes on, in order: all
    /// but hop-by-hop ones and those `Connection` names (what `forward::apply_hop_rules`
    /// leaves in a map).
    pub(crate) fn each_forwarded<'a>(
        &'a self,
        mut f: impl FnMut(&'a [u8], Option<Known>, &'a [u8]),
    ) {
        let named = self.connection_named();
        for field in &self.fields {
            if field.known.is_some_and(Known::is_hop_by_hop) {
                continue;
            }
            let name = self.bytes(field.name);
            if !named.is_empty() && named.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            f(name, field.known, self.bytes(field.value));
        }
    }

    /// Leaves out every field of a listed name (a `Content-Length` beside
    /// `Transfer-Encoding`: RFC 9112 §6.3).
    pub(crate) fn remove(&mut self, name: Known) {
        self.fields.retain(|f| f.known != Some(name));
    }

    /// The names `Connection` lists for removal (`http/hop.rs`: never a framing field);
    /// none, without an allocation, for the usual `keep-alive` or `close`.
    fn connection_named(&self) -> Vec<&[u8]> {
        hop::named_by_connection(self.all(Known::Connection)).collect()
    }
}

/// `name: value` with the name in lower case, as `http` spells names: a listed one as
/// spelled, another lower-cased as it is copied.
pub(crate) fn write_line(out: &mut Vec<u8>, name: &[u8], known: Option<Known>, value: &[u8]) {
    match known {
        Some(known) => line(out, known.spelled(), value),
        None => lower_line(out, name, value),
    }
}

/// `name: value` as given (both heads' encoders, `h1_conns/wire.rs` and
/// `agent_h1/response.rs`).
pub(crate) fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    // Room once for the line, not per piece.
    out.reserve(name.len() + value.len() + 4);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// A line whose name is written in lower case, as `http` spells names.
fn lower_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let from = out.len();
    line(out, name, value);
    out[from..from + name.len()].make_ascii_lowercase();
}

/// A field's value as text: `None` when it is not visible ASCII and tabs
/// (`HeaderValue::to_str`'s rule).
pub(crate) fn text(value: &[u8]) -> Option<&str> {
    if !visible(value) {
        return None;
    }
    std::str::from_utf8(value).ok()
}

/// `HeaderValue::to_str`'s rule: visible ASCII and tabs. Every byte is checked, without
/// stopping at the first that fails, so the loop runs in vector registers.
fn visible(value: &[u8]) -> bool {
    value.iter().fold(true, |ok, &b| {
        ok & ((b == b'\t') | (0x20..0x7f).contains(&b))
    })
}

#[cfg(test)]
#[path = "fields/tests.rs"]
mod tests;
