//! Transparency: strata changes nothing an agent or a server would notice, other than the
//! headers a proxy must touch. Bodies come out byte-for-byte as the upstream sent them (JSON,
//! SSE, anything), whatever the chunk boundaries; headers pass both ways; GET streams and
//! DELETE pass; 202/204/4xx bodies pass; requests strata cannot parse reach the upstream
//! unchanged. Both HTTP/1.1 and h2 (prior knowledge) agents.
#![cfg(test)]

use crate::support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::Full;
use proptest::prelude::*;
use proptest::test_runner::{Config as PropConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use strata::app::Running;
use strata::classify::Outcome;
use strata::config::HostHeader;
use strata::testbed::client::{McpClient, Reply, SseReader, Transport};
use support::upstream::{Recorded, ScriptedUpstream, full, pieces, respond};
use support::{LIMIT, Stack, delta_after, just};
use tokio::time::{sleep, timeout};

use Transport::{Http1, Http2};

/// Property cases per body kind; each case is two real HTTP exchanges.
const CASES: u32 = 32;
/// Between two pieces of a scripted body, so each is written and flushed on its own.
const PIECE_GAP: Duration = Duration::from_millis(1);
const ID: i64 = 7;

/// What the scripted upstream answers next.
#[derive(Clone, Debug)]
struct Script {
    status: u16,
    content_type: Option<&'static str>,
    body: Bytes,
    cuts: Vec<usize>,
    /// `Content-Length` framing instead of chunked.
    content_length: bool,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            status: 200,
            content_type: Some("application/json"),
            body: Bytes::new(),
            cuts: Vec::new(),
            content_length: false,
        }
    }
}

/// A scripted upstream playing the current [`Script`], and strata in front of it.
struct Fixture {
    upstream: ScriptedUpstream,
    strata: Running,
    script: Arc<Mutex<Script>>,
}

impl Fixture {
    async fn start(tweak: impl FnOnce(&mut strata::config::Config)) -> Fixture {
        let script = Arc::new(Mutex::new(Script::default()));
        let playing = script.clone();
        let upstream = ScriptedUpstream::spawn(move |_| {
            let s = playing.lock().unwrap().clone();
            let mut headers = Vec::new();
            if let Some(ct) = s.content_type {
                headers.push(("content-type", ct.to_owned()));
            }
            if s.content_length {
                headers.push(("content-length", s.body.len().to_string()));
            }
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            respond(s.status, &headers, pieces(s.body, &s.cuts, PIECE_GAP))
        })
        .await;
        let strata = support::strata(upstream.addr, tweak).await;
        Fixture {
            upstream,
            strata,
            script,
        }
    }

    fn play(&self, script: Script) {
        *self.script.lock().unwrap() = script;
    }

    /// The same tools/call sent direct and through strata: both replies.
    async fn both(&self, transport: Transport) -> (Reply, Reply) {
        let direct = call(self.upstream.addr, Http1).await;
        let proxied = call(self.strata.listen, transport).await;
        (direct, proxied)
    }
}

