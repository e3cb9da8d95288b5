//! `retry_origin: client`: the agent re-sent a request that had just failed — same session,
//! method, tool and fingerprint (the request without its JSON-RPC id and `_meta`) — within
//! [`WINDOW`]. Fingerprints cost a parse, so they are only taken when needed: of a failed
//! call's body (kept in the replay buffer anyway), and of a new request only when a failure
//! with the same session, method and tool is on record.
//!
//! Limits: [`MAX_REMEMBERED`] failures at once; when full, the oldest half is dropped (a
//! client retry then logs as `none`, never wrongly as `client`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::idempotency::{Fingerprint, Hashing, fingerprint};

/// How long after a failure a repeat counts as the agent's retry.
pub(crate) const WINDOW: Duration = Duration::from_secs(300);
/// Failures remembered at once.
pub(crate) const MAX_REMEMBERED: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CallKey {
    session: Box<str>,
    method: Box<str>,
    tool: Box<str>,
}

/// Recent failed calls, by session, method and tool.
#[derive(Default)]
pub struct RecentFailures {
    map: Mutex<HashMap<CallKey, (Fingerprint, Instant)>>,
    /// The map's length, set under its lock: every call asks, and while nothing failed lately
    /// the answer comes without the lock — whose word every worker thread would write, the
    /// cache line passing between the cores on each call.
    remembered: AtomicUsize,
}

impl RecentFailures {
    fn key(session: Option<&str>, method: &str, tool: &str) -> CallKey {
        CallKey {
            session: session.unwrap_or_default().into(),
            method: method.into(),
            tool: tool.into(),
        }
    }

    /// A call failed: remember what it was.
    pub fn failed(
        &self,
        session: Option<&str>,
        method: &str,
        tool: &str,
        target: &str,
        body: &[u8],
    ) {
        let Some(fp) = fingerprint(target, body, Hashing::InProcess) else {
            return;
        };
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_REMEMBERED {
            map.retain(|_, (_, at)| now.saturating_duration_since(*at) < WINDOW / 2);
        }
        // Failures of many sessions within the half window leave the map full: forgetting by
        // age alone would let it grow past its bound, at the rate failures arrive.
        if map.len() >= MAX_REMEMBERED {
            drop_older_half(&mut map);
        }
        map.insert(Self::key(session, method, tool), (fp.fingerprint, now));
        self.remembered.store(map.len(), Ordering::Relaxed);
    }

    /// Nothing failed lately: no call is a retry (asked without the lock, as `is_retry`
    /// does, before the caller reads the call's names for it).
    pub fn none(&self) -> bool {
        self.remembered.load(Ordering::Relaxed) == 0
    }

    /// Whether this request repeats a recent failure (and forgets that failure).
    pub fn is_retry(
        &self,
        session: Option<&str>,
        method: &str,
        tool: &str,
        target: &str,
        body: &[u8],
    ) -> bool {
        // The usual case: nothing failed lately; neither the lock nor the key is needed.
        if self.none() {
            return false;
        }
        let key = Self::key(session, method, tool);
        let recorded = {
            let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            match map.get(&key) {
                Some((fp, at)) if at.elapsed() < WINDOW => *fp,
                Some(_) => {
                    // Past the window: forgotten now, so calls stop taking the lock for it.
                    map.remove(&key);
                    self.remembered.store(map.len(), Ordering::Relaxed);
                    return false;
                }
                None => return false,
            }
        };
        let same = fingerprint(target, body, Hashing::InProcess)
            .is_some_and(|f| f.fingerprint == recorded);
        if same {
            let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            map.remove(&key);
            self.remembered.store(map.len(), Ordering::Relaxed);
        }
        same
    }
}

/// Keeps the newer half of `map` (by the time each failure was remembered); entries as old as
/// the median go too, so equal times never keep more than half.
fn drop_older_half(map: &mut HashMap<CallKey, (Fingerprint, Instant)>) {
    let mut times: Vec<Instant> = map.values().map(|(_, at)| *at).collect();
    let mid = times.len() / 2;
    let (_, median, _) = times.select_nth_unstable(mid);
    let median = *median;
    map.retain(|_, (_, at)| *at > median);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_repeat_of_a_failure_is_a_client_retry() {
        let r = RecentFailures::default();
        let body = |id: u32, arg: u32| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t","arguments":{{"a":{arg}}}}}}}"#
            )
        };
        r.failed(Some("s1"), "tools/call", "t", "/mcp", body(1, 1).as_bytes());
        assert!(
            !r.is_retry(Some("s2"), "tools/call", "t", "/mcp", body(2, 1).as_bytes()),
            "other session"
        );
        assert!(
            !r.is_retry(Some("s1"), "tools/call", "t", "/mcp", body(2, 9).as_bytes()),
            "other arguments"
        );
        assert!(
            r.is_retry(Some("s1"), "tools/call", "t", "/mcp", body(2, 1).as_bytes()),
            "same request, new id"
        );
        assert!(
            !r.is_retry(Some("s1"), "tools/call", "t", "/mcp", body(3, 1).as_bytes()),
            "counted once"
        );
        r.failed(None, "tools/call", "t", "/mcp", body(4, 1).as_bytes());
        tokio::time::advance(WINDOW).await;
        assert!(
            !r.is_retry(None, "tools/call", "t", "/mcp", body(5, 1).as_bytes()),
            "too late"
        );
        assert_eq!(
            r.remembered.load(Ordering::Relaxed),
            0,
            "forgotten when found too late"
        );
    }

    /// Regression (found designing the soak, whose agents fail calls on many sessions): when
    /// every remembered failure was younger than half the window, nothing was forgotten and
    /// the map grew past `MAX_REMEMBERED` with every new session's failure.
    #[tokio::test(start_paused = true)]
    async fn the_map_stays_bounded_when_every_failure_is_recent() {
        let r = RecentFailures::default();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
        for n in 0..MAX_REMEMBERED * 3 {
            let session = format!("s{n}");
            r.failed(Some(&session), "tools/call", "t", "/mcp", body.as_bytes());
            tokio::time::advance(Duration::from_millis(1)).await;
            let len = r.map.lock().map(|m| m.len()).unwrap_or(usize::MAX);
            assert!(len <= MAX_REMEMBERED, "{len} after {n}");
        }
        // The newest failures are the ones kept.
        let last = format!("s{}", MAX_REMEMBERED * 3 - 1);
        assert!(r.is_retry(Some(&last), "tools/call", "t", "/mcp", body.as_bytes()));
        assert!(!r.is_retry(Some("s0"), "tools/call", "t", "/mcp", body.as_bytes()));
    }
}
