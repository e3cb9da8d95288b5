//! Where OTLP exports go, over HTTP/protobuf or gRPC, as configured: spans as strata writes
//! them ([`SpanSender`]: a request body made by `export.rs`), metrics through the
//! `opentelemetry-otlp` crate's exporter. The configured headers are set on every request
//! last, so a file's header wins over an `OTEL_EXPORTER_OTLP_HEADERS` entry of the same name
//! (which the crate adds itself).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry_http::{HttpClient, HttpError, hyper::HyperClient};
use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig};
use opentelemetry_otlp::{
    MetricExporter, Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig,
};
use rustls::RootCertStore;
use tonic::client::Grpc;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Channel, Endpoint};

use super::TelemetryError;
use crate::config::{OtlpProtocol, TelemetryConfig};

/// An exporter of either signal, built the same way: the two builders share their methods
/// but no trait to name them by.
macro_rules! exporter {
    ($builder:expr, $config:expr, $endpoint:expr) => {
        match $config.protocol {
            OtlpProtocol::HttpProtobuf => $builder
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint($endpoint)
                .with_timeout($config.timeout)
                .with_http_client(Collector::new($config)?)
                .build(),
            OtlpProtocol::Grpc => $builder
                .with_tonic()
                .with_endpoint($endpoint)
                .with_timeout($config.timeout)
                .with_interceptor(HeadersLast(Arc::new(metadata($config))))
                .with_tls_config(grpc_tls($config, $endpoint)?)
                .build(),
        }
        .map_err(|e| TelemetryError::Exporter(e.to_string()))
    };
}

/// The gRPC method spans are exported with (`opentelemetry/proto/collector/trace/v1`).
const TRACE_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Sends export requests of spans, already encoded, to the collector.
pub(super) enum SpanSender {
    Http {
        collector: Box<Collector>,
        endpoint: Uri,
    },
    Grpc {
        client: Box<Grpc<Channel>>,
        metadata: Arc<MetadataMap>,
        timeout: Duration,
    },
}

impl SpanSender {
    pub(super) fn new(config: &TelemetryConfig, endpoint: &str) -> Result<Self, TelemetryError> {
        let bad = |e: &dyn fmt::Display| TelemetryError::Exporter(format!("{endpoint}: {e}"));
        Ok(match config.protocol {
            OtlpProtocol::HttpProtobuf => SpanSender::Http {
                collector: Box::new(Collector::new(config)?),
                endpoint: endpoint.parse().map_err(|e| bad(&e))?,
            },
            OtlpProtocol::Grpc => {
                let tls = grpc_tls(config, endpoint)?;
                let channel = Endpoint::from_shared(endpoint.to_owned())
                    .and_then(|e| e.tls_config(tls))
                    .map_err(|e| bad(&e))?
                    .timeout(config.timeout)
                    .connect_lazy();
                SpanSender::Grpc {
                    client: Box::new(Grpc::new(channel)),
                    metadata: Arc::new(metadata(config)),
                    timeout: config.timeout,
                }
            }
        })
    }

