//! The OpenTelemetry metrics: `mcp.server.operation.duration` (a call, as the agent saw it),
//! `mcp.client.operation.duration` (an upstream attempt, as strata saw it), both histograms in
//! seconds over the conventions' buckets (the Prometheus histogram's), and `strata.calls`, the
//! call counter as an OTLP sum. The SDK aggregates; the export thread collects through a
//! [`SharedReader`] on its own schedule (`export.rs`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};

use crate::metrics::CALL_DURATION_BUCKETS;

/// The instruments every call records into.
pub(super) struct CallMeters {
    /// Kept for the instruments' life: dropping the provider stops aggregation.
    _provider: SdkMeterProvider,
    server: Histogram<f64>,
    client: Histogram<f64>,
    calls: Counter<u64>,
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
        };
        (meters, reader)
    }

    /// One call, with its attributes (method, tool, error type, layer, outcome).
    pub(super) fn call(&self, duration: Duration, attributes: &[KeyValue]) {
        self.server.record(duration.as_secs_f64(), attributes);
        self.calls.add(1, attributes);
    }

    /// One upstream attempt.
    pub(super) fn attempt(&self, duration: Duration, attributes: &[KeyValue]) {
        self.client.record(duration.as_secs_f64(), attributes);
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
