//! Shared helpers of the integration tests (`tests/it/`, `tests/tls/`, `tests/soak/`): strata
//! and the testbed in-process on `127.0.0.1:0`, counter deltas read from strata's own
//! `/metrics` text, call records read back from the captured log, and a scripted upstream.
//!
//! Each test binary uses a different subset, hence the `dead_code` allowance.
#![allow(dead_code, unreachable_pub)]

pub mod agent;
pub mod children;
pub mod h2raw;
pub mod otlp;
pub mod post;
pub mod process;
pub mod raw;
pub mod redis;
pub mod redis_servers;
pub mod upstream;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use strata::app::{self, Running};
use strata::classify::Outcome;
use strata::config::{Config, Upstream};
use strata::log::CapturedLogs;
use strata::observe::call_record::CALL_TARGET;
use strata::testbed::client::{LEGACY_VERSION, McpClient, Transport};
use strata::testbed::{Testbed, TestbedHandle};
use tokio::time::{Instant, sleep};

pub use strata::demo::{CallKey, calls_total, delta};

/// Every wait in these tests is bounded by this: nothing here should take more than a few
/// hundred milliseconds, so reaching it means something hangs.
pub const LIMIT: Duration = Duration::from_secs(10);

/// Strata in front of `upstream`, on `127.0.0.1:0`, with `tweak` applied to the defaults.
pub async fn strata(upstream: SocketAddr, tweak: impl FnOnce(&mut Config)) -> Running {
    let up = Upstream::parse(&format!("http://{upstream}")).unwrap();
    let mut config = Config::default_with_upstream(up);
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
    config.timeouts.drain = Duration::from_millis(500);
    tweak(&mut config);
    tokio::time::timeout(LIMIT, app::start(&config))
        .await
        .unwrap()
        .unwrap()
}

/// The testbed with strata in front of it.
pub struct Stack {
    pub strata: Running,
    pub testbed: Arc<Testbed>,
    pub testbed_addr: SocketAddr,
    _handle: TestbedHandle,
}

impl Stack {
    /// Testbed + strata; `tweak` adjusts strata's config (defaults otherwise).
    pub async fn start(tweak: impl FnOnce(&mut Config)) -> Stack {
        let (testbed_addr, testbed, handle) = Testbed::spawn_local().await.unwrap();
        let strata = strata(testbed_addr, tweak).await;
        Stack {
            strata,
            testbed,
            testbed_addr,
            _handle: handle,
        }
    }

    /// A 2026-07-28 client talking to strata.
    pub fn modern(&self, transport: Transport) -> McpClient {
        McpClient::modern(self.strata.listen)
            .with_transport(transport)
            .with_timeout(LIMIT)
    }

    /// A 2025-11-25 client with an initialized session, talking to strata.
    pub async fn legacy(&self, transport: Transport) -> McpClient {
        let mut c = McpClient::legacy(self.strata.listen)
            .with_transport(transport)
            .with_timeout(LIMIT);
        c.initialize(LEGACY_VERSION).await.unwrap();
        c
    }

    pub fn counts(&self) -> BTreeMap<CallKey, u64> {
        counts(&self.strata)
    }

    /// One tools/call per testbed scenario, each in its era: the legacy-only ones on
    /// `legacy`, the rest on `modern`. Any reply will do (a call that breaks is still a call);
    /// returns the tools called, in order.
    pub async fn call_every_scenario(modern: &McpClient, legacy: &McpClient) -> Vec<&'static str> {
        let mut tools = Vec::with_capacity(strata::testbed::SCENARIOS.len());
        for scenario in strata::testbed::SCENARIOS {
            let client = if scenario.legacy_only { legacy } else { modern };
            let _ = client.call_tool(scenario.tool, serde_json::json!({})).await;
            tools.push(scenario.tool);
        }
        tools
    }

    pub async fn delta_after(
        &self,
        before: &BTreeMap<CallKey, u64>,
        total: u64,
    ) -> BTreeMap<CallKey, u64> {
        delta_after(&self.strata, before, total).await
    }
}

/// strata's `strata_calls_total` series now.
pub fn counts(running: &Running) -> BTreeMap<CallKey, u64> {
    calls_total(&running.metrics.render())
}

/// The counter delta since `before`, once it adds up to at least `total` (or after [`LIMIT`]:
/// then the caller's assertion shows what was missing). A classification normally lands
/// before the agent sees the end of its response, so this rarely waits.
pub async fn delta_after(
    running: &Running,
    before: &BTreeMap<CallKey, u64>,
    total: u64,
) -> BTreeMap<CallKey, u64> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let d = delta(before, &counts(running));
        if d.values().sum::<u64>() >= total || Instant::now() >= deadline {
            return d;
        }
        sleep(Duration::from_millis(5)).await;
    }
}

/// The series key of one classification.
pub fn key(method: &str, tool: &str, outcome: Outcome) -> CallKey {
    CallKey {
        method: method.to_owned(),
        tool: tool.to_owned(),
        layer: outcome.layer().as_str().to_owned(),
        outcome: outcome.as_str().to_owned(),
    }
}

/// A delta of exactly one call with this key.
pub fn just(method: &str, tool: &str, outcome: Outcome) -> BTreeMap<CallKey, u64> {
    BTreeMap::from([(key(method, tool, outcome), 1)])
}

/// `log::capture_json`, made safe to use while other tests of the same binary run on
/// other threads without a capture.
///
/// tracing caches each callsite's interest process-wide. When only one dispatcher is
/// registered, tracing-core rebuilds that cache from the *current thread's* dispatcher; a
/// test thread without a capture (the no-op default) would then switch `strata::call` off for
/// every thread, and a capturing test would see no records. A global subscriber that enables
/// everything (and keeps nothing) makes every thread's answer "always".
pub fn capture() -> (tracing::subscriber::DefaultGuard, CapturedLogs) {
    static GLOBAL: std::sync::Once = std::sync::Once::new();
    GLOBAL.call_once(|| {
        let _ = tracing::subscriber::set_global_default(EnableAll);
    });
    strata::log::capture_json()
}

/// Enables every callsite and discards every event.
struct EnableAll;

impl tracing::Subscriber for EnableAll {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::always()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The per-call records (`strata::call`) captured so far. The capture also holds every
/// trace line of hyper and h2, so lines are picked by target before they are parsed.
pub fn records(logs: &CapturedLogs) -> Vec<Value> {
    let target = format!("\"target\":\"{CALL_TARGET}\"");
    logs.text()
        .lines()
        .filter(|l| l.contains(&target))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["target"] == CALL_TARGET)
        .collect()
}

/// The call records of `tool` (tools/call).
pub fn records_of(logs: &CapturedLogs, tool: &str) -> Vec<Value> {
    records(logs)
        .into_iter()
        .filter(|r| r["tool"] == tool)
        .collect()
}

/// Waits until `n` call records of `tool` were captured; returns them.
pub async fn wait_records(logs: &CapturedLogs, tool: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let found = records_of(logs, tool);
        if found.len() >= n || Instant::now() >= deadline {
            return found;
        }
        sleep(Duration::from_millis(5)).await;
    }
}

/// A port nothing listens on (bound, then released).
pub async fn closed_port() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    addr
}

/// 64-bit FNV-1a, fed incrementally: enough to tell two 64 MiB bodies apart without keeping
/// either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}
