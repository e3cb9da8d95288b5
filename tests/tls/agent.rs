//! Agent-facing TLS: strata terminates TLS with the configured certificate, serves h1 and h2
//! (by ALPN) and still classifies every call; asks for client certificates when told to;
//! counts failed handshakes once per connection without disturbing others; and serves a
//! renewed certificate after a reload.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http::Version;
use strata::app::{self, Running};
use strata::classify::Outcome;
use strata::config::{Config, ListenTls, Upstream};
use strata::testbed::{Testbed, TestbedHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::peers::{TlsAgent, eventually, served_certificate};
use crate::pki::{Ca, scratch_dir};
use crate::support::post::series;
use crate::support::{LIMIT, counts, delta_after, just};

/// strata with TLS from `dir` (`server.crt`, `server.key`, and `clients.pem` if `mtls`) in
/// front of a fresh testbed; the config too, for reloads.
async fn tls_strata(
    dir: &Path,
    mtls: bool,
    tweak: impl FnOnce(&mut Config),
) -> (Running, Config, TestbedHandle) {
    let (testbed, _, handle) = Testbed::spawn_local().await.unwrap();
    let upstream = Upstream::parse(&format!("http://{testbed}")).unwrap();
    let mut config = Config::default_with_upstream(upstream);
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
    config.timeouts.drain = Duration::from_millis(500);
    config.tls = Some(ListenTls {
        cert_file: dir.join("server.crt"),
        key_file: dir.join("server.key"),
        client_ca_file: mtls.then(|| dir.join("clients.pem")),
    });
    tweak(&mut config);
    let running = tokio::time::timeout(LIMIT, app::start(&config))
        .await
        .unwrap()
        .unwrap();
    (running, config, handle)
}

fn handshake_errors(running: &Running, reason: &str) -> f64 {
    let text = running.metrics.render();
    series(
        &text,
        "strata_tls_handshake_errors_total",
        &[("reason", reason)],
    )
}

#[tokio::test]
async fn h1_and_h2_over_tls_are_served_and_classified() {
    let dir = scratch_dir("agent_versions");
    let ca = Ca::new("agent CA");
    ca.server(1).write(&dir, "server");
    let (running, _, _testbed) = tls_strata(&dir, false, |_| {}).await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let before = counts(&running);
        let agent = TlsAgent::new(running.listen, ca.roots(), None, version);
        let reply = agent.call_ok().await.unwrap();
        assert_eq!((reply.status, reply.version), (200, version), "{reply:?}");
        assert!(
            String::from_utf8_lossy(&reply.body).contains("\"result\""),
            "{reply:?}"
        );
        let delta = delta_after(&running, &before, 1).await;
        assert_eq!(
            delta,
            just("tools/call", "ok", Outcome::ToolSuccess),
            "{version:?}"
        );
    }
    running.stop().await;
}

#[tokio::test]
async fn failed_handshakes_are_counted_and_leave_others_alone() {
    let dir = scratch_dir("agent_failures");
    let ca = Ca::new("agent CA");
    ca.server(1).write(&dir, "server");
    let (running, _, _testbed) = tls_strata(&dir, false, |c| {
        c.timeouts.header_read = Duration::from_secs(1);
    })
    .await;

    // Plain HTTP to the TLS port: not a ClientHello.
    let mut plain = TcpStream::connect(running.listen).await.unwrap();
    plain
        .write_all(b"POST /mcp HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(
        closed(&mut plain).await,
        "a plain HTTP request is not answered"
    );
    assert!(eventually(|| handshake_errors(&running, "error") == 1.0).await);

    // An agent that connects and says nothing holds a task, not the accept loop, and is cut
    // at timeouts.header_read; a healthy call meanwhile goes through.
    let mut silent = TcpStream::connect(running.listen).await.unwrap();
    let agent = TlsAgent::new(running.listen, ca.roots(), None, Version::HTTP_11);
    assert_eq!(agent.call_ok().await.unwrap().status, 200);
    assert!(closed(&mut silent).await, "the silent connection is closed");
    assert!(eventually(|| handshake_errors(&running, "timeout") == 1.0).await);

    // An agent that does not trust strata's certificate.
    let stranger = Ca::new("someone else");
    let distrustful = TlsAgent::new(running.listen, stranger.roots(), None, Version::HTTP_11);
    assert!(distrustful.call_ok().await.is_err());
    assert!(eventually(|| handshake_errors(&running, "error") == 2.0).await);
    assert_eq!(handshake_errors(&running, "client_cert"), 0.0);
    running.stop().await;
}

