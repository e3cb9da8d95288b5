//! The in-process store: one replica's keys, bounded by entries and bytes.
//!
//! Every entry expires `ttl` after it was written (a marker after its claim, a record after
//! its completion), so a call that never completes — the proxy's ticket is dropped on every
//! path, but a stuck upstream keeps it alive — does not block its key forever. Because the
//! TTL is one value, claim order is marker expiry order and completion order is record expiry
//! order: two ordered indexes give both the sweep (pop expired fronts, on every operation:
//! amortised O(1), so no background task) and eviction (oldest record first). Each index item
//! carries its entry's expiry, so a sweep that finds nothing expired reads the two first items
//! and no entry of the map (an old entry's line is seldom in cache). In-flight markers
//! are never evicted: dropping one would let a repeat run the call a second time; when only
//! markers are left, a claim fails with [`StoreError::Full`] and the proxy forwards the call
//! without idempotency.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::fingerprint::Fingerprint;
use super::key::KeyHashed;
use super::record::Record;
use super::store::{Completion, Found};
use super::{Key, StoreError};

pub(super) struct MemoryStore {
    ttl: Duration,
    max_entries: usize,
    max_bytes: usize,
    max_record_bytes: usize,
    inner: Mutex<Inner>,
}

/// What the memory store holds, for gauges and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub in_flight: usize,
    pub records: usize,
    /// Bytes of records ([`Record::size`]).
    pub bytes: usize,
}

#[derive(Default)]
struct Inner {
    /// By key, on the hash the key carries ([`KeyHashed`]).
    entries: HashMap<Key, Entry, KeyHashed>,
    /// Markers by claim sequence (= expiry order).
    in_flight: BTreeMap<u64, Indexed>,
    /// Records by completion sequence (= expiry and eviction order).
    done: BTreeMap<u64, Indexed>,
    bytes: usize,
    /// Sequence numbers; a marker's is also its claim token.
    next: u64,
}

/// An index item: the entry's key, and its expiry (the entry's own, copied).
struct Indexed {
    expires: Instant,
    key: Key,
}

struct Entry {
    fp: Fingerprint,
    seq: u64,
    expires: Instant,
    /// `None` while in flight.
    record: Option<Record>,
}

impl MemoryStore {
    pub(super) fn new(
        ttl: Duration,
        max_entries: usize,
        max_bytes: usize,
        max_record: usize,
    ) -> Self {
        MemoryStore {
            ttl,
            max_entries: max_entries.max(1),
            max_bytes,
            max_record_bytes: max_record,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Locked and swept: what the caller sees has not expired.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.sweep(Instant::now());
        inner
    }

    pub(super) fn claim(&self, key: &Key, fp: Fingerprint) -> Result<Found, StoreError> {
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.get(key) {
            return Ok(match &entry.record {
                _ if entry.fp != fp => Found::Mismatch,
                None => Found::InFlight,
                Some(record) => Found::Done(record.clone()),
            });
        }
        while inner.entries.len() >= self.max_entries {
            if !inner.evict_oldest_record() {
                return Err(StoreError::Full {
                    entries: inner.entries.len(),
                });
            }
        }
        let seq = inner.next_seq();
        let key = key.clone();
        let expires = Instant::now() + self.ttl;
        let indexed = Indexed {
            expires,
            key: key.clone(),
        };
        inner.in_flight.insert(seq, indexed);
        let entry = Entry {
            fp,
            seq,
            expires,
            record: None,
        };
        inner.entries.insert(key, entry);
        Ok(Found::Fresh(seq))
    }

    pub(super) fn complete(&self, key: &Key, token: u64, record: Record) -> Completion {
        let mut inner = self.lock();
        if !inner.holds(key, token) {
            return Completion::Lost;
        }
        let size = record.size();
        if size > self.max_record_bytes || size > self.max_bytes {
            inner.remove(key);
            return Completion::TooLarge;
        }
        // Only records hold bytes, and this one fits alone: evicting ends.
        while inner.bytes + size > self.max_bytes && inner.evict_oldest_record() {}
        let seq = inner.next_seq();
        let expires = Instant::now() + self.ttl;
        // The entry is updated in place: one lookup of the key, not a removal and an insert.
        let Inner {
            entries,
            in_flight,
            done,
            bytes,
            ..
        } = &mut *inner;
        let Some(entry) = entries.get_mut(key) else {
            return Completion::Lost;
        };
        // The marker's index item holds a copy of the key; the record's takes it over.
        let key = match in_flight.remove(&entry.seq) {
            Some(Indexed { key: shared, .. }) => shared,
            None => key.clone(),
        };
        let indexed = Indexed { expires, key };
        done.insert(seq, indexed);
        *bytes += size;
        entry.seq = seq;
        entry.expires = expires;
        entry.record = Some(record);
        Completion::Stored
    }

    pub(super) fn release(&self, key: &Key, token: u64) {
        let mut inner = self.lock();
        if inner.holds(key, token) {
            inner.remove(key);
        }
    }

    pub(super) fn usage(&self) -> Usage {
        let inner = self.lock();
        Usage {
            in_flight: inner.in_flight.len(),
            records: inner.done.len(),
            bytes: inner.bytes,
        }
    }
}

impl Inner {
    fn next_seq(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The key is still in flight under this claim (not expired and re-claimed).
    fn holds(&self, key: &Key, token: u64) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| e.record.is_none() && e.seq == token)
    }

    fn remove(&mut self, key: &Key) {
        let Some(entry) = self.entries.remove(key) else {
            return;
        };
        match entry.record {
            None => {
                self.in_flight.remove(&entry.seq);
            }
            Some(record) => {
                self.done.remove(&entry.seq);
                self.bytes = self.bytes.saturating_sub(record.size());
            }
        }
    }

    /// Drops the oldest record; false when there is none (only markers are left).
    fn evict_oldest_record(&mut self) -> bool {
        match self.done.first_key_value() {
            Some((_, Indexed { key, .. })) => {
                let key = key.clone();
                self.remove(&key);
                true
            }
            None => false,
        }
    }

    /// Drops expired entries from the front of both indexes.
    fn sweep(&mut self, now: Instant) {
        for records in [false, true] {
            loop {
                let index = if records {
                    &mut self.done
                } else {
                    &mut self.in_flight
                };
                let Some(first) = index.first_entry() else {
                    break;
                };
                if first.get().expires > now {
                    break;
                }
                // Taken from the index whatever the entry is, so the loop ends.
                let (seq, Indexed { key, .. }) = first.remove_entry();
                // An entry gone or newer than its index item is never expected.
                if self.entries.get(&key).is_some_and(|e| e.seq == seq) {
                    self.remove(&key);
                }
            }
        }
    }
}
