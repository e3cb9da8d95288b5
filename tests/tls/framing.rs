//! Message framing on every route: `Connection` never takes away what frames or addresses a
//! message (`Content-Length`, `Transfer-Encoding`, `Host`), a repeated `Host` is refused, and
//! a listed `Content-Length` reaches the agent as one value.
//!
//! The attack these guard against: an agent sends `Connection: content-length` and a body that
//! is itself a request. A proxy that drops the length forwards a POST without one followed by
//! the body, which the server reads as a second request; its answer waits on the pooled
//! connection for the next call, of another agent. Each route is driven with the exact bytes:
//! agent {strata's own HTTP/1.1, hyper's (TLS)} × upstream {strata's own HTTP/1.1, hyper's
//! pooled client (retries off), `https://`} × {retries on, off, with `Idempotency-Key`}.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use serde_json::json;
use strata::app::{self, Running};
use strata::config::{Config, ListenTls, Upstream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

use crate::pki::{Ca, provider, scratch_dir};
use crate::support::LIMIT;
use crate::support::raw::{find, read_request};
use crate::support::upstream::{Recorded, ScriptedUpstream, full, respond};
use crate::upstream::TlsFront;

/// The attack, byte for byte: the body is a request of its own.
const SMUGGLING: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: probe.local\r\nConnection: content-length\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: probe.local\r\n\r\n";
const SMUGGLED_BODY: &[u8] = b"GET /smuggled HTTP/1.1\r\nHost: probe.local\r\n\r\n";

#[derive(Clone, Copy, Debug)]
enum AgentSide {
    /// Plain TCP: strata's own HTTP/1.1 connection.
    Own,
    /// TLS: hyper's HTTP/1.1 server.
    Hyper,
}

#[derive(Clone, Copy, Debug)]
enum UpstreamSide {
    /// `http://`: strata's own connections for bodies read whole (retries on), hyper's
    /// pooled client for streamed ones (retries off).
    Plain,
    /// `https://`: hyper's client over TLS.
    Tls,
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    RetriesOn,
    RetriesOff,
    Key,
}

/// Every upstream request answers with what it saw: `METHOD path body-length`.
fn echoing(req: &Recorded) -> http::Response<crate::support::upstream::ScriptBody> {
    let seen = format!("{} {} {}", req.method, req.uri.path(), req.body.len());
    let body = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "seen": seen}});
    respond(
        200,
        &[("content-type", "application/json")],
        full(body.to_string()),
    )
}

struct Route {
    strata: Running,
    upstream: ScriptedUpstream,
    agent: AgentSide,
    ca: Arc<Ca>,
    _front: Option<TlsFront>,
}

impl Route {
    async fn start(agent: AgentSide, upstream_side: UpstreamSide, mode: Mode) -> Route {
        let ca = Arc::new(Ca::new("framing"));
        let dir = scratch_dir(&format!("framing-{agent:?}-{upstream_side:?}-{mode:?}"));
        let upstream = ScriptedUpstream::spawn(echoing).await;
        let (url, front) = match upstream_side {
            UpstreamSide::Plain => (format!("http://{}", upstream.addr), None),
            UpstreamSide::Tls => {
                let front = TlsFront::spawn(&ca.server(2), upstream.addr).await;
                (
                    format!("https://localhost:{}", front.addr.port()),
                    Some(front),
                )
            }
        };
        let mut config = Config::default_with_upstream(Upstream::parse(&url).unwrap());
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
        config.timeouts.drain = Duration::from_millis(500);
        let ca_path = dir.join("ca.pem");
        std::fs::write(&ca_path, ca.pem()).unwrap();
        config.upstream_tls.ca_file = Some(ca_path);
        if let AgentSide::Hyper = agent {
            let (cert_file, key_file) = ca.server(1).write(&dir, "server");
            config.tls = Some(ListenTls {
                cert_file,
                key_file,
                client_ca_file: None,
            });
        }
        if let Mode::RetriesOff = mode {
            config.policy.retry.max_attempts = 1;
        }
        let strata = tokio::time::timeout(LIMIT, app::start(&config))
            .await
            .unwrap()
            .unwrap();
        Route {
            strata,
            upstream,
            agent,
            ca,
            _front: front,
        }
    }

    /// Sends `bytes` on a new agent connection and reads one answer (head and body).
    async fn exchange(&self, bytes: &[u8]) -> String {
        let tcp = TcpStream::connect(self.strata.listen).await.unwrap();
        match self.agent {
            AgentSide::Own => one_answer(tcp, bytes).await,
            AgentSide::Hyper => {
                let config = ClientConfig::builder_with_provider(provider())
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_root_certificates(self.ca.roots())
                    .with_no_client_auth();
                let connector = TlsConnector::from(Arc::new(config));
                let name = ServerName::try_from("localhost").unwrap();
                let tls = connector.connect(name, tcp).await.unwrap();
                one_answer(tls, bytes).await
            }
        }
    }
}

