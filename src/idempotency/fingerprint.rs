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
//! serde_json prints them (`1` and `1.0` differ). The hash must be stable across processes,
//! replicas and builds — a Redis record outlives the process that wrote it and is read by
//! other replicas — so it cannot use std's `RandomState` (random per process) or
//! `DefaultHasher` (its algorithm is unspecified across Rust releases). It is two independent
//! 64-bit hashes written out here: FNV-1a and SipHash-2-4 with a fixed key. Not cryptographic:
//! a colliding pair only fools the agent that owns the key (keys are scoped, see [`Key`]).
//!
//! [`Key`]: super::Key

use serde_json::Value;

use super::jsonscan;

/// Changes whenever the canonical form below changes, so old records stop matching (422)
/// instead of matching wrongly.
const DOMAIN: &[u8] = b"strata-idem-fp/1";

/// SipHash key: any fixed value works; it only has to be the same everywhere.
pub(super) const SIP_KEY: (u64, u64) = (0x7374_7261_7461_2d69, 0x6465_6d2d_6670_2f31);

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
pub fn fingerprint(target: &str, body: &[u8]) -> Option<Fingerprinted> {
    let mut value: Value = serde_json::from_slice(body).ok()?;
    match &mut value {
        Value::Array(batch) => batch.iter_mut().for_each(strip),
        one => strip(one),
    }
    let mut h = Hash128::new();
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
fn strip(message: &mut Value) {
    let Value::Object(m) = message else { return };
    if let Some(id) = m.get_mut("id") {
        *id = Value::Bool(true);
    }
    if let Some(Value::Object(params)) = m.get_mut("params") {
        params.remove("_meta");
    }
}

/// Feeds a value in an unambiguous tagged, length-prefixed form. Recursion is bounded by
/// serde_json's parser, which refuses nesting deeper than 128.
fn canonical(v: &Value, h: &mut Hash128) {
    match v {
        Value::Null => h.bytes(b"n"),
        Value::Bool(true) => h.bytes(b"t"),
        Value::Bool(false) => h.bytes(b"f"),
        Value::Number(n) => {
            h.bytes(b"#");
            h.string(&n.to_string());
        }
        Value::String(s) => {
            h.bytes(b"\"");
            h.string(s);
        }
        Value::Array(items) => {
            h.bytes(b"[");
            h.len(items.len());
            items.iter().for_each(|item| canonical(item, h));
        }
        Value::Object(map) => {
            h.bytes(b"{");
            h.len(map.len());
            // Sorted here rather than trusting the map type: serde_json keeps insertion order
            // if any crate in the build enables its `preserve_order` feature.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, v) in entries {
                h.string(k);
                canonical(v, h);
            }
        }
    }
}

// === the hashes ===

/// FNV-1a 64 and SipHash-2-4 side by side.
struct Hash128 {
    fnv: u64,
    sip: SipHasher24,
}

impl Hash128 {
    fn new() -> Hash128 {
        Hash128 {
            fnv: 0xcbf2_9ce4_8422_2325,
            sip: SipHasher24::new(SIP_KEY.0, SIP_KEY.1),
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.fnv = (self.fnv ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.sip.write(bytes);
    }

    fn len(&mut self, n: usize) {
        self.bytes(&(n as u64).to_le_bytes());
    }

    fn string(&mut self, s: &str) {
        self.len(s.len());
        self.bytes(s.as_bytes());
    }

    fn finish(self) -> u128 {
        (u128::from(self.fnv) << 64) | u128::from(self.sip.finish())
    }
}

/// SipHash-2-4 (Aumasson and Bernstein, 2012), streaming.
pub(super) struct SipHasher24 {
    v: [u64; 4],
    tail: u64,
    ntail: usize,
    length: usize,
}

impl SipHasher24 {
    pub(super) fn new(k0: u64, k1: u64) -> SipHasher24 {
        SipHasher24 {
            v: [
                k0 ^ 0x736f_6d65_7073_6575,
                k1 ^ 0x646f_7261_6e64_6f6d,
                k0 ^ 0x6c79_6765_6e65_7261,
                k1 ^ 0x7465_6462_7974_6573,
            ],
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }

    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    fn compress(&mut self, m: u64) {
        self.v[3] ^= m;
        Self::round(&mut self.v);
        Self::round(&mut self.v);
        self.v[0] ^= m;
    }

    /// Bytes in order, as one stream whatever the cuts between writes: a word is compressed
    /// once 8 bytes are in, little-endian (the tail a byte at a time, whole words at once).
    pub(super) fn write(&mut self, bytes: &[u8]) {
        self.length += bytes.len();
        let mut rest = bytes;
        while self.ntail != 0 {
            let Some((&b, more)) = rest.split_first() else {
                return;
            };
            self.push(b);
            rest = more;
        }
        let mut words = rest.chunks_exact(8);
        for word in &mut words {
            let mut m = [0u8; 8];
            m.copy_from_slice(word);
            self.compress(u64::from_le_bytes(m));
        }
        for &b in words.remainder() {
            self.push(b);
        }
    }

    /// One byte into the tail; a full tail is compressed.
    fn push(&mut self, b: u8) {
        self.tail |= u64::from(b) << (8 * self.ntail);
        self.ntail += 1;
        if self.ntail == 8 {
            let m = self.tail;
            self.compress(m);
            self.tail = 0;
            self.ntail = 0;
        }
    }

    pub(super) fn finish(mut self) -> u64 {
        let last = ((self.length as u64 & 0xff) << 56) | self.tail;
        self.compress(last);
        self.v[2] ^= 0xff;
        for _ in 0..4 {
            Self::round(&mut self.v);
        }
        self.v[0] ^ self.v[1] ^ self.v[2] ^ self.v[3]
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

/// A stable 128-bit hash of a byte string (key scopes).
pub(super) fn hash_bytes(bytes: &[u8]) -> u128 {
    let mut h = Hash128::new();
    h.bytes(bytes);
    h.finish()
}
