//! The session a call carries in `Mcp-Session-Id` (2025-03-26 … 2025-11-25 transports
//! §Session Management): the id, and the hash the call record logs in its place.
//!
//! An agent's connection carries one session's calls, call after call: the id is checked,
//! kept and hashed once per session on a connection ([`LastSession`]), not once per call.

use std::sync::Arc;

use super::call_record::SessionHash;
use crate::http::fields;

/// A raw `Mcp-Session-Id` and its loggable hash. Cloned per call: one reference count.
#[derive(Clone, Debug)]
pub struct Session(Arc<Held>);

#[derive(Debug)]
struct Held {
    id: Arc<str>,
    hash: SessionHash,
}

/// The session an agent connection's last call carried: the next call's id, when it is the
/// same, is neither checked again nor hashed again.
#[derive(Debug, Default)]
pub struct LastSession(Option<Session>);

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

// === impl LastSession ===

impl LastSession {
    /// The session a field's value names: the last one when the bytes are its id, else a new
    /// one, kept for the next call. `None` when the value is not visible ASCII (as
    /// [`fields::text`] reads it).
    pub fn of(&mut self, value: &[u8]) -> Option<Session> {
        if let Some(last) = &self.0
            && last.as_str().as_bytes() == value
        {
            return Some(last.clone());
        }
        let session = Session::new(fields::text(value)?);
        self.0 = Some(session.clone());
        Some(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_id_again_is_the_same_session_and_another_replaces_it() {
        let mut last = LastSession::default();
        let first = last.of(b"abc-1").expect("visible ASCII");
        let again = last.of(b"abc-1").expect("the same id");
        assert!(Arc::ptr_eq(&first.0, &again.0), "kept, not made anew");
        assert_eq!(again.hash(), &SessionHash::new("abc-1"));
        let other = last.of(b"abc-2").expect("another id");
        assert_eq!(other.as_str(), "abc-2");
        assert_eq!(other.hash(), &SessionHash::new("abc-2"));
        let back = last.of(b"abc-1").expect("the first id again");
        assert!(
            !Arc::ptr_eq(&first.0, &back.0),
            "only the last session is kept"
        );
        assert_eq!(back.hash(), first.hash());
    }

    #[test]
    fn a_value_that_is_not_visible_ascii_names_no_session_and_keeps_the_last() {
        let mut last = LastSession::default();
        let kept = last.of(b"abc").expect("visible ASCII");
        for value in [&b"caf\xc3\xa9"[..], b"nul\0", b"del\x7f", b"line\n"] {
            assert!(last.of(value).is_none(), "{value:?}");
        }
        let again = last.of(b"abc").expect("the kept id");
        assert!(Arc::ptr_eq(&kept.0, &again.0));
    }
}
