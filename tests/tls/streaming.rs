//! TLS on both hops at once: an agent over TLS (h1 and h2) → strata → an HTTPS upstream.
//! SSE events still leave as they arrive (nothing waits for a TLS record to fill up), and the
//! calls are classified as usual.

use std::net::SocketAddr;
use std::time::Duration;

use http::Version;
use http_body_util::BodyExt;
use serde_json::json;
use strata::app;
use strata::classify::Outcome;
use strata::config::{Config, ListenTls};
use tokio::time::Instant;

use crate::peers::TlsAgent;
use crate::pki::{Ca, scratch_dir};
use crate::support::{LIMIT, counts, delta_after, just};
use crate::upstream::HttpsUpstream;

/// `sse_drip`'s gap between events; three events, then the result.
const GAP_MS: u64 = 200;

#[tokio::test]
async fn sse_streams_event_by_event_through_tls_on_both_sides() {
    let dir = scratch_dir("both_sides");
    let ca = Ca::new("both sides CA");
    ca.server(1).write(&dir, "server");
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let upstream = HttpsUpstream::spawn(&ca.server(2)).await;
    let mut config = Config::default_with_upstream(upstream.url("localhost"));
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
    config.timeouts.drain = Duration::from_millis(500);
    config.upstream_tls.ca_file = Some(dir.join("ca.pem"));
    config.tls = Some(ListenTls {
        cert_file: dir.join("server.crt"),
        key_file: dir.join("server.key"),
        client_ca_file: None,
    });
    let running = tokio::time::timeout(LIMIT, app::start(&config))
        .await
        .unwrap()
        .unwrap();

    for version in [Version::HTTP_11, Version::HTTP_2] {
        let before = counts(&running);
        let agent = TlsAgent::new(running.listen, ca.roots(), None, version);
        let args = json!({"count": 3, "interval_ms": GAP_MS});
        let response = agent.call("sse_drip", args).await.unwrap();
        assert_eq!(
            (response.status().as_u16(), response.version()),
            (200, version)
        );
        let mut body = response.into_body();
        let (mut first_event, mut text) = (None, String::new());
        while let Some(frame) = tokio::time::timeout(LIMIT, body.frame()).await.unwrap() {
            if let Ok(data) = frame.unwrap().into_data() {
                text.push_str(&String::from_utf8_lossy(&data));
                if first_event.is_none() && text.contains("data:") {
                    first_event = Some(Instant::now());
                }
            }
        }
        let streamed = first_event.unwrap().elapsed();
        // The first event came out about 3 gaps before the end, not with the rest.
        assert!(
            streamed >= Duration::from_millis(2 * GAP_MS),
            "{version:?}: first event only {streamed:?} before the end"
        );
        assert_eq!(text.matches("notifications/progress").count(), 3, "{text}");
        assert!(text.contains("\"result\""), "{text}");
        let delta = delta_after(&running, &before, 1).await;
        let want = just("tools/call", "sse_drip", Outcome::ToolSuccess);
        assert_eq!(delta, want, "{version:?}");
    }
    assert_eq!(upstream.testbed.calls_of("sse_drip"), 2);
    running.stop().await;
}
