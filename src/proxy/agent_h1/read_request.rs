//! The request head reader on its own, fed in pieces, for the fuzz target
//! (`fuzz/fuzz_targets/agent_h1.rs`) and the unit tests.

use bytes::BytesMut;

use super::request::{self, HeadLimits, Parsed};

/// What [`read_request`] found.
#[doc(hidden)]
#[derive(Debug, PartialEq, Eq)]
pub enum ReadRequest {
    /// A head this connection serves: the request line's method and target, the fields in
    /// order, the body's length, and whether the connection closes after it.
    Served {
        method: String,
        target: String,
        fields: Vec<(String, Vec<u8>)>,
        /// The same fields as read for forwarding (`http/fields.rs`): names lower-cased,
        /// in the order they came (the map's groups each name's values at its first).
        as_read: Vec<(String, Vec<u8>)>,
        content_length: u64,
        close: bool,
    },
    /// Handed to hyper: at this head, or at the `http` types' refusal of its parts.
    HandOver,
    /// The bytes ended before a head did.
    Partial,
}

/// Reads `wire` as the connection reads a request head — fed `step` bytes at a time, under
/// `limits.max_header_bytes` and `limits.max_headers` — and builds the request it would
/// serve. For the fuzz target (`fuzz/fuzz_targets/agent_h1.rs`): any bytes, at any cuts, end
/// in one of [`ReadRequest`]'s answers, never a panic, and the cuts do not change which.
#[doc(hidden)]
pub fn read_request(wire: &[u8], step: usize, max_bytes: usize, max_fields: usize) -> ReadRequest {
    let limits = HeadLimits {
        max_bytes,
        max_fields,
    };
    let mut buf = BytesMut::new();
    let mut pieces = wire.chunks(step.max(1));
    let head = loop {
        if !buf.is_empty() {
            match request::parse(&buf, limits) {
                Parsed::Complete(head) => break head,
                Parsed::HandOver => return ReadRequest::HandOver,
                Parsed::Partial => {}
            }
        }
        match pieces.next() {
            Some(piece) => buf.extend_from_slice(piece),
            None => return ReadRequest::Partial,
        }
    };
    let bytes = buf.split_to(head.len).freeze();
    // A second reading of the same head, for its fields as read.
    let Parsed::Complete(mut again) = request::parse(&bytes, limits) else {
        return ReadRequest::HandOver;
    };
    let mut head = head;
    let Some(request) = head.request(&bytes) else {
        return ReadRequest::HandOver;
    };
    let as_read = match again.request_and_fields(bytes) {
        Ok((_, fields)) => fields
            .lines()
            .map(|(name, value)| {
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                (name, value.to_vec())
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    ReadRequest::Served {
        method: request.method().as_str().to_owned(),
        target: request.uri().to_string(),
        fields: request
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
            .collect(),
        as_read,
        content_length: head.content_length,
        close: head.close,
    }
}
