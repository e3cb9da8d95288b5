//! A test-only OTLP receiver: what strata exports over OpenTelemetry, decoded with the official
//! protobuf definitions (`opentelemetry-proto`), on a free loopback port.
//!
//! - [`OtlpReceiver::http`]: OTLP/HTTP with protobuf bodies (`POST /v1/traces`,
//!   `POST /v1/metrics`, `content-type: application/x-protobuf`), HTTP/1.1.
//! - [`OtlpReceiver::grpc`]: OTLP/gRPC (`TraceService` and `MetricsService`), with tonic.
//!
//! A [`Mode`] shared with the server decides the answer: accept (store what was decoded, answer
//! the empty `Export*ServiceResponse`), stall (hold the request unanswered until the receiver is
//! dropped) or fail (HTTP 503, gRPC `UNAVAILABLE`). Every request is counted and its headers
//! kept whatever the mode, except one carrying another receiver's [`TOKEN_HEADER`]; only
//! accepted requests are stored. Dropping the receiver stops the
//! server, its connections and every stalled request.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, sleep};

/// The protobuf media type of OTLP/HTTP.
const PROTOBUF: &str = "application/x-protobuf";

/// The header naming the receiver an exporter was pointed at ([`OtlpReceiver::token`]). A
/// request carrying another receiver's token reached this one by a reused loopback port (an
/// exporter of a test that has ended, flushing): it is answered 404 and neither counted nor
/// stored.
pub const TOKEN_HEADER: &str = "x-otlp-receiver";

/// Tokens already given out in this process.
static TOKENS: AtomicUsize = AtomicUsize::new(0);

/// How often the `wait_*` methods look again.
const POLL: Duration = Duration::from_millis(20);

/// How the receiver answers, switchable while it runs ([`OtlpReceiver::set_mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Decode, store, answer the empty `Export*ServiceResponse` (HTTP 200 / gRPC OK).
    Accept,
    /// Read the request, then never answer (until the receiver is dropped).
    Stall,
    /// Answer HTTP 503 / gRPC `UNAVAILABLE` without storing anything.
    Fail,
}

impl Mode {
    fn from_u8(value: u8) -> Mode {
        match value {
            1 => Mode::Stall,
            2 => Mode::Fail,
            _ => Mode::Accept,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Mode::Accept => 0,
            Mode::Stall => 1,
            Mode::Fail => 2,
        }
    }
}

/// An attribute value, as far as the tests look at it.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
    /// Arrays, key-value lists, bytes, or no value.
    Other,
}

impl Attr {
    fn from_any(value: Option<&AnyValue>) -> Attr {
        match value.and_then(|v| v.value.as_ref()) {
            Some(Value::StringValue(s)) => Attr::Str(s.clone()),
            Some(Value::IntValue(i)) => Attr::Int(*i),
            Some(Value::BoolValue(b)) => Attr::Bool(*b),
            Some(Value::DoubleValue(d)) => Attr::Double(*d),
            _ => Attr::Other,
        }
    }
}

/// One received span, flattened out of its `ResourceSpans` / `ScopeSpans`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub name: String,
    /// The proto `SpanKind` value: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer,
    /// 5 consumer ([`ReceivedSpan::kind_name`]).
    pub kind: i32,
    /// Lower hex, 32 digits.
    pub trace_id: String,
    /// Lower hex, 16 digits.
    pub span_id: String,
    /// Lower hex; empty when the span is a root.
    pub parent_span_id: String,
    pub flags: u32,
    pub attributes: BTreeMap<String, Attr>,
    /// The attributes of the span's resource.
    pub resource: BTreeMap<String, Attr>,
    /// The instrumentation scope's name.
    pub scope: String,
    /// 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    pub status_message: String,
    /// Name and attributes of each event, in order.
    pub events: Vec<(String, BTreeMap<String, Attr>)>,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl ReceivedSpan {
    fn from_proto(span: &Span, resource: &BTreeMap<String, Attr>, scope: &str) -> ReceivedSpan {
        let status = span.status.as_ref();
        ReceivedSpan {
            name: span.name.clone(),
            kind: span.kind,
            trace_id: hex(&span.trace_id),
            span_id: hex(&span.span_id),
            parent_span_id: hex(&span.parent_span_id),
            flags: span.flags,
            attributes: attrs(&span.attributes),
            resource: resource.clone(),
            scope: scope.to_owned(),
            status_code: status.map_or(0, |s| s.code),
            status_message: status.map(|s| s.message.clone()).unwrap_or_default(),
            events: span
                .events
                .iter()
                .map(|e| (e.name.clone(), attrs(&e.attributes)))
                .collect(),
            start_ns: span.start_time_unix_nano,
            end_ns: span.end_time_unix_nano,
        }
    }

    /// "SERVER", "CLIENT", "INTERNAL", "PRODUCER", "CONSUMER" or "UNSPECIFIED".
    pub fn kind_name(&self) -> &'static str {
        match SpanKind::try_from(self.kind) {
            Ok(SpanKind::Server) => "SERVER",
            Ok(SpanKind::Client) => "CLIENT",
            Ok(SpanKind::Internal) => "INTERNAL",
            Ok(SpanKind::Producer) => "PRODUCER",
            Ok(SpanKind::Consumer) => "CONSUMER",
            Ok(SpanKind::Unspecified) | Err(_) => "UNSPECIFIED",
        }
    }

    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attributes.get(key)
    }

    /// The attribute if it is a string.
    pub fn str_attr(&self, key: &str) -> Option<&str> {
        match self.attr(key)? {
            Attr::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The attribute if it is an integer.
    pub fn int_attr(&self, key: &str) -> Option<i64> {
        match self.attr(key)? {
            Attr::Int(i) => Some(*i),
            _ => None,
        }
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, Attr> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), Attr::from_any(kv.value.as_ref())))
        .collect()
}