/// Writes `bytes`, then reads one HTTP/1.1 answer framed by `Content-Length` or chunked.
async fn one_answer<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, bytes: &[u8]) -> String {
    io.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            if answer_complete(&got) {
                return;
            }
            let n = io.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(LIMIT, read)
        .await
        .expect("no whole answer in time");
    String::from_utf8_lossy(&got).into_owned()
}

fn answer_complete(got: &[u8]) -> bool {
    let Some(end) = find(got, b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let body = &got[end + 4..];
    if head.contains("transfer-encoding: chunked") {
        return find(body, b"0\r\n\r\n").is_some();
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}

fn call(id: u64, tool: &str) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}})
    .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: probe.local\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A ping POST with `fields` (each line ending in CRLF) before its `Content-Length`.
fn ping_with(fields: &str) -> Vec<u8> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    format!(
        "POST /mcp HTTP/1.1\r\n{fields}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// `SMUGGLING` with an `Idempotency-Key` field before the length.
fn with_key(bytes: &[u8]) -> Vec<u8> {
    let at = find(bytes, b"Content-Length").unwrap();
    [&bytes[..at], b"Idempotency-Key: k-1\r\n", &bytes[at..]].concat()
}

async fn smuggling_is_one_request(agent: AgentSide, upstream: UpstreamSide, mode: Mode) {
    let route = Route::start(agent, upstream, mode).await;
    let what = format!("{agent:?} agent, {upstream:?} upstream, {mode:?}");
    let attack = match mode {
        Mode::Key => with_key(SMUGGLING),
        _ => SMUGGLING.to_vec(),
    };
    let first = route.exchange(&attack).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{what}: {first}");
    assert!(first.contains("POST /mcp 45"), "{what}: {first}");
    // A second agent, on the pooled upstream connection the first call used.
    let second_call = call(2, "second");
    let second = route.exchange(&second_call).await;
    let own_body = second_call.len() - find(&second_call, b"\r\n\r\n").unwrap() - 4;
    assert!(
        second.contains(&format!("POST /mcp {own_body}")),
        "{what}: the second agent got another's answer: {second}"
    );
    let seen = route.upstream.requests();
    let lines: Vec<String> = seen
        .iter()
        .map(|r| format!("{} {} {}", r.method, r.uri.path(), r.body.len()))
        .collect();
    assert_eq!(seen.len(), 2, "{what}: the upstream saw {lines:?}");
    assert_eq!(seen[0].body.as_ref(), SMUGGLED_BODY, "{what}");
    assert_eq!(
        seen[0].headers.get("content-length").unwrap(),
        "45",
        "{what}"
    );
    assert_eq!(
        seen[0].headers.get("host").unwrap(),
        "probe.local",
        "{what}"
    );
    assert!(
        seen.iter().all(|r| r.uri.path() == "/mcp"),
        "{what}: {lines:?}"
    );
}

#[tokio::test]
async fn connection_content_length_is_one_request_on_every_route() {
    use AgentSide::*;
    use Mode::*;
    use UpstreamSide::*;
    for agent in [Own, Hyper] {
        for mode in [RetriesOn, RetriesOff, Key] {
            smuggling_is_one_request(agent, Plain, mode).await;
        }
        for mode in [RetriesOn, RetriesOff] {
            smuggling_is_one_request(agent, Tls, mode).await;
        }
    }
}

#[tokio::test]
async fn connection_host_keeps_the_host_on_every_route() {
    for agent in [AgentSide::Own, AgentSide::Hyper] {
        for mode in [Mode::RetriesOn, Mode::RetriesOff] {
            let route = Route::start(agent, UpstreamSide::Plain, mode).await;
            let request =
                ping_with("Connection: host, x-gone\r\nHost: probe.local\r\nX-Gone: 1\r\n");
            let answer = route.exchange(&request).await;
            assert!(
                answer.starts_with("HTTP/1.1 200"),
                "{agent:?} {mode:?}: {answer}"
            );
            let seen = route.upstream.last();
            assert_eq!(seen.headers.get("host").unwrap(), "probe.local");
            assert!(seen.headers.get("x-gone").is_none(), "{agent:?} {mode:?}");
        }
    }
}

#[tokio::test]
async fn two_host_fields_are_refused_and_nothing_is_forwarded() {
    for agent in [AgentSide::Own, AgentSide::Hyper] {
        for mode in [Mode::RetriesOn, Mode::RetriesOff, Mode::Key] {
            let route = Route::start(agent, UpstreamSide::Plain, mode).await;
            let request =
                ping_with("Host: a.example\r\nHost: b.example\r\nIdempotency-Key: k-2\r\n");
            let answer = route.exchange(&request).await;
            assert!(
                answer.starts_with("HTTP/1.1 400"),
                "{agent:?} {mode:?}: {answer}"
            );
            assert!(answer.contains("downstream:bad_request_head"), "{answer}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(route.upstream.requests().is_empty(), "{agent:?} {mode:?}");
        }
    }
}

/// An upstream that answers every request with `answer`, byte for byte.
async fn raw_upstream(answer: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut buf, heads) = (Vec::new(), std::sync::Mutex::new(Vec::new()));
                while let Ok(Some(_)) = read_request(&mut tcp, &mut buf, &heads).await {
                    if tcp.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn through(dir: &Path, answer: &'static [u8], agent: AgentSide, mode: Mode) -> String {
    let upstream = raw_upstream(answer).await;
    let ca = Arc::new(Ca::new("lengths"));
    let mut config =
        Config::default_with_upstream(Upstream::parse(&format!("http://{upstream}")).unwrap());
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
    if let AgentSide::Hyper = agent {
        let (cert_file, key_file) = ca.server(1).write(dir, "server");
        config.tls = Some(ListenTls {
            cert_file,
            key_file,
            client_ca_file: None,
        });
    }
    if let Mode::RetriesOff = mode {
        config.policy.retry.max_attempts = 1;
    }
    let strata = app::start(&config).await.unwrap();
    let route = Route {
        strata,
        upstream: ScriptedUpstream::spawn(echoing).await,
        agent,
        ca,
        _front: None,
    };
    route.exchange(&call(1, "listed")).await
}

#[tokio::test]
async fn a_listed_length_reaches_the_agent_as_one_and_different_ones_as_502() {
    const LISTED: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 38, 38\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n";
    const REPEATED: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 38\r\nContent-Length: 38\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n";
    const DIFFERENT: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: 38, 39\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n";
    // `Connection` naming the length must not take it away either.
    const NAMED: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nConnection: content-length, x-gone\r\nX-Gone: 1\r\nContent-Length: 38\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n";
    let dir = scratch_dir("framing-lengths");
    for agent in [AgentSide::Own, AgentSide::Hyper] {
        for mode in [Mode::RetriesOn, Mode::RetriesOff] {
            for answer in [LISTED, REPEATED, NAMED] {
                let got = through(&dir, answer, agent, mode).await;
                let head = got[..find(got.as_bytes(), b"\r\n\r\n").unwrap()].to_ascii_lowercase();
                let lengths: Vec<&str> = head
                    .lines()
                    .filter_map(|l| l.strip_prefix("content-length: "))
                    .collect();
                assert_eq!(lengths, ["38"], "{agent:?} {mode:?}: {got}");
                assert!(!head.contains("x-gone"), "{agent:?} {mode:?}: {got}");
                assert!(
                    got.ends_with("\"result\":{}}\r\n"),
                    "{agent:?} {mode:?}: {got}"
                );
            }
            let got = through(&dir, DIFFERENT, agent, mode).await;
            assert!(got.starts_with("HTTP/1.1 502"), "{agent:?} {mode:?}: {got}");
        }
    }
}

/// An h2 request may not carry `Connection` at all (RFC 9113 §8.2.2): the stream is refused
/// as malformed and nothing reaches the upstream. With two `host` fields it is refused too.
#[tokio::test]
async fn an_h2_agent_cannot_name_fields_away_or_repeat_host() {
    use crate::support::h2raw::{self, END_HEADERS, END_STREAM, HEADERS, RST_STREAM, RawH2};
    const DATA: u8 = 0x0;
    let route = Route::start(AgentSide::Own, UpstreamSide::Plain, Mode::RetriesOn).await;
    let authority = route.strata.listen.to_string();
    let cases: [&[(&str, &str)]; 2] = [
        &[("connection", "content-length"), ("content-length", "45")],
        &[
            ("host", "a.example"),
            ("host", "b.example"),
            ("content-length", "45"),
        ],
    ];
    for extra in cases {
        let mut h2 = RawH2::connect(route.strata.listen).await;
        let mut fields = vec![
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", authority.as_str()),
            (":path", "/mcp"),
        ];
        fields.extend_from_slice(extra);
        let mut out = h2raw::frame(HEADERS, END_HEADERS, 1, &h2raw::header_block(&fields));
        out.extend(h2raw::frame(DATA, END_STREAM, 1, SMUGGLED_BODY));
        h2.send(&out).await.unwrap();
        let mut refused = false;
        while let Some(frame) = h2.next(Duration::from_secs(2)).await {
            if frame.stream != 1 {
                continue;
            }
            if frame.kind == RST_STREAM {
                refused = true;
                break;
            }
            if frame.kind == HEADERS {
                // `:status` 400 (indexed HPACK entry 12, or a literal `400`).
                refused =
                    frame.payload.first() == Some(&0x8c) || find(&frame.payload, b"400").is_some();
                break;
            }
        }
        assert!(refused, "{extra:?}: the stream was not refused");
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        route.upstream.requests().is_empty(),
        "{:?}",
        route.upstream.requests()
    );
}
