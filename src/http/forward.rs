//! Head rewriting for both directions. Everything not named here passes unchanged:
//! `Mcp-Session-Id`, `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`,
//! `Last-Event-ID`, `Authorization`, `Accept`, cookies, and every unknown header.
//!
//! Rules (RFC 9110 §7.6.1 Connection, §7.6.3 Via; de-facto X-Forwarded-For):
//! - the hop rules (`http/hop.rs`): `Connection` and every header it names — never
//!   `Content-Length`, `Transfer-Encoding` or `Host` — `Keep-Alive`, `Proxy-Connection`,
//!   `TE`, `Trailer`, `Transfer-Encoding` and `Upgrade` are removed, and the body is framed
//!   anew by the connection that writes it;
//! - `Via: <version> strata` is appended (both directions);
//! - `X-Forwarded-For` gets the agent's address appended (requests).
//! - `Host` is kept by default: MCP servers check `Host`/`Origin` against DNS rebinding
//!   (2025-11-25 transports §Security Warning), and a proxy that rewrites it switches that
//!   defence off. `host_header: upstream` rewrites it to the upstream's authority, as nginx does.

use std::fmt::Write as _;
use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::Authority;
use http::{Uri, Version};

use crate::http::hop;
use crate::http::length::{InvalidLength, stated_length};

/// Applies the hop rules (`http/hop.rs`) to a head about to be forwarded: hop-by-hop fields
/// and those `Connection` names go (never a framing field); a `Content-Length` beside
/// `Transfer-Encoding` goes (the coding frames the body and the next hop's framing is
/// written anew: RFC 9112 §6.3); equal `Content-Length` values, listed or repeated, become
/// one (RFC 9110 §8.6). Different ones are an error: the message has no one length.
pub(crate) fn apply_hop_rules(headers: &mut HeaderMap) -> Result<(), InvalidLength> {
    // One pass over the names first: most messages carry at most `Connection: keep-alive`,
    // and removing seven names by string (a parse and a hash each) cost more than the rest
    // of the head rewriting.
    let mut doomed: Vec<HeaderName> = Vec::new();
    let mut coded = false;
    let mut has_length = false;
    for name in headers.keys() {
        if *name == header::CONTENT_LENGTH {
            has_length = true;
        } else if hop::HOP_BY_HOP.contains(&name.as_str()) {
            // (`http`'s names are lower case: an exact compare.)
            coded |= *name == header::TRANSFER_ENCODING;
            doomed.push(name.clone());
        }
    }
    if has_length {
        if coded {
            doomed.push(header::CONTENT_LENGTH);
        } else {
            one_length(headers)?;
        }
    }
    if doomed.is_empty() {
        return Ok(());
    }
    let named: Vec<HeaderName> = hop::named_by_connection(
        headers
            .get_all(header::CONNECTION)
            .iter()
            .map(HeaderValue::as_bytes),
    )
    .filter_map(|name| HeaderName::from_bytes(name).ok())
    .collect();
    doomed.extend(named);
    for name in doomed {
        headers.remove(name);
    }
    Ok(())
}

/// `Content-Length` as one value: a list or a repeated field of equal values is written
/// once; different values are an error.
fn one_length(headers: &mut HeaderMap) -> Result<(), InvalidLength> {
    let stated = stated_length(
        headers
            .get_all(header::CONTENT_LENGTH)
            .iter()
            .map(HeaderValue::as_bytes),
    )?;
    if let (true, Some(length)) = (stated.listed, stated.length) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    Ok(())
}

/// Gives every header value its own small allocation. hyper parses header values as slices
/// of the connection's read buffer (8 KiB, growing to ~400 KiB after large bodies), and an h2
/// peer's HPACK encoder keeps recently sent values in its dynamic table for as long as its
/// connection lives: forwarded as they are, each kept value would pin a whole read buffer of
/// the other connection. Found by the soak: without the copies, strata's RSS on long-lived h2
/// agent connections grows without bound (~14 KB per 150 KB response, ~0.3 KB per small one).
/// Done only for heads going out on an h2 connection: hyper's HTTP/1.1 encoder drops the
/// values once the head is written, so there the copies would be work for nothing.
pub(crate) fn own_values(headers: &mut HeaderMap) {
    for value in headers.values_mut() {
        // Every value hyper accepted is a valid `HeaderValue`; on the impossible failure the
        // original is kept (correct, merely pinning).
        if let Ok(mut owned) = HeaderValue::from_bytes(value.as_bytes()) {
            owned.set_sensitive(value.is_sensitive());
            *value = owned;
        }
    }
}

/// Appends `Via` for this hop.
pub(crate) fn add_via(headers: &mut HeaderMap, version: Version) {
    headers.append(header::VIA, HeaderValue::from_static(via(version)));
}

/// This hop's `Via` entry for a message that arrived in `version`.
pub(crate) fn via(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "0.9 strata",
        Version::HTTP_10 => "1.0 strata",
        Version::HTTP_2 => "2 strata",
        Version::HTTP_3 => "3 strata",
        _ => "1.1 strata",
    }
}

