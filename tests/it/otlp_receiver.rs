//! The tests' OTLP receiver (`tests/support/otlp.rs`) against the official Rust exporter
//! (`opentelemetry-otlp`, independent of strata's own export): what the SDK built is what the
//! receiver decodes, over OTLP/HTTP (protobuf) and OTLP/gRPC, for spans and for a histogram;
//! `Mode::Fail` is an export error, `Mode::Stall` holds the request until the exporter's own
//! timeout.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::{
    HttpExporterBuilderSet, MetricExporter, RetryPolicy, SpanExporter, SpanExporterBuilder,
    TonicExporterBuilderSet, WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _,
};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter as _};
use tokio::runtime::Handle;
use tokio::time::{Instant, timeout};

use crate::support::LIMIT;
use crate::support::otlp::{Attr, Mode, OtlpReceiver, ReceivedSpan};

/// The service name of the exported resource, and the tracer's / meter's scope name.
const SERVICE: &str = "strata-otlp-test";
/// The exporter timeout of the `Mode::Stall` tests.
const SHORT: Duration = Duration::from_millis(300);

/// Keeps what the SDK's simple processor hands over, to export it with the OTLP exporter under
/// test from async code (the simple processor would `block_on` the export on a runtime thread).
#[derive(Debug, Default, Clone)]
struct Collect(Arc<Mutex<Vec<SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for Collect {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// A `tools/call` as strata would trace it, made by the SDK: a SERVER span with attributes, an
/// event and an error status, and a CLIENT child. In end order: the child, then the server.
fn mcp_spans() -> Vec<SpanData> {
    let collect = Collect::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(collect.clone())
        .build();
    let tracer = provider.tracer(SERVICE);
    let mut server = tracer
        .span_builder("tools/call get_weather")
        .with_kind(SpanKind::Server)
        .with_attributes([
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("strata.attempts", 2_i64),
        ])
        .start(&tracer);
    server.add_event("retry", vec![KeyValue::new("attempt", 1_i64)]);
    server.set_status(Status::error("upstream timed out"));
    let cx = Context::current_with_span(server);
    let mut client = tracer
        .span_builder("POST")
        .with_kind(SpanKind::Client)
        .with_attributes([KeyValue::new("http.request.method", "POST")])
        .start_with_context(&tracer, &cx);
    client.end();
    cx.span().end();
    provider.shutdown().unwrap();
    let spans = collect.0.lock().unwrap().clone();
    assert_eq!(spans.len(), 2);
    spans
}

fn resource() -> Resource {
    Resource::builder_empty().with_service_name(SERVICE).build()
}

fn http_spans(rx: &OtlpReceiver) -> SpanExporterBuilder<HttpExporterBuilderSet> {
    SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", rx.endpoint()))
}

fn grpc_spans(rx: &OtlpReceiver) -> SpanExporterBuilder<TonicExporterBuilderSet> {
    SpanExporter::builder()
        .with_tonic()
        .with_endpoint(rx.endpoint())
}

/// `exporter.export(spans)`, bounded.
async fn export(exporter: &SpanExporter, spans: Vec<SpanData>) -> OTelSdkResult {
    timeout(LIMIT, exporter.export(spans))
        .await
        .expect("the export did not finish")
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The receiver decoded exactly what the SDK built.
fn check_decoded(got: &[ReceivedSpan], sent: &[SpanData]) {
    assert_eq!(got.len(), 2, "{got:#?}");
    let server = got
        .iter()
        .find(|s| s.name == "tools/call get_weather")
        .expect("the server span");
    let client = got
        .iter()
        .find(|s| s.name == "POST")
        .expect("the client span");
    let sent_server = sent
        .iter()
        .find(|s| s.span_kind == SpanKind::Server)
        .unwrap();
    let sent_client = sent
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .unwrap();

    assert_eq!(server.kind_name(), "SERVER");
    assert_eq!(server.kind, 2);
    assert_eq!(server.str_attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(server.int_attr("strata.attempts"), Some(2));
    assert_eq!(server.attr("nope"), None);
    assert_eq!(server.str_attr("strata.attempts"), None);
    assert_eq!(server.status_code, 2);
    assert_eq!(server.status_message, "upstream timed out");
    assert_eq!(
        server.events,
        vec![(
            "retry".to_owned(),
            BTreeMap::from([("attempt".to_owned(), Attr::Int(1))])
        )]
    );
    assert_eq!(server.parent_span_id, "");
    assert_eq!(
        server.trace_id,
        format!("{:032x}", sent_server.span_context.trace_id())
    );
    assert_eq!(
        server.span_id,
        format!("{:016x}", sent_server.span_context.span_id())
    );
    assert_eq!(server.flags & 0xff, 1, "sampled");
    assert!(0 < server.start_ns && server.start_ns <= server.end_ns);

    assert_eq!(client.kind_name(), "CLIENT");
    assert_eq!(client.str_attr("http.request.method"), Some("POST"));
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(client.trace_id, server.trace_id);
    assert_eq!(
        client.span_id,
        format!("{:016x}", sent_client.span_context.span_id())
    );
    assert_eq!(client.status_code, 0);
    assert_eq!(client.status_message, "");
    assert!(client.events.is_empty());

    for span in [server, client] {
        assert_eq!(span.scope, SERVICE);
        assert_eq!(
            span.resource.get("service.name"),
            Some(&Attr::Str(SERVICE.to_owned()))
        );
        assert_eq!(span.trace_id.len(), 32);
        assert_eq!(span.span_id.len(), 16);
    }
}

#[tokio::test]
async fn http_exporter_spans_are_decoded() {
    let rx = OtlpReceiver::http().await;
    let mut exporter = http_spans(&rx)
        .with_headers(HashMap::from([(
            "X-Strata-Test".to_owned(),
            "http".to_owned(),
        )]))
        .build()
        .unwrap();
    exporter.set_resource(&resource());
    let sent = mcp_spans();
    export(&exporter, sent.clone()).await.unwrap();

    let got = rx.wait_spans(2, LIMIT).await;
    check_decoded(&got, &sent);
    assert_eq!(rx.requests(), 1);
    let headers = rx.last_headers();
    assert_eq!(
        header(&headers, "content-type"),
        Some("application/x-protobuf")
    );
    assert_eq!(header(&headers, "x-strata-test"), Some("http"));
}

#[tokio::test]
async fn grpc_exporter_spans_are_decoded() {
    let rx = OtlpReceiver::grpc().await;
    let mut metadata = MetadataMap::new();
    metadata.insert("x-strata-test", "grpc".parse().unwrap());
    let mut exporter = grpc_spans(&rx).with_metadata(metadata).build().unwrap();
    exporter.set_resource(&resource());
    let sent = mcp_spans();
    export(&exporter, sent.clone()).await.unwrap();

    let got = rx.wait_spans(2, LIMIT).await;
    check_decoded(&got, &sent);
    assert_eq!(rx.requests(), 1);
    let headers = rx.last_headers();
    assert_eq!(header(&headers, "content-type"), Some("application/grpc"));
    assert_eq!(header(&headers, "x-strata-test"), Some("grpc"));
}

#[tokio::test]
async fn fail_is_an_export_error_then_accept_stores() {
    for grpc in [false, true] {
        let rx = if grpc {
            OtlpReceiver::grpc().await
        } else {
            OtlpReceiver::http().await
        };
        let exporter = if grpc {
            grpc_spans(&rx)
                .with_retry_policy(RetryPolicy::disabled())
                .build()
        } else {
            http_spans(&rx)
                .with_retry_policy(RetryPolicy::disabled())
                .build()
        }
        .unwrap();

        rx.set_mode(Mode::Fail);
        let failed = export(&exporter, mcp_spans()).await;
        assert!(failed.is_err(), "grpc {grpc}: {failed:?}");
        assert_eq!(rx.requests(), 1, "grpc {grpc}");
        assert!(rx.spans().is_empty(), "grpc {grpc}");

        rx.set_mode(Mode::Accept);
        export(&exporter, mcp_spans()).await.unwrap();
        assert_eq!(rx.requests(), 2, "grpc {grpc}");
        assert_eq!(rx.wait_spans(2, LIMIT).await.len(), 2, "grpc {grpc}");
    }
}

/// The exporter's default policy retries a 503 three times: four requests, then the error.
#[tokio::test]
async fn fail_is_retried_by_the_default_policy() {
    let rx = OtlpReceiver::http().await;
    rx.set_mode(Mode::Fail);
    let exporter = http_spans(&rx).build().unwrap();
    assert!(export(&exporter, mcp_spans()).await.is_err());
    assert_eq!(rx.requests(), 4);
    assert!(rx.spans().is_empty());
}

#[tokio::test]
async fn stall_holds_the_request_until_the_exporter_times_out() {
    for grpc in [false, true] {
        let rx = if grpc {
            OtlpReceiver::grpc().await
        } else {
            OtlpReceiver::http().await
        };
        let exporter = if grpc {
            grpc_spans(&rx).with_timeout(SHORT).build()
        } else {
            http_spans(&rx).with_timeout(SHORT).build()
        }
        .unwrap();

        rx.set_mode(Mode::Stall);
        let start = Instant::now();
        let stalled = export(&exporter, mcp_spans()).await;
        let took = start.elapsed();
        assert!(stalled.is_err(), "grpc {grpc}: {stalled:?}");
        assert!(
            took >= SHORT - Duration::from_millis(20),
            "grpc {grpc}: {took:?}"
        );
        assert!(took < Duration::from_secs(5), "grpc {grpc}: {took:?}");
        assert_eq!(rx.requests(), 1, "grpc {grpc}");
        assert!(rx.spans().is_empty(), "grpc {grpc}");

        // Dropping the receiver stops its server: the port soon refuses connections.
        let addr = rx.addr();
        drop(rx);
        let deadline = Instant::now() + LIMIT;
        while tokio::net::TcpStream::connect(addr).await.is_ok() {
            assert!(Instant::now() < deadline, "grpc {grpc}: still listening");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The SDK's `PeriodicReader` exports from its own thread, outside any tokio runtime, with
/// `futures_executor::block_on`; the hyper client needs one. This client runs each request on
/// the runtime of `handle`.
#[derive(Debug)]
struct OnRuntime {
    handle: Handle,
    inner: Arc<HyperClient>,
}

#[tonic::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let inner = self.inner.clone();
        self.handle
            .spawn(async move { inner.send_bytes(request).await })
            .await?
    }
}

#[tokio::test]
async fn http_exporter_histogram_is_decoded() {
    let rx = OtlpReceiver::http().await;
    let endpoint = format!("{}/v1/metrics", rx.endpoint());
    let handle = Handle::current();
    // The reader's `force_flush` and `shutdown` block until its thread has exported.
    let flushed = tokio::task::spawn_blocking(move || {
        let client = OnRuntime {
            handle,
            inner: Arc::new(HyperClient::with_default_connector(
                Duration::from_secs(5),
                None,
            )),
        };
        let exporter = MetricExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_endpoint(endpoint)
            .with_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter).build())
            .with_resource(resource())
            .build();
        let histogram = provider
            .meter(SERVICE)
            .f64_histogram("mcp.server.operation.duration")
            .with_unit("s")
            .build();
        histogram.record(0.25, &[KeyValue::new("mcp.method.name", "tools/call")]);
        let flushed = provider.force_flush();
        provider.shutdown().unwrap();
        flushed
    });
    timeout(LIMIT, flushed)
        .await
        .expect("the flush did not finish")
        .unwrap()
        .unwrap();

    let metric = rx
        .wait_metric("mcp.server.operation.duration", LIMIT)
        .await
        .expect("the histogram");
    assert_eq!(metric.unit, "s");
    let Some(Data::Histogram(histogram)) = &metric.data else {
        panic!("not a histogram: {metric:#?}");
    };
    assert_eq!(histogram.data_points.len(), 1, "{histogram:#?}");
    let point = &histogram.data_points[0];
    assert_eq!(point.count, 1);
    assert_eq!(point.sum, Some(0.25));
    assert_eq!(point.attributes.len(), 1);
    assert_eq!(point.attributes[0].key, "mcp.method.name");
    let requests = rx.metric_requests();
    assert!(!requests.is_empty());
    let resource = requests[0].resource_metrics[0].resource.as_ref().unwrap();
    assert!(
        resource
            .attributes
            .iter()
            .any(|kv| kv.key == "service.name")
    );
    assert_eq!(
        header(&rx.last_headers(), "content-type"),
        Some("application/x-protobuf")
    );
}
