//! The header names strata's own HTTP/1.1 parsers meet on nearly every call, resolved without
//! `HeaderName::from_bytes`.
//!
//! `from_bytes` lower-cases the name into a scratch buffer through a table, then matches it
//! against every standard name; a name outside that list (`mcp-session-id`,
//! `mcp-protocol-version`, …) is copied into a new allocation. For the dozen names an MCP call
//! carries, a match on the length and one case-insensitive compare gives the same
//! `HeaderName` — `http` spells every name in lower case, and so do these constants.

use http::header::{self, HeaderName};

/// The header an MCP session travels in (2025-03-26 … 2025-11-25 transports §Session
/// Management). Header names are case-insensitive; 2025-11-25 spells it `MCP-Session-Id`.
///
/// Names as `HeaderName` constants rather than strings: a lookup by `&str` parses the name
/// first (`http`'s `parse_hdr`), four or more on every call.
pub(crate) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub(crate) const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub(crate) const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// The IETF draft's header (draft-ietf-httpapi-idempotency-key-header).
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// Marks an answer replayed from an idempotency record (Stripe's `Idempotent-Replayed`).
pub(crate) const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// W3C Trace Context: the header strata sets toward the server when it propagates its
/// CLIENT span (`telemetry.propagate: header`).
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The names listed here. Each is known by its length and first letter, then one compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    Host,
    Date,
    Accept,
    Origin,
    Server,
    UserAgent,
    Connection,
    KeepAlive,
    RetryAfter,
    ContentType,
    Authorization,
    CacheControl,
    LastEventId,
    ContentLength,
    McpSessionId,
    AcceptEncoding,
    IdempotencyKey,
    XForwardedFor,
    TransferEncoding,
    McpProtocolVersion,
    ProxyConnection,
    Te,
    Trailer,
    Upgrade,
    /// W3C Trace Context (read only while OpenTelemetry export is on).
    Traceparent,
    Tracestate,
}

impl Known {
    /// `name`'s entry, when it is one of the names listed here (any case).
    pub(crate) fn of(name: &[u8]) -> Option<Known> {
        use Known::*;
        let first = name.first().map_or(0, |b| b | 0x20);
        let known = match (name.len(), first) {
            (2, _) => Te,
            (4, b'h') => Host,
            (4, b'd') => Date,
            (6, b'a') => Accept,
            (6, b'o') => Origin,
            (6, b's') => Server,
            (7, b't') => Trailer,
            (7, b'u') => Upgrade,
            (10, b'u') => UserAgent,
            (10, b'c') => Connection,
            (10, b'k') => KeepAlive,
            (11, b'r') => RetryAfter,
            (11, b't') => Traceparent,
            (10, b't') => Tracestate,
            (12, _) => ContentType,
            (13, b'a') => Authorization,
            (13, b'c') => CacheControl,
            (13, b'l') => LastEventId,
            (14, b'c') => ContentLength,
            (14, b'm') => McpSessionId,
            (15, b'a') => AcceptEncoding,
            (15, b'i') => IdempotencyKey,
            (15, b'x') => XForwardedFor,
            (16, _) => ProxyConnection,
            (17, _) => TransferEncoding,
            (20, _) => McpProtocolVersion,
            _ => return None,
        };
        folded_eq(name, known.spelled()).then_some(known)
    }

    /// The name in lower case, as `http` spells it.
    pub(crate) fn spelled(self) -> &'static [u8] {
        self.name_str().as_bytes()
    }

    fn name_str(self) -> &'static str {
        use Known::*;
        match self {
            Host => "host",
            Date => "date",
            Accept => "accept",
            Origin => "origin",
            Server => "server",
            UserAgent => "user-agent",
            Connection => "connection",
            KeepAlive => "keep-alive",
            RetryAfter => "retry-after",
            ContentType => "content-type",
            Authorization => "authorization",
            CacheControl => "cache-control",
            LastEventId => "last-event-id",
            ContentLength => "content-length",
            McpSessionId => "mcp-session-id",
            AcceptEncoding => "accept-encoding",
            IdempotencyKey => "idempotency-key",
            XForwardedFor => "x-forwarded-for",
            TransferEncoding => "transfer-encoding",
            McpProtocolVersion => "mcp-protocol-version",
            ProxyConnection => "proxy-connection",
            Te => "te",
            Trailer => "trailer",
            Upgrade => "upgrade",
            Traceparent => "traceparent",
            Tracestate => "tracestate",
        }
    }

    /// As a `HeaderName`.
    pub(crate) fn header_name(self) -> HeaderName {
        use Known::*;
        match self {
            Host => header::HOST,
            Date => header::DATE,
            Accept => header::ACCEPT,
            Origin => header::ORIGIN,
            Server => header::SERVER,
            UserAgent => header::USER_AGENT,
            Connection => header::CONNECTION,
            RetryAfter => header::RETRY_AFTER,
            ContentType => header::CONTENT_TYPE,
            Authorization => header::AUTHORIZATION,
            CacheControl => header::CACHE_CONTROL,
            LastEventId => LAST_EVENT_ID,
            ContentLength => header::CONTENT_LENGTH,
            McpSessionId => MCP_SESSION_ID,
            AcceptEncoding => header::ACCEPT_ENCODING,
            IdempotencyKey => IDEMPOTENCY_KEY,
            TransferEncoding => header::TRANSFER_ENCODING,
            McpProtocolVersion => MCP_PROTOCOL_VERSION,
            Te => header::TE,
            Trailer => header::TRAILER,
            Upgrade => header::UPGRADE,
            Traceparent => TRACEPARENT,
            KeepAlive | XForwardedFor | ProxyConnection | Tracestate => {
                HeaderName::from_static(self.name_str())
            }
        }
    }

    /// Hop-by-hop (`http::hop::HOP_BY_HOP`): never forwarded, whatever `Connection` says.
    pub(crate) fn is_hop_by_hop(self) -> bool {
        use Known::*;
        matches!(
            self,
            Connection | KeepAlive | ProxyConnection | Te | Trailer | TransferEncoding | Upgrade
        )
    }

    /// Frames or addresses the message (`http::hop::FRAMING`): `Connection` cannot remove it.
    pub(crate) fn is_framing(self) -> bool {
        matches!(
            self,
            Known::ContentLength | Known::TransferEncoding | Known::Host
        )
    }
}

