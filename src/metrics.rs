//! Every metric strata exports, declared once: names, HELP text, label names, buckets.
//!
//! The rest of the crate sees only [`Metrics`], [`CallHandles`], [`GaugeGuard`] and the label
//! enums, never a `prometheus` type, so switching exposition crates touches this module
//! only. The registry is private to each [`Metrics`]: two proxies in one test process never
//! share counters.

use std::sync::Arc;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

mod calls;
mod labels;
mod shards;
#[cfg(test)]
mod tests;

pub use calls::CallHandles;
pub use labels::{
    CaptureResult, CircuitState, HttpMethod, Limit, MAX_LABEL_BYTES, OTHER, ReloadResult,
    ReplayResult, RetryReason, SuppressReason, TelemetrySignal, TlsFailure,
};

use crate::runtime::per_worker::PerWorker;
use calls::{CallCache, CallFamilies};
use shards::Merged;

/// Histogram buckets for call durations, in seconds: the explicit boundaries OpenTelemetry's MCP
/// semantic conventions give `mcp.client.operation.duration` and `mcp.server.operation.duration`,
/// so dashboards built for those conventions line up with ours.
pub const CALL_DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// All of strata's metrics, with a private registry. Build with [`Metrics::new`], share as
/// `Arc<Metrics>`.
pub struct Metrics {
    registry: Registry,
    calls: CallCache,
    // Each series a copy per worker, summed when scraped (`metrics/shards.rs`).
    inflight: PerWorker<IntGauge>,
    sse_streams_open: PerWorker<IntGauge>,
    pending_resumable: PerWorker<IntGauge>,
    upstream_connect_errors: PerWorker<IntCounter>,
    response_bytes: PerWorker<IntCounter>,
    http_requests: [PerWorker<IntCounter>; HttpMethod::COUNT],
    limit_hits: [PerWorker<IntCounter>; Limit::COUNT],
    idempotent_replays: [PerWorker<IntCounter>; ReplayResult::COUNT],
    config_reloads: [PerWorker<IntCounter>; ReloadResult::COUNT],
    tls_handshake_errors: [PerWorker<IntCounter>; TlsFailure::COUNT],
    telemetry_dropped: [PerWorker<IntCounter>; TelemetrySignal::COUNT],
    capture_entries: [PerWorker<IntCounter>; CaptureResult::COUNT],
    circuit: CircuitHandles,
}

/// The upstream circuit's series, resolved at start-up (`strata_circuit_state{scope}`,
/// `strata_circuit_transitions_total{scope,to}`). Transitions are rare: one copy, not one
/// per worker.
#[derive(Clone)]
pub struct CircuitHandles {
    state: IntGauge,
    transitions: [IntCounter; CircuitState::COUNT],
}

impl CircuitHandles {
    /// A new circuit, closed (no transition counted).
    pub fn starts_closed(&self) {
        self.state.set(CircuitState::Closed as i64);
    }

    /// The circuit moved to `to`.
    pub fn moved(&self, to: CircuitState) {
        self.state.set(to as i64);
        self.transitions[to as usize].inc();
    }
}

impl std::fmt::Debug for CircuitHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CircuitHandles")
            .field(&self.state.get())
            .finish()
    }
}

/// Registering a family failed: a name or label is invalid or declared twice. This can only
/// come from a mistake in this file, and the unit tests build a `Metrics` to prove there is none.
#[derive(Debug, thiserror::Error)]
#[error("internal: cannot register metric family: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

/// Holds a gauge one higher for as long as it lives. Not `Clone`: each guard decrements once.
#[must_use = "the gauge is decremented as soon as the guard is dropped"]
pub struct GaugeGuard(IntGauge, i64);

/// `strata_response_bytes_total`, one worker's copy ([`Metrics::response_bytes_here`]).
#[derive(Clone)]
pub struct ResponseBytes(IntCounter);

impl ResponseBytes {
    /// Adds `n` forwarded response bytes.
    pub fn add(&self, n: u64) {
        self.0.inc_by(n);
    }
}

impl std::fmt::Debug for ResponseBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ResponseBytes").field(&self.0.get()).finish()
    }
}

/// A counter family whose label arity is part of its type, so a lookup with the wrong number
/// of values does not compile (`with_label_values` would panic on a mismatch).
struct CounterFamily<const N: usize>(PerWorker<IntCounterVec>);

