//! The soak's shared state: the next call and id to hand out, the global deadline, and the
//! tally of what was sent and what strata must have counted. Workers (`worker.rs`) take
//! calls from here and report every call's expected outcome and body check back.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use strata::classify::Outcome;
use strata::demo::CallKey;
use strata::testbed::{SentBody, Testbed};
use tokio::time::{Instant, sleep};

use crate::plan::Kind;

/// How long a worker waits for the testbed's record of an answer. The record is written
/// before the agent can see the body's end, except for an agent that left: then it comes when
/// strata has dropped the upstream request.
const SENT_LIMIT: Duration = Duration::from_secs(10);
/// Problems kept verbatim for the report (all are counted).
const KEEP: usize = 20;

/// What strata must log for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    pub method: &'static str,
    pub tool: &'static str,
    pub outcome: Outcome,
}

/// Everything the workers reported.
#[derive(Debug, Default)]
pub struct Tally {
    /// JSON-RPC requests sent (every call, initialize included).
    pub sent: u64,
    /// The `strata_calls_total` series these calls must produce.
    pub expected: BTreeMap<CallKey, u64>,
    /// Each call's expectation by its id's JSON text (strata's `jsonrpc_id`).
    pub by_id: HashMap<String, Expected>,
    /// Whole bodies whose status, length and hash equal what the testbed sent.
    pub hashed: u64,
    /// Bodies cut short (a reset, an agent that left) that are an exact prefix of what the
    /// testbed sent.
    pub prefixed: u64,
    /// h2 calls whose upstream body broke and whose agent got the reset before the head.
    pub reset_before_head: u64,
    /// Body bytes received in total.
    pub body_bytes: u64,
    /// Legacy sessions opened.
    pub sessions: u64,
    /// Stateless calls of each counting scenario, and how many of them failed.
    pub stateless_counting: BTreeMap<&'static str, (u64, u64)>,
    pub problems: u64,
    pub problem_lines: Vec<String>,
}

pub struct Driver {
    pub strata: SocketAddr,
    pub testbed: Arc<Testbed>,
    pub cycle: Vec<Kind>,
    pub deadline: Instant,
    next_call: AtomicU64,
    next_id: AtomicU64,
    tally: Mutex<Tally>,
}

impl Driver {
    pub fn new(
        strata: SocketAddr,
        testbed: Arc<Testbed>,
        cycle: Vec<Kind>,
        limit: Duration,
    ) -> Self {
        Driver {
            strata,
            testbed,
            cycle,
            deadline: Instant::now() + limit,
            next_call: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            tally: Mutex::default(),
        }
    }

    /// The next call's kind, while fewer than `upto` calls were handed out.
    pub fn next_kind(&self, upto: u64) -> Option<Kind> {
        let k = self
            .next_call
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                (k < upto).then_some(k + 1)
            })
            .ok()?;
        assert!(Instant::now() < self.deadline, "the soak's deadline passed");
        let len = self.cycle.len() as u64;
        Some(self.cycle[usize::try_from(k % len).unwrap()])
    }

    /// A request id no other call of the soak uses, so the testbed's records and strata's log
    /// lines map one-to-one onto calls.
    pub fn next_id(&self) -> Value {
        json!(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// The testbed's record of the answer to `id`, once it is written.
    pub async fn sent(&self, id: &Value) -> Option<SentBody> {
        let key = id.to_string();
        let until = Instant::now() + SENT_LIMIT;
        loop {
            if let Some(sent) = self.testbed.take_sent(&key) {
                return Some(sent);
            }
            if Instant::now() >= until {
                return None;
            }
            sleep(Duration::from_millis(1)).await;
        }
    }

    /// One call was sent and is expected to be counted as `expected`.
    pub fn expect(&self, id: &Value, expected: Expected) {
        let key = CallKey {
            method: expected.method.to_owned(),
            tool: expected.tool.to_owned(),
            layer: expected.outcome.layer().as_str().to_owned(),
            outcome: expected.outcome.as_str().to_owned(),
        };
        let mut t = self.tally.lock().unwrap();
        t.sent += 1;
        *t.expected.entry(key).or_default() += 1;
        if t.by_id.insert(id.to_string(), expected).is_some() {
            drop(t);
            self.problem(format!("id {id} used twice"));
        }
    }

    pub fn problem(&self, text: String) {
        let mut t = self.tally.lock().unwrap();
        t.problems += 1;
        if t.problem_lines.len() < KEEP {
            t.problem_lines.push(text);
        }
    }

    /// Calls sent so far.
    pub fn calls_sent(&self) -> u64 {
        self.tally.lock().unwrap().sent
    }

    /// Adds to the tally under its lock.
    pub fn tally(&self, f: impl FnOnce(&mut Tally)) {
        f(&mut self.tally.lock().unwrap());
    }

    pub fn into_tally(self) -> Tally {
        self.tally.into_inner().unwrap()
    }
}
