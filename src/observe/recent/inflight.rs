//! The calls in flight, for `/calls/inflight` (the "stuck" view): each registered when strata
//! takes it on and gone when it has its outcome. Only while the inspector is on; the tracker
//! holds a [`Watch`] for its calls, and a call parked for a resumed stream holds its own.
//!
//! A call's registration is on every call's path, so it costs no allocation and no shared
//! lock: the registry is split in shards, each a slab under its own lock, and a thread
//! registers in the shard it was given (workers: one each), so two workers never wait on
//! each other or move each other's cache lines. A call keeps its request's names in a buffer of
//! its own, inline for the usual short names, in the slab's reused slot.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use slab::Slab;
use smallvec::SmallVec;
use tokio::time::Instant;

use crate::classify::Kind;
use crate::classify::capture::{Captured, MAX_NAME_BYTES};
use crate::classify::envelope::Request;
use crate::observe::call_record::{SessionHash, id_text};

/// Bytes of a call's names kept inline (longer ones go to the heap).
const INLINE_TEXTS: usize = 96;

/// Shards of the registry: more than the workers a machine runs, so each worker has its own.
const SHARDS: usize = 16;

/// The registry of calls in flight.
#[derive(Debug)]
pub struct Inflight {
    shards: Box<[Shard]>,
}

/// One shard, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<Slab<InflightCall>>);

/// A call in flight, as `/calls/inflight` shows it.
#[derive(Clone, Debug)]
pub struct InflightCall {
    /// The method, tool, JSON-RPC id (as the log writes it) and client the request names, one
    /// after the other: inline for the usual short names, so a registration allocates nothing.
    texts: SmallVec<[u8; INLINE_TEXTS]>,
    /// Where each of the four ends in `texts`.
    ends: [usize; 4],
    /// Which of the tool and the client the request names.
    named: [bool; 2],
    /// The session's client, when the request names none.
    client: Option<Arc<str>>,
    /// The raw `Mcp-Session-Id` (the call's own, shared): hashed only when shown
    /// ([`InflightCall::session_hash`]), never per call.
    session: Option<Arc<str>>,
    pub started: Instant,
    pub state: InflightState,
}

/// Where a call in flight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InflightState {
    /// Sent upstream; the response's head has not come.
    Waiting,
    /// The response is streaming to the agent.
    Streaming,
    /// Its stream closed early; it waits for the agent to resume it.
    Parked,
}

/// Some calls' places in the registry; each leaves it when done, or when this drops.
#[derive(Debug)]
pub struct Watch {
    inflight: Arc<Inflight>,
    shard: usize,
    /// Slab keys, in the order the calls were given; `None` once done.
    keys: SmallVec<[Option<usize>; 1]>,
}

// === impl Inflight ===

impl Default for Inflight {
    fn default() -> Self {
        Inflight {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

impl Inflight {
    /// Registers `calls`, in order: [`Watch::done`] takes the same index.
    pub fn watch(self: &Arc<Self>, calls: impl IntoIterator<Item = InflightCall>) -> Watch {
        let shard = this_threads_shard();
        let mut registry = self.lock(shard);
        let keys = calls
            .into_iter()
            .map(|call| Some(registry.insert(call)))
            .collect();
        drop(registry);
        Watch {
            inflight: self.clone(),
            shard,
            keys,
        }
    }

    /// The calls in flight now, oldest first.
    pub fn snapshot(&self) -> Vec<InflightCall> {
        let mut calls = Vec::new();
        for shard in 0..self.shards.len() {
            calls.extend(self.lock(shard).iter().map(|(_, call)| call.clone()));
        }
        calls.sort_by_key(|call| call.started);
        calls
    }

    fn lock(&self, shard: usize) -> MutexGuard<'_, Slab<InflightCall>> {
        let shard = &self.shards[shard % self.shards.len()].0;
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The shard this thread registers in: given on its first call, in turn.
fn this_threads_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
    }
    SHARD.with(|shard| match shard.get() {
        Some(given) => given,
        None => {
            let given = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            shard.set(Some(given));
            given
        }
    })
}

// === impl InflightCall ===

impl InflightCall {
    /// `request` as a call in flight. `client`: the session's, when the request names none.
    pub fn of(
        request: &Request,
        session: Option<&Arc<str>>,
        client: Option<&Arc<str>>,
        started: Instant,
        state: InflightState,
    ) -> InflightCall {
        let mut texts = SmallVec::new();
        let mut ends = [0; 4];
        let parts = [
            request.method.text_lossy(),
            if_named(&request.tool),
            id_text(request),
            if_named(&request.client),
        ];
        for (part, end) in parts.iter().zip(&mut ends) {
            texts.extend_from_slice(part.as_bytes());
            *end = texts.len();
        }
        InflightCall {
            texts,
            ends,
            named: [named(&request.tool), named(&request.client)],
            client: client.cloned(),
            session: session.cloned(),
            started,
            state,
        }
    }

    /// The `i`th of the method, tool, id and client.
    fn text(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
        let bytes = self.texts.get(start..self.ends[i]).unwrap_or_default();
        // Written from `str`s: always UTF-8.
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    pub fn method(&self) -> &str {
        self.text(0)
    }

    pub fn tool(&self) -> Option<&str> {
        self.named[0].then(|| self.text(1))
    }

    /// As the log writes it: `7`, or `"abc"` with its quotes.
    pub fn jsonrpc_id(&self) -> &str {
        self.text(2)
    }

    pub fn client(&self) -> Option<&str> {
        match self.named[1] {
            true => Some(self.text(3)),
            false => self.client.as_deref(),
        }
    }

    /// The session as the log shows it.
    pub fn session_hash(&self) -> Option<SessionHash> {
        self.session.as_deref().map(SessionHash::new)
    }
}

/// Whether the request names this text (a string, not absent or of another kind).
fn named(text: &Captured<MAX_NAME_BYTES>) -> bool {
    text.kind == Kind::String
}

/// The text, or empty when the request does not name it.
fn if_named(text: &Captured<MAX_NAME_BYTES>) -> std::borrow::Cow<'_, str> {
    match named(text) {
        true => text.text_lossy(),
        false => Default::default(),
    }
}

// === impl InflightState ===

impl InflightState {
    pub const fn as_str(self) -> &'static str {
        match self {
            InflightState::Waiting => "waiting",
            InflightState::Streaming => "streaming",
            InflightState::Parked => "parked",
        }
    }
}

// === impl Watch ===

impl Watch {
    /// Calls watched, done or not.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every call still watched is now in `state`.
    pub fn set_state(&self, state: InflightState) {
        let mut registry = self.inflight.lock(self.shard);
        for key in self.keys.iter().flatten() {
            if let Some(call) = registry.get_mut(*key) {
                call.state = state;
            }
        }
    }

    /// The `i`th call has its outcome.
    pub fn done(&mut self, i: usize) {
        if let Some(key) = self.keys.get_mut(i).and_then(Option::take) {
            self.inflight.lock(self.shard).try_remove(key);
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.keys.iter().any(Option::is_some) {
            let mut registry = self.inflight.lock(self.shard);
            for key in self.keys.iter().flatten() {
                registry.try_remove(*key);
            }
        }
    }
}