/// As [`CounterFamily`], for histograms.
struct HistogramFamily<const N: usize>(PerWorker<HistogramVec>);

// === impl Metrics ===

impl Metrics {
    /// Content type of [`Metrics::render`]'s output (Prometheus text format 0.0.4).
    pub const CONTENT_TYPE: &'static str = prometheus::TEXT_FORMAT;

    /// Registers every family in a fresh private registry.
    ///
    /// `max_methods` and `max_tools` cap the distinct `method` and `tool` label values taken
    /// from traffic; later values are exported as `_other`. The empty tool (every method
    /// other than tools/call) is not counted.
    pub fn new(max_methods: usize, max_tools: usize) -> Result<Arc<Metrics>, MetricsError> {
        let r = Registry::new();
        let families = CallFamilies {
            calls: CounterFamily::register(
                &r,
                "strata_calls_total",
                "JSON-RPC requests classified, by method, tool, layer and outcome.",
                ["method", "tool", "layer", "outcome"],
            )?,
            duration: HistogramFamily::register(
                &r,
                "strata_call_duration_seconds",
                "Time from a JSON-RPC request's arrival to its outcome, in seconds.",
                ["method", "tool", "outcome"],
                &CALL_DURATION_BUCKETS,
            )?,
            retries: CounterFamily::register(
                &r,
                "strata_retries_total",
                "Calls re-sent upstream by strata, by reason.",
                ["method", "tool", "reason"],
            )?,
            suppressed: CounterFamily::register(
                &r,
                "strata_retries_suppressed_total",
                "Retryable failures strata did not retry, by reason.",
                ["method", "tool", "reason"],
            )?,
        };
        let http_requests = CounterFamily::register(
            &r,
            "strata_http_requests_total",
            "HTTP requests received from downstream, by HTTP method.",
            ["method"],
        )?;
        let limit_hits = CounterFamily::register(
            &r,
            "strata_limit_hits_total",
            "Times a named limit was reached, by limit.",
            ["limit"],
        )?;
        let replays = CounterFamily::register(
            &r,
            "strata_idempotent_replays_total",
            "Idempotency-Key lookups that did not reach the upstream, by result.",
            ["result"],
        )?;
        let reloads = CounterFamily::register(
            &r,
            "strata_config_reloads_total",
            "Config reload attempts, by result.",
            ["result"],
        )?;
        let tls_failures = CounterFamily::register(
            &r,
            "strata_tls_handshake_errors_total",
            "Agent connections whose TLS handshake failed, by reason.",
            ["reason"],
        )?;
        let telemetry_dropped = CounterFamily::register(
            &r,
            "strata_telemetry_dropped_total",
            "Spans and metric points OpenTelemetry export lost, by signal.",
            ["signal"],
        )?;
        let capture_entries = CounterFamily::register(
            &r,
            "strata_capture_entries_total",
            "HTTP exchanges traffic capture wrote to its file or lost, by result.",
            ["result"],
        )?;
        let circuit = circuit_handles(&r)?;
        let build_info = IntGaugeVec::new(
            Opts::new(
                "strata_build_info",
                "Always 1; the version strata was built from.",
            ),
            &["version"],
        )?;
        r.register(Box::new(build_info.clone()))?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);

