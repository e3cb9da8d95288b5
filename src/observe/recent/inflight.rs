//! The calls in flight, for `/calls/inflight` (the "stuck" view): each registered when strata
//! takes it on and gone when it has its outcome. Only while the inspector is on; the tracker
//! holds a [`Watch`] for its calls, and a call parked for a resumed stream holds its own.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use crate::classify::Kind;
use crate::classify::envelope::Request;
use crate::observe::call_record::SessionHash;

/// The registry of calls in flight.
#[derive(Debug, Default)]
pub struct Inflight {
    next_key: AtomicU64,
    calls: Mutex<HashMap<u64, InflightCall>>,
}

/// A call in flight, as `/calls/inflight` shows it.
#[derive(Clone, Debug)]
pub struct InflightCall {
    pub method: Box<str>,
    pub tool: Option<Box<str>>,
    /// As the log writes it: `7`, or `"abc"` with its quotes.
    pub jsonrpc_id: Box<str>,
    pub client: Option<Box<str>>,
    /// The raw `Mcp-Session-Id` (the call's own, shared): hashed only when shown
    /// ([`InflightCall::session_hash`]), never per call.
    pub session: Option<Arc<str>>,
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
    keys: Box<[Option<u64>]>,
}

// === impl Inflight ===

impl Inflight {
    /// Registers `calls`, in order: [`Watch::done`] takes the same index.
    pub fn watch(self: &Arc<Self>, calls: impl IntoIterator<Item = InflightCall>) -> Watch {
        let mut registry = self.lock();
        let keys = calls
            .into_iter()
            .map(|call| {
                let key = self.next_key.fetch_add(1, Ordering::Relaxed);
                registry.insert(key, call);
                Some(key)
            })
            .collect();
        Watch {
            inflight: self.clone(),
            keys,
        }
    }

    /// The calls in flight now, oldest first.
    pub fn snapshot(&self) -> Vec<InflightCall> {
        let mut calls: Vec<InflightCall> = self.lock().values().cloned().collect();
        calls.sort_by_key(|call| call.started);
        calls
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, InflightCall>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// === impl InflightCall ===

impl InflightCall {
    /// `request` as a call in flight. `client`: the session's, when the request names none.
    pub fn of(
        request: &Request,
        jsonrpc_id: Cow<'_, str>,
        session: Option<&Arc<str>>,
        client: Option<&str>,
        started: Instant,
        state: InflightState,
    ) -> InflightCall {
        let text = |kind: Kind, text: Cow<'_, str>| (kind == Kind::String).then(|| text.into());
        InflightCall {
            method: request.method.text_lossy().into(),
            tool: text(request.tool.kind, request.tool.text_lossy()),
            jsonrpc_id: jsonrpc_id.into(),
            client: text(request.client.kind, request.client.text_lossy())
                .or_else(|| client.map(Box::from)),
            session: session.cloned(),
            started,
            state,
        }
    }

    /// The session as the log shows it.
    pub fn session_hash(&self) -> Option<SessionHash> {
        self.session.as_deref().map(SessionHash::new)
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
        let mut registry = self.inflight.lock();
        for key in self.keys.iter().flatten() {
            if let Some(call) = registry.get_mut(key) {
                call.state = state;
            }
        }
    }

    /// The `i`th call has its outcome.
    pub fn done(&mut self, i: usize) {
        if let Some(key) = self.keys.get_mut(i).and_then(Option::take) {
            self.inflight.lock().remove(&key);
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.keys.iter().any(Option::is_some) {
            let mut registry = self.inflight.lock();
            for key in self.keys.iter().flatten() {
                registry.remove(key);
            }
        }
    }
}