    /// Sends one `ExportTraceServiceRequest`; an error says what the collector answered.
    pub(super) async fn send(&mut self, body: Vec<u8>) -> Result<(), String> {
        match self {
            SpanSender::Http {
                collector,
                endpoint,
            } => {
                let request = Request::post(endpoint.clone())
                    .header(CONTENT_TYPE, "application/x-protobuf")
                    .body(Bytes::from(body))
                    .map_err(|e| e.to_string())?;
                let response = collector
                    .send_bytes(request)
                    .await
                    .map_err(|e| e.to_string())?;
                match response.status().is_success() {
                    true => Ok(()),
                    false => Err(format!("HTTP {}", response.status())),
                }
            }
            SpanSender::Grpc {
                client,
                metadata,
                timeout,
            } => {
                let mut request = tonic::Request::new(Bytes::from(body));
                *request.metadata_mut() = MetadataMap::clone(metadata);
                request.set_timeout(*timeout);
                client.ready().await.map_err(|e| e.to_string())?;
                let path = PathAndQuery::from_static(TRACE_EXPORT);
                client
                    .unary::<_, (), _>(request, path, Encoded)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// A gRPC codec for a message encoded already; the answer's content is not read (an
/// `ExportTraceServiceResponse` says at most that some spans were refused).
#[derive(Clone, Copy, Debug)]
struct Encoded;

impl Codec for Encoded {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = Encoded;
    type Decoder = Encoded;

    fn encoder(&mut self) -> Encoded {
        Encoded
    }

    fn decoder(&mut self) -> Encoded {
        Encoded
    }
}

impl Encoder for Encoded {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Encoded {
    type Item = ();
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, tonic::Status> {
        src.advance(src.remaining());
        Ok(Some(()))
    }
}

/// The metric exporter for `endpoint`.
pub(super) fn metrics(
    config: &TelemetryConfig,
    endpoint: &str,
) -> Result<MetricExporter, TelemetryError> {
    exporter!(MetricExporter::builder(), config, endpoint)
}

/// Sets the configured headers on each gRPC request, over any the environment added.
#[derive(Clone)]
struct HeadersLast(Arc<MetadataMap>);

impl tonic::service::Interceptor for HeadersLast {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        for entry in self.0.iter() {
            if let tonic::metadata::KeyAndValueRef::Ascii(key, value) = entry {
                request.metadata_mut().insert(key.clone(), value.clone());
            }
        }
        Ok(request)
    }
}

/// The configured headers as gRPC metadata (validated as header fields already).
fn metadata(config: &TelemetryConfig) -> MetadataMap {
    let mut map = MetadataMap::new();
    for (name, value) in &config.headers {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(name.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            map.insert(key, value);
        }
    }
    map
}

/// TLS toward an `https://` gRPC collector: Mozilla's roots, and `ca_file` when set.
fn grpc_tls(config: &TelemetryConfig, endpoint: &str) -> Result<ClientTlsConfig, TelemetryError> {
    let mut tls = ClientTlsConfig::new();
    if !endpoint.starts_with("https://") {
        return Ok(tls);
    }
    tls = tls.with_webpki_roots();
    if let Some(path) = &config.ca_file {
        let pem = std::fs::read(path).map_err(|e| TelemetryError::CaFile(e.to_string()))?;
        tls = tls.ca_certificate(Certificate::from_pem(pem));
    }
    Ok(tls)
}

/// The HTTP client OTLP/HTTP exports go through: hyper's, with rustls for an `https://`
/// collector, and the configured headers set last.
#[derive(Clone)]
pub(super) struct Collector {
    client: HyperClient<HttpsConnector<HttpConnector>>,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl Collector {
    fn new(config: &TelemetryConfig) -> Result<Collector, TelemetryError> {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path).map_err(|e| TelemetryError::CaFile(e.to_string()))?;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                let cert = cert.map_err(|e| TelemetryError::CaFile(e.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|e| TelemetryError::CaFile(e.to_string()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TelemetryError::CaFile(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let headers = config
            .headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    HeaderName::try_from(name.as_str()).ok()?,
                    HeaderValue::try_from(value.as_str()).ok()?,
                ))
            })
            .collect();
        Ok(Collector {
            client: HyperClient::new(connector, config.timeout, None),
            headers: Arc::new(headers),
        })
    }
}

impl fmt::Debug for Collector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may hold credentials: only their names.
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Collector")
            .field("headers", &names)
            .finish()
    }
}

type Sending<'a> = Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'a>>;

impl HttpClient for Collector {
    fn send_bytes<'a, 'b>(&'a self, mut request: Request<Bytes>) -> Sending<'b>
    where
        'a: 'b,
        Self: 'b,
    {
        for (name, value) in self.headers.iter() {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        Box::pin(self.client.send_bytes(request))
    }
}
