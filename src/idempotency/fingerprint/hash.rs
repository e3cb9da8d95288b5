//! The hashes behind a fingerprint ([`Hashing`]): for the Redis store FNV-1a and SipHash-2-4
//! with a fixed key, written out here because they must give the value records already stored
//! carry; XXH3-128 for fingerprints that never leave the process.

use std::fmt::{self, Write as _};

use xxhash_rust::xxh3::{Xxh3Default, xxh3_128};

/// SipHash key: any fixed value works; it only has to be the same everywhere.
pub(in crate::idempotency) const SIP_KEY: (u64, u64) =
    (0x7374_7261_7461_2d69, 0x6465_6d2d_6670_2f31);

/// How many bytes of the stream are gathered before the hash takes them: the whole stream of
/// a tools/call with a few arguments, which XXH3 then hashes at once.
const RUN: usize = 512;

/// Which 128-bit hash a fingerprint is taken with. Both are stable (the same value in every
/// process and build); they differ in who reads the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hashing {
    /// FNV-1a 64 and SipHash-2-4 with a fixed key, side by side: the fingerprint Redis records
    /// carry (`strata-idem/1`), which a record written by another replica or an earlier build
    /// must still match.
    Shared,
    /// XXH3-128: a fingerprint that never leaves the process (the memory store, client
    /// retries). Sixteen bytes a step where FNV-1a takes one.
    InProcess,
}

/// A 128-bit hash over one stream of bytes. A fingerprint's stream is many short writes (a
/// one-byte tag, an eight-byte length, a short key); they are gathered into runs, and the hash
/// takes a run at once. Every hash here is streaming, so where the runs are cut changes none.
pub(in crate::idempotency) struct Hash128 {
    streams: Streams,
    pending: [u8; RUN],
    used: usize,
}

/// The hashes' states.
enum Streams {
    /// FNV-1a a byte at a time as it must, SipHash in whole words.
    Shared { fnv: u64, sip: SipHasher24 },
    /// XXH3's streaming state, made when a second run begins: a stream of one run (the usual
    /// request) is hashed at once, as XXH3 defines the same value for both.
    InProcess(Option<Box<Xxh3Default>>),
}

impl Streams {
    fn absorb(&mut self, bytes: &[u8]) {
        match self {
            Streams::Shared { fnv, sip } => {
                *fnv = fnv_1a(*fnv, bytes);
                sip.write(bytes);
            }
            Streams::InProcess(state) => state
                .get_or_insert_with(|| Box::new(Xxh3Default::new()))
                .update(bytes),
        }
    }

    /// The 128-bit value of everything absorbed.
    fn digest(self) -> u128 {
        match self {
            Streams::Shared { fnv, sip } => (u128::from(fnv) << 64) | u128::from(sip.finish()),
            Streams::InProcess(None) => xxh3_128(&[]),
            Streams::InProcess(Some(state)) => state.digest128(),
        }
    }
}

impl Hash128 {
    pub(in crate::idempotency) fn new(hashing: Hashing) -> Hash128 {
        let streams = match hashing {
            Hashing::Shared => Streams::Shared {
                fnv: 0xcbf2_9ce4_8422_2325,
                sip: SipHasher24::new(SIP_KEY.0, SIP_KEY.1),
            },
            Hashing::InProcess => Streams::InProcess(None),
        };
        Hash128 {
            streams,
            pending: [0; RUN],
            used: 0,
        }
    }

    pub(in crate::idempotency) fn bytes(&mut self, bytes: &[u8]) {
        let end = self.used + bytes.len();
        if let Some(to) = self.pending.get_mut(self.used..end) {
            to.copy_from_slice(bytes);
            self.used = end;
            return;
        }
        self.flush();
        match self.pending.get_mut(..bytes.len()) {
            Some(to) => {
                to.copy_from_slice(bytes);
                self.used = bytes.len();
            }
            None => self.streams.absorb(bytes),
        }
    }

    /// The gathered run into the hash.
    fn flush(&mut self) {
        let run = self.pending.get(..self.used).unwrap_or_default();
        self.streams.absorb(run);
        self.used = 0;
    }

    pub(in crate::idempotency) fn len(&mut self, n: usize) {
        self.bytes(&(n as u64).to_le_bytes());
    }

    pub(in crate::idempotency) fn string(&mut self, s: &str) {
        self.len(s.len());
        self.bytes(s.as_bytes());
    }

    /// A number's text as `serde_json` prints it, length-prefixed like [`Hash128::string`];
    /// written into a buffer on the stack (no number prints longer than 24 bytes: a u64 or
    /// an i64 in 20 at most, an f64 in ryu's shortest form).
    pub(in crate::idempotency) fn number(&mut self, n: &serde_json::Number) {
        let mut text = NumberText::new();
        // Writing to `NumberText` fails only past its end, which no number reaches; a
        // number cut short would still hash, just not as its whole text.
        let _ = write!(text, "{n}");
        let text = text.as_bytes();
        self.len(text.len());
        self.bytes(text);
    }

    pub(in crate::idempotency) fn finish(mut self) -> u128 {
        if let Streams::InProcess(None) = self.streams {
            // A stream of one run: hashed at once, no streaming state made.
            return xxh3_128(self.pending.get(..self.used).unwrap_or_default());
        }
        self.flush();
        self.streams.digest()
    }
}

/// FNV-1a 64 from state `h` over `bytes`.
fn fnv_1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A number's printed text, held on the stack.
struct NumberText {
    buf: [u8; 40],
    len: usize,
}

impl NumberText {
    fn new() -> NumberText {
        NumberText {
            buf: [0; 40],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl fmt::Write for NumberText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let to = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        to.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// SipHash-2-4 (Aumasson and Bernstein, 2012), streaming.
pub(in crate::idempotency) struct SipHasher24 {
    v: [u64; 4],
    tail: u64,
    ntail: usize,
    length: usize,
}

impl SipHasher24 {
    pub(in crate::idempotency) fn new(k0: u64, k1: u64) -> SipHasher24 {
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
    pub(in crate::idempotency) fn write(&mut self, bytes: &[u8]) {
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

    pub(in crate::idempotency) fn finish(mut self) -> u64 {
        let last = ((self.length as u64 & 0xff) << 56) | self.tail;
        self.compress(last);
        self.v[2] ^= 0xff;
        for _ in 0..4 {
            Self::round(&mut self.v);
        }
        self.v[0] ^ self.v[1] ^ self.v[2] ^ self.v[3]
    }
}
