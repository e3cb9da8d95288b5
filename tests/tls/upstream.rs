//! Upstream TLS: strata verifies the MCP server's certificate by default (a self-signed one
//! is a connect error: 502, counted), trusts a private CA from `upstream_tls.ca_file`, sends
//! the upstream's host name as SNI, and accepts anything with `insecure_skip_verify`, saying
//! so in the log.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::LazyConfigAcceptor;

use serde_json::json;
use strata::app::Running;
use strata::classify::Outcome;
use strata::config::{Config, Upstream, Workers};
use strata::testbed::{Testbed, TestbedHandle};

use crate::pki::{Ca, Leaf, provider, scratch_dir, self_signed};
use crate::support::post::Agent;
use crate::support::{capture, counts, delta_after, just, strata};

/// What one connection to a [`TlsFront`] negotiated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handshake {
    /// The SNI host name the client sent, if any.
    pub sni: Option<String>,
    pub alpn: Option<Vec<u8>>,
}

/// Terminates TLS with `leaf` and relays the bytes to a plain upstream (the testbed), so the
/// testbed's own server answers over HTTPS (HTTP/1.1 or h2, whichever ALPN picked).
pub struct TlsFront {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Handshake>>>,
    task: JoinHandle<()>,
}

impl TlsFront {
    pub async fn spawn(leaf: &Leaf, target: SocketAddr) -> TlsFront {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(leaf.chain(), leaf.key())
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (config, recorded) = (config.clone(), recorded.clone());
                tokio::spawn(async move {
                    let acceptor = rustls::server::Acceptor::default();
                    let Ok(start) = LazyConfigAcceptor::new(acceptor, tcp).await else {
                        return;
                    };
                    let sni = start.client_hello().server_name().map(str::to_owned);
                    // A client that rejects our certificate fails here: nothing to relay.
                    let Ok(mut tls) = start.into_stream(config).await else {
                        return;
                    };
                    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                    recorded.lock().unwrap().push(Handshake { sni, alpn });
                    let Ok(mut plain) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront { addr, seen, task }
    }

    /// The handshakes completed so far, oldest first.
    pub fn handshakes(&self) -> Vec<Handshake> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The testbed behind a TLS front serving `leaf`.
pub struct HttpsUpstream {
    pub front: TlsFront,
    pub testbed: Arc<Testbed>,
    _handle: TestbedHandle,
}

impl HttpsUpstream {
    pub async fn spawn(leaf: &Leaf) -> HttpsUpstream {
        let (addr, testbed, handle) = Testbed::spawn_local().await.unwrap();
        HttpsUpstream {
            front: TlsFront::spawn(leaf, addr).await,
            testbed,
            _handle: handle,
        }
    }

    /// `https://HOST:PORT` of the front.
    pub fn url(&self, host: &str) -> Upstream {
        Upstream::parse(&format!("https://{host}:{}", self.front.addr.port())).unwrap()
    }
}

/// strata (plain agent side, one attempt per call) in front of `upstream`.
async fn strata_to(upstream: Upstream, tweak: impl FnOnce(&mut Config)) -> Running {
    // `support::strata` wants a plain address; the upstream is replaced right after.
    let placeholder = SocketAddr::from(([127, 0, 0, 1], 1));
    strata(placeholder, |c| {
        c.upstream = upstream;
        c.policy.retry.max_attempts = 1;
        tweak(c);
    })
    .await
}

async fn call_ok(running: &Running) -> u16 {
    Agent::new(running.listen)
        .call(json!(1), "ok", json!({}), &[])
        .await
        .status
}

fn connect_errors(running: &Running) -> f64 {
    // A family without labels: `series` looks for `{`, so read the line directly.
    let family = "strata_upstream_connect_errors_total ";
    let text = running.metrics.render();
    let line = text.lines().find(|l| l.starts_with(family)).unwrap();
    line[family.len()..].parse().unwrap()
}

/// A PEM file holding `pem`, in a fresh directory.
fn ca_file(name: &str, pem: &str) -> PathBuf {
    let path = scratch_dir(name).join("ca.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

/// On both routes to an `https://` upstream: hyper-util's pooled client (one attempt, the body
/// streamed) and strata's own connections (retries on, the body read whole).
const ROUTES: [u32; 2] = [1, 3];

#[tokio::test]
async fn verification_is_on_by_default() {
    for attempts in ROUTES {
        let upstream = HttpsUpstream::spawn(&self_signed()).await;
        let running = strata_to(upstream.url("localhost"), |c| {
            c.policy.retry.max_attempts = attempts;
        })
        .await;
        assert_eq!(connect_errors(&running), 0.0);
        let before = counts(&running);
        assert_eq!(call_ok(&running).await, 502, "{attempts} attempts");
        assert!(connect_errors(&running) >= 1.0, "{attempts} attempts");
        let delta = delta_after(&running, &before, 1).await;
        assert_eq!(delta, just("tools/call", "ok", Outcome::HttpError));
        assert_eq!(
            upstream.testbed.calls_of("ok"),
            0,
            "nothing reached the upstream"
        );
        assert!(upstream.front.handshakes().is_empty());
        running.stop().await;
    }
}

#[tokio::test]
async fn a_private_ca_is_trusted_and_the_host_is_sent_as_sni() {
    for attempts in ROUTES {
        private_ca_on_route(attempts).await;
    }
}

async fn private_ca_on_route(attempts: u32) {
    let ca = Ca::new("upstream CA");
    let upstream = HttpsUpstream::spawn(&ca.server(7)).await;
    let ca_path = ca_file("upstream_ca", &ca.pem());
    let trusting = |c: &mut Config| {
        c.upstream_tls.ca_file = Some(ca_path.clone());
        c.policy.retry.max_attempts = attempts;
        // One worker: strata's own connections are kept per worker.
        c.workers = Workers::Count(1);
    };

    let running = strata_to(upstream.url("localhost"), trusting).await;
    let before = counts(&running);
    assert_eq!(call_ok(&running).await, 200);
    let delta = delta_after(&running, &before, 1).await;
    assert_eq!(delta, just("tools/call", "ok", Outcome::ToolSuccess));
    assert_eq!(upstream.testbed.calls_of("ok"), 1);
    assert_eq!(connect_errors(&running), 0.0);
    // No ALPN: the front, which would prefer h2, speaks HTTP/1.1. The second call goes on the
    // first one's connection: one handshake.
    assert_eq!(call_ok(&running).await, 200);
    let want = Handshake {
        sni: Some("localhost".to_owned()),
        alpn: None,
    };
    assert_eq!(upstream.front.handshakes(), vec![want]);
    running.stop().await;

    // By IP address: the certificate's IP SAN verifies it, and no SNI is sent (RFC 6066 §3
    // allows only host names in server_name).
    let running = strata_to(upstream.url("127.0.0.1"), trusting).await;
    assert_eq!(call_ok(&running).await, 200);
    assert_eq!(upstream.front.handshakes()[1].sni, None);
    running.stop().await;

    // The same upstream without the CA file: Mozilla's roots do not vouch for it.
    let running = strata_to(upstream.url("localhost"), |c| {
        c.policy.retry.max_attempts = attempts;
    })
    .await;
    assert_eq!(call_ok(&running).await, 502);
    assert!(connect_errors(&running) >= 1.0);
    assert_eq!(upstream.testbed.calls_of("ok"), 3);
    running.stop().await;
}

#[tokio::test]
async fn insecure_skip_verify_accepts_any_certificate_and_says_so_loudly() {
    let upstream = HttpsUpstream::spawn(&self_signed()).await;
    let (_guard, logs) = capture();
    let running = strata_to(upstream.url("localhost"), |c| {
        c.upstream_tls.insecure_skip_verify = true;
    })
    .await;
    let warning = logs
        .text()
        .lines()
        .find(|l| l.contains("insecure_skip_verify is ON"))
        .map(str::to_owned);
    let warning = warning.expect("no insecure_skip_verify warning in the log");
    assert!(warning.contains("\"level\":\"WARN\""), "{warning}");
    assert_eq!(call_ok(&running).await, 200);
    assert_eq!(upstream.testbed.calls_of("ok"), 1);
    assert_eq!(upstream.front.handshakes().len(), 1);
    running.stop().await;
}

/// A TLS handshake that never finishes (the server accepts and sends nothing) ends at
/// `timeouts.connect` on both routes: 502 and a connect error, not the response head's wait.
#[tokio::test]
async fn a_handshake_that_never_finishes_ends_at_the_connect_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let holding = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = silent.accept().await {
            held.push(tcp);
        }
    });
    for attempts in ROUTES {
        let url = Upstream::parse(&format!("https://localhost:{port}")).unwrap();
        let running = strata_to(url, |c| {
            c.policy.retry.max_attempts = attempts;
            c.timeouts.connect = Duration::from_millis(300);
            c.timeouts.response_head = Duration::from_secs(30);
        })
        .await;
        let started = tokio::time::Instant::now();
        assert_eq!(call_ok(&running).await, 502, "{attempts} attempts");
        let took = started.elapsed();
        // Each attempt ends at 300 ms; three, with their backoff, well within 10 s. Unbounded,
        // the call would wait the 30 s response-head timeout.
        assert!(
            took < Duration::from_secs(10),
            "{attempts} attempts: {took:?}"
        );
        assert!(connect_errors(&running) >= 1.0, "{attempts} attempts");
        running.stop().await;
    }
    holding.abort();
}
