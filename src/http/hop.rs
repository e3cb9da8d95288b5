//! The hop rules (RFC 9110 §7.6.1): which header fields belong to one connection and are
//! never forwarded, and which fields `Connection` may add to them.
//!
//! One set of rules for every head strata passes on — a request or an answer, in `http`'s
//! map or as the fields were read — and for the fields an idempotency record keeps.
//!
//! `Connection` lists fields the sender meant for this hop only, and a proxy removes them.
//! It may not remove what frames or addresses the message itself: `Content-Length`,
//! `Transfer-Encoding` and `Host` (RFC 9112 §6, §3.2). A proxy that drops `Content-Length`
//! because `Connection` names it forwards a request without a length followed by its body,
//! which the server reads as a second request (request smuggling). Those names in
//! `Connection` are ignored; the framing the next hop gets is the one strata writes.

use crate::http::names::Known;

/// Fields that are never forwarded, whatever `Connection` says (lower case).
pub const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Fields `Connection` cannot remove: the message's framing and its target's host.
pub const FRAMING: [&str; 3] = ["content-length", "transfer-encoding", "host"];

/// Whether `name` (any case) is hop-by-hop. Every such name is a listed one
/// (`http/names.rs`), told by its length and first letter and one compare: cheaper than a
/// compare with each of the seven a byte at a time, and an upstream's
/// `Connection: keep-alive` is checked on every answer.
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    Known::of(name).is_some_and(Known::is_hop_by_hop)
}

/// Whether `name` (any case) frames or addresses the message.
pub fn is_framing(name: &[u8]) -> bool {
    Known::of(name).is_some_and(Known::is_framing)
}

/// The fields the `Connection` values name for removal besides the hop-by-hop ones (which go
/// anyway): each token once per value, as sent; framing fields never.
pub fn named_by_connection<'a>(
    values: impl Iterator<Item = &'a [u8]>,
) -> impl Iterator<Item = &'a [u8]> {
    values
        .flat_map(|value| value.split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|token| !token.is_empty() && !is_hop_by_hop(token) && !is_framing(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(values: &[&'static str]) -> Vec<&'static [u8]> {
        named_by_connection(values.iter().map(|v| v.as_bytes())).collect()
    }

    #[test]
    fn connection_never_names_framing_fields_away() {
        assert!(named(&["content-length"]).is_empty());
        assert!(named(&["Content-Length, HOST", " transfer-encoding "]).is_empty());
        // `close` is an option, not a field: naming it removes nothing.
        assert_eq!(named(&["keep-alive, close, Upgrade"]), [&b"close"[..]]);
    }

    #[test]
    fn connection_names_other_fields_as_sent() {
        assert_eq!(
            named(&["x-a, Content-Length", "X-B,,host, mcp-session-id"]),
            [&b"x-a"[..], b"X-B", b"mcp-session-id"]
        );
    }

    #[test]
    fn hop_by_hop_in_any_case() {
        assert!(is_hop_by_hop(b"Transfer-Encoding"));
        assert!(is_hop_by_hop(b"KEEP-ALIVE"));
        assert!(!is_hop_by_hop(b"content-length"));
        assert!(is_framing(b"Host"));
        assert!(!is_framing(b"hosts"));
    }

    #[test]
    fn every_listed_name_is_told_in_any_case_and_no_other() {
        for (list, is) in [
            (&HOP_BY_HOP[..], is_hop_by_hop as fn(&[u8]) -> bool),
            (&FRAMING[..], is_framing),
        ] {
            for name in list {
                assert!(is(name.as_bytes()), "{name}");
                assert!(is(name.to_ascii_uppercase().as_bytes()), "{name}");
                // The same length, one byte other: at the start, in the middle, at the end.
                for at in [0, name.len() / 2, name.len() - 1] {
                    let mut other = name.as_bytes().to_vec();
                    other[at] = b'x';
                    assert!(!is(&other), "{}", String::from_utf8_lossy(&other));
                }
            }
        }
        assert!(!is_hop_by_hop(b"host") && !is_framing(b"connection"));
    }
}
