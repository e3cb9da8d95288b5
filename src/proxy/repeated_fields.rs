//! The MCP header fields an agent connection's calls repeat, kept from its last call: the
//! session (`Mcp-Session-Id`, on every request after initialization, 2025-03-26 … 2025-11-25
//! transports §Session Management) and the protocol version (`MCP-Protocol-Version`, on
//! every request after initialization from 2025-06-18, on every request in 2026-07-28). A
//! value the same as the last call's is taken as it was kept: not checked again, not copied
//! again, the session not hashed again.

use std::ops::Deref;
use std::sync::Arc;

use crate::http::fields;
use crate::observe::session::Session;

/// The last call's session and protocol version, lent by strata's own agent connection to
/// each call it serves (`agent_h1.rs`); hyper's connections make one per call.
#[derive(Debug, Default)]
pub struct RepeatedFields {
    session: Option<Session>,
    protocol_version: Option<Arc<str>>,
}

impl RepeatedFields {
    /// The session `value` names: the last one when the bytes are its id, else a new one,
    /// kept for the next call. `None` when the value is not visible ASCII ([`fields::text`]).
    pub fn session(&mut self, value: &[u8]) -> Option<Session> {
        kept(&mut self.session, value, Session::as_str, Session::new)
    }

    /// The protocol version `value` names, as [`session`](Self::session) keeps it.
    pub fn protocol_version(&mut self, value: &[u8]) -> Option<Arc<str>> {
        kept(&mut self.protocol_version, value, Deref::deref, |v| {
            Arc::from(v)
        })
    }
}

/// `slot`'s value again when `value` is its text, else the value `make` gives, kept in
/// `slot`; `None` (and `slot` kept) when `value` is not text.
fn kept<T: Clone>(
    slot: &mut Option<T>,
    value: &[u8],
    text: impl Fn(&T) -> &str,
    make: impl FnOnce(&str) -> T,
) -> Option<T> {
    if let Some(last) = slot.as_ref()
        && text(last).as_bytes() == value
    {
        return Some(last.clone());
    }
    let made = make(fields::text(value)?);
    *slot = Some(made.clone());
    Some(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::call_record::SessionHash;

    /// Both are the one session made once: each `Session::new` shares its id anew.
    fn same(a: &Session, b: &Session) -> bool {
        Arc::ptr_eq(a.id(), b.id())
    }

    #[test]
    fn the_same_id_again_is_the_same_session_and_another_replaces_it() {
        let mut repeated = RepeatedFields::default();
        let first = repeated.session(b"abc-1").expect("visible ASCII");
        let again = repeated.session(b"abc-1").expect("the same id");
        assert!(same(&first, &again), "kept, not made anew");
        assert_eq!(again.hash(), &SessionHash::new("abc-1"));
        let other = repeated.session(b"abc-2").expect("another id");
        assert_eq!(other.as_str(), "abc-2");
        assert_eq!(other.hash(), &SessionHash::new("abc-2"));
        let back = repeated.session(b"abc-1").expect("the first id again");
        assert!(!same(&first, &back), "only the last session is kept");
        assert_eq!(back.hash(), first.hash());
    }

    #[test]
    fn the_same_protocol_version_again_is_shared_and_another_replaces_it() {
        let mut repeated = RepeatedFields::default();
        let first = repeated.protocol_version(b"2025-11-25").expect("text");
        let again = repeated.protocol_version(b"2025-11-25").expect("text");
        assert!(Arc::ptr_eq(&first, &again), "kept, not copied again");
        let other = repeated.protocol_version(b"2026-07-28").expect("text");
        assert_eq!(&*other, "2026-07-28");
        assert!(!Arc::ptr_eq(&first, &other));
    }

    #[test]
    fn a_value_that_is_not_visible_ascii_names_nothing_and_keeps_the_last() {
        let mut repeated = RepeatedFields::default();
        let session = repeated.session(b"abc").expect("visible ASCII");
        let version = repeated.protocol_version(b"2025-11-25").expect("text");
        for value in [&b"caf\xc3\xa9"[..], b"nul\0", b"del\x7f", b"line\n"] {
            assert!(repeated.session(value).is_none(), "{value:?}");
            assert!(repeated.protocol_version(value).is_none(), "{value:?}");
        }
        assert!(same(
            &session,
            &repeated.session(b"abc").expect("the kept id")
        ));
        let kept = repeated
            .protocol_version(b"2025-11-25")
            .expect("the kept version");
        assert!(Arc::ptr_eq(&version, &kept));
    }
}
