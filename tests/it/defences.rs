//! Defences: the `Origin` allow-list (DNS rebinding) and secrets that must
//! never reach the log. Agents and a scripted upstream on `127.0.0.1:0`.
#![cfg(test)]

use crate::support;

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

const AUTH: &str = "Bearer sk-AUTH-SECRET-7f3a";
const COOKIE: &str = "sid=COOKIE-SECRET-91c2";
const ARG: &str = "ARG-SECRET-55d0";
const ERR: &str = "ERR-SECRET-0b4e";
const SESSION: &str = "SESSION-SECRET-c0de";
const SET_COOKIE: &str = "SETCOOKIE-SECRET-a11e";

/// Answers by tool name, each answer echoing a secret: a JSON-RPC error, the same on SSE, an
/// HTTP 500 with the error, and a tool error result.
fn leaky_upstream(req: &Recorded) -> http::Response<ScriptBody> {
    let call: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let id = call["id"].clone();
    let message = format!("invalid token {ERR} (you sent {ARG})");
    let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32001, "message": message}});
    let cookie = format!("session={SET_COOKIE}");
    let json_ct = ("content-type", "application/json");
    let headers = [json_ct, ("set-cookie", cookie.as_str())];
    match call["params"]["name"].as_str() {
        Some("sse") => respond(
            200,
            &[("content-type", "text/event-stream")],
            full(format!("event: message\ndata: {error}\n\n")),
        ),
        Some("http500") => respond(500, &headers, full(error.to_string())),
        Some("tool_error") => {
            let result = json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": message}], "isError": true}});
            respond(200, &headers, full(result.to_string()))
        }
        _ => respond(200, &headers, full(error.to_string())),
    }
}

/// Calls carrying an `Authorization` header, a cookie, a session id and a token in the tool
/// arguments, answered with errors that echo a token: none of it appears anywhere in the log,
/// at any level, of strata's own targets or of hyper's and h2's.
#[tokio::test]
async fn secrets_never_reach_the_log() {
    let (_guard, logs) = support::capture();
    let upstream = ScriptedUpstream::spawn(leaky_upstream).await;
    let strata = support::strata(upstream.addr, |_| {}).await;
    let headers = [
        ("authorization", AUTH),
        ("cookie", COOKIE),
        ("mcp-session-id", SESSION),
    ];
    let mut calls = 0;
    for transport in [Http1, Http2] {
        let client = McpClient::modern(strata.listen)
            .with_transport(transport)
            .with_timeout(LIMIT);
        for tool in ["json", "sse", "http500", "tool_error"] {
            let id = client.next_id();
            let body = client.tool_call_body(&id, tool, json!({"token": ARG, "query": ARG}));
            let mut b = client.post_builder("tools/call", Some(tool));
            for (k, v) in headers {
                b = b.header(k, v);
            }
            let req = b.body(Full::new(Bytes::from(body.to_string()))).unwrap();
            let reply = client.exchange(id, req).await.unwrap();
            // The agent gets every byte; only the log keeps them out.
            assert!(String::from_utf8_lossy(&reply.body).contains(ERR), "{tool}");
            calls += 1;
        }
    }
    let recs = support::wait_records(&logs, "tool_error", 2).await;
    assert_eq!(recs.len(), 2);
    assert_eq!(support::records(&logs).len(), calls);
    assert!(
        upstream
            .requests()
            .iter()
            .all(|r| r.headers["authorization"] == AUTH)
    );
    let text = logs.text();
    // The capture is at trace level for every target: hyper's and h2's frame traces too.
    for level in ["TRACE", "DEBUG", "INFO"] {
        let tag = format!("\"level\":\"{level}\"");
        assert!(text.contains(&tag), "no {level} line captured");
    }
    assert!(text.contains("\"target\":\"h2::"), "no h2 line captured");
    let secrets = [
        AUTH,
        "sk-AUTH-SECRET",
        COOKIE,
        "COOKIE-SECRET",
        ARG,
        ERR,
        SESSION,
        SET_COOKIE,
    ];
    for line in text.lines() {
        for secret in secrets {
            assert!(!line.contains(secret), "{secret:?} logged: {line}");
        }
    }
}

const IDEMPOTENCY_KEY: &str = "IDEM-SECRET-6d1f";

/// The same calls, with an `Idempotency-Key` too, while the inspector is on: neither `/calls`
/// nor the live stream shows any of the secrets (records carry names, ids and outcomes only).
#[tokio::test]
async fn secrets_never_reach_the_inspector() {
    use http_body_util::{BodyExt, Empty};
    let upstream = ScriptedUpstream::spawn(leaky_upstream).await;
    let strata = support::strata(upstream.addr, |c| c.inspector.enabled = true).await;
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<Bytes>>();
    let admin = |path: &str| {
        let uri = format!("http://{}{path}", strata.admin);
        http.request(http::Request::get(uri).body(Empty::new()).unwrap())
    };
    let mut stream = admin("/calls/stream").await.unwrap().into_body();
    let client = McpClient::modern(strata.listen).with_timeout(LIMIT);
    let tools = ["json", "sse", "http500", "tool_error"];
    for (n, tool) in tools.into_iter().enumerate() {
        let id = client.next_id();
        let body = client.tool_call_body(&id, tool, json!({"token": ARG}));
        let key = format!("{IDEMPOTENCY_KEY}-{n}");
        let req = client
            .post_builder("tools/call", Some(tool))
            .header("authorization", AUTH)
            .header("cookie", COOKIE)
            .header("mcp-session-id", SESSION)
            .header("idempotency-key", key)
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        client.exchange(id, req).await.unwrap();
    }
    let mut streamed = String::new();
    let deadline = tokio::time::Instant::now() + LIMIT;
    while streamed.matches("event: call").count() < tools.len() {
        let frame = tokio::time::timeout_at(deadline, stream.frame())
            .await
            .unwrap();
        let frame = frame.unwrap().unwrap();
        streamed.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()));
    }
    let listed = admin("/calls")
        .await
        .unwrap()
        .into_body()
        .collect()
        .await
        .unwrap();
    let listed = String::from_utf8(listed.to_bytes().to_vec()).unwrap();
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&listed).unwrap().len(),
        tools.len()
    );
    let secrets = [
        "sk-AUTH-SECRET",
        "COOKIE-SECRET",
        ARG,
        ERR,
        SESSION,
        SET_COOKIE,
        IDEMPOTENCY_KEY,
    ];
    for text in [&streamed, &listed] {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret:?} shown: {text}");
        }
    }
}