/// True once the peer closes (or resets) the connection, within [`LIMIT`].
async fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(LIMIT, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            // A TLS alert may come first; keep reading until the close.
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

#[tokio::test]
async fn mutual_tls_requires_a_certificate_from_the_client_ca() {
    let dir = scratch_dir("agent_mtls");
    let ca = Ca::new("agent CA");
    ca.server(1).write(&dir, "server");
    let clients = Ca::new("client CA");
    std::fs::write(dir.join("clients.pem"), clients.pem()).unwrap();
    let (running, _, _testbed) = tls_strata(&dir, true, |_| {}).await;
    let at = running.listen;

    let anonymous = TlsAgent::new(at, ca.roots(), None, Version::HTTP_11);
    assert!(anonymous.call_ok().await.is_err(), "no client certificate");
    assert!(eventually(|| handshake_errors(&running, "client_cert") == 1.0).await);

    let foreign = Ca::new("other client CA").client("mallory");
    let impostor = TlsAgent::new(at, ca.roots(), Some(&foreign), Version::HTTP_2);
    assert!(
        impostor.call_ok().await.is_err(),
        "a certificate from another CA"
    );
    assert!(eventually(|| handshake_errors(&running, "client_cert") == 2.0).await);

    let before = counts(&running);
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let cert = clients.client("agent");
        let agent = TlsAgent::new(at, ca.roots(), Some(&cert), version);
        let reply = agent.call_ok().await.unwrap();
        assert_eq!((reply.status, reply.version), (200, version));
    }
    let delta = delta_after(&running, &before, 2).await;
    assert_eq!(delta.values().sum::<u64>(), 2, "{delta:?}");
    running.stop().await;
}

#[tokio::test]
async fn a_reload_serves_the_renewed_certificate_to_new_connections() {
    let dir = scratch_dir("agent_reload");
    let ca = Ca::new("agent CA");
    let first = ca.server(1);
    first.write(&dir, "server");
    let (running, config, _testbed) = tls_strata(&dir, false, |_| {}).await;
    let at: SocketAddr = running.listen;
    assert_eq!(served_certificate(at, ca.roots()).await, first.der);
    // An agent with a pooled connection from before the reload.
    let agent = TlsAgent::new(at, ca.roots(), None, Version::HTTP_2);
    assert_eq!(agent.call_ok().await.unwrap().status, 200);

    // Renewal: new files at the same paths, then SIGHUP (here: `reload` with the same config).
    let renewed = ca.server(2);
    renewed.write(&dir, "server");
    running.reload(&config).unwrap();
    assert_eq!(served_certificate(at, ca.roots()).await, renewed.der);
    assert_ne!(first.der, renewed.der);
    assert_eq!(
        agent.call_ok().await.unwrap().status,
        200,
        "the open connection"
    );

    // A broken renewal is refused whole: the last good certificate stays in force.
    std::fs::write(dir.join("server.crt"), "garbage\n").unwrap();
    let err = running.reload(&config).unwrap_err().to_string();
    assert!(err.contains("tls.cert_file"), "{err}");
    assert_eq!(served_certificate(at, ca.roots()).await, renewed.der);
    let text = running.metrics.render();
    assert_eq!(
        series(&text, "strata_config_reloads_total", &[("result", "ok")]),
        1.0
    );
    assert_eq!(
        series(&text, "strata_config_reloads_total", &[("result", "error")]),
        1.0
    );
    running.stop().await;
}

#[tokio::test]
async fn a_reload_turns_tls_on_and_off_for_new_connections() {
    let dir = scratch_dir("agent_toggle");
    let ca = Ca::new("agent CA");
    ca.server(1).write(&dir, "server");
    let (running, mut config, _testbed) = tls_strata(&dir, false, |c| c.tls = None).await;
    let at = running.listen;
    let fresh_tls = || TlsAgent::new(at, ca.roots(), None, Version::HTTP_11);
    assert!(answers_plain_http(at).await);
    assert!(fresh_tls().call_ok().await.is_err());

    config.tls = Some(ListenTls {
        cert_file: dir.join("server.crt"),
        key_file: dir.join("server.key"),
        client_ca_file: None,
    });
    running.reload(&config).unwrap();
    assert_eq!(fresh_tls().call_ok().await.unwrap().status, 200);
    assert!(!answers_plain_http(at).await);

    config.tls = None;
    running.reload(&config).unwrap();
    assert!(answers_plain_http(at).await);
    assert!(fresh_tls().call_ok().await.is_err());
    running.stop().await;
}

/// Whether a new plain connection gets an HTTP response to a GET.
async fn answers_plain_http(at: SocketAddr) -> bool {
    let mut stream = TcpStream::connect(at).await.unwrap();
    let request = b"GET /mcp HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    stream.write_all(request).await.unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(LIMIT, stream.read_to_end(&mut reply)).await;
    reply.starts_with(b"HTTP/1.1 ")
}
