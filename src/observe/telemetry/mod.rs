//! OpenTelemetry export: a trace per call and the MCP duration metrics, over OTLP.
//!
//! Each finished call hands its record here once ([`Telemetry::finished`], from the call
//! tracker, exactly where `strata_calls_total` counts it). The sampler decides from the parent
//! the agent sent (`parent.rs`); a sampled call becomes a SERVER span and a CLIENT span per
//! upstream attempt (`spans.rs`), offered to a bounded queue that a thread of its own sends
//! in batches (`export.rs`, `exporters.rs`). The duration histograms and the call counter are
//! aggregated by the SDK and collected by that thread on their interval (`meters.rs`).

mod error_type;
mod export;
mod exporters;
mod meters;
mod parent;
mod spans;
mod wire;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanId, SpanKind};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, Sampler, SamplingDecision, ShouldSample,
};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::classify::envelope::RequestContext;
use crate::config::{SamplerConfig, TelemetryConfig};
use crate::metrics::Metrics;
use crate::observe::call_record::CallRecord;
use crate::observe::call_trace::{CallTrace, TraceIds};

use export::{ExportThread, SpanQueue};
use meters::{CallMeters, PointKey};
use parent::Carrier;
use spans::TracedCall;

/// The instrumentation scope strata's spans and metrics carry.
const SCOPE: &str = "strata";

/// Why OpenTelemetry export could not start. The operator's side: the config names something
/// the exporters cannot use.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry: cannot build the OTLP exporter: {0}")]
    Exporter(String),
    #[error("telemetry.otlp.ca_file: {0}")]
    CaFile(String),
    #[error("telemetry: cannot start the export thread: {0}")]
    Thread(std::io::Error),
}

/// A finished call, as its spans and points are made of.
pub struct FinishedCall<'a> {
    pub record: &'a CallRecord<'a>,
    /// Attempt times and the agent's trace headers (present while export is on); a sampled
    /// call's spans take it along.
    pub trace: Option<Box<CallTrace>>,
    /// The request's trace context (`params._meta`), prompt and resource URI, if any.
    pub context: Option<&'a RequestContext>,
    pub started: Instant,
}

/// OpenTelemetry export while it is on. Shared by every worker's call context.
pub struct Telemetry {
    sampler: Sampler,
    spans: Option<SpanQueue>,
    meters: Option<CallMeters>,
    thread: Mutex<Option<ExportThread>>,
}

