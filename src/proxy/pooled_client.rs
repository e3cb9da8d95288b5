//! hyper-util's pooled client, shared by every worker, for the calls strata's own connections
//! (`h1_conns.rs`) do not take: those whose request body is streamed. HTTP/1.1, over TCP or
//! TLS, as on strata's own connections.
//!
//! TLS, for both: rustls with the `ring` provider; roots are Mozilla's (webpki) or the host's
//! (native), plus an optional extra CA file. Verification is on unless
//! `insecure_skip_verify`, which is logged loudly at start-up. No ALPN is offered: the server
//! speaks HTTP/1.1, and toward HTTP/1.1 the agent's `Host` and the target's authority cannot
//! disagree as `Host` and `:authority` could in h2 (RFC 9113 §8.3.1).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::config::{TlsRoots, UpstreamTls};

/// The body strata sends upstream: the agent's, observed by the request inspector.
pub use super::request_body::RequestBody;
pub type UpstreamClient = Client<Bounded<HttpsConnector<HttpConnector>>, RequestBody>;

/// Idle pooled connections are closed after this. It must stay below the servers' own
/// keep-alive timeouts — uvicorn's and Node's are 5 s — or a call sent just as the server
/// closes an idle connection fails (502), and a `tools/call` is not retried.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `key`: the setting that names the file.
    #[error("{key} {path}: {reason}")]
    CaFile {
        key: &'static str,
        path: String,
        reason: String,
    },
    #[error("upstream TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("upstream {0}: not a host name or IP address a certificate can name")]
    ServerName(String),
}

/// Builds the shared pooled client, with the TLS settings of [`tls_config`].
pub fn build(tls: &ClientConfig, connect_timeout: Duration) -> UpstreamClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls.clone())
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    let bounded = Bounded {
        inner: https,
        limit: connect_timeout,
    };
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build(bounded)
}

/// A connector whose whole connect — TCP, and the TLS handshake for `https://` — ends within
/// `timeouts.connect`, as on strata's own connections (hyper-util's `HttpConnector` bounds the
/// TCP connect alone). Past it the connect fails: a connect error, nothing sent.
#[derive(Clone)]
pub struct Bounded<C> {
    inner: C,
    limit: Duration,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<C> tower_service::Service<http::Uri> for Bounded<C>
where
    C: tower_service::Service<http::Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let limit = self.limit;
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                Err(_elapsed) => Err("timeouts.connect elapsed".into()),
            }
        })
    }
}

/// The TLS settings for connections to an `https://` upstream (no ALPN: HTTP/1.1).
pub fn tls_config(tls: &UpstreamTls) -> Result<ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    if tls.insecure_skip_verify {
        tracing::warn!(
            "upstream_tls.insecure_skip_verify is ON: the upstream's certificate is NOT verified; \
             anyone on the path can impersonate the MCP server"
        );
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth());
    }
    let mut roots = RootCertStore::empty();
    match tls.roots {
        TlsRoots::Webpki => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        TlsRoots::Native => {
            let found = rustls_native_certs::load_native_certs();
            for err in &found.errors {
                tracing::warn!(error = %err, "a native root certificate could not be loaded");
            }
            roots.add_parsable_certificates(found.certs);
        }
    }
    if let Some(path) = &tls.ca_file {
        for cert in read_certs(path, "upstream_tls.ca_file")? {
            roots.add(cert).map_err(|e| ClientError::CaFile {
                key: "upstream_tls.ca_file",
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        }
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// Reads every certificate of a PEM file.
pub fn read_certs(
    path: &std::path::Path,
    key: &'static str,
) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let err = |reason: String| ClientError::CaFile {
        key,
        path: path.display().to_string(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no PEM certificate in the file".into()));
    }
    Ok(certs)
}

/// Accepts any server certificate (signatures are still checked for form).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_a_certificate_is_named_by_the_setting_that_names_it() {
        let path = std::env::temp_dir().join(format!("strata-ca-{}.crt", std::process::id()));
        std::fs::write(&path, "not a certificate\n").unwrap();
        let error = read_certs(&path, "idempotency.redis.ca_file").unwrap_err();
        std::fs::remove_file(&path).unwrap();
        let text = error.to_string();
        assert!(
            text.starts_with("idempotency.redis.ca_file ")
                && text.ends_with("no PEM certificate in the file"),
            "{text}"
        );
    }
}