/// `name` lower-cased equals `lower` (same length, at most 20 bytes: every listed name).
/// `eq_ignore_ascii_case` goes a byte at a time; this
/// compares eight bytes at a time, the last word overlapping the one before it.
fn folded_eq(name: &[u8], lower: &[u8]) -> bool {
    let len = name.len();
    if len != lower.len() || len > 20 {
        return false;
    }
    if len < 4 {
        return name.eq_ignore_ascii_case(lower);
    }
    if len < 8 {
        // Two 4-byte words, overlapping when the length is under 8.
        return word::<4>(name, 0) == word::<4>(lower, 0)
            && word::<4>(name, len - 4) == word::<4>(lower, len - 4);
    }
    let mut at = 0;
    loop {
        let at_last = at + 8 >= len;
        let from = if at_last { len - 8 } else { at };
        if word::<8>(name, from) != word::<8>(lower, from) {
            return false;
        }
        if at_last {
            return true;
        }
        at += 8;
    }
}

/// `N` bytes of `bytes` from `at`, ASCII upper-case letters lower-cased, as a number.
fn word<const N: usize>(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word[..N].copy_from_slice(&bytes[at..at + N]);
    let word = u64::from_le_bytes(word);
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    // Per byte, without a carry into the next: its high bit is set when the byte's low seven
    // bits are >= 'A' and > 'Z' respectively; a byte of 0x80 or more is left as it is.
    let low = word & (0x7f * ONES);
    let from_a = low + (0x80 - u64::from(b'A')) * ONES;
    let past_z = low + (0x80 - u64::from(b'Z') - 1) * ONES;
    let upper = from_a & !past_z & !word & (0x80 * ONES);
    word | (upper >> 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTED: [&str; 26] = [
        "te",
        "trailer",
        "upgrade",
        "keep-alive",
        "x-forwarded-for",
        "proxy-connection",
        "host",
        "date",
        "accept",
        "origin",
        "server",
        "user-agent",
        "connection",
        "retry-after",
        "content-type",
        "authorization",
        "cache-control",
        "last-event-id",
        "content-length",
        "mcp-session-id",
        "accept-encoding",
        "idempotency-key",
        "transfer-encoding",
        "mcp-protocol-version",
        "x-unlisted",
        "hosT",
    ];

    #[test]
    fn gives_what_from_bytes_gives() {
        for name in LISTED {
            for spelled in [name.to_owned(), name.to_ascii_uppercase()] {
                let expected = HeaderName::from_bytes(spelled.as_bytes()).ok();
                match Known::of(spelled.as_bytes()).map(Known::header_name) {
                    Some(known) => assert_eq!(Some(known), expected, "{spelled}"),
                    None => assert_eq!(name, "x-unlisted", "{spelled} is listed"),
                }
                if let Some(known) = Known::of(spelled.as_bytes()) {
                    assert_eq!(known.spelled(), name.to_ascii_lowercase().as_bytes());
                    assert_eq!(
                        known.is_hop_by_hop(),
                        crate::http::hop::HOP_BY_HOP.contains(&known.header_name().as_str()),
                        "{spelled}"
                    );
                    assert_eq!(
                        known.is_framing(),
                        crate::http::hop::FRAMING.contains(&known.header_name().as_str()),
                        "{spelled}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_name_of_a_listed_length_and_letter_is_not_taken_for_it() {
        // Same length and first letter as listed names, other bytes.
        for other in [
            "hxst",
            "accepx",
            "content-typo",
            "mcp-session-ix",
            "retry-afteR!",
            "",
        ] {
            assert_eq!(Known::of(other.as_bytes()), None, "{other}");
        }
        // Bytes that match only when case is folded wrongly ('\r' | 0x20 == '-', '@' | 0x20 ==
        // '`', 0xC8 & 0x7f == 'H'), at every place of the compare.
        for name in LISTED {
            for at in 0..name.len() {
                for wrong in [
                    b'\r',
                    b'@',
                    b'[',
                    0xC0 | (name.as_bytes()[at] & 0x3f),
                    0x80 | name.as_bytes()[at],
                ] {
                    let mut bytes = name.as_bytes().to_vec();
                    if bytes[at].eq_ignore_ascii_case(&wrong) {
                        continue;
                    }
                    bytes[at] = wrong;
                    assert_eq!(Known::of(&bytes), None, "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn folds_words_as_to_ascii_lowercase_does() {
        for b in 0..=255u8 {
            let bytes = [b; 8];
            let expected = u64::from_le_bytes([b.to_ascii_lowercase(); 8]);
            assert_eq!(word::<8>(&bytes, 0), expected, "{b:#x}");
        }
    }
}
