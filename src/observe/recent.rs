//! The recent calls inspector: the last finished calls, each kept as its record's JSON text
//! (`ring.rs`, bounded by count and by bytes), a live feed of each new one (a broadcast that
//! never waits for its readers), and the calls still in flight (`inflight.rs`). The admin
//! listener serves them (`admin/calls.rs`, `admin/stream.rs`); `strata tap` reads the feed.
//!
//! Off (`inspector.enabled: false`), the call context holds no inspector and a finished call
//! costs one `Option` check. On, a finished call's fields are rendered once
//! (`CallRecord::fields_text`), written to the log line from that text and kept; readers
//! wrap the same text in their object.

mod entry;
mod filter;
mod inflight;
mod ring;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::SystemTime;

use tokio::sync::broadcast;

use crate::config::{BearerToken, InspectorConfig};
use crate::observe::call_record::CallRecord;

pub use entry::CallEntry;
pub use filter::Filter;
pub use inflight::{Inflight, InflightCall, InflightState, Watch};
use ring::Ring;

/// Finished calls the live feed holds for its slowest reader; one that falls further behind
/// is dropped (`admin/stream.rs`), so a reader never holds up a call or grows memory.
pub const FEED_BACKLOG: usize = 1024;

/// The inspector: one per process, kept across reloads.
pub struct Inspector {
    ring: Mutex<Ring>,
    next_seq: AtomicU64,
    feed: broadcast::Sender<Arc<CallEntry>>,
    inflight: Arc<Inflight>,
    access: RwLock<Access>,
    started: SystemTime,
}

/// Who may read the inspector, per the config in force.
#[derive(Clone, Debug, Default)]
struct Access {
    enabled: bool,
    token: Option<BearerToken>,
}

// === impl Inspector ===

impl Inspector {
    pub fn new(config: &InspectorConfig) -> Arc<Inspector> {
        let (feed, _) = broadcast::channel(FEED_BACKLOG);
        let inspector = Inspector {
            ring: Mutex::new(Ring::new(config.recent, config.max_bytes)),
            next_seq: AtomicU64::new(1),
            feed,
            inflight: Arc::default(),
            access: RwLock::default(),
            started: SystemTime::now(),
        };
        inspector.configure(config);
        Arc::new(inspector)
    }

    /// Applies a (reloaded) config: the ring's bounds (the oldest records go when they
    /// shrink), whether the endpoints answer, and the token. Switched off, the kept records
    /// are dropped.
    pub fn configure(&self, config: &InspectorConfig) {
        {
            let mut ring = self.lock();
            ring.resize(config.recent, config.max_bytes);
            if !config.enabled {
                ring.clear();
            }
        }
        *self.access.write().unwrap_or_else(|e| e.into_inner()) = Access {
            enabled: config.enabled,
            token: config.token.clone(),
        };
    }

    /// Whether the inspector's endpoints answer.
    pub fn enabled(&self) -> bool {
        self.access
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .enabled
    }

    /// The token readers must present, when one is set.
    pub fn token(&self) -> Option<BearerToken> {
        let access = self.access.read().unwrap_or_else(|e| e.into_inner());
        access.token.clone()
    }

    /// When the process started.
    pub fn started(&self) -> SystemTime {
        self.started
    }

    /// Most records kept (the default and largest `limit` of a listing).
    pub fn capacity(&self) -> usize {
        self.lock().max_count()
    }

    /// A call finished: keeps its record, whose [`CallRecord::fields_text`] is `fields`, and
    /// tells the feed's readers.
    pub fn finished(&self, record: &CallRecord<'_>, fields: String) {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(CallEntry::new(record, fields, seq, SystemTime::now()));
        self.lock().push(entry.clone());
        // No reader is not an error: the feed only serves those listening now.
        let _ = self.feed.send(entry);
    }

    /// The kept records `filter` selects, newest first, at most `limit`.
    pub fn recent(&self, filter: &Filter, limit: usize) -> Vec<Arc<CallEntry>> {
        let now = SystemTime::now();
        let ring = self.lock();
        ring.newest_first()
            .filter(|entry| filter.matches(entry, now))
            .take(limit)
            .cloned()
            .collect()
    }

    /// Each call finished from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<CallEntry>> {
        self.feed.subscribe()
    }

    /// The calls in flight.
    pub fn inflight(&self) -> &Arc<Inflight> {
        &self.inflight
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
