//! The recorded final answer of a keyed call, and the tee that builds it while the response
//! streams to the agent.
//!
//! What is kept: status, the end-to-end headers that describe the answer, the body, and the
//! original request's ids (so a repeat gets its own ids back). What is not kept, and why:
//! - hop-by-hop headers (RFC 9110 §7.6.1) and `Content-Length` (the replayed body's length
//!   changes when ids are spliced; hyper frames the replay itself);
//! - `Mcp-Session-Id` (assigned to the first call's session; a repeat may come on another
//!   session or replica — 2025-11-25 transports §Session Management), `Set-Cookie` (the first
//!   caller's state, often load-balancer affinity), `Date`/`Age` (stale on replay), `Via` and
//!   `strata-attempts` (strata adds its own on the way out).

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::http::fields::Headers;
use crate::http::hop::HOP_BY_HOP;
use crate::http::names::Known;

use super::codec;
use super::replace;

/// Response headers never recorded (lowercase), besides the hop-by-hop ones
/// ([`HOP_BY_HOP`]).
const NOT_RECORDED: [&str; 8] = [
    "content-length",
    "mcp-session-id",
    "set-cookie",
    "date",
    "age",
    "via",
    "strata-attempts",
    "x-strata-error",
];

/// A completed call's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub status: u16,
    /// End-to-end headers in the order received (lowercase names; see the module doc for
    /// what is left out).
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Bytes,
    /// The body is `text/event-stream` (ids are spliced per event), else JSON.
    pub sse: bool,
    /// The original request's JSON-RPC ids, raw JSON text, request order.
    pub ids: Vec<String>,
}

/// Whether an answer with this status is recorded. 2xx: the upstream answered (a JSON-RPC
/// error or `isError` result included — that is the call's answer). 500: it began executing
/// and failed; replaying it rather than re-running is the point of a key (Stripe records
/// 500s too). Everything else says the request was not processed — 4xx (401/403 before an
/// auth refresh, 404 for an expired session that the SDK re-initialises and re-sends),
/// 429, 502/503/504 — so it is released and the agent may try again with the same key.
pub fn recordable_status(status: u16) -> bool {
    (200..300).contains(&status) || status == 500
}

/// Whether a response header (its name in any case) is recorded.
pub fn keeps_header(name: &[u8]) -> bool {
    !NOT_RECORDED
        .iter()
        .chain(HOP_BY_HOP.iter())
        .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
}

// === impl Record ===

impl Record {
    /// The record of a complete answer held in memory. Prefer [`Recording`] on a stream.
    pub fn new(status: StatusCode, headers: &HeaderMap, body: Bytes, ids: Vec<String>) -> Record {
        Record::of(status, Headers::Map(headers), body, ids)
    }

    /// [`Record::new`] of a head however it was read.
    fn of(status: StatusCode, headers: Headers<'_>, body: Bytes, ids: Vec<String>) -> Record {
        let (headers, sse) = recorded_headers(headers);
        Record {
            status: status.as_u16(),
            headers,
            body,
            sse,
            ids,
        }
    }

    /// Bytes the record takes, counted against `max_record_bytes` and `max_bytes`: its
    /// encoded size, so the same limit holds in memory and in Redis.
    pub fn size(&self) -> usize {
        codec::encoded_len(self)
    }

    /// The recorded headers, for the replayed response (unparseable ones dropped).
    pub fn header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.headers.len());
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_bytes(value),
            ) {
                map.append(name, value);
            }
        }
        map
    }

    /// The body to replay to a repeat whose request ids are `new_ids` (raw JSON text, request
    /// order, as [`Fingerprinted::ids`]): the i-th original id is replaced by the i-th new one.
    /// The fingerprint matched, so both requests have the same shape and the same number of ids.
    ///
    /// [`Fingerprinted::ids`]: super::Fingerprinted::ids
    pub fn replay_body(&self, new_ids: &[String]) -> Bytes {
        let pairs: Vec<(&str, &str)> = self
            .ids
            .iter()
            .zip(new_ids)
            .map(|(old, new)| (old.as_str(), new.as_str()))
            .collect();
        replace::replace_ids(&self.body, self.sse, &pairs)
    }
}

/// The headers worth recording, and whether the body is an SSE stream: the end-to-end ones
/// a proxy passes on (the hop rules: `http/hop.rs`) less those [`keeps_header`] leaves out,
/// as read or from a map alike. Names are kept in lower case.
fn recorded_headers(headers: Headers<'_>) -> (Vec<(String, Vec<u8>)>, bool) {
    let mut kept = Vec::new();
    headers.each_forwarded(|name, value| {
        // Field names are tokens (RFC 9110 §5.1): ASCII, as both forms have checked.
        if keeps_header(name)
            && let Ok(name) = std::str::from_utf8(name)
        {
            kept.push((name.to_ascii_lowercase(), value.to_vec()));
        }
    });
    let sse = headers.get(Known::ContentType).is_some_and(|v| {
        let media = v.split(|&b| b == b';').next().unwrap_or_default();
        media
            .trim_ascii()
            .eq_ignore_ascii_case(b"text/event-stream")
    });
    (kept, sse)
}

/// Tees a response body into a record, up to a cap: past the cap it stops copying and frees
/// what it held (the answer is then not recorded, and the key released).
pub struct Recording {
    head: Record,
    body: BytesMut,
    /// Body bytes still allowed under the cap.
    room: usize,
    over: bool,
}

impl Recording {
    /// Starts a record of a response head; `cap` is `max_record_bytes` ([`Store::record_cap`]).
    ///
    /// [`Store::record_cap`]: super::Store::record_cap
    pub(crate) fn new(
        status: StatusCode,
        headers: Headers<'_>,
        ids: Vec<String>,
        cap: usize,
    ) -> Self {
        let head = Record::of(status, headers, Bytes::new(), ids);
        let used = head.size();
        Recording {
            room: cap.saturating_sub(used),
            over: used > cap,
            head,
            body: BytesMut::new(),
        }
    }

    /// Copies one body chunk, unless the record is already over its cap.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.over {
            return;
        }
        if chunk.len() > self.room {
            self.over = true;
            self.body = BytesMut::new();
            return;
        }
        self.room -= chunk.len();
        self.body.extend_from_slice(chunk);
    }

    /// The answer outgrew the cap: it will not be recorded.
    pub fn is_over(&self) -> bool {
        self.over
    }

    /// The record, unless it outgrew the cap.
    pub fn finish(self) -> Option<Record> {
        if self.over {
            return None;
        }
        Some(Record {
            body: self.body.freeze(),
            ..self.head
        })
    }
}
