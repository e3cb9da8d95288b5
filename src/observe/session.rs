//! The session a call carries in `Mcp-Session-Id` (2025-03-26 … 2025-11-25 transports
//! §Session Management): the id, and the hash the call record logs in its place. Made once
//! per session on an agent connection (`proxy/repeated_fields.rs`), not once per call.

use std::sync::Arc;

use super::call_record::SessionHash;

/// A raw `Mcp-Session-Id` and its loggable hash. Cloned per call: one reference count.
#[derive(Clone, Debug)]
pub struct Session(Arc<Held>);

#[derive(Debug)]
struct Held {
    id: Arc<str>,
    hash: SessionHash,
}

// === impl Session ===

impl Session {
    pub fn new(id: &str) -> Session {
        Session(Arc::new(Held {
            id: Arc::from(id),
            hash: SessionHash::new(id),
        }))
    }

    /// The raw id, shared (a parked call is filed under it).
    pub fn id(&self) -> &Arc<str> {
        &self.0.id
    }

    pub fn as_str(&self) -> &str {
        &self.0.id
    }

    pub fn hash(&self) -> &SessionHash {
        &self.0.hash
    }
}
