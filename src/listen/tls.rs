//! Agent-facing TLS termination: rustls (`ring` provider) with the configured certificate,
//! ALPN h2 and http/1.1, and client-certificate verification when `tls.client_ca_file` is set.
//!
//! The acceptor in force lives in [`AgentTls`]; the accept loop reads it once per accepted
//! connection, so a reload that swaps it serves the new certificate to new connections while
//! open ones keep the session they negotiated. The handshake runs in the connection's own task
//! under a deadline, so a slow or hostile agent never holds up the accept loop.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::ListenTls;
use crate::http::io::MaybeTls;
use crate::metrics::{Metrics, TlsFailure};

/// What the agent may negotiate, most preferred first (RFC 7301). Without ALPN a client gets
/// HTTP/1.1, or h2 if it sends the h2 preface anyway: the auto builder detects either.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why the agent-facing TLS settings could not be turned into an acceptor. The operator's side:
/// at start strata does not serve, at reload the old certificate stays in force.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("downstream TLS: {key} {path}: {reason}")]
    File {
        key: &'static str,
        path: String,
        reason: String,
    },
    #[error("downstream TLS: tls.client_ca_file: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
    #[error("downstream TLS: tls.cert_file and tls.key_file: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The agent-facing TLS acceptor in force (`None`: plain TCP), swapped by reloads.
pub struct AgentTls {
    acceptor: RwLock<Option<TlsAcceptor>>,
    metrics: Arc<Metrics>,
}

// === impl AgentTls ===

impl AgentTls {
    /// Reads the files of `tls` (if any) and holds the acceptor built from them.
    pub fn new(tls: Option<&ListenTls>, metrics: Arc<Metrics>) -> Result<Arc<Self>, TlsError> {
        Ok(Arc::new(Self {
            acceptor: RwLock::new(acceptor(tls)?),
            metrics,
        }))
    }

    /// The acceptor for a connection accepted now (a cheap clone: it shares the config).
    pub fn load(&self) -> Option<TlsAcceptor> {
        self.acceptor
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Puts a new acceptor (or plain TCP) in force for connections accepted from now on.
    pub fn store(&self, acceptor: Option<TlsAcceptor>) {
        *self.acceptor.write().unwrap_or_else(|e| e.into_inner()) = acceptor;
    }

    /// The connection's byte stream: `stream` itself without TLS, else the TLS session once
    /// the handshake is done (within `deadline`). A failed handshake is counted and logged
    /// here, once for the connection, and the connection is dropped (`None`).
    pub(super) async fn accept(
        &self,
        acceptor: Option<TlsAcceptor>,
        stream: TcpStream,
        agent: SocketAddr,
        deadline: Duration,
    ) -> Option<AgentIo> {
        let Some(acceptor) = acceptor else {
            return Some(MaybeTls::Plain(stream));
        };
        let (reason, error) = match tokio::time::timeout(deadline, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => return Some(MaybeTls::Tls(Box::new(tls))),
            Ok(Err(err)) => (failure(&err), err.to_string()),
            Err(_) => (TlsFailure::Timeout, "not finished in time".to_owned()),
        };
        self.metrics.tls_handshake_error(reason);
        // debug, not warn: port scanners and load-balancer TCP probes fail here all day long.
        tracing::debug!(%agent, %reason, %error, "agent TLS handshake failed");
        None
    }
}

/// An agent connection: plain TCP, or TLS over it.
pub(super) type AgentIo = MaybeTls<TlsStream<TcpStream>>;

/// Builds the acceptor for `tls`; `None` when TLS is off.
pub fn acceptor(tls: Option<&ListenTls>) -> Result<Option<TlsAcceptor>, TlsError> {
    tls.map(server_config)
        .transpose()
        .map(|config| config.map(|c| TlsAcceptor::from(Arc::new(c))))
}

fn server_config(tls: &ListenTls) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &tls.client_ca_file {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certs(path, "tls.client_ca_file")? {
                roots
                    .add(cert)
                    .map_err(|e| file_error("tls.client_ca_file", path, e.to_string()))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let chain = certs(&tls.cert_file, "tls.cert_file")?;
    // `with_single_cert` also checks that the key belongs to the leaf certificate.
    let mut config = builder.with_single_cert(chain, private_key(&tls.key_file)?)?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

fn certs(path: &Path, key: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = std::fs::read(path).map_err(|e| file_error(key, path, e.to_string()))?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(key, path, e.to_string()))?;
    if certs.is_empty() {
        return Err(file_error(
            key,
            path,
            "no PEM certificate in the file".into(),
        ));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let key = "tls.key_file";
    let pem = std::fs::read(path).map_err(|e| file_error(key, path, e.to_string()))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| file_error(key, path, e.to_string()))?
        .ok_or_else(|| file_error(key, path, "no PEM private key in the file".into()))
}

fn file_error(key: &'static str, path: &Path, reason: String) -> TlsError {
    TlsError::File {
        key,
        path: path.display().to_string(),
        reason,
    }
}

/// Sorts a handshake error: tokio-rustls hands rustls's error inside an `io::Error`.
fn failure(err: &io::Error) -> TlsFailure {
    use rustls::Error as E;
    match err.get_ref().and_then(|e| e.downcast_ref::<E>()) {
        Some(E::NoCertificatesPresented | E::InvalidCertificate(_)) => TlsFailure::ClientCert,
        _ => TlsFailure::Error,
    }
}
