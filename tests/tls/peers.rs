//! The test's TLS peers on the agent side: an agent (hyper-util's client over hyper-rustls,
//! trusting the test CA, with or without a client certificate), and a bare handshake that
//! reports the certificate strata served.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::pki::{Leaf, provider};
use crate::support::LIMIT;

/// What the agent got.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub version: Version,
    pub body: Bytes,
}

/// An agent speaking HTTPS to strata, offering only `version` by ALPN.
pub struct TlsAgent {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    at: SocketAddr,
}

impl TlsAgent {
    pub fn new(
        at: SocketAddr,
        roots: RootCertStore,
        cert: Option<&Leaf>,
        version: Version,
    ) -> Self {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match cert {
            Some(leaf) => builder
                .with_client_auth_cert(leaf.chain(), leaf.key())
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only();
        let https = match version {
            Version::HTTP_2 => https.enable_http2().build(),
            _ => https.enable_http1().build(),
        };
        TlsAgent {
            client: Client::builder(TokioExecutor::new()).build(https),
            at,
        }
    }

    /// POSTs a tools/call of `ok` to `https://127.0.0.1:PORT/mcp` and reads the whole reply.
    pub async fn call_ok(&self) -> Result<Reply, hyper_util::client::legacy::Error> {
        let response = self.call("ok", json!({})).await?;
        let (status, version) = (response.status().as_u16(), response.version());
        let body = tokio::time::timeout(LIMIT, response.into_body().collect())
            .await
            .expect("the body timed out")
            .unwrap()
            .to_bytes();
        Ok(Reply {
            status,
            version,
            body,
        })
    }

    /// POSTs a 2026-07-28 tools/call of `tool`; returns at the response head.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
    ) -> Result<Response<Incoming>, hyper_util::client::legacy::Error> {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }}
        });
        let request = http::Request::post(format!("https://{}/mcp", self.at))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        tokio::time::timeout(LIMIT, self.client.request(request))
            .await
            .expect("the call timed out")
    }
}

/// The leaf certificate strata serves to a new connection now.
pub async fn served_certificate(at: SocketAddr, roots: RootCertStore) -> CertificateDer<'static> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(at).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let tls = tokio::time::timeout(
        LIMIT,
        TlsConnector::from(Arc::new(config)).connect(name, tcp),
    )
    .await
    .unwrap()
    .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].clone()
}

/// Waits (bounded) until `check` holds.
pub async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while !check() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}
