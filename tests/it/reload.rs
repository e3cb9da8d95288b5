//! Config reload (SIGHUP in `main`): a new config is swapped in without dropping the listener;
//! a bad one is refused and counted, and the old one stays in force.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use strata::app::start;
use strata::config::{Config, Overrides, Upstream};
use strata::testbed::Testbed;

async fn call_ok(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    at: std::net::SocketAddr,
) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = http::Request::post(format!("http://{at}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .unwrap()
        .unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

#[tokio::test]
async fn reload_swaps_the_upstream_and_refuses_bad_configs() {
    let (a, bed_a, _ha) = Testbed::spawn_local().await.unwrap();
    let (b, bed_b, _hb) = Testbed::spawn_local().await.unwrap();
    let mut config =
        Config::default_with_upstream(Upstream::parse(&format!("http://{a}")).unwrap());
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.admin = "127.0.0.1:0".parse().unwrap();
    let running = start(&config).await.unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http();

    assert_eq!(call_ok(&client, running.listen).await, 200);
    assert_eq!((bed_a.calls_of("ok"), bed_b.calls_of("ok")), (1, 0));

    config.upstream = Upstream::parse(&format!("http://{b}")).unwrap();
    running.reload(&config).unwrap();
    // On the same pooled agent connection, which keeps a copy of the proxy (`ProxyCache`):
    // the reload must reach it too.
    assert_eq!(call_ok(&client, running.listen).await, 200);
    assert_eq!(
        (bed_a.calls_of("ok"), bed_b.calls_of("ok")),
        (1, 1),
        "the new upstream answered"
    );

    // A bad file never reaches `reload`: it is refused where it is parsed, and counted.
    let bad = Config::parse("upstream: ftp://nope\n", "bad.yaml", &Overrides::default());
    assert!(bad.is_err());
    running.reload_refused();
    assert_eq!(call_ok(&client, running.listen).await, 200);
    assert_eq!(bed_b.calls_of("ok"), 2, "the old config stays in force");

    let text = running.metrics.render();
    assert!(
        text.contains("strata_config_reloads_total{result=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("strata_config_reloads_total{result=\"error\"} 1"),
        "{text}"
    );
    running.stop().await;
}
