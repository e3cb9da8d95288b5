//! The `telemetry` section, typed: OpenTelemetry export over OTLP. Values come from the file
//! (and flags), then from the standard `OTEL_*` environment variables, then from the
//! defaults — in that order of precedence. Export is on exactly when an endpoint is set and
//! `OTEL_SDK_DISABLED` is not `true`; otherwise [`Config::telemetry`](super::Config) is
//! `None` (the section is still validated).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The `OTEL_*` environment variables strata reads, captured once at start (`main`) so that
/// parsing a config stays a pure function of its inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtelEnv(pub BTreeMap<String, String>);

impl OtelEnv {
    /// Every `OTEL_*` variable of this process.
    pub fn from_process() -> OtelEnv {
        OtelEnv(
            std::env::vars()
                .filter(|(name, _)| name.starts_with("OTEL_"))
                .collect(),
        )
    }

    /// A variable's value; an empty value counts as unset (as the OpenTelemetry SDKs read it).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }
}

/// How spans and metrics travel to the collector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/HTTP with protobuf bodies (`/v1/traces`, `/v1/metrics`): the SDKs' default.
    #[default]
    HttpProtobuf,
    /// OTLP/gRPC.
    Grpc,
}

/// Which calls are traced (the OpenTelemetry SDK samplers, by their `OTEL_TRACES_SAMPLER`
/// names).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum SamplerConfig {
    AlwaysOn,
    AlwaysOff,
    /// A fraction of traces, decided from the trace id.
    TraceIdRatio(f64),
    /// The agent's sampled flag when it sends a parent; otherwise the inner rule.
    #[default]
    ParentBasedAlwaysOn,
    ParentBasedAlwaysOff,
    ParentBasedTraceIdRatio(f64),
}

/// Whether strata tells the MCP server about its CLIENT span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Propagate {
    /// Nothing is added: the request reaches the server byte for byte as the agent sent it.
    #[default]
    None,
    /// A `traceparent` header naming the attempt's CLIENT span is added (and an agent's own
    /// `traceparent` header replaced).
    Header,
}

/// The span queue and its batches (`OTEL_BSP_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanBatching {
    /// Longest wait before queued spans are sent (`OTEL_BSP_SCHEDULE_DELAY`, default 5 s).
    pub schedule_delay: Duration,
    /// Spans queued at most; a span finding the queue full is dropped and counted
    /// (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048).
    pub max_queue_size: usize,
    /// Spans per export request (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, default 512).
    pub max_export_batch_size: usize,
}

impl Default for SpanBatching {
    fn default() -> Self {
        SpanBatching {
            schedule_delay: Duration::from_secs(5),
            max_queue_size: 2048,
            max_export_batch_size: 512,
        }
    }
}

/// OpenTelemetry export, resolved: every value final.
#[derive(Clone, Debug, PartialEq)]
pub struct TelemetryConfig {
    pub protocol: OtlpProtocol,
    /// Where spans go: for OTLP/HTTP the whole URL (`…/v1/traces`), for gRPC the collector's
    /// address. `None`: no traces are exported.
    pub traces_endpoint: Option<String>,
    /// Where metrics go, likewise (`…/v1/metrics`). `None`: no metrics are exported.
    pub metrics_endpoint: Option<String>,
    /// Sent with every export request (authentication to a hosted collector).
    pub headers: Vec<(String, String)>,
    /// Longest an export request may take.
    pub timeout: Duration,
    /// A PEM CA file trusted (besides the built-in roots) for an `https://` collector.
    pub ca_file: Option<PathBuf>,
    pub sampler: SamplerConfig,
    pub batching: SpanBatching,
    /// How often metrics are exported.
    pub metrics_interval: Duration,
    pub propagate: Propagate,
    /// Resource attributes; `service.name` is always among them (default `strata`).
    pub resource: Vec<(String, String)>,
}
