//! Legacy-era sessions (2025-03-26 … 2025-11-25 transports §Session Management): ids, the
//! per-session fault counters, the end signal that closes GET streams, and the stash of final
//! responses that a resumed GET (`Last-Event-ID`) replays.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::watch;

/// Live sessions kept at most. Past this the oldest session is ended, as the spec allows
/// ("the server MAY terminate the session at any time", 2025-11-25 transports §Session
/// Management); clients that never send DELETE would otherwise grow the map forever.
pub(crate) const MAX_SESSIONS: usize = 4096;
/// Final responses kept per session for resumption; the oldest is forgotten past this.
pub(crate) const MAX_REPLAYS_PER_SESSION: usize = 64;
/// Distinct counter keys per scope. Keys are scenario names (`&'static str`), so this only
/// guards against a future caller counting unbounded names.
const MAX_COUNTER_KEYS: usize = 256;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these short critical sections cannot leave the maps in a
    // half-updated state, so a poisoned lock is still safe to use.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Call counters keyed by tool, for faults that depend on "which call is this".
#[derive(Debug, Default)]
pub(crate) struct Counters {
    map: Mutex<HashMap<&'static str, u64>>,
}

impl Counters {
    /// Counts one more call of `tool` and returns its 1-based number.
    pub(crate) fn bump(&self, tool: &'static str) -> u64 {
        let mut map = lock(&self.map);
        if map.len() >= MAX_COUNTER_KEYS && !map.contains_key(tool) {
            return 1;
        }
        let n = map.entry(tool).or_insert(0);
        *n += 1;
        *n
    }
}

#[derive(Debug)]
pub(crate) struct Session {
    id: String,
    seq: u64,
    counters: Counters,
    ended: watch::Sender<bool>,
    /// (SSE stream id, the final response's SSE frame), oldest first.
    replays: Mutex<VecDeque<(String, Bytes)>>,
}

impl Session {
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// A receiver that turns `true` once the session has ended (DELETE, eviction, shutdown).
    pub(crate) fn ended(&self) -> watch::Receiver<bool> {
        self.ended.subscribe()
    }

    fn end(&self) {
        self.ended.send_replace(true);
    }

    /// Keeps the final response of SSE stream `stream` for a later GET with `Last-Event-ID`.
    pub(crate) fn stash_replay(&self, stream: String, frame: Bytes) {
        let mut replays = lock(&self.replays);
        if replays.len() >= MAX_REPLAYS_PER_SESSION {
            replays.pop_front();
        }
        replays.push_back((stream, frame));
    }

    /// The stashed final response of the stream that event `last_event_id` belongs to. Event
    /// ids are `<stream>-<n>` (see `sse::event_id`). The stash is kept after a replay, so a
    /// client whose resumed GET also broke can resume again.
    pub(crate) fn replay_after(&self, last_event_id: &str) -> Option<Bytes> {
        let (stream, _) = last_event_id.trim().rsplit_once('-')?;
        lock(&self.replays)
            .iter()
            .find(|(s, _)| s == stream)
            .map(|(_, frame)| frame.clone())
    }
}

#[derive(Debug)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    next_seq: AtomicU64,
    /// Random per testbed, so ids from two runs (or two testbeds) never collide.
    salt: u64,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            map: Mutex::default(),
            next_seq: AtomicU64::new(1),
            salt: RandomState::new().hash_one(0x5e55_u32),
        }
    }
}

impl Sessions {
    /// Mints a session. Ids are lowercase hex: visible ASCII (0x21-0x7E) as the spec requires.
    pub(crate) fn create(&self) -> Arc<Session> {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let (ended, _) = watch::channel(false);
        let session = Arc::new(Session {
            id: format!("{:016x}{seq:08x}", self.salt),
            seq,
            counters: Counters::default(),
            ended,
            replays: Mutex::default(),
        });
        let evicted = {
            let mut map = lock(&self.map);
            let evicted = if map.len() >= MAX_SESSIONS {
                let oldest = map.values().min_by_key(|s| s.seq).map(|s| s.id.clone());
                oldest.and_then(|id| map.remove(&id))
            } else {
                None
            };
            map.insert(session.id.clone(), Arc::clone(&session));
            evicted
        };
        if let Some(old) = evicted {
            tracing::debug!(session = %old.id, "testbed: evicted the oldest session");
            old.end();
        }
        session
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.map).get(id).cloned()
    }

    /// Ends and forgets a session; false if it was not live.
    pub(crate) fn remove(&self, id: &str) -> bool {
        let removed = lock(&self.map).remove(id);
        removed.map(|s| s.end()).is_some()
    }

    /// Ends every session (testbed shutdown), so open GET streams finish and graceful
    /// shutdown does not wait on them.
    pub(crate) fn end_all(&self) {
        let all: Vec<_> = lock(&self.map).drain().map(|(_, s)| s).collect();
        all.iter().for_each(|s| s.end());
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.map).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_visible_ascii_and_unique() {
        let sessions = Sessions::default();
        let a = sessions.create();
        let b = sessions.create();
        assert_ne!(a.id(), b.id());
        assert!(a.id().bytes().all(|c| (0x21..=0x7e).contains(&c)));
        assert!(sessions.get(a.id()).is_some());
    }

    #[test]
    fn remove_ends_the_session() {
        let sessions = Sessions::default();
        let s = sessions.create();
        let ended = s.ended();
        assert!(sessions.remove(s.id()));
        assert!(*ended.borrow());
        assert!(sessions.get(s.id()).is_none());
        assert!(!sessions.remove(s.id()));
    }

    #[test]
    fn replays_are_found_by_stream_prefix() {
        let sessions = Sessions::default();
        let s = sessions.create();
        s.stash_replay("s7".into(), Bytes::from_static(b"final"));
        assert_eq!(s.replay_after("s7-1").as_deref(), Some(&b"final"[..]));
        assert_eq!(s.replay_after("s7-0").as_deref(), Some(&b"final"[..]));
        assert!(s.replay_after("s8-1").is_none());
        assert!(s.replay_after("garbage").is_none());
    }

    #[test]
    fn counters_count_per_key() {
        let c = Counters::default();
        assert_eq!(c.bump("a"), 1);
        assert_eq!(c.bump("a"), 2);
        assert_eq!(c.bump("b"), 1);
    }
}
