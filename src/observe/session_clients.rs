//! Which client (`name@version`) speaks on which session: learnt from `initialize`
//! (≤2025-11-25 lifecycle §Initialization: `params.clientInfo`) and the `Mcp-Session-Id`
//! its response assigned, so every later call of the session can be logged with it.
//! 2026-07-28 requests name their client themselves (`_meta`), and need no table.
//!
//! Limits: at most [`MAX_SESSIONS`] sessions are remembered; when full, the table is cleared
//! (later calls of forgotten sessions are logged without a client — never wrongly).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use foldhash::fast::RandomState;

/// Sessions whose client is remembered.
pub(crate) const MAX_SESSIONS: usize = 4096;

/// Hashed with foldhash, not SipHash: every call of a session looks its id up here. The ids
/// come from the upstream's `initialize` answers, the table is capped, and the seed is random
/// per table, so crafted collisions cannot grow the work past the cap.
#[derive(Default)]
pub struct SessionClients {
    map: Mutex<HashMap<Arc<str>, Arc<str>, RandomState>>,
}

impl SessionClients {
    pub fn remember(&self, session: &str, client: &str) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_SESSIONS && !map.contains_key(session) {
            map.clear();
        }
        map.insert(Arc::from(session), Arc::from(client));
    }

    pub fn get(&self, session: &str) -> Option<Arc<str>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(session).cloned()
    }

    /// DELETE ended the session (2025-03-26 … 2025-11-25 transports §Session Management).
    pub fn forget(&self, session: &str) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(session);
    }
}
