//! How an agent of the load generator talks to its target: HTTP/1.1 or h2 with prior
//! knowledge on plain TCP, or TLS with HTTP/1.1 or h2 by ALPN. One connection per agent, no
//! pool, one call at a time on it, whatever the protocol.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::bail;
use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

/// The protocol an agent speaks to its target.
#[derive(Clone)]
pub(crate) enum Wire {
    H1,
    /// h2 with prior knowledge (the connection preface first, no upgrade).
    H2c,
    /// TLS with `config` (its one ALPN protocol: `h2` or `http/1.1`).
    Tls {
        config: Arc<rustls::ClientConfig>,
        h2: bool,
    },
}

/// One agent's connection.
pub(crate) enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Wire {
    fn h2(&self) -> bool {
        matches!(self, Wire::H2c | Wire::Tls { h2: true, .. })
    }

    /// Makes `req` (origin-form, with `Host`) right for this protocol: h2 carries the scheme and
    /// authority as pseudo-header fields, taken from an absolute URI, and no `Host`.
    pub(crate) fn shape(
        &self,
        addr: SocketAddr,
        mut req: Request<Full<Bytes>>,
    ) -> Request<Full<Bytes>> {
        if self.h2() {
            let scheme = if matches!(self, Wire::Tls { .. }) {
                "https"
            } else {
                "http"
            };
            let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
            if let Ok(uri) = format!("{scheme}://{addr}{path}").parse() {
                *req.uri_mut() = uri;
            }
            req.headers_mut().remove(header::HOST);
        }
        req
    }
}

/// Opens a connection to `addr` speaking `wire`.
pub(crate) async fn connect(addr: SocketAddr, wire: &Wire) -> anyhow::Result<Sender> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    match wire {
        Wire::H1 => h1(TokioIo::new(tcp)).await,
        Wire::H2c => h2(TokioIo::new(tcp)).await,
        Wire::Tls {
            config,
            h2: want_h2,
        } => {
            let name = ServerName::IpAddress(addr.ip().into());
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, tcp)
                .await?;
            let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
            match (alpn.as_deref(), want_h2) {
                (Some(b"h2"), true) => h2(TokioIo::new(tls)).await,
                (Some(b"http/1.1"), false) => h1(TokioIo::new(tls)).await,
                (other, _) => bail!(
                    "ALPN: the server chose {:?}",
                    other.map(String::from_utf8_lossy)
                ),
            }
        }
    }
}

async fn h1<I>(io: I) -> anyhow::Result<Sender>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (send, conn) = http1::handshake(io).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Sender::H1(send))
}

async fn h2<I>(io: I) -> anyhow::Result<Sender>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (send, conn) = http2::handshake(TokioExecutor::new(), io).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Sender::H2(send))
}

impl Sender {
    /// Sends `req` once the connection is ready; the response head.
    pub(crate) async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
    ) -> hyper::Result<Response<Incoming>> {
        match self {
            Sender::H1(s) => {
                s.ready().await?;
                s.send_request(req).await
            }
            Sender::H2(s) => {
                s.ready().await?;
                s.send_request(req).await
            }
        }
    }
}