/// Lower hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Lower-case header names and their values (lossy UTF-8), in the map's order.
fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// What the server and the receiver share.
struct State {
    mode: AtomicU8,
    requests: AtomicUsize,
    /// This receiver's [`TOKEN_HEADER`] value.
    token: String,
    last_headers: Mutex<Vec<(String, String)>>,
    spans: Mutex<Vec<ReceivedSpan>>,
    metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
    /// Its sender lives in the receiver: `changed()` returns when the receiver is dropped.
    dropped: watch::Receiver<()>,
}

impl State {
    /// Counts the request and keeps its headers; gives the mode to answer in, or `None` for a
    /// request meant for another receiver.
    fn arrived(&self, headers: &HeaderMap) -> Option<Mode> {
        let token = headers.get(TOKEN_HEADER).map(|v| v.as_bytes());
        if token.is_some_and(|t| t != self.token.as_bytes()) {
            eprintln!("otlp receiver: a request for another receiver: {headers:?}");
            return None;
        }
        self.requests.fetch_add(1, Ordering::SeqCst);
        *self.last_headers.lock().unwrap() = header_pairs(headers);
        Some(Mode::from_u8(self.mode.load(Ordering::SeqCst)))
    }

    /// Pending until the receiver is dropped.
    async fn stall(&self) {
        let mut dropped = self.dropped.clone();
        // Nothing is ever sent: this returns (with an error) when the sender is dropped.
        let _ = dropped.changed().await;
    }

    fn store_traces(&self, request: &ExportTraceServiceRequest) {
        let mut received = Vec::new();
        for resource_spans in &request.resource_spans {
            let resource = resource_spans
                .resource
                .as_ref()
                .map(|r| attrs(&r.attributes))
                .unwrap_or_default();
            for scope_spans in &resource_spans.scope_spans {
                let scope = scope_spans
                    .scope
                    .as_ref()
                    .map(|s| s.name.as_str())
                    .unwrap_or_default();
                for span in &scope_spans.spans {
                    received.push(ReceivedSpan::from_proto(span, &resource, scope));
                }
            }
        }
        self.spans.lock().unwrap().extend(received);
    }

    fn store_metrics(&self, request: ExportMetricsServiceRequest) {
        self.metrics.lock().unwrap().push(request);
    }
}

