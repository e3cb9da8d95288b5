use std::sync::Arc;
use std::time::Duration;

use http::uri::Authority;
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::{H1Conns, KEEP_HEAD, head_buffer, keep_head};
use crate::config::UpstreamTls;
use crate::proxy::pooled_client::tls_config;

/// An upstream that accepts one connection and reports when strata closes it.
async fn upstream() -> (Authority, oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority: Authority = listener.local_addr().unwrap().to_string().parse().unwrap();
    let (closed, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut io, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 64];
        while io.read(&mut buf).await.unwrap_or(0) > 0 {}
        let _ = closed.send(());
    });
    (authority, rx)
}

/// A connection left idle past the limit is closed by the sweep, with no call to find it.
#[tokio::test]
async fn idle_connections_are_closed_by_the_sweep() {
    let (authority, closed) = upstream().await;
    let limit = Duration::from_millis(60);
    let conns = H1Conns::new(&authority, None, Duration::from_secs(5), limit).unwrap();
    let held = conns.connect().await.unwrap();
    conns.checkin(held);
    assert_eq!(conns.idle_count(), 1);
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("the upstream saw the idle connection closed")
        .unwrap();
    assert_eq!(conns.idle_count(), 0);
}

/// Within the limit an idle connection stays, and is the one the next call takes.
#[tokio::test]
async fn a_connection_within_the_limit_is_kept_and_taken() {
    let (authority, mut closed) = upstream().await;
    let conns = H1Conns::new(
        &authority,
        None,
        Duration::from_secs(5),
        Duration::from_secs(30),
    )
    .unwrap();
    let held = conns.connect().await.unwrap();
    conns.checkin(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(conns.idle_count(), 1);
    assert!(closed.try_recv().is_err());
    assert!(conns.here().checkout(Instant::now()).await.is_some());
    assert_eq!(conns.idle_count(), 0);
}

/// A TLS upstream (a self-signed `localhost` certificate) that accepts one connection and,
/// once the handshake is done, closes it at once (`close`) or holds it until strata closes
/// it. rustls sends TLS 1.3 session tickets right after the handshake.
async fn tls_upstream(close: bool) -> Arc<H1Conns> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![certified.cert.der().clone()],
            PrivateKeyDer::Pkcs8(key),
        )
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = TlsAcceptor::from(Arc::new(config))
            .accept(tcp)
            .await
            .unwrap();
        if !close {
            let mut buf = [0u8; 64];
            while tls.read(&mut buf).await.unwrap_or(0) > 0 {}
        }
    });
    let authority: Authority = format!("localhost:{port}").parse().unwrap();
    let skip = UpstreamTls {
        insecure_skip_verify: true,
        ..UpstreamTls::default()
    };
    let client = Arc::new(tls_config(&skip).unwrap());
    H1Conns::new(
        &authority,
        Some(client),
        Duration::from_secs(5),
        Duration::from_secs(30),
    )
    .unwrap()
}

/// An idle TLS connection with the server's session tickets waiting unread is open: the
/// check at checkout reads them and finds no application data.
#[tokio::test]
async fn an_idle_tls_connection_with_session_tickets_waiting_is_taken() {
    let conns = tls_upstream(false).await;
    let held = conns.connect().await.unwrap();
    conns.checkin(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(conns.here().checkout(Instant::now()).await.is_some());
}

/// An idle TLS connection the server closed is found closed at checkout, and dropped.
#[tokio::test]
async fn an_idle_tls_connection_the_server_closed_is_not_taken() {
    let conns = tls_upstream(true).await;
    let held = conns.connect().await.unwrap();
    conns.checkin(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(conns.here().checkout(Instant::now()).await.is_none());
    assert_eq!(conns.idle_count(), 0);
}

/// A written head's buffer is the next head's on the same thread: one buffer a thread, not
/// one a call; one grown past the limit is not kept.
#[test]
fn a_head_buffer_is_reused_by_the_next_head() {
    std::thread::spawn(|| {
        let mut first = head_buffer(200);
        assert!(first.is_empty() && first.capacity() >= 200);
        first.extend_from_slice(b"POST / HTTP/1.1\r\n\r\n");
        let (at, room) = (first.as_ptr(), first.capacity());
        keep_head(first);
        let second = head_buffer(100);
        assert!(second.is_empty());
        assert_eq!(
            (second.as_ptr(), second.capacity()),
            (at, room),
            "the spare was not reused"
        );
        // Taken: a head encoded meanwhile gets a buffer of its own.
        let meanwhile = head_buffer(100);
        assert_ne!(meanwhile.as_ptr(), at);
        keep_head(second);

        let big = head_buffer(KEEP_HEAD + 1);
        keep_head(big);
        assert!(
            head_buffer(10).capacity() <= KEEP_HEAD,
            "a big buffer was kept"
        );
    })
    .join()
    .unwrap();
}