/// What this hop adds to a request's head: `Via` and the agent's `X-Forwarded-For` entry.
/// Kept beside the head rather than put in its map: strata's own upstream connection writes
/// them as it encodes the head (`h1_conns/wire.rs`), where two more entries in the agent's
/// map would make it grow — a rehash of every entry, on every call.
///
/// It borrows the agent's entry from its [`Peer`]: a `HeaderValue` clone is a reference
/// count taken and given back, two atomic operations a call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hop<'a> {
    via: &'static str,
    forwarded_for: &'a HeaderValue,
}

impl<'a> Hop<'a> {
    pub(crate) fn new(version: Version, agent: &'a Peer) -> Hop<'a> {
        Hop {
            via: via(version),
            forwarded_for: &agent.forwarded_for,
        }
    }

    /// Into the map, for a head that goes out through hyper.
    pub(crate) fn apply(&self, headers: &mut HeaderMap) {
        headers.append(header::VIA, HeaderValue::from_static(self.via));
        add_forwarded_for(headers, self.forwarded_for);
    }

    /// `Via`, and `X-Forwarded-For` with the agent's address after any the head had (the
    /// head's own `X-Forwarded-For` lines are left out by the caller: this is their sum).
    pub(crate) fn write<'p>(&self, prior: impl Iterator<Item = &'p [u8]>, out: &mut Vec<u8>) {
        out.extend_from_slice(b"via: ");
        out.extend_from_slice(self.via.as_bytes());
        out.extend_from_slice(b"\r\nx-forwarded-for: ");
        for prior in prior.filter(|v| !v.is_empty()) {
            out.extend_from_slice(prior);
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(self.forwarded_for.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The agent at the other end of a connection, as each of its requests needs it.
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The address as an `X-Forwarded-For` entry, formatted once per connection rather than
    /// on every call.
    forwarded_for: HeaderValue,
}

impl Peer {
    pub fn new(addr: SocketAddr) -> Peer {
        let mut text = String::with_capacity(48);
        let _ = write!(text, "{}", addr.ip());
        let forwarded_for =
            HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static("unknown"));
        Peer {
            addr,
            forwarded_for,
        }
    }
}

/// Appends the agent's address to `X-Forwarded-For` (one list, comma separated).
fn add_forwarded_for(headers: &mut HeaderMap, ip: &HeaderValue) {
    let Some(prior) = headers.get(X_FORWARDED_FOR).filter(|v| !v.is_empty()) else {
        headers.insert(X_FORWARDED_FOR, ip.clone());
        return;
    };
    // One allocation, handed to the header value as is.
    let mut value = Vec::with_capacity(prior.len() + 2 + ip.len());
    value.extend_from_slice(prior.as_bytes());
    value.extend_from_slice(b", ");
    value.extend_from_slice(ip.as_bytes());
    if let Ok(value) = HeaderValue::try_from(value) {
        headers.insert(X_FORWARDED_FOR, value);
    }
}

/// Sets `Host` for the upstream request. An h2 agent sends `:authority` instead of `Host`;
/// the upstream (often h1) needs a `Host`, so it is made from the agent's authority.
pub(crate) fn set_host(
    headers: &mut HeaderMap,
    agent_uri: &Uri,
    upstream: &Authority,
    rewrite: bool,
) {
    if rewrite {
        if let Ok(v) = HeaderValue::from_str(upstream.as_str()) {
            headers.insert(header::HOST, v);
        }
        return;
    }
    if !headers.contains_key(header::HOST) {
        let authority = agent_uri.authority().unwrap_or(upstream);
        if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
            headers.insert(header::HOST, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_hop_by_hop_and_named() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        h.insert("x-secret-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("te", HeaderValue::from_static("trailers"));
        h.insert("mcp-session-id", HeaderValue::from_static("abc"));
        h.insert("authorization", HeaderValue::from_static("Bearer t"));
        apply_hop_rules(&mut h).unwrap();
        assert_eq!(h.len(), 2);
        assert!(h.contains_key("mcp-session-id"));
        assert!(h.contains_key("authorization"));

        // Only `Connection` itself: removed, with what it names (any case).
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("Keep-Alive, X-Other"),
        );
        h.insert("x-other", HeaderValue::from_static("1"));
        h.insert("upgrade", HeaderValue::from_static("h2c"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        apply_hop_rules(&mut h).unwrap();
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["accept"]);

        // None at all: untouched.
        let mut h = HeaderMap::new();
        h.insert("x-other", HeaderValue::from_static("1"));
        apply_hop_rules(&mut h).unwrap();
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn connection_never_removes_framing_fields() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("content-length, Host, transfer-encoding, x-a"),
        );
        h.insert("content-length", HeaderValue::from_static("45"));
        h.insert("host", HeaderValue::from_static("probe.local"));
        h.insert("x-a", HeaderValue::from_static("1"));
        apply_hop_rules(&mut h).unwrap();
        let mut left: Vec<_> = h.iter().map(|(k, v)| (k.as_str(), v.as_bytes())).collect();
        left.sort();
        assert_eq!(
            left,
            [("content-length", &b"45"[..]), ("host", b"probe.local")]
        );
    }

    #[test]
    fn a_length_beside_a_coding_goes_with_it() {
        let mut h = HeaderMap::new();
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("content-length", HeaderValue::from_static("45"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        apply_hop_rules(&mut h).unwrap();
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["accept"]);
    }

    #[test]
    fn listed_lengths_become_one_and_different_ones_are_refused() {
        let mut h = HeaderMap::new();
        h.insert("content-length", HeaderValue::from_static("213, 213"));
        apply_hop_rules(&mut h).unwrap();
        assert_eq!(
            h.get_all("content-length").iter().collect::<Vec<_>>(),
            ["213"]
        );

        let mut h = HeaderMap::new();
        h.append("content-length", HeaderValue::from_static("7"));
        h.append("content-length", HeaderValue::from_static("7"));
        apply_hop_rules(&mut h).unwrap();
        assert_eq!(
            h.get_all("content-length").iter().collect::<Vec<_>>(),
            ["7"]
        );

        for values in [&["213, 214"][..], &["7", "8"], &["x"]] {
            let mut h = HeaderMap::new();
            for v in values {
                h.append("content-length", HeaderValue::from_static(v));
            }
            assert_eq!(apply_hop_rules(&mut h), Err(InvalidLength), "{values:?}");
        }
    }

    #[test]
    fn owned_values_share_nothing_with_the_read_buffer() {
        let buffer = bytes::Bytes::from_static(b"text/event-stream; charset=utf-8 secret");
        let range = buffer.as_ptr_range();
        let mut h = HeaderMap::new();
        let slice = HeaderValue::from_maybe_shared(buffer.slice(..17)).unwrap();
        h.insert("content-type", slice);
        let mut secret = HeaderValue::from_maybe_shared(buffer.slice(33..)).unwrap();
        secret.set_sensitive(true);
        h.append("x-token", secret.clone());
        h.append("x-token", HeaderValue::from_static("second"));
        assert!(range.contains(&h["content-type"].as_bytes().as_ptr()));
        own_values(&mut h);
        for value in h.values() {
            assert!(!range.contains(&value.as_bytes().as_ptr()), "{value:?}");
        }
        assert_eq!(h["content-type"], "text/event-stream");
        let tokens: Vec<_> = h.get_all("x-token").iter().collect();
        assert_eq!(tokens, [&secret, &HeaderValue::from_static("second")]);
        assert!(tokens[0].is_sensitive());
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        let peer = |ip: &str| Peer::new(SocketAddr::new(ip.parse().unwrap(), 1));
        let hop = |h: &mut HeaderMap, ip: &str| Hop::new(Version::HTTP_11, &peer(ip)).apply(h);
        hop(&mut h, "10.0.0.1");
        assert_eq!(h["x-forwarded-for"], "10.0.0.1");
        hop(&mut h, "::1");
        hop(&mut h, "127.0.0.1");
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, ::1, 127.0.0.1");
        assert_eq!(h.get_all("via").iter().count(), 3);
        // An empty prior value is replaced, not extended.
        h.insert("x-forwarded-for", HeaderValue::from_static(""));
        hop(&mut h, "10.0.0.2");
        assert_eq!(h["x-forwarded-for"], "10.0.0.2");
    }

    #[test]
    fn hop_lines_written_into_a_head_say_what_the_map_would() {
        let agent = Peer::new(SocketAddr::new("10.0.0.9".parse().unwrap(), 1));
        let mut out = Vec::new();
        Hop::new(Version::HTTP_2, &agent).write(std::iter::empty(), &mut out);
        assert_eq!(out, b"via: 2 strata\r\nx-forwarded-for: 10.0.0.9\r\n");
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", HeaderValue::from_static("1.1.1.1"));
        h.append("x-forwarded-for", HeaderValue::from_static(""));
        h.append(
            "x-forwarded-for",
            HeaderValue::from_static("2.2.2.2, 3.3.3.3"),
        );
        let mut out = Vec::new();
        Hop::new(Version::HTTP_11, &agent).write(
            h.get_all("x-forwarded-for")
                .iter()
                .map(HeaderValue::as_bytes),
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "via: 1.1 strata\r\nx-forwarded-for: 1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.9\r\n"
        );
    }

    #[test]
    fn host_kept_or_rewritten() {
        let up: Authority = "127.0.0.1:8000".parse().unwrap();
        let uri: Uri = "/mcp".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("agent.example:7000"));
        set_host(&mut h, &uri, &up, false);
        assert_eq!(h["host"], "agent.example:7000");
        set_host(&mut h, &uri, &up, true);
        assert_eq!(h["host"], "127.0.0.1:8000");
        let h2: Uri = "https://svc.example/mcp".parse().unwrap();
        let mut h = HeaderMap::new();
        set_host(&mut h, &h2, &up, false);
        assert_eq!(h["host"], "svc.example");
    }
}
