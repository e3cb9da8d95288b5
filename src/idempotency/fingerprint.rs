//! The request fingerprint: "same key + same request → same answer" (IETF
//! draft-ietf-httpapi-idempotency-key-header §2.2: the server MAY fingerprint the payload and
//! MUST NOT accept a key reused with a different one).
//!
//! The fingerprint covers the HTTP request target and the JSON body, except what differs
//! between honest repeats of one request:
//! - the JSON-RPC `id` (a retrying SDK sends a fresh one): its *value* is replaced by a
//!   placeholder, so a request and a notification (no `id`) still fingerprint differently;
//! - `params._meta` (progress tokens, client details; 2025-06-18 basic §_meta): dropped.
//!
//! Objects are hashed with their keys sorted, so member order does not matter; numbers as
//! serde_json prints them (`1` and `1.0` differ). The hash is one the caller names
//! ([`Hashing`]): a Redis record outlives the process that wrote it and is read by other
//! replicas and later builds, so its fingerprint is the one such records have always carried
//! (FNV-1a and SipHash-2-4 with a fixed key, written out in [`hash`]); a fingerprint that
//! stays in the process (the memory store, client retries) is XXH3-128, which takes a
//! fraction of the instructions. Neither can be std's `RandomState` (random per process) or
//! `DefaultHasher` (its algorithm is unspecified across Rust releases). Not cryptographic: a
//! colliding pair only fools the agent that owns the key (keys are scoped, see [`Key`]).
//!
//! [`Key`]: super::Key

mod hash;
mod text;
mod tree;

use super::jsonscan;
pub(super) use hash::Hash128;
pub use hash::Hashing;
#[cfg(test)]
pub(super) use hash::{SIP_KEY, SipHasher24};
use tree::Node;

/// Changes whenever the canonical form below changes, so old records stop matching (422)
/// instead of matching wrongly.
const DOMAIN: &[u8] = b"strata-idem-fp/1";

/// 128 bits identifying a request, minus its id and `_meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub u128);

/// A fingerprinted request and the raw text of its JSON-RPC ids, in request order (one for a
/// single request, one per request in a batch; notifications have none). The ids go into the
/// record so a repeat's answer can have its own ids put back ([`Record::replay_body`]).
///
/// [`Record::replay_body`]: super::Record::replay_body
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprinted {
    pub fingerprint: Fingerprint,
    pub ids: Vec<String>,
}

/// Fingerprints a request: `target` is the HTTP path and query, `body` the whole request body.
/// `None` when the body is not JSON (such a request is forwarded without idempotency).
pub fn fingerprint(target: &str, body: &[u8], hashing: Hashing) -> Option<Fingerprinted> {
    text::fingerprint(target, body, hashing).or_else(|| by_tree(target, body, hashing))
}

/// Fingerprints a body read as the text path's, with the hashing straight from the text.
#[cfg(test)]
pub(super) fn from_text(target: &str, body: &[u8], hashing: Hashing) -> Option<Fingerprinted> {
    text::fingerprint(target, body, hashing)
}

/// Fingerprints any JSON body through a parsed tree.
pub(super) fn by_tree(target: &str, body: &[u8], hashing: Hashing) -> Option<Fingerprinted> {
    let mut value = Node::parse(body)?;
    match &mut value {
        Node::Array(batch) => batch.iter_mut().for_each(strip),
        one => strip(one),
    }
    let mut h = Hash128::new(hashing);
    h.bytes(DOMAIN);
    h.string(target);
    canonical(&value, &mut h);
    // The raw id texts, as the agent wrote them, for splicing into replayed answers.
    let ids = jsonscan::messages(body)?
        .into_iter()
        .filter_map(|m| m.id)
        .filter_map(|r| std::str::from_utf8(&body[r]).ok().map(str::to_owned))
        .collect();
    Some(Fingerprinted {
        fingerprint: Fingerprint(h.finish()),
        ids,
    })
}

/// Replaces a message's `id` with a placeholder and drops `params._meta`.
fn strip(message: &mut Node<'_>) {
    if let Some(id) = message.member_mut("id") {
        *id = Node::Bool(true);
    }
    if let Some(params) = message.member_mut("params") {
        params.remove("_meta");
    }
}

/// Feeds a value in an unambiguous tagged, length-prefixed form; objects' members come
/// sorted by key from the parse. Recursion is bounded by serde_json's parser, which refuses
/// nesting deeper than 128.
fn canonical(v: &Node<'_>, h: &mut Hash128) {
    match v {
        Node::Null => h.bytes(b"n"),
        Node::Bool(true) => h.bytes(b"t"),
        Node::Bool(false) => h.bytes(b"f"),
        Node::Number(n) => {
            h.bytes(b"#");
            h.number(n);
        }
        Node::String(s) => {
            h.bytes(b"\"");
            h.string(s);
        }
        Node::Array(items) => {
            h.bytes(b"[");
            h.len(items.len());
            items.iter().for_each(|item| canonical(item, h));
        }
        Node::Object(members) => {
            h.bytes(b"{");
            h.len(members.len());
            for (k, v) in members {
                h.string(k);
                canonical(v, h);
            }
        }
    }
}

// === impl Fingerprint ===

impl Fingerprint {
    /// 32 lowercase hex digits (the form stored in Redis).
    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }

    pub fn from_hex(text: &[u8]) -> Option<Fingerprint> {
        // `from_str_radix` alone would also take a leading `+`.
        if text.len() != 32 || !text.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let text = std::str::from_utf8(text).ok()?;
        u128::from_str_radix(text, 16).ok().map(Fingerprint)
    }
}

/// A stable 128-bit hash of a byte string (key scopes, part of a Redis key's name).
pub(super) fn hash_bytes(bytes: &[u8]) -> u128 {
    let mut h = Hash128::new(Hashing::Shared);
    h.bytes(bytes);
    h.finish()
}
