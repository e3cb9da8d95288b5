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
    folded_eq(name, spelled).then_some(known)
}

/// `name` lower-cased equals `lower` (same length, 4 to 20 bytes: every listed name).
/// `eq_ignore_ascii_case` goes a byte at a time (~10 instructions a byte, callgrind); this
/// compares eight bytes at a time, the last word overlapping the one before it.
fn folded_eq(name: &[u8], lower: &[u8]) -> bool {
    let len = name.len();
    if len != lower.len() || !(4..=20).contains(&len) {
        return false;
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
                    assert_eq!(known_name(&bytes), None, "{bytes:?}");
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
