//! The export thread: spans from a bounded queue, sent in batches; metrics collected and sent
//! on their interval. It runs on a thread and runtime of its own, so a collector that is slow,
//! down or refusing never takes a worker's time: a call only ever offers its spans to the
//! queue ([`SpanQueue::offer`]), and a full queue drops them, counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::exporters::{self, SpanSender};
use super::meters::SharedReader;
use super::spans::{self, Clock, TracedCall};
use super::wire::{AnyValue, Wire};
use super::{SCOPE, TelemetryError};
use crate::config::TelemetryConfig;
use crate::metrics::{Metrics, TelemetrySignal};

/// How often losses are logged, at most (each interval's total in one line).
const LOSS_LOG_EVERY: Duration = Duration::from_secs(10);

/// Where sampled calls leave what their spans are made of. Offering wakes no one: the export
/// thread comes for the calls every `schedule_delay`, or as soon as a batch's worth is queued
/// — a wake-up (a futex call and a switch of threads) per span was most of a traced call's
/// cost. The queue holds `max_queue_size` spans' worth of calls ([`in_calls`]).
#[derive(Clone)]
pub(super) struct SpanQueue {
    tx: mpsc::Sender<TracedCall>,
    /// Told when a batch's worth is queued.
    full: Arc<Notify>,
    /// Calls in a batch.
    batch: usize,
    metrics: Arc<Metrics>,
    /// Spans dropped since the last log line.
    dropped: Arc<AtomicU64>,
}

impl SpanQueue {
    /// Queues a call, or drops its spans (counted) when the queue is full or the thread is
    /// gone.
    pub(super) fn offer(&self, call: TracedCall) {
        if let Err(e) = self.tx.try_send(call) {
            let call = match e {
                mpsc::error::TrySendError::Full(call) | mpsc::error::TrySendError::Closed(call) => {
                    call
                }
            };
            let spans = call.spans();
            self.metrics
                .telemetry_dropped(TelemetrySignal::Traces, spans);
            self.dropped.fetch_add(spans, Ordering::Relaxed);
            return;
        }
        if self.tx.max_capacity() - self.tx.capacity() >= self.batch {
            self.full.notify_one();
        }
    }
}

/// The running export thread: told to stop, it flushes what it holds within the deadline.
pub(super) struct ExportThread {
    stop: Option<oneshot::Sender<Instant>>,
    done: Option<oneshot::Receiver<()>>,
}

/// What the export thread sends where.
struct Pipeline {
    spans: Option<(SpanSender, mpsc::Receiver<TracedCall>)>,
    /// The export request's `Resource` and `InstrumentationScope` fields, written once.
    resource: Vec<u8>,
    scope: Vec<u8>,
    metrics: Option<(opentelemetry_otlp::MetricExporter, SharedReader)>,
    config: TelemetryConfig,
    counters: Arc<Metrics>,
    dropped: Arc<AtomicU64>,
}

/// Starts the export thread; returns once its exporters are built (an error stops the start).
pub(super) fn start(
    config: &TelemetryConfig,
    reader: Option<SharedReader>,
    counters: Arc<Metrics>,
) -> Result<(Option<SpanQueue>, ExportThread), TelemetryError> {
    let (tx, rx) = mpsc::channel(in_calls(config.batching.max_queue_size));
    let dropped = Arc::new(AtomicU64::new(0));
    let full = Arc::new(Notify::new());
    let queue = config.traces_endpoint.as_ref().map(|_| SpanQueue {
        tx,
        full: full.clone(),
        batch: in_calls(config.batching.max_export_batch_size),
        metrics: counters.clone(),
        dropped: dropped.clone(),
    });
    let (built_tx, built_rx) = std::sync::mpsc::sync_channel(1);
    let (stop_tx, stop_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel();
    let config = config.clone();
    std::thread::Builder::new()
        .name("strata-telemetry".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = built_tx.send(Err(TelemetryError::Thread(e)));
                    return;
                }
            };
            runtime.block_on(async move {
                let pipeline = Pipeline::build(config, rx, reader, counters, dropped)
                    .map(|pipeline| (pipeline, full));
                match pipeline {
                    Ok((pipeline, full)) => {
                        let _ = built_tx.send(Ok(()));
                        pipeline.run(stop_rx, full).await;
                    }
                    Err(e) => {
                        let _ = built_tx.send(Err(e));
                    }
                }
            });
            let _ = done_tx.send(());
        })
        .map_err(TelemetryError::Thread)?;
    match built_rx.recv() {
        Ok(Ok(())) => Ok((
            queue,
            ExportThread {
                stop: Some(stop_tx),
                done: Some(done_rx),
            },
        )),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(TelemetryError::Exporter("export thread ended".into())),
    }
}

