//! A client's idempotency key, scoped to the client, and hashed once for the memory store.
//!
//! The memory store's map is keyed by what clients send, so its hash is keyed per process
//! (std's `RandomState`, SipHash-1-3), as std's maps are: a client cannot choose keys that
//! collide. The hash is taken once, when the key is read, and the map takes it as it is
//! ([`KeyHashed`]) on each of a call's lookups (claim, record, release).

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Arc, LazyLock};

use super::fingerprint;

/// Longest key accepted, in bytes (Stripe's limit; the IETF draft sets none).
pub const MAX_KEY_LEN: usize = 255;

/// The scope's 32 hex digits and the colon before a key.
const SCOPED_LEN: usize = 33;

/// Lower-case hex digits, by value.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// This process's keys for the key hash.
static SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);

/// A client's idempotency key, scoped: `<scope hash, 32 hex>:<key>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    text: Arc<str>,
    /// `SEED`'s hash of `text`.
    hash: u64,
}

/// The memory store's map hasher: a [`Key`]'s hash, as it was taken.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KeyHashed;

/// See [`KeyHashed`].
#[derive(Default)]
pub(super) struct TakenHash(u64);

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
        // `{scope:032x}:{v}`, written on the stack without the formatting machinery (a keyed
        // call makes one per call), then copied once into the key's own allocation.
        let scope = fingerprint::hash_bytes(scope);
        let mut buf = [0u8; SCOPED_LEN + MAX_KEY_LEN];
        for (pair, byte) in buf.chunks_exact_mut(2).zip(scope.to_be_bytes()) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0xf)];
        }
        buf[32] = b':';
        let len = SCOPED_LEN + v.len();
        buf.get_mut(SCOPED_LEN..len)?.copy_from_slice(v);
        let text = std::str::from_utf8(buf.get(..len)?).ok()?;
        let hash = SEED.hash_one(text);
        Some(Key {
            text: Arc::from(text),
            hash,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Equal keys have equal texts, so equal hashes.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

// === impl KeyHashed ===

impl BuildHasher for KeyHashed {
    type Hasher = TakenHash;

    fn build_hasher(&self) -> TakenHash {
        TakenHash(0)
    }
}

// === impl TakenHash ===

impl Hasher for TakenHash {
    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    /// Only a [`Key`]'s hash comes here (`write_u64`); other bytes are folded in all the same.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