impl Telemetry {
    /// Starts export as configured (the exporters are built before this returns).
    pub fn start(
        config: &TelemetryConfig,
        counters: Arc<Metrics>,
    ) -> Result<Arc<Telemetry>, TelemetryError> {
        let (meters, reader) = match config.metrics_endpoint {
            Some(_) => {
                let (meters, reader) = CallMeters::new(resource(config), SCOPE);
                (Some(meters), Some(reader))
            }
            None => (None, None),
        };
        let (spans, thread) = export::start(config, reader, counters)?;
        Ok(Arc::new(Telemetry {
            sampler: sampler(config.sampler),
            spans,
            meters,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Records one finished call: its points always; when sampled, what its spans are made
    /// of goes to the export thread.
    pub fn finished(&self, call: FinishedCall<'_>) {
        let record = call.record;
        let error_type = error_type::of_call(
            record.outcome,
            record.http_statuses.last().copied(),
            record.error_code,
        );
        if let Some(meters) = &self.meters {
            record_points(meters, &call, error_type.as_deref());
        }
        if let Some(queue) = &self.spans {
            self.trace(queue, call, error_type);
        }
    }

    /// Sends what is queued and collected, within `within` (SIGTERM's drain).
    pub async fn shutdown(&self, within: Duration) {
        if let Some(thread) = self.thread.lock().await.take() {
            thread.stop(within).await;
        }
    }

    /// The call's trace ids: its parent's trace (`params._meta` first, then the agent's
    /// header) or a new one, a SERVER span id, and the sampler's decision.
    pub fn decide(
        &self,
        header: Option<&CallTrace>,
        meta: Option<&RequestContext>,
        name: &str,
    ) -> TraceIds {
        let none = Carrier {
            traceparent: None,
            tracestate: None,
        };
        let header = header.map_or(none, |t| Carrier {
            traceparent: t.traceparent.as_deref(),
            tracestate: t.tracestate.as_deref(),
        });
        let meta = meta.map_or(none, |c| Carrier {
            traceparent: c.traceparent.as_deref(),
            tracestate: c.tracestate.as_deref(),
        });
        let parent = parent::parent([meta, header]);
        let parent_span = parent::span_context(parent.as_ref());
        let trace = match parent_span.is_valid() {
            true => parent_span.trace_id(),
            false => RandomIdGenerator::default().new_trace_id(),
        };
        let decision =
            self.sampler
                .should_sample(parent.as_ref(), trace, name, &SpanKind::Server, &[], &[]);
        TraceIds {
            trace,
            server: new_span_id(),
            parent: match parent_span.is_valid() {
                true => parent_span.span_id(),
                false => SpanId::INVALID,
            },
            state: decision.trace_state,
            sampled: decision.decision == SamplingDecision::RecordAndSample,
        }
    }

    /// The `traceparent` an attempt carries to the server: the call's trace, the attempt's
    /// CLIENT span (W3C Trace Context, version 00).
    pub fn traceparent(ids: &TraceIds, attempt: SpanId) -> String {
        let flags = if ids.sampled { "01" } else { "00" };
        format!("00-{}-{}-{flags}", ids.trace, attempt)
    }

    fn trace(
        &self,
        queue: &SpanQueue,
        mut call: FinishedCall<'_>,
        error_type: Option<Cow<'static, str>>,
    ) {
        // The samplers strata offers decide on the trace id and the parent alone: the span's
        // name is made only for a sampled call.
        let ids = match call.trace.as_mut().and_then(|t| t.ids.take()) {
            Some(ids) => ids,
            None => self.decide(call.trace.as_deref(), call.context, &call.record.method),
        };
        if !ids.sampled {
            return;
        }
        let context = call.context;
        queue.offer(TracedCall {
            record: call.record.clone().into_owned(),
            trace: call.trace,
            prompt: context.and_then(|c| c.prompt.as_deref()).map(Box::from),
            resource_uri: context
                .and_then(|c| c.resource_uri.as_deref())
                .map(Box::from),
            ids,
            error_type,
            started: call.started,
        });
    }
}

/// A new random span id.
pub fn new_span_id() -> SpanId {
    RandomIdGenerator::default().new_span_id()
}

/// The call's points: its duration and count, and each attempt's duration (an attempt's
/// `error.type` is how it failed, or the call's for the attempt that answered).
fn record_points(meters: &CallMeters, call: &FinishedCall<'_>, error_type: Option<&str>) {
    let record = call.record;
    let key = PointKey {
        method: &record.method,
        tool: record.tool.as_deref(),
        error_type,
        outcome: Some(record.outcome),
    };
    meters.record(key, record.duration);
    let Some(trace) = &call.trace else {
        return;
    };
    let end = call.started + record.duration;
    let last = trace.attempts.len();
    for (i, attempt) in trace.attempts.iter().enumerate() {
        let failed = attempt.failure.map(error_type::of_failure);
        let error_type = match (&failed, i + 1 == last) {
            (Some(failed), _) => Some(failed.as_ref()),
            (None, true) => error_type,
            (None, false) => None,
        };
        let ended = attempt.ended.unwrap_or(end);
        let key = PointKey {
            error_type,
            outcome: None,
            ..key
        };
        meters.record(key, ended.saturating_duration_since(attempt.started));
    }
}

/// The SDK sampler for the configured one.
fn sampler(config: SamplerConfig) -> Sampler {
    match config {
        SamplerConfig::AlwaysOn => Sampler::AlwaysOn,
        SamplerConfig::AlwaysOff => Sampler::AlwaysOff,
        SamplerConfig::TraceIdRatio(ratio) => Sampler::TraceIdRatioBased(ratio),
        SamplerConfig::ParentBasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        SamplerConfig::ParentBasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        SamplerConfig::ParentBasedTraceIdRatio(ratio) => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
        }
    }
}

fn resource(config: &TelemetryConfig) -> Resource {
    let attributes = config
        .resource
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()));
    Resource::builder_empty()
        .with_attributes(attributes)
        .build()
}