impl ExportThread {
    /// Flushes what is queued and collected, then ends the thread; waits at most `within`.
    pub(super) async fn stop(mut self, within: Duration) {
        let deadline = Instant::now() + within;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(deadline);
        }
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout_at(deadline, done).await;
        }
    }
}

impl Drop for ExportThread {
    fn drop(&mut self) {
        // Dropped unstopped (a reload replaced it): flush within a short grace.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Instant::now() + Duration::from_secs(5));
        }
    }
}

/// Ticks once a `period` from now on: the first tick is one period away, not at once, so spans
/// queued while the thread starts wait their `schedule_delay` like any others.
fn every(period: Duration) -> Interval {
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

// === impl Pipeline ===

impl Pipeline {
    fn build(
        config: TelemetryConfig,
        rx: mpsc::Receiver<TracedCall>,
        reader: Option<SharedReader>,
        counters: Arc<Metrics>,
        dropped: Arc<AtomicU64>,
    ) -> Result<Pipeline, TelemetryError> {
        let spans = match &config.traces_endpoint {
            Some(endpoint) => Some((SpanSender::new(&config, endpoint)?, rx)),
            None => None,
        };
        let metrics = match (&config.metrics_endpoint, reader) {
            (Some(endpoint), Some(reader)) => {
                Some((exporters::metrics(&config, endpoint)?, reader))
            }
            _ => None,
        };
        Ok(Pipeline {
            spans,
            resource: resource_field(&config),
            scope: scope_field(),
            metrics,
            config,
            counters,
            dropped,
        })
    }

    /// Sends the queued spans every `schedule_delay`, or when a batch's worth is queued;
    /// metrics every interval; both once more when told to stop.
    async fn run(mut self, mut stop: oneshot::Receiver<Instant>, full: Arc<Notify>) {
        let mut spans_tick = every(self.config.batching.schedule_delay);
        let mut metrics_tick = every(self.config.metrics_interval);
        let mut loss_log = every(LOSS_LOG_EVERY);
        loop {
            tokio::select! {
                deadline = &mut stop => {
                    let deadline = deadline.unwrap_or_else(|_| Instant::now());
                    self.flush(deadline).await;
                    return;
                }
                () = full.notified() => self.send_queued().await,
                _ = spans_tick.tick() => self.send_queued().await,
                _ = metrics_tick.tick(), if self.metrics.is_some() => self.send_metrics().await,
                _ = loss_log.tick() => self.log_losses(),
            }
        }
    }

    /// Every span queued now, in batches.
    async fn send_queued(&mut self) {
        for batch in self.take_queued() {
            self.send_spans(batch).await;
        }
    }

    /// The queued calls, in batches of at most `max_export_batch_size` spans (a call's spans
    /// stay together).
    fn take_queued(&mut self) -> Vec<Vec<TracedCall>> {
        let size = self.config.batching.max_export_batch_size as u64;
        let mut batches = Vec::new();
        let Some((_, rx)) = &mut self.spans else {
            return batches;
        };
        let mut batch = Vec::new();
        let mut spans = 0;
        while let Ok(call) = rx.try_recv() {
            if spans + call.spans() > size && !batch.is_empty() {
                batches.push(std::mem::take(&mut batch));
                spans = 0;
            }
            spans += call.spans();
            batch.push(call);
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
        batches
    }

    async fn send_spans(&mut self, batch: Vec<TracedCall>) {
        if batch.is_empty() {
            return;
        }
        let body = self.request(&batch);
        let Some((sender, _)) = &mut self.spans else {
            return;
        };
        let n = batch.iter().map(TracedCall::spans).sum();
        drop(batch);
        if let Err(e) = sender.send(body).await {
            self.counters.telemetry_dropped(TelemetrySignal::Traces, n);
            self.dropped.fetch_add(n, Ordering::Relaxed);
            tracing::debug!(error = %e, spans = n, "span export failed");
        }
    }

    /// The `ExportTraceServiceRequest` of a batch: one `ResourceSpans` with one `ScopeSpans`.
    fn request(&self, batch: &[TracedCall]) -> Vec<u8> {
        let clock = Clock::now();
        let mut wire = Wire::default();
        wire.message(1, |resource_spans| {
            resource_spans.raw(&self.resource);
            resource_spans.message(2, |scope_spans| {
                scope_spans.raw(&self.scope);
                for call in batch {
                    spans::write(scope_spans, call, &clock);
                }
            });
        });
        wire.into_bytes()
    }

    async fn send_metrics(&mut self) {
        let Some((exporter, reader)) = &self.metrics else {
            return;
        };
        let mut collected = ResourceMetrics::default();
        // Nothing recorded yet: no request at all.
        if reader.collect(&mut collected).is_err() || points(&collected) == 0 {
            return;
        }
        if let Err(e) = exporter.export(&collected).await {
            let points = points(&collected);
            self.counters
                .telemetry_dropped(TelemetrySignal::Metrics, points);
            tracing::warn!(error = %e, points, "metric export failed");
        }
    }

    /// The last spans and metrics, sent before `deadline`.
    async fn flush(&mut self, deadline: Instant) {
        if let Some((_, rx)) = &mut self.spans {
            rx.close();
        }
        let batches = self.take_queued();
        let flush = async {
            for batch in batches {
                self.send_spans(batch).await;
            }
            self.send_metrics().await;
        };
        if tokio::time::timeout_at(deadline, flush).await.is_err() {
            tracing::warn!("telemetry flush did not finish within the drain time");
        }
        self.log_losses();
    }

    /// One line for the spans lost since the last, if any.
    fn log_losses(&self) {
        let lost = self.dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            tracing::warn!(
                spans = lost,
                "spans dropped: the collector is slow, down or refusing (strata_telemetry_dropped_total)"
            );
        }
    }
}

/// Calls whose spans make about `spans`: a SERVER and a CLIENT span each, usually.
fn in_calls(spans: usize) -> usize {
    (spans / 2).max(1)
}

/// `ResourceSpans.resource`: the configured resource attributes.
fn resource_field(config: &TelemetryConfig) -> Vec<u8> {
    let mut wire = Wire::default();
    wire.message(1, |resource| {
        for (key, value) in &config.resource {
            resource.attribute(1, key, AnyValue::Str(value));
        }
    });
    wire.into_bytes()
}

/// `ScopeSpans.scope`: strata, and its version.
fn scope_field() -> Vec<u8> {
    let mut wire = Wire::default();
    wire.message(1, |scope| {
        scope.str(1, SCOPE);
        scope.str(2, env!("CARGO_PKG_VERSION"));
    });
    wire.into_bytes()
}

/// Data points in a collection (what a failed export lost).
fn points(collected: &ResourceMetrics) -> u64 {
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    fn count<T>(data: &MetricData<T>) -> usize {
        match data {
            MetricData::Gauge(g) => g.data_points().count(),
            MetricData::Sum(s) => s.data_points().count(),
            MetricData::Histogram(h) => h.data_points().count(),
            MetricData::ExponentialHistogram(h) => h.data_points().count(),
        }
    }
    let mut n = 0;
    for scope in collected.scope_metrics() {
        for metric in scope.metrics() {
            n += match metric.data() {
                AggregatedMetrics::F64(d) => count(d),
                AggregatedMetrics::U64(d) => count(d),
                AggregatedMetrics::I64(d) => count(d),
            };
        }
    }
    n as u64
}