/// A 2026-07-28 tools/call of tool "t" with id [`ID`] to `addr`, read whole.
async fn call(addr: SocketAddr, transport: Transport) -> Reply {
    let client = McpClient::modern(addr)
        .with_transport(transport)
        .with_timeout(LIMIT);
    let body = client.tool_call_body(&json!(ID), "t", json!({}));
    let req = client
        .post_builder("tools/call", Some("t"))
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    client.exchange(json!(ID), req).await.unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A deterministic runner: the same cases on every run.
fn runner() -> TestRunner {
    let config = PropConfig {
        cases: CASES,
        failure_persistence: None,
        ..PropConfig::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

fn transport() -> impl Strategy<Value = Transport> {
    prop_oneof![Just(Http1), Just(Http2)]
}

/// Up to 16 cut offsets; those past the body's end are ignored.
fn cuts(max: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..max, 0..16)
}

/// A tools/call result with arbitrary text (any Unicode, escapes included), as an SDK server
/// would serialize it, optionally pretty-printed.
fn json_result() -> impl Strategy<Value = Bytes> {
    ("\\PC{0,120}", any::<bool>()).prop_map(|(text, pretty)| {
        let v = json!({"jsonrpc": "2.0", "id": ID, "result": {
            "content": [{"type": "text", "text": text}], "isError": false,
            "resultType": "complete"}});
        let s = if pretty {
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            v.to_string()
        };
        Bytes::from(s)
    })
}

/// SSE: progress notifications (some with ids, some after a comment), then the result; each
/// event with LF, CRLF or CR line ends.
fn sse_result() -> impl Strategy<Value = Bytes> {
    let eol = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
    let event = (eol.clone(), any::<bool>(), any::<bool>(), "\\PC{0,40}");
    (proptest::collection::vec(event, 0..5), eol, "\\PC{0,40}").prop_map(
        |(events, last_eol, text)| {
            let mut out = String::new();
            for (i, (eol, with_id, comment, msg)) in events.into_iter().enumerate() {
                if comment {
                    out.push_str(&format!(": keep-alive{eol}{eol}"));
                }
                if with_id {
                    out.push_str(&format!("id: e{i}{eol}"));
                }
                let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": ID, "progress": i, "message": msg}});
                out.push_str(&format!("event: message{eol}data: {note}{eol}{eol}"));
            }
            let result = json!({"jsonrpc": "2.0", "id": ID, "result": {
                "content": [{"type": "text", "text": text}], "isError": false}});
            out.push_str(&format!("data: {result}{last_eol}{last_eol}"));
            Bytes::from(out)
        },
    )
}

/// Headers worth comparing between a direct and a proxied reply: all but `date` (the clock)
/// and `via` (strata adds one), with the framing headers hyper may legitimately pick anew.
fn comparable(h: &HeaderMap) -> BTreeMap<String, Vec<Vec<u8>>> {
    let mut out: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for (k, v) in h {
        if [
            "date",
            "via",
            "transfer-encoding",
            "connection",
            "keep-alive",
        ]
        .contains(&k.as_str())
        {
            continue;
        }
        out.entry(k.as_str().to_owned())
            .or_default()
            .push(v.as_bytes().to_vec());
    }
    out
}

/// Direct and proxied replies must carry the same status, headers and bytes as the script.
fn assert_same(direct: &Reply, proxied: &Reply, body: &Bytes) -> Result<(), TestCaseError> {
    prop_assert_eq!(direct.status, proxied.status);
    prop_assert_eq!(&direct.body, body);
    prop_assert_eq!(&proxied.body, body);
    prop_assert!(direct.broken.is_none() && proxied.broken.is_none());
    let (d, p) = (comparable(&direct.headers), comparable(&proxied.headers));
    // hyper may send a known length as Content-Length where the upstream sent chunks; the
    // length itself is never different.
    let strip = |mut m: BTreeMap<String, Vec<Vec<u8>>>| {
        m.remove("content-length");
        m
    };
    prop_assert_eq!(strip(d), strip(p));
    Ok(())
}

#[test]
fn json_bodies_are_forwarded_byte_for_byte_and_classified_alike() {
    let rt = runtime();
    let fx = rt.block_on(Fixture::start(|_| {}));
    let strategy = (json_result(), cuts(400), any::<bool>(), transport());
    let result = runner().run(&strategy, |(body, cuts, content_length, transport)| {
        rt.block_on(async {
            fx.play(Script {
                body: body.clone(),
                cuts,
                content_length,
                ..Script::default()
            });
            let before = support::counts(&fx.strata);
            let (direct, proxied) = timeout(LIMIT, fx.both(transport)).await.unwrap();
            assert_same(&direct, &proxied, &body)?;
            let d = delta_after(&fx.strata, &before, 1).await;
            prop_assert_eq!(d, just("tools/call", "t", Outcome::ToolSuccess));
            Ok(())
        })
    });
    result.unwrap();
}

#[test]
fn sse_bodies_are_forwarded_byte_for_byte_and_classified_alike() {
    let rt = runtime();
    let fx = rt.block_on(Fixture::start(|_| {}));
    let strategy = (sse_result(), cuts(600), transport());
    let result = runner().run(&strategy, |(body, cuts, transport)| {
        rt.block_on(async {
            fx.play(Script {
                content_type: Some("text/event-stream"),
                body: body.clone(),
                cuts,
                ..Script::default()
            });
            let before = support::counts(&fx.strata);
            let (direct, proxied) = timeout(LIMIT, fx.both(transport)).await.unwrap();
            assert_same(&direct, &proxied, &body)?;
            let d = delta_after(&fx.strata, &before, 1).await;
            prop_assert_eq!(d, just("tools/call", "t", Outcome::ToolSuccess));
            Ok(())
        })
    });
    result.unwrap();
}

#[test]
fn any_bytes_any_status_are_forwarded_unchanged_and_classified_once() {
    let rt = runtime();
    let fx = rt.block_on(Fixture::start(|_| {}));
    let status = prop_oneof![Just(200u16), Just(202), Just(400), Just(404), Just(500)];
    let content_type = prop_oneof![
        Just(Some("application/json")),
        Just(Some("text/event-stream")),
        Just(Some("text/plain")),
        Just(None),
    ];
    let strategy = (
        proptest::collection::vec(any::<u8>(), 0..2000),
        status,
        content_type,
        cuts(2000),
        any::<bool>(),
        transport(),
    );
    let result = runner().run(
        &strategy,
        |(body, status, content_type, cuts, content_length, transport)| {
            rt.block_on(async {
                let body = Bytes::from(body);
                fx.play(Script {
                    status,
                    content_type,
                    body: body.clone(),
                    cuts,
                    content_length,
                });
                let before = support::counts(&fx.strata);
                let (direct, proxied) = timeout(LIMIT, fx.both(transport)).await.unwrap();
                assert_same(&direct, &proxied, &body)?;
                let d = delta_after(&fx.strata, &before, 1).await;
                prop_assert_eq!(d.values().sum::<u64>(), 1, "{:?}", d);
                Ok(())
            })
        },
    );
    result.unwrap();
}

// --- Headers ---

/// Request headers the agent sends, beyond the era's own (`Accept`, `Content-Type`,
/// `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).
const AGENT_HEADERS: [(&str, &str); 7] = [
    ("mcp-session-id", "sess-123"),
    ("mcp-param-region", "eu-west-1"),
    ("last-event-id", "s1-4"),
    ("authorization", "Bearer secret-token"),
    ("cookie", "a=1; b=2"),
    ("x-forwarded-for", "10.1.2.3"),
    ("x-custom", "one"),
];

/// Hop-by-hop headers an HTTP/1.1 agent may send (h2 forbids them on the wire).
const HOP_BY_HOP: [(&str, &str); 5] = [
    ("connection", "x-hop"),
    ("x-hop", "1"),
    ("keep-alive", "timeout=5"),
    ("proxy-connection", "keep-alive"),
    ("te", "trailers"),
];

fn headers_upstream(_: &Recorded) -> http::Response<support::upstream::ScriptBody> {
    respond(
        200,
        &[
            ("content-type", "application/json"),
            ("mcp-session-id", "sess-from-server"),
            ("set-cookie", "s=1; Path=/"),
            ("set-cookie", "t=2; Path=/"),
            ("www-authenticate", "Bearer resource_metadata=\"x\""),
            ("cache-control", "no-cache"),
            ("x-resp-custom", "r"),
            ("connection", "x-resp-hop"),
            ("x-resp-hop", "1"),
            ("keep-alive", "timeout=5"),
        ],
        full(format!(
            r#"{{"jsonrpc":"2.0","id":{ID},"result":{{"content":[],"isError":false}}}}"#
        )),
    )
}

fn values(h: &HeaderMap, name: &str) -> Vec<String> {
    h.get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn headers_pass_both_ways_and_hop_by_hop_ones_do_not() {
    for host_header in [HostHeader::Preserve, HostHeader::Upstream] {
        let upstream = ScriptedUpstream::spawn(headers_upstream).await;
        let strata = support::strata(upstream.addr, |c| c.host_header = host_header).await;
        for transport in [Http1, Http2] {
            let client = McpClient::modern(strata.listen)
                .with_transport(transport)
                .with_timeout(LIMIT);
            let body = client
                .tool_call_body(&json!(ID), "t", json!({"region": "eu-west-1"}))
                .to_string();
            let path = "/mcp/sub?x=1&y=%2F&z";
            let mut b = client
                .post_builder("tools/call", Some("t"))
                .uri(format!("http://{}{path}", strata.listen));
            for (k, v) in AGENT_HEADERS {
                b = b.header(k, v);
            }
            b = b.header("x-custom", "two");
            if transport == Http1 {
                b = b.header("host", "agent.example:7000");
                for (k, v) in HOP_BY_HOP {
                    b = b.header(k, v);
                }
            }
            let req = b.body(Full::new(Bytes::from(body.clone()))).unwrap();
            let reply = client.exchange(json!(ID), req).await.unwrap();
            let ctx = format!("{transport:?} {host_header:?}");
            assert_eq!(reply.status, StatusCode::OK, "{ctx}");

            // What the upstream received.
            let got = upstream.last();
            let h = &got.headers;
            assert_eq!(got.method, Method::POST);
            assert_eq!(got.uri.to_string(), path, "{ctx}: path and query verbatim");
            assert_eq!(&got.body[..], body.as_bytes(), "{ctx}");
            for (k, v) in AGENT_HEADERS
                .iter()
                .filter(|(k, _)| *k != "x-custom" && *k != "x-forwarded-for")
            {
                assert_eq!(values(h, k), [*v], "{ctx}: {k}");
            }
            assert_eq!(values(h, "x-custom"), ["one", "two"], "{ctx}");
            assert_eq!(values(h, "mcp-protocol-version"), ["2026-07-28"], "{ctx}");
            assert_eq!(values(h, "mcp-method"), ["tools/call"], "{ctx}");
            assert_eq!(values(h, "mcp-name"), ["t"], "{ctx}");
            assert_eq!(
                values(h, "accept"),
                ["application/json, text/event-stream"],
                "{ctx}"
            );
            assert_eq!(values(h, "content-type"), ["application/json"], "{ctx}");
            for (k, _) in HOP_BY_HOP {
                assert!(h.get(k).is_none(), "{ctx}: {k} is hop-by-hop");
            }
            let via = if transport == Http1 {
                "1.1 strata"
            } else {
                "2 strata"
            };
            assert_eq!(values(h, "via"), [via], "{ctx}");
            assert_eq!(
                values(h, "x-forwarded-for"),
                ["10.1.2.3, 127.0.0.1"],
                "{ctx}"
            );
            let host = match (host_header, transport) {
                (HostHeader::Upstream, _) => upstream.addr.to_string(),
                (HostHeader::Preserve, Http1) => "agent.example:7000".to_owned(),
                // An h2 agent sends `:authority`; strata makes the upstream's Host from it.
                (HostHeader::Preserve, Http2) => strata.listen.to_string(),
            };
            assert_eq!(values(h, "host"), [host], "{ctx}");

            // What the agent received.
            let r = &reply.headers;
            assert_eq!(values(r, "mcp-session-id"), ["sess-from-server"], "{ctx}");
            assert_eq!(
                values(r, "set-cookie"),
                ["s=1; Path=/", "t=2; Path=/"],
                "{ctx}"
            );
            assert_eq!(
                values(r, "www-authenticate"),
                ["Bearer resource_metadata=\"x\""],
                "{ctx}"
            );
            assert_eq!(values(r, "cache-control"), ["no-cache"], "{ctx}");
            assert_eq!(values(r, "x-resp-custom"), ["r"], "{ctx}");
            assert_eq!(values(r, "via"), ["1.1 strata"], "{ctx}");
            for k in ["x-resp-hop", "keep-alive"] {
                assert!(r.get(k).is_none(), "{ctx}: {k} is hop-by-hop");
            }
            assert!(
                values(r, "connection")
                    .iter()
                    .all(|v| !v.contains("x-resp-hop")),
                "{ctx}"
            );
        }
    }
}

// --- GET, DELETE and bodies of non-200 answers ---

#[tokio::test]
async fn get_stream_and_delete_pass_and_are_not_calls() {
    let stack = Stack::start(|_| {}).await;
    for transport in [Http1, Http2] {
        let client = stack.legacy(transport).await;
        let before = stack.counts();

        // The standalone GET stream: open, its first event (`: ok`) arrives, close it.
        let resp = client.get_stream(None).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let mut reader = SseReader::new(resp.into_body()).with_timeout(LIMIT);
        let (first, _) = reader.next_event().await.unwrap().unwrap();
        assert_eq!(&first.raw[..], b": ok\n\n");
        drop(reader);

        // Resuming an unknown stream: the testbed's 400 body, unchanged.
        let resp = client.get_stream(Some("nope-1")).await.unwrap();
        let reply = strata::testbed::client::collect(Value::Null, resp, LIMIT)
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            &reply.body[..],
            br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: unknown Last-Event-ID"},"id":null}"#
        );

        let sessions = stack.testbed.sessions();
        let reply = client.delete_session().await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(stack.testbed.sessions(), sessions - 1);
        // Neither GET nor DELETE is a JSON-RPC call.
        sleep(Duration::from_millis(20)).await;
        assert!(support::delta(&before, &stack.counts()).is_empty());

        // The session is gone: the server's 404 reaches the agent and is the call's outcome.
        let reply = client.call_tool("ok", json!({})).await.unwrap();
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        assert_eq!(
            &reply.body[..],
            br#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}"#
        );
        let d = stack.delta_after(&before, 1).await;
        assert_eq!(d, just("tools/call", "ok", Outcome::HttpError));
    }
    // 2026-07-28 has no GET stream: the testbed's 405 and its Allow header pass through.
    let client = stack.modern(Http1);
    let resp = client.get_stream(None).await.unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(resp.headers()["allow"], "POST");
}

#[tokio::test]
async fn non_200_bodies_are_forwarded_byte_for_byte() {
    let fx = Fixture::start(|_| {}).await;
    let cases: [(u16, Option<&'static str>, &'static str, Outcome); 7] = [
        (202, None, "", Outcome::StreamIncomplete),
        // A 2xx JSON body that answers nothing by id, charged to the one open request.
        (
            202,
            Some("application/json"),
            r#"{"accepted":true}"#,
            Outcome::InvalidEnvelope,
        ),
        (204, None, "", Outcome::StreamIncomplete),
        (
            400,
            Some("application/json"),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}"#,
            Outcome::HttpError,
        ),
        (
            401,
            Some("application/json"),
            r#"{"error":"invalid_token"}"#,
            Outcome::HttpError,
        ),
        (404, Some("text/plain"), "not found\n", Outcome::HttpError),
        (
            503,
            Some("text/html"),
            "<html><body>upstream busy</body></html>",
            Outcome::HttpError,
        ),
    ];
    for transport in [Http1, Http2] {
        for (status, content_type, body, outcome) in cases {
            let body = Bytes::from_static(body.as_bytes());
            fx.play(Script {
                status,
                content_type,
                body: body.clone(),
                cuts: vec![body.len() / 2],
                content_length: false,
            });
            let before = support::counts(&fx.strata);
            let (direct, proxied) = fx.both(transport).await;
            assert_eq!(proxied.status.as_u16(), status);
            assert_same(&direct, &proxied, &body).unwrap();
            let d = delta_after(&fx.strata, &before, 1).await;
            assert_eq!(
                d,
                just("tools/call", "t", outcome),
                "{status} {transport:?}"
            );
        }
    }
}

// --- Requests strata cannot parse ---

/// Sends `body` with `content_type` through strata; returns what the upstream received and
/// the counter delta after a short settle.
async fn send_raw(
    fx: &Fixture,
    transport: Transport,
    content_type: &str,
    body: Bytes,
) -> (Recorded, Reply, BTreeMap<support::CallKey, u64>) {
    let client = McpClient::modern(fx.strata.listen)
        .with_transport(transport)
        .with_timeout(LIMIT);
    let before = support::counts(&fx.strata);
    let req = client
        .builder(Method::POST)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", content_type)
        .body(Full::new(body))
        .unwrap();
    let reply = client.exchange(Value::Null, req).await.unwrap();
    sleep(Duration::from_millis(20)).await;
    let d = support::delta(&before, &support::counts(&fx.strata));
    (fx.upstream.last(), reply, d)
}

fn limit_hits(running: &Running, limit: &str) -> u64 {
    let prefix = format!("strata_limit_hits_total{{limit=\"{limit}\"}} ");
    running
        .metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn unparseable_requests_reach_the_upstream_unchanged() {
    // With the retry policy on, a request body is read into the replay buffer first (past its
    // cap, the rest streams); with it off, the body streams from the start.
    for retries in [true, false] {
        unparseable_requests(retries).await;
    }
}

async fn unparseable_requests(retries: bool) {
    // A small inspect cap, so "huge" is quick to send.
    let cap = 4096;
    let fx = Fixture::start(|c| {
        c.limits.request_inspect_bytes = cap;
        if !retries {
            c.policy.retry.max_attempts = 1;
        }
    })
    .await;
    fx.play(Script {
        status: 400,
        body: Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        ),
        ..Script::default()
    });
    let mut garbage: Vec<u8> = (0..=255u8).cycle().take(3 * cap).collect();
    garbage.extend_from_slice(b"\xff\xfe{\"id\":1,");
    let not_json: [(&str, Bytes); 4] = [
        ("application/json", Bytes::from_static(b"{oops")),
        ("application/json", Bytes::from(garbage)),
        ("text/plain", Bytes::from_static(b"hello")),
        (
            "application/x-www-form-urlencoded",
            Bytes::from_static(b"a=1&b=2"),
        ),
    ];
    for transport in [Http1, Http2] {
        for (ct, body) in not_json.clone() {
            let (got, reply, d) = send_raw(&fx, transport, ct, body.clone()).await;
            assert_eq!(
                got.body, body,
                "{ct} {transport:?}: the upstream got the same bytes"
            );
            assert_eq!(got.headers["content-type"], ct);
            assert_eq!(reply.status, StatusCode::BAD_REQUEST);
            // No JSON-RPC request could be read: nothing to classify.
            assert!(d.is_empty(), "{ct}: {d:?}");
        }

        // Huge: a valid call far past the inspect cap. Its id and method come first, as every
        // SDK writes them, so it still counts (classify/request.rs); the cap is counted too.
        fx.play(Script {
            body: Bytes::from(format!(
                r#"{{"jsonrpc":"2.0","id":{ID},"result":{{"content":[],"isError":false}}}}"#
            )),
            ..Script::default()
        });
        let blob = "x".repeat(64 * cap);
        // The tool name before the arguments (as the SDKs write it) is read; after them, past
        // the cap, it is not and the call counts with an empty tool label.
        for (params, tool) in [
            (
                format!(r#"{{"name":"t","arguments":{{"blob":"{blob}"}}}}"#),
                "t",
            ),
            (
                format!(r#"{{"arguments":{{"blob":"{blob}"}},"name":"t"}}"#),
                "",
            ),
        ] {
            let hits = limit_hits(&fx.strata, "request_inspect_bytes");
            let big =
                format!(r#"{{"jsonrpc":"2.0","id":{ID},"method":"tools/call","params":{params}}}"#);
            let body = Bytes::from(big);
            let (got, reply, d) = send_raw(&fx, transport, "application/json", body.clone()).await;
            assert_eq!(
                got.body, body,
                "{transport:?}: the upstream got the same bytes"
            );
            assert_eq!(reply.status, StatusCode::OK);
            assert_eq!(d, just("tools/call", tool, Outcome::ToolSuccess));
            assert_eq!(limit_hits(&fx.strata, "request_inspect_bytes"), hits + 1);
        }
        fx.play(Script {
            status: 400,
            body: Bytes::from_static(b"{}"),
            ..Script::default()
        });
    }
}

/// A JSON-RPC request with the wrong content type reaches a real server unchanged; the
/// server's 415 is the call's outcome (strata reads the body, not the label).
#[tokio::test]
async fn wrong_content_type_is_forwarded_and_answered_by_the_server() {
    let stack = Stack::start(|_| {}).await;
    let client = stack.modern(Http1);
    let before = stack.counts();
    let body = client
        .tool_call_body(&json!(3), "ok", json!({}))
        .to_string();
    let req = client
        .builder(Method::POST)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let reply = client.exchange(json!(3), req).await.unwrap();
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let d = stack.delta_after(&before, 1).await;
    assert_eq!(d, just("tools/call", "ok", Outcome::HttpError));
}
