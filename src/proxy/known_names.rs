//! The header names strata's own HTTP/1.1 parsers meet on nearly every call, resolved without
//! `HeaderName::from_bytes`.
//!
//! `from_bytes` lower-cases the name into a scratch buffer through a table, then matches it
//! against every standard name; a name outside that list (`mcp-session-id`,
//! `mcp-protocol-version`, …) is copied into a new allocation. For the dozen names an MCP call
//! carries, a match on the length and one case-insensitive compare gives the same
//! `HeaderName` — `http` spells every name in lower case, and so do these constants.

use http::header::{self, HeaderName};

use super::{
    IDEMPOTENCY_KEY, LAST_EVENT_ID, PROTOCOL_VERSION as MCP_PROTOCOL_VERSION,
    SESSION as MCP_SESSION_ID,
};

/// `name` as a `HeaderName`, when it is one of the names listed here (any case); `None`
/// otherwise (the caller then asks `HeaderName::from_bytes`).
pub(super) fn known_name(name: &[u8]) -> Option<HeaderName> {
    let (known, spelled): (HeaderName, &[u8]) = match name.len() {
        4 => match name[0] | 0x20 {
            b'h' => (header::HOST, b"host"),
            b'd' => (header::DATE, b"date"),
            _ => return None,
        },
        6 => match name[0] | 0x20 {
            b'a' => (header::ACCEPT, b"accept"),
            b'o' => (header::ORIGIN, b"origin"),
            b's' => (header::SERVER, b"server"),
            _ => return None,
        },
        10 => match name[0] | 0x20 {
            b'u' => (header::USER_AGENT, b"user-agent"),
            b'c' => (header::CONNECTION, b"connection"),
            _ => return None,
        },
        11 => (header::RETRY_AFTER, b"retry-after"),
        12 => (header::CONTENT_TYPE, b"content-type"),
        13 => match name[0] | 0x20 {
            b'a' => (header::AUTHORIZATION, b"authorization"),
            b'c' => (header::CACHE_CONTROL, b"cache-control"),
            b'l' => (LAST_EVENT_ID, b"last-event-id"),
            _ => return None,
        },
        14 => match name[0] | 0x20 {
            b'c' => (header::CONTENT_LENGTH, b"content-length"),
            b'm' => (MCP_SESSION_ID, b"mcp-session-id"),
            _ => return None,
        },
        15 => match name[0] | 0x20 {
            b'a' => (header::ACCEPT_ENCODING, b"accept-encoding"),
            b'i' => (IDEMPOTENCY_KEY, b"idempotency-key"),
            _ => return None,
        },
        17 => (header::TRANSFER_ENCODING, b"transfer-encoding"),
        20 => (MCP_PROTOCOL_VERSION, b"mcp-protocol-version"),
        _ => return None,
    };
    name.eq_ignore_ascii_case(spelled).then_some(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTED: [&str; 20] = [
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
                match known_name(spelled.as_bytes()) {
                    Some(known) => assert_eq!(Some(known), expected, "{spelled}"),
                    None => assert_eq!(name, "x-unlisted", "{spelled} is listed"),
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
            assert_eq!(known_name(other.as_bytes()), None, "{other}");
        }
        // A byte that only matches when case is folded wrongly: '@' | 0x20 == '`'.
        assert_eq!(known_name(b"Host\0"), None);
    }
}
