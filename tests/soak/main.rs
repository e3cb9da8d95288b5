//! Soak with nothing lost: a bounded load through the real `strata` binary
//! (a child process) in front of the in-process testbed, mixing every scenario, both protocol
//! eras, JSON and SSE answers, HTTP/1.1 and h2 agents, sessions that come and go, and agents
//! that leave mid-stream. Afterwards:
//!
//! - the sum of `strata_calls_total` (scraped from the admin listener) equals the calls sent,
//!   and every series (method, tool, layer, outcome) equals what the plan predicts;
//! - the log holds exactly one well-formed record per call, with the predicted outcome and one
//!   attempt, and no panic;
//! - every body the agent received is the testbed's, byte for byte (length and FNV-1a against
//!   the testbed's record of what it sent; a body cut short is an exact prefix of it);
//! - strata's RSS after the run is within a bound of its RSS after warm-up;
//! - no call is left in flight, no SSE stream open, nothing parked, nothing retried.
//!
//! Calls are counted once per JSON-RPC request (initialize included). strata runs its default
//! retry policy, under which no soak call is retryable, so attempts = calls (checked).
//!
//! `cargo test --test soak` runs [`CI_CALLS`] calls; `bash bench/soak.sh` runs `soak_full`
//! ([`FULL_CALLS`]) on a release build. Knobs: `STRATA_SOAK_CALLS`, `STRATA_SOAK_CONCURRENCY`;
//! for finding where a figure comes from, `STRATA_SOAK_ONLY=tool,method` (a subset of the
//! mix), `STRATA_SOAK_TRANSPORT=h1|h2` (all agents on one), `STRATA_SOAK_LOG=FILE` (keep
//! strata's log), `STRATA_SOAK_HEAPTRACK=FILE` (strata under heaptrack).
//!
//! Linux only: memory and descriptors are read from `/proc`.
#![cfg(target_os = "linux")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failure should fail the test"
)]
#![allow(unreachable_pub, reason = "helper modules of one test crate")]

mod calllog;
mod child;
mod driver;
mod plan;
mod report;
mod scrape;
mod worker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use strata::testbed::Testbed;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep};

use child::StrataProc;
use driver::{Driver, Tally};
use scrape::Scrape;
use worker::Worker;

/// The CI size: a few seconds on a debug build.
const CI_CALLS: u64 = 3_000;
/// The full soak (`bench/soak.sh`).
const FULL_CALLS: u64 = 100_000;
const CONCURRENCY: usize = 64;
/// Tenths of the run before the warm-up memory sample: by then every worker has its
/// connections and a session, and every kind of call has run many times. (Workers pause at
/// every tenth while memory is sampled, so every sample sees strata idle.)
const WARMUP_TENTHS: usize = 1;
/// The RSS bound after warm-up: growth of at most this much, or [`RSS_SLACK_PERCENT`] of the
/// warm-up figure if that is more. A leak of even 100 bytes per call exceeds it on the full
/// run; allocator noise (per-thread arenas, connection buffers of different sizes) stays well
/// inside it.
const RSS_SLACK_KIB: u64 = 8 * 1024;
const RSS_SLACK_PERCENT: u64 = 25;
/// After the last call, how long strata may take to classify the last of them (a resumable
/// stream waits 250 ms for its resume).
const SETTLE_LIMIT: Duration = Duration::from_secs(20);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
        Err(_) => default,
    }
}

