//! The OpenTelemetry metrics: `mcp.server.operation.duration` (a call, as the agent saw it),
//! `mcp.client.operation.duration` (an upstream attempt, as strata saw it), both histograms in
//! seconds over the conventions' buckets (the Prometheus histogram's), and `strata.calls`, the
//! call counter as an OTLP sum. The SDK aggregates; the export thread collects through a
//! [`SharedReader`] on its own schedule (`export.rs`).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use foldhash::fast::FixedState;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{BoundCounter, BoundHistogram, Counter, Histogram, MeterProvider};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};

use crate::classify::Outcome;
use crate::metrics::CALL_DURATION_BUCKETS;
use crate::runtime::per_worker::PerWorker;

/// Attribute sets bound per worker, at most; past it a point is recorded unbound (the SDK
/// looks its attribute set up each time, and caps the sets at 2,000 per instrument).
const MAX_BOUND: usize = 1024;

/// The instruments every call records into.
pub(super) struct CallMeters {
    /// Kept for the instruments' life: dropping the provider stops aggregation.
    _provider: SdkMeterProvider,
    server: Histogram<f64>,
    client: Histogram<f64>,
    calls: Counter<u64>,
    /// The instruments bound to each attribute set met so far, per worker: a bound point
    /// skips the SDK's attribute lookup (hashing every attribute, a shared lock) and this
    /// call's attribute allocations. Each worker only ever takes its own lock.
    bound: PerWorker<Mutex<HashMap<u64, Bound>>>,
}

/// What a point is recorded under: the call's or the attempt's attributes.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(super) struct PointKey<'a> {
    pub method: &'a str,
    pub tool: Option<&'a str>,
    pub error_type: Option<&'a str>,
    /// The call's outcome; `None` for an attempt.
    pub outcome: Option<Outcome>,
}

/// The instruments bound to one attribute set, and the set's key.
struct Bound {
    method: Box<str>,
    tool: Option<Box<str>>,
    error_type: Option<Box<str>>,
    outcome: Option<Outcome>,
    instruments: Instruments,
}

enum Instruments {
    Call(BoundHistogram<f64>, BoundCounter<u64>),
    Attempt(BoundHistogram<f64>),
}

/// The reader the export thread collects through (the provider owns one handle of it).
#[derive(Clone, Debug)]
pub(super) struct SharedReader(Arc<ManualReader>);

impl CallMeters {
    /// The instruments, and the reader their points are collected through.
    pub(super) fn new(resource: Resource, scope: &'static str) -> (CallMeters, SharedReader) {
        let reader = SharedReader(Arc::new(ManualReader::builder().build()));
        let provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader.clone())
            .build();
        let meter = provider.meter(scope);
        let histogram = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(CALL_DURATION_BUCKETS.to_vec())
                .build()
        };
        let meters = CallMeters {
            server: histogram(
                "mcp.server.operation.duration",
                "JSON-RPC calls from the agent, from request to outcome.",
            ),
            client: histogram(
                "mcp.client.operation.duration",
                "Upstream attempts, from the request sent to the answer's end.",
            ),
            calls: meter
                .u64_counter("strata.calls")
                .with_unit("{call}")
                .with_description("JSON-RPC calls classified, by layer and outcome.")
                .build(),
            _provider: provider,
            bound: PerWorker::new(|| Mutex::new(HashMap::new())),
        };
        (meters, reader)
    }

    /// One call (`key.outcome` set) or one upstream attempt, lasting `duration`.
    pub(super) fn record(&self, key: PointKey<'_>, duration: Duration) {
        let seconds = duration.as_secs_f64();
        let hash = FixedState::default().hash_one(key);
        let mut bound = self.bound.here().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hit) = bound.get(&hash).filter(|b| b.is(key)) {
            hit.instruments.record(seconds);
            return;
        }
        let attributes = key.attributes();
        if bound.len() >= MAX_BOUND || bound.contains_key(&hash) {
            drop(bound);
            match key.outcome {
                Some(_) => {
                    self.server.record(seconds, &attributes);
                    self.calls.add(1, &attributes);
                }
                None => self.client.record(seconds, &attributes),
            }
            return;
        }
        let instruments = match key.outcome {
            Some(_) => {
                Instruments::Call(self.server.bind(&attributes), self.calls.bind(&attributes))
            }
            None => Instruments::Attempt(self.client.bind(&attributes)),
        };
        instruments.record(seconds);
        bound.insert(hash, Bound::of(key, instruments));
    }
}

impl PointKey<'_> {
    /// The attributes: `mcp.method.name`, `gen_ai.tool.name`, `error.type`, and for a call
    /// `strata.layer` and `strata.outcome`.
    fn attributes(&self) -> Vec<KeyValue> {
        let mut attributes = Vec::with_capacity(5);
        attributes.push(KeyValue::new("mcp.method.name", self.method.to_owned()));
        if let Some(tool) = self.tool {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
        }
        if let Some(ty) = self.error_type {
            attributes.push(KeyValue::new("error.type", ty.to_owned()));
        }
        if let Some(outcome) = self.outcome {
            attributes.push(KeyValue::new("strata.layer", outcome.layer().as_str()));
            attributes.push(KeyValue::new("strata.outcome", outcome.as_str()));
        }
        attributes
    }
}

impl Bound {
    fn of(key: PointKey<'_>, instruments: Instruments) -> Bound {
        Bound {
            method: key.method.into(),
            tool: key.tool.map(Into::into),
            error_type: key.error_type.map(Into::into),
            outcome: key.outcome,
            instruments,
        }
    }

    fn is(&self, key: PointKey<'_>) -> bool {
        *self.method == *key.method
            && self.tool.as_deref() == key.tool
            && self.error_type.as_deref() == key.error_type
            && self.outcome == key.outcome
    }
}

impl Instruments {
    fn record(&self, seconds: f64) {
        match self {
            Instruments::Call(duration, calls) => {
                duration.record(seconds);
                calls.add(1);
            }
            Instruments::Attempt(duration) => duration.record(seconds),
        }
    }
}

// === impl SharedReader ===

impl SharedReader {
    /// Every point aggregated so far (cumulative).
    pub(super) fn collect(&self, into: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(into)
    }
}

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }

    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}