        Ok(Arc::new(Metrics {
            calls: CallCache::new(families, max_methods, max_tools),
            inflight: gauge(
                &r,
                "strata_inflight_calls",
                "JSON-RPC requests received and not yet classified.",
            )?,
            sse_streams_open: gauge(
                &r,
                "strata_sse_streams_open",
                "SSE response streams currently being forwarded to downstream.",
            )?,
            pending_resumable: gauge(
                &r,
                "strata_pending_resumable_calls",
                "Calls whose resumable SSE stream closed early, awaiting a resumed stream.",
            )?,
            upstream_connect_errors: counter(
                &r,
                "strata_upstream_connect_errors_total",
                "Failed attempts to open a connection to the upstream.",
            )?,
            response_bytes: counter(
                &r,
                "strata_response_bytes_total",
                "Response body bytes forwarded from upstream to downstream.",
            )?,
            // Closed label sets are resolved up front: their series exist (at 0) from the
            // first scrape, so `rate()` and alerts see them before the first event.
            http_requests: HttpMethod::ALL.map(|m| http_requests.get([m.as_str()])),
            limit_hits: Limit::ALL.map(|l| limit_hits.get([l.as_str()])),
            idempotent_replays: ReplayResult::ALL.map(|x| replays.get([x.as_str()])),
            config_reloads: ReloadResult::ALL.map(|x| reloads.get([x.as_str()])),
            tls_handshake_errors: TlsFailure::ALL.map(|x| tls_failures.get([x.as_str()])),
            telemetry_dropped: TelemetrySignal::ALL.map(|x| telemetry_dropped.get([x.as_str()])),
            capture_entries: CaptureResult::ALL.map(|x| capture_entries.get([x.as_str()])),
            circuit,
            registry: r,
        }))
    }

    /// Handles for one call's (method, tool) pair. `tool` is `params.name` for tools/call and
    /// "" otherwise. Call once per JSON-RPC request, not per chunk.
    pub fn call(&self, method: &str, tool: &str) -> CallHandles {
        self.calls.handles(method, tool)
    }

    /// `f` of the handles [`call`](Self::call) gives, without taking a shared lock or
    /// cloning them once this thread has met the pair: the data path's way.
    pub fn with_call<T>(&self, method: &str, tool: &str, f: impl FnOnce(&CallHandles) -> T) -> T {
        self.calls.with_handles(method, tool, f)
    }

    /// Counts `calls` calls (an exchange's) as in flight until the guard drops.
    pub fn inflight_guard(&self, calls: usize) -> GaugeGuard {
        GaugeGuard::by(
            self.inflight.here(),
            i64::try_from(calls).unwrap_or(i64::MAX),
        )
    }

    /// Counts an SSE response stream as open until the guard drops.
    pub fn sse_stream_guard(&self) -> GaugeGuard {
        GaugeGuard::new(self.sse_streams_open.here())
    }

    /// Counts a call as awaiting a resumed SSE stream until the guard drops.
    pub fn pending_resumable_guard(&self) -> GaugeGuard {
        GaugeGuard::new(self.pending_resumable.here())
    }

    pub fn upstream_connect_error(&self) {
        self.upstream_connect_errors.here().inc();
    }

    pub fn http_request(&self, method: HttpMethod) {
        self.http_requests[method as usize].here().inc();
    }

    /// This worker's copy of the response byte counter, for a body to add to as it goes
    /// (one atomic add per chunk): no reference to the shared [`Metrics`] per body, whose
    /// count both workers would write.
    pub fn response_bytes_here(&self) -> ResponseBytes {
        ResponseBytes(self.response_bytes.here().clone())
    }

    pub fn limit_hit(&self, limit: Limit) {
        self.limit_hits[limit as usize].here().inc();
    }

    pub fn idempotent_replay(&self, result: ReplayResult) {
        self.idempotent_replays[result as usize].here().inc();
    }

    pub fn config_reload(&self, result: ReloadResult) {
        self.config_reloads[result as usize].here().inc();
    }

    /// Counts one agent connection whose TLS handshake failed.
    pub fn tls_handshake_error(&self, reason: TlsFailure) {
        self.tls_handshake_errors[reason as usize].here().inc();
    }

    /// Counts `n` spans or metric points OpenTelemetry export lost.
    pub fn telemetry_dropped(&self, signal: TelemetrySignal, n: u64) {
        self.telemetry_dropped[signal as usize].here().inc_by(n);
    }

    /// `strata_calls_total` summed over methods and tools: `(layer, outcome, calls)` for each
    /// pair counted so far (the inspector's `/calls/counts`).
    pub fn calls_by_outcome(&self) -> Vec<(String, String, u64)> {
        let mut counts: Vec<(String, String, u64)> = Vec::new();
        let families = self.registry.gather();
        let calls = families.iter().filter(|f| f.name() == "strata_calls_total");
        for metric in calls.flat_map(|family| family.get_metric()) {
            let label = |name: &str| {
                let found = metric.get_label().iter().find(|l| l.name() == name);
                found.map(|l| l.value().to_owned()).unwrap_or_default()
            };
            let (layer, outcome) = (label("layer"), label("outcome"));
            // Counters hold whole numbers.
            let n = metric.get_counter().get_value() as u64;
            match counts.iter_mut().find(|c| c.0 == layer && c.1 == outcome) {
                Some(count) => count.2 += n,
                None => counts.push((layer, outcome, n)),
            }
        }
        counts
    }

    /// The upstream circuit's handles.
    pub fn circuit(&self) -> &CircuitHandles {
        &self.circuit
    }

    /// Counts `n` captured exchanges written or lost.
    pub fn capture_entries(&self, result: CaptureResult, n: u64) {
        self.capture_entries[result as usize].here().inc_by(n);
    }

    /// Every family in Prometheus text format 0.0.4 ([`Metrics::CONTENT_TYPE`]).
    ///
    /// Families labelled by method and tool appear once they have a series, i.e. after the
    /// first call. A family that fails to encode is left out (and logged) rather than failing
    /// the whole scrape.
    pub fn render(&self) -> String {
        let encoder = TextEncoder::new();
        let mut out = String::new();
        for family in self.registry.gather() {
            let mut one = String::new();
            match encoder.encode_utf8(std::slice::from_ref(&family), &mut one) {
                Ok(()) => out.push_str(&one),
                Err(error) => {
                    tracing::warn!(family = family.name(), %error, "metric family not rendered");
                }
            }
        }
        out
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn counter(r: &Registry, name: &str, help: &str) -> Result<PerWorker<IntCounter>, MetricsError> {
    let c = PerWorker::try_new(|| IntCounter::with_opts(Opts::new(name, help)))?;
    r.register(Box::new(Merged(c.clone())))?;
    Ok(c)
}

fn gauge(r: &Registry, name: &str, help: &str) -> Result<PerWorker<IntGauge>, MetricsError> {
    let g = PerWorker::try_new(|| IntGauge::with_opts(Opts::new(name, help)))?;
    r.register(Box::new(Merged(g.clone())))?;
    Ok(g)
}

/// The circuit's gauge and transition counters; the scope is the one upstream.
fn circuit_handles(r: &Registry) -> Result<CircuitHandles, MetricsError> {
    let state = IntGaugeVec::new(
        Opts::new(
            "strata_circuit_state",
            "The circuit's state: 0 closed, 1 open, 2 half-open.",
        ),
        &["scope"],
    )?;
    r.register(Box::new(state.clone()))?;
    let transitions = IntCounterVec::new(
        Opts::new(
            "strata_circuit_transitions_total",
            "Times the circuit moved to a state, by state.",
        ),
        &["scope", "to"],
    )?;
    r.register(Box::new(transitions.clone()))?;
    Ok(CircuitHandles {
        state: state.with_label_values(&[CIRCUIT_SCOPE]),
        transitions: CircuitState::ALL
            .map(|to| transitions.with_label_values(&[CIRCUIT_SCOPE, to.as_str()])),
    })
}

/// The circuit's `scope` label: strata has one upstream, and one circuit for it.
pub const CIRCUIT_SCOPE: &str = "upstream";

// === impl GaugeGuard ===

impl GaugeGuard {
    fn new(gauge: &IntGauge) -> Self {
        Self::by(gauge, 1)
    }

    fn by(gauge: &IntGauge, n: i64) -> Self {
        gauge.add(n);
        GaugeGuard(gauge.clone(), n)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.sub(self.1);
    }
}

impl std::fmt::Debug for GaugeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("GaugeGuard").field(&self.0.get()).finish()
    }
}

// === impl CounterFamily ===

impl<const N: usize> CounterFamily<N> {
    fn register(
        r: &Registry,
        name: &str,
        help: &str,
        labels: [&str; N],
    ) -> Result<Self, MetricsError> {
        let vec = PerWorker::try_new(|| IntCounterVec::new(Opts::new(name, help), &labels))?;
        r.register(Box::new(Merged(vec.clone())))?;
        Ok(CounterFamily(vec))
    }

    fn get(&self, values: [&str; N]) -> PerWorker<IntCounter> {
        self.0.map(|vec| vec.with_label_values(&values))
    }
}

// === impl HistogramFamily ===

impl<const N: usize> HistogramFamily<N> {
    fn register(
        r: &Registry,
        name: &str,
        help: &str,
        labels: [&str; N],
        buckets: &[f64],
    ) -> Result<Self, MetricsError> {
        let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
        let vec = PerWorker::try_new(|| HistogramVec::new(opts.clone(), &labels))?;
        r.register(Box::new(Merged(vec.clone())))?;
        Ok(HistogramFamily(vec))
    }

    fn get(&self, values: [&str; N]) -> PerWorker<Histogram> {
        self.0.map(|vec| vec.with_label_values(&values))
    }
}