/// The whole run must end within this: two minutes plus 5 ms a call (the full run takes well
/// under a third of it on a shared 2-core machine).
fn run_limit(calls: u64) -> Duration {
    Duration::from_secs(120) + Duration::from_millis(5) * u32::try_from(calls).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak() {
    let calls = env_or("STRATA_SOAK_CALLS", CI_CALLS);
    soak_run(calls, env_or("STRATA_SOAK_CONCURRENCY", CONCURRENCY)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "100,000 calls: bench/soak.sh runs it on a release build"]
async fn soak_full() {
    let calls = env_or("STRATA_SOAK_CALLS", FULL_CALLS);
    soak_run(calls, env_or("STRATA_SOAK_CONCURRENCY", CONCURRENCY)).await;
}

async fn soak_run(calls: u64, concurrency: usize) {
    assert!(calls > 0 && concurrency > 0);
    let (testbed_addr, testbed, testbed_handle) = Testbed::builder()
        .record_sent(true)
        .spawn_local()
        .await
        .unwrap();
    let strata = StrataProc::start(testbed_addr).await;
    let log = Arc::clone(&strata.log);
    let driver = Arc::new(Driver::new(
        strata.listen,
        Arc::clone(&testbed),
        plan::cycle_from_env(),
        run_limit(calls),
    ));

    let started = Instant::now();
    let mut workers = (0..concurrency).map(|n| Worker::new(&driver, n)).collect();
    // The run in tenths, memory sampled after each (the first is the warm-up).
    let mut curve = Vec::new();
    for tenth in 1..=10 {
        let upto = (calls * tenth / 10).max(1);
        workers = phase(&driver, workers, upto).await;
        curve.push((upto, strata.memory()));
    }
    let duration = started.elapsed();
    let (warmup_calls, warm) = curve[WARMUP_TENTHS - 1];

    let scrape = settle(&strata, driver.calls_sent()).await;
    let end = strata.memory();
    for w in workers {
        w.close().await;
    }
    let exit = strata.stop().await;
    testbed_handle.shutdown().await.unwrap();
    let tally = Arc::into_inner(driver).unwrap().into_tally();
    let counted = scrape.calls();
    let book = log.lock().unwrap();

    let text = report::render(&report::Figures {
        calls,
        concurrency,
        duration,
        warmup_calls,
        warm,
        end,
        curve: &curve,
        tally: &tally,
        counted: &counted,
        log: &book,
    });
    println!("{text}");

    assert!(exit.success(), "strata exited with {exit}\n{text}");
    assert_eq!(tally.problems, 0, "{text}");
    assert_eq!(testbed.sent_dropped(), 0, "{text}");
    // Counts: the sum and every series, exactly.
    assert_eq!(counted.values().sum::<u64>(), tally.sent, "{text}");
    assert_eq!(counted, tally.expected, "{text}");
    check_stateless_counting(&tally);
    // Nothing left behind, nothing re-sent.
    for gauge in [
        "strata_inflight_calls",
        "strata_sse_streams_open",
        "strata_pending_resumable_calls",
        "strata_retries_total",
        "strata_limit_hits_total",
    ] {
        assert_eq!(scrape.sum(gauge), 0.0, "{gauge}\n{text}");
    }
    // The log: one well-formed record per call, as predicted, and no panic.
    assert!(book.panics.is_empty(), "{text}");
    assert_eq!(book.stderr_lines, 0, "{text}");
    assert_eq!((book.malformed, book.duplicates), (0, 0), "{text}");
    assert_eq!(book.call_lines, tally.sent, "{text}");
    check_log_per_call(&tally, &book.calls);
    // Memory.
    let bound = RSS_SLACK_KIB.max(warm.rss_kib * RSS_SLACK_PERCENT / 100);
    assert!(
        end.rss_kib <= warm.rss_kib + bound,
        "RSS grew by more than {bound} KiB after warm-up\n{text}"
    );
}

/// Runs every worker until `upto` calls were handed out; gives the workers back.
async fn phase(driver: &Arc<Driver>, workers: Vec<Worker>, upto: u64) -> Vec<Worker> {
    let mut set = JoinSet::new();
    for (n, w) in workers.into_iter().enumerate() {
        let driver = Arc::clone(driver);
        set.spawn(async move { (n, w.run(driver, upto).await) });
    }
    let mut back: Vec<(usize, Worker)> = Vec::new();
    while let Some(joined) = set.join_next().await {
        back.push(joined.unwrap());
    }
    back.sort_by_key(|(n, _)| *n);
    back.into_iter().map(|(_, w)| w).collect()
}

/// strata's `/metrics` once every call sent is counted and none is in flight (or when
/// [`SETTLE_LIMIT`] passes: then the assertions show what is missing).
async fn settle(strata: &StrataProc, sent: u64) -> Scrape {
    let until = Instant::now() + SETTLE_LIMIT;
    loop {
        let scrape = Scrape::fetch(strata.admin).await;
        let counted: u64 = scrape.calls().values().sum();
        let settled = counted >= sent && scrape.sum("strata_inflight_calls") == 0.0;
        let logged = strata.log.lock().unwrap().call_lines;
        if (settled && logged >= sent) || Instant::now() >= until {
            return scrape;
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// Stateless calls of the counting scenarios share one testbed-wide counter: which of them
/// failed depends on the race, how many does not.
fn check_stateless_counting(tally: &Tally) {
    for (tool, (n, failed)) in &tally.stateless_counting {
        let want = (1..=*n)
            .filter(|nth| plan::fails(tool, *nth) == Some(true))
            .count() as u64;
        assert_eq!(
            *failed, want,
            "{tool}: {failed} of {n} stateless calls failed"
        );
    }
}

/// Every call's record: logged once, with the predicted method, tool and outcome, one attempt.
fn check_log_per_call(tally: &Tally, logged: &std::collections::HashMap<String, calllog::Logged>) {
    let mut wrong: BTreeMap<String, String> = BTreeMap::new();
    for (id, want) in &tally.by_id {
        let got = logged.get(id);
        let ok = got.is_some_and(|g| {
            g.method == want.method
                && g.tool == want.tool
                && g.outcome == want.outcome.as_str()
                && g.attempts == 1
        });
        if !ok && wrong.len() < 20 {
            wrong.insert(id.clone(), format!("want {want:?}, logged {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "per-call log mismatches: {wrong:#?}");
    assert_eq!(logged.len(), tally.by_id.len());
}
