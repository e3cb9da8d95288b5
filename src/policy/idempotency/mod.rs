//! Idempotency keys: the first completed answer to a keyed call answers its repeats
//! (IETF draft-ietf-httpapi-idempotency-key-header; Stripe's "Idempotent requests").
//!
//! Same key + same request (its [`Fingerprint`], which ignores the JSON-RPC id and `_meta`)
//! → the recorded answer, with the repeat's own ids put in; same key + a different request →
//! 422; a repeat while the first call still runs → 409. Records expire after `ttl`; the memory
//! store is bounded by entries and bytes, the Redis store by Redis.

mod codec;
mod fingerprint;
mod jsonscan;
mod record;
mod replace;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

pub use fingerprint::{Fingerprint, Fingerprinted, fingerprint};
pub use record::{Record, Recording, keeps_header, recordable_status};
pub use replace::{replace_id, replace_ids};

/// Longest key accepted, in bytes (Stripe's limit; the IETF draft sets none).
pub const MAX_KEY_LEN: usize = 255;

/// A client's idempotency key, scoped: `<scope hash, 32 hex>:<key>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(Arc<str>);

// === impl Key ===

impl Key {
    /// A key from the `Idempotency-Key` header value. The draft makes it a Structured Field
    /// String (`"…"`, RFC 9651 §3.3.3); most clients send it bare, so both are taken and the
    /// quotes dropped. `scope` is whatever separates clients (may be empty); it is hashed.
    /// `None` when empty, longer than [`MAX_KEY_LEN`], or not printable ASCII.
    pub fn new(header_value: &[u8], scope: &[u8]) -> Option<Key> {
        let v = header_value.trim_ascii();
        let v = match v {
            [b'"', inner @ .., b'"'] => inner,
            v => v,
        };
        if v.is_empty() || v.len() > MAX_KEY_LEN || !v.iter().all(|b| (0x20..0x7f).contains(b)) {
            return None;
        }
        let v = std::str::from_utf8(v).ok()?;
        let scope = fingerprint::hash_bytes(scope);
        Some(Key(format!("{scope:032x}:{v}").into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
