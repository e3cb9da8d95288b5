//! Defences (issue 7, item 5): the `Origin` allow-list (DNS rebinding) and secrets that must
//! never reach the log. Agents and a scripted upstream on `127.0.0.1:0`.
#![cfg(test)]

mod support;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use strata::config::Origins;
use strata::testbed::client::{McpClient, Reply, Transport};
use support::upstream::{Recorded, ScriptBody, ScriptedUpstream, full, respond};
use support::{LIMIT, delta_after, just};

use Transport::{Http1, Http2};
use strata::classify::Outcome;

const ALLOWED: &str = "https://app.example.com";

fn ok_upstream(req: &Recorded) -> http::Response<ScriptBody> {
    let id = serde_json::from_slice::<Value>(&req.body).map_or(Value::Null, |v| v["id"].clone());
    let body = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [], "isError": false}});
    respond(
        200,
        &[("content-type", "application/json")],
        full(body.to_string()),
    )
}

/// One tools/call with extra headers, read whole.
async fn call(client: &McpClient, headers: &[(&str, &str)], args: Value) -> Reply {
    let id = client.next_id();
    let body = client.tool_call_body(&id, "t", args);
    let mut b = client.post_builder("tools/call", Some("t"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    client.exchange(id, req).await.unwrap()
}

fn limit_hits(text: &str, limit: &str) -> u64 {
    let prefix = format!("strata_limit_hits_total{{limit=\"{limit}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or(0)
}

/// A browser page from an origin not on the list gets 403 and a JSON-RPC error, and nothing
/// reaches the MCP server; listed origins and agents that send no `Origin` pass.
#[tokio::test]
async fn origins_not_on_the_list_get_403_and_nothing_is_forwarded() {
    let upstream = ScriptedUpstream::spawn(ok_upstream).await;
    let strata = support::strata(upstream.addr, |c| {
        c.origins = Origins::new(vec![ALLOWED.into()]);
    })
    .await;
    for transport in [Http1, Http2] {
        let client = McpClient::modern(strata.listen)
            .with_transport(transport)
            .with_timeout(LIMIT);
        let seen = upstream.requests().len();
        let before = support::counts(&strata);
        // No Origin (every non-browser agent) and a listed one: forwarded.
        for headers in [vec![], vec![("origin", ALLOWED)]] {
            let reply = call(&client, &headers, json!({})).await;
            assert_eq!(reply.status, StatusCode::OK, "{transport:?} {headers:?}");
        }
        assert_eq!(upstream.requests().len(), seen + 2);
        let d = delta_after(&strata, &before, 2).await;
        assert_eq!(d.values().sum::<u64>(), 2, "{d:?}");

        let hits = limit_hits(&strata.metrics.render(), "origin");
        let before = support::counts(&strata);
        for evil in [
            "https://evil.example",
            "http://app.example.com",
            "https://app.example.com:8443",
            "null",
        ] {
            let reply = call(&client, &[("origin", evil)], json!({})).await;
            assert_eq!(reply.status, StatusCode::FORBIDDEN, "{transport:?} {evil}");
            assert_eq!(
                reply.headers["x-strata-error"],
                "downstream:origin_not_allowed"
            );
            let body = reply.json().unwrap();
            assert_eq!(body["jsonrpc"], "2.0");
            assert_eq!(body["id"], Value::Null);
            assert_eq!(body["error"]["code"], -32000);
        }
        // The standalone GET stream and DELETE are refused too.
        for method in [Method::GET, Method::DELETE] {
            let req = client
                .builder(method.clone())
                .header("origin", "https://evil.example")
                .body(Full::default())
                .unwrap();
            let reply = client.exchange(Value::Null, req).await.unwrap();
            assert_eq!(reply.status, StatusCode::FORBIDDEN, "{method}");
        }
        assert_eq!(upstream.requests().len(), seen + 2, "nothing was forwarded");
        assert_eq!(limit_hits(&strata.metrics.render(), "origin"), hits + 6);
        // Refused before the body is read: there is no call to count.
        let d = support::delta(&before, &support::counts(&strata));
        assert!(d.is_empty(), "{d:?}");
    }
    // Without a list, any origin passes.
    let open = support::strata(upstream.addr, |_| {}).await;
    let client = McpClient::modern(open.listen).with_timeout(LIMIT);
    let before = support::counts(&open);
    let reply = call(&client, &[("origin", "https://evil.example")], json!({})).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        delta_after(&open, &before, 1).await,
        just("tools/call", "t", Outcome::ToolSuccess)
    );
}