/// A running OTLP receiver on `127.0.0.1`. Dropping it stops the server.
pub struct OtlpReceiver {
    addr: SocketAddr,
    state: Arc<State>,
    task: AbortHandle,
    /// Dropped with the receiver: releases every stalled request.
    _dropped: watch::Sender<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OtlpReceiver {
    async fn bind() -> (TcpListener, SocketAddr, Arc<State>, watch::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (dropped_tx, dropped_rx) = watch::channel(());
        let state = Arc::new(State {
            mode: AtomicU8::new(Mode::Accept.as_u8()),
            requests: AtomicUsize::new(0),
            token: format!(
                "{}-{}",
                std::process::id(),
                TOKENS.fetch_add(1, Ordering::SeqCst)
            ),
            last_headers: Mutex::new(Vec::new()),
            spans: Mutex::new(Vec::new()),
            metrics: Mutex::new(Vec::new()),
            dropped: dropped_rx,
        });
        (listener, addr, state, dropped_tx)
    }

    /// OTLP/HTTP (protobuf), HTTP/1.1, on a free loopback port, served on the current runtime.
    pub async fn http() -> OtlpReceiver {
        let (listener, addr, state, dropped) = OtlpReceiver::bind().await;
        let served = state.clone();
        let task = tokio::spawn(async move {
            // Owns the connections: aborting this task drops the set, which aborts them all.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    sleep(POLL).await;
                    continue;
                };
                while connections.try_join_next().is_some() {}
                let state = served.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer_http(&state, request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        OtlpReceiver {
            addr,
            state,
            task: task.abort_handle(),
            _dropped: dropped,
        }
    }

    /// OTLP/gRPC (`TraceService`, `MetricsService`) on a free loopback port, served on the
    /// current runtime.
    pub async fn grpc() -> OtlpReceiver {
        let (listener, addr, state, dropped) = OtlpReceiver::bind().await;
        let service = GrpcService(state.clone());
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let mut stopped = state.dropped.clone();
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(service.clone()))
                .add_service(MetricsServiceServer::new(service))
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = stopped.changed().await;
                })
                .await;
        });
        OtlpReceiver {
            addr,
            state,
            task: task.abort_handle(),
            _dropped: dropped,
        }
    }

    /// The value an exporter sends in [`TOKEN_HEADER`] to be told apart from exporters meant
    /// for other receivers.
    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// `http://127.0.0.1:PORT`, without a path.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How requests arriving from now on are answered (a request's mode is read on arrival).
    pub fn set_mode(&self, mode: Mode) {
        self.state.mode.store(mode.as_u8(), Ordering::SeqCst);
    }

    /// Requests received so far, in every mode, on any path.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// The headers of the latest request (lower-case names; for gRPC, the request metadata).
    pub fn last_headers(&self) -> Vec<(String, String)> {
        self.state.last_headers.lock().unwrap().clone()
    }

    /// Every accepted span so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.state.spans.lock().unwrap().clone()
    }

    /// The spans once there are at least `n` of them, or whatever there is after `within`.
    pub async fn wait_spans(&self, n: usize, within: Duration) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + within;
        loop {
            let spans = self.spans();
            if spans.len() >= n || Instant::now() >= deadline {
                return spans;
            }
            sleep(POLL).await;
        }
    }

    /// Every accepted metrics export request so far, in arrival order.
    pub fn metric_requests(&self) -> Vec<ExportMetricsServiceRequest> {
        self.state.metrics.lock().unwrap().clone()
    }

    /// The latest received metric named `name`, waiting up to `within` for one.
    pub async fn wait_metric(&self, name: &str, within: Duration) -> Option<Metric> {
        let deadline = Instant::now() + within;
        loop {
            let found = self.latest_metric(name);
            if found.is_some() || Instant::now() >= deadline {
                return found;
            }
            sleep(POLL).await;
        }
    }

    fn latest_metric(&self, name: &str) -> Option<Metric> {
        let requests = self.state.metrics.lock().unwrap();
        requests
            .iter()
            .rev()
            .flat_map(|r| r.resource_metrics.iter().rev())
            .flat_map(|r| r.scope_metrics.iter().rev())
            .flat_map(|s| s.metrics.iter().rev())
            .find(|m| m.name == name)
            .cloned()
    }
}

fn reply(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    reply(status, "text/plain", message.as_bytes().to_vec())
}

async fn answer_http(state: &State, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(mode) = state.arrived(request.headers()) else {
        return text(StatusCode::NOT_FOUND, "another receiver's request");
    };
    let is_traces = request.uri().path() == "/v1/traces";
    if request.method() != Method::POST || !(is_traces || request.uri().path() == "/v1/metrics") {
        return text(StatusCode::NOT_FOUND, "not an OTLP path");
    }
    let protobuf = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or_default().trim() == PROTOBUF);
    let encoded = request
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes() != b"identity");
    if !protobuf || encoded {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "only uncompressed application/x-protobuf",
        );
    }
    let Ok(body) = request.into_body().collect().await else {
        return text(StatusCode::BAD_REQUEST, "broken body");
    };
    let body = body.to_bytes();
    match mode {
        Mode::Accept => {}
        Mode::Stall => {
            state.stall().await;
            return text(StatusCode::SERVICE_UNAVAILABLE, "receiver dropped");
        }
        Mode::Fail => return text(StatusCode::SERVICE_UNAVAILABLE, "mode: fail"),
    }
    let response = if is_traces {
        match ExportTraceServiceRequest::decode(body) {
            Ok(decoded) => state.store_traces(&decoded),
            Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
        }
        ExportTraceServiceResponse::default().encode_to_vec()
    } else {
        match ExportMetricsServiceRequest::decode(body) {
            Ok(decoded) => state.store_metrics(decoded),
            Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
        }
        ExportMetricsServiceResponse::default().encode_to_vec()
    };
    reply(StatusCode::OK, PROTOBUF, response)
}

/// Both gRPC services over the shared state.
#[derive(Clone)]
struct GrpcService(Arc<State>);

impl GrpcService {
    /// Counts, keeps the metadata, and answers per the mode: `Ok` to store and succeed.
    async fn arrived<T>(&self, request: &tonic::Request<T>) -> Result<(), tonic::Status> {
        let headers = request.metadata().clone().into_headers();
        match self.0.arrived(&headers) {
            None => Err(tonic::Status::not_found("another receiver's request")),
            Some(Mode::Accept) => Ok(()),
            Some(Mode::Stall) => {
                self.0.stall().await;
                Err(tonic::Status::unavailable("receiver dropped"))
            }
            Some(Mode::Fail) => Err(tonic::Status::unavailable("mode: fail")),
        }
    }
}

#[tonic::async_trait]
impl TraceService for GrpcService {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.arrived(&request).await?;
        self.0.store_traces(request.get_ref());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for GrpcService {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.arrived(&request).await?;
        self.0.store_metrics(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}
