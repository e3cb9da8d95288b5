//! The route matrix: on every route through strata, what the upstream sees and what the agent
//! gets back are what a direct connection gives, byte for byte, but for the documented
//! changes (README "What passes through"; `src/http/forward.rs`, `src/http/hop.rs`):
//! - hop-by-hop fields (`Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade`) and the fields `Connection` names go, both ways; never
//!   `Content-Length`, `Transfer-Encoding` or `Host`;
//! - `Via: <version> strata` is appended both ways (the version the message arrived in);
//! - `X-Forwarded-For` gets the agent's address appended on requests;
//! - `Host` is kept; an h2 agent sends `:authority` instead, and strata makes the upstream's
//!   `Host` from it (`forward::set_host`);
//! - the body is framed anew by the connection that writes it;
//! - `strata-attempts` only when retried (never here), and header names in lower case.
//!
//! A route is agent side × upstream side × `Idempotency-Key`:
//! - agent: strata's own HTTP/1.1 connection (plain TCP, `Content-Length` body); hyper's
//!   HTTP/1.1 (a chunked body on plain TCP, which strata's own connection hands over; or TLS);
//!   h2 (prior knowledge on plain TCP, or ALPN over TLS);
//! - upstream: `http://` and `https://`, each with retries on (strata's own HTTP/1.1 upstream
//!   connections, the body read whole) and off (hyper-util's pooled client, the body
//!   streamed), always in HTTP/1.1: strata offers no ALPN, though the TLS front would prefer
//!   h2 (asserted per route);
//! - without a key, or with one (the body read whole, the answer recorded in the memory
//!   store).
//!
//! Each route's request is also sent, the same bytes, straight to a scripted upstream of the
//! same kind (over TLS for a TLS agent): what that upstream records is the agent's request as
//! a direct connection delivers it, and the baseline of the comparison. The upstream's answer
//! as it is on the wire in HTTP/1.1 is read directly too.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use serde_json::Value;
use strata::app::{self, Running};
use strata::config::{Config, ListenTls, Upstream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::pki::{Ca, provider, scratch_dir};
use crate::support::LIMIT;
use crate::support::raw::find;
use crate::support::upstream::{Recorded, ScriptBody, ScriptedUpstream, full, respond};
use crate::upstream::TlsFront;

/// Header fields by lower-case name, each name's values in the order they came.
type Fields = BTreeMap<String, Vec<String>>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AgentKind {
    /// Plain TCP, a `Content-Length` body: strata's own HTTP/1.1 connection.
    OwnH1,
    /// Plain TCP, a chunked body: strata's own connection hands it to hyper's HTTP/1.1.
    ChunkedH1,
    /// TLS (ALPN `http/1.1`), a `Content-Length` body: hyper's HTTP/1.1.
    TlsH1,
    /// h2 with prior knowledge on plain TCP.
    H2,
    /// h2 over TLS (ALPN `h2`).
    TlsH2,
}

const AGENTS: [AgentKind; 5] = [
    AgentKind::OwnH1,
    AgentKind::ChunkedH1,
    AgentKind::TlsH1,
    AgentKind::H2,
    AgentKind::TlsH2,
];

impl AgentKind {
    fn tls(self) -> bool {
        matches!(self, AgentKind::TlsH1 | AgentKind::TlsH2)
    }

    fn h2(self) -> bool {
        matches!(self, AgentKind::H2 | AgentKind::TlsH2)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UpstreamKind {
    /// `http://`, retries on (the default): strata's own HTTP/1.1 upstream connections.
    Http,
    /// `http://`, `retry.max_attempts: 1`: hyper-util's pooled client, the body streamed.
    HttpStreamed,
    /// `https://`, retries on: strata's own HTTP/1.1 connections over TLS.
    Https,
    /// `https://`, `retry.max_attempts: 1`: hyper-util's pooled client over TLS.
    HttpsStreamed,
}

const UPSTREAMS: [UpstreamKind; 4] = [
    UpstreamKind::Http,
    UpstreamKind::HttpStreamed,
    UpstreamKind::Https,
    UpstreamKind::HttpsStreamed,
];

impl UpstreamKind {
    fn tls(self) -> bool {
        matches!(self, UpstreamKind::Https | UpstreamKind::HttpsStreamed)
    }

    fn retries(self) -> bool {
        matches!(self, UpstreamKind::Http | UpstreamKind::Https)
    }
}

/// The end-to-end fields every agent sends, in this order.
const END_TO_END: [(&str, &str); 10] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("X-Custom", "a"),
    ("X-Repeat", "1"),
    ("X-Repeat", "2"),
    ("Mcp-Session-Id", "s-1"),
    ("MCP-Protocol-Version", "2025-11-25"),
    ("Mcp-Method", "tools/call"),
    ("Mcp-Name", "echo"),
    ("Authorization", "Bearer t"),
];

/// This connection's fields, which an HTTP/1.1 agent adds (h2 has none: RFC 9113 §8.2.2).
/// `Connection` names `X-Hop` (removed with it) and `content-length` (which it may not remove).
const HOP: [(&str, &str); 6] = [
    ("Connection", "keep-alive, X-Hop"),
    ("Connection", "content-length"),
    ("X-Hop", "1"),
    ("Keep-Alive", "timeout=5"),
    ("TE", "trailers"),
    ("Proxy-Connection", "keep-alive"),
];

/// The hop-by-hop fields (`src/http/hop.rs`), and those `Connection` may never name away.
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];
const FRAMING: [&str; 3] = ["content-length", "transfer-encoding", "host"];

/// The upstream's answer date: set, so hyper adds none and the value can be compared.
const ANSWER_DATE: &str = "Tue, 01 Dec 2026 00:00:00 GMT";

fn call_body(id: u64) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{}}}}}}"#
    )
    .into_bytes()
}

fn answer_body(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"echo"}}],"isError":false}}}}"#
    )
}

/// The upstream: 200 with end-to-end fields (one repeated), the date, and fields of its own
/// connection (`Connection` naming `X-Resp-Hop`, `Keep-Alive`), for the request's id.
fn answering(req: &Recorded) -> Response<ScriptBody> {
    let id = serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|v| v["id"].as_u64())
        .unwrap_or(0);
    let body = answer_body(id);
    let length = body.len().to_string();
    respond(
        200,
        &[
            ("content-type", "application/json"),
            ("x-answer", "yes"),
            ("x-answer-repeat", "1"),
            ("x-answer-repeat", "2"),
            ("mcp-session-id", "s-1"),
            ("date", ANSWER_DATE),
            ("connection", "x-resp-hop"),
            ("x-resp-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("content-length", &length),
        ],
        full(body),
    )
}

/// One tools/call as an agent of `agent` sends it.
struct Call {
    agent: AgentKind,
    /// The fields as the agent writes them (names as written), in order.
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Call {
    fn new(agent: AgentKind, id: u64, key: Option<&str>) -> Call {
        let body = call_body(id);
        let mut fields: Vec<(String, String)> = Vec::new();
        let mut push = |k: &str, v: &str| fields.push((k.to_owned(), v.to_owned()));
        if !agent.h2() {
            push("Host", "probe.local");
        }
        for (k, v) in END_TO_END {
            push(k, v);
        }
        if !agent.h2() {
            for (k, v) in HOP {
                push(k, v);
            }
        }
        if let Some(key) = key {
            push("Idempotency-Key", key);
        }
        match agent {
            AgentKind::ChunkedH1 => push("Transfer-Encoding", "chunked"),
            _ => push("Content-Length", &body.len().to_string()),
        }
        Call {
            agent,
            fields,
            body,
        }
    }

    /// The HTTP/1.1 request's bytes; a chunked body in two chunks.
    fn h1_bytes(&self) -> Vec<u8> {
        let mut out = b"POST /mcp HTTP/1.1\r\n".to_vec();
        for (k, v) in &self.fields {
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        if self.agent == AgentKind::ChunkedH1 {
            let (a, b) = self.body.split_at(self.body.len() / 2);
            for part in [a, b] {
                out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                out.extend_from_slice(part);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else {
            out.extend_from_slice(&self.body);
        }
        out
    }

    /// What the agent sent, as fields by name.
    fn sent(&self) -> Fields {
        fields_of(&self.fields)
    }
}

/// What the agent got.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// Names as they came (h2: lower case by the protocol), in order.
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    /// The HTTP/1.1 answer's head as it came (empty for h2).
    raw_head: String,
}

fn fields_of(list: &[(String, String)]) -> Fields {
    let mut out = Fields::new();
    for (k, v) in list {
        out.entry(k.to_ascii_lowercase())
            .or_default()
            .push(v.clone());
    }
    out
}

fn map_fields(h: &HeaderMap) -> Fields {
    let mut out = Fields::new();
    for (k, v) in h {
        out.entry(k.as_str().to_owned())
            .or_default()
            .push(String::from_utf8_lossy(v.as_bytes()).into_owned());
    }
    out
}

/// `fields` without the hop-by-hop ones and those `Connection` names (never a framing field).
fn without_hop(fields: &Fields) -> Fields {
    let named: Vec<String> = fields
        .get("connection")
        .into_iter()
        .flatten()
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty() && !FRAMING.contains(&t.as_str()))
        .collect();
    fields
        .iter()
        .filter(|(k, _)| !HOP_BY_HOP.contains(&k.as_str()) && !named.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `fields` without the body's framing (compared on its own).
fn unframed(mut fields: Fields) -> Fields {
    fields.remove("content-length");
    fields.remove("transfer-encoding");
    fields
}

/// The request an upstream should see through strata, from what it saw directly: the
/// documented changes applied, framing aside.
fn forwarded_request(direct: &Fields, agent: AgentKind, authority: &str) -> Fields {
    let mut out = unframed(without_hop(direct));
    if agent.h2() {
        // `forward::set_host`: an h2 agent's `:authority` becomes the upstream's `Host`.
        out.entry("host".to_owned())
            .or_insert_with(|| vec![authority.to_owned()]);
    }
    let via = if agent.h2() { "2 strata" } else { "1.1 strata" };
    out.entry("via".to_owned())
        .or_default()
        .push(via.to_owned());
    let xff = out.entry("x-forwarded-for".to_owned()).or_default();
    match xff.last_mut() {
        Some(prior) => *prior = format!("{prior}, 127.0.0.1"),
        None => xff.push("127.0.0.1".to_owned()),
    }
    out
}

/// The answer an agent should get through strata, from the upstream's answer as it is on the
/// wire (HTTP/1.1): the documented changes applied, framing aside.
fn forwarded_answer(wire: &Fields) -> Fields {
    let mut out = unframed(without_hop(wire));
    out.entry("via".to_owned())
        .or_default()
        .push("1.1 strata".to_owned());
    out
}

// --- The agents ---

async fn tls_to(addr: SocketAddr, ca: &Ca, alpn: &[u8]) -> TlsStream<TcpStream> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(ca.roots())
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn), "ALPN");
    tls
}

/// `call` to `at` (TLS when the agent is a TLS one), and the whole answer.
async fn exchange(call: &Call, at: SocketAddr, ca: &Ca) -> Answer {
    let authority = if call.agent.tls() {
        format!("localhost:{}", at.port())
    } else {
        at.to_string()
    };
    let scheme = if call.agent.tls() { "https" } else { "http" };
    let uri = format!("{scheme}://{authority}/mcp");
    let run = async {
        match call.agent {
            AgentKind::OwnH1 | AgentKind::ChunkedH1 => {
                let tcp = TcpStream::connect(at).await.unwrap();
                tcp.set_nodelay(true).unwrap();
                h1_exchange(tcp, &call.h1_bytes()).await
            }
            AgentKind::TlsH1 => {
                h1_exchange(tls_to(at, ca, b"http/1.1").await, &call.h1_bytes()).await
            }
            AgentKind::H2 => {
                let tcp = TcpStream::connect(at).await.unwrap();
                tcp.set_nodelay(true).unwrap();
                h2_exchange(tcp, &uri, call).await
            }
            AgentKind::TlsH2 => h2_exchange(tls_to(at, ca, b"h2").await, &uri, call).await,
        }
    };
    tokio::time::timeout(LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("{:?} to {at}: no whole answer in time", call.agent))
}

/// Writes `bytes`, reads one HTTP/1.1 answer (`Content-Length`, chunked, or to the close).
async fn h1_exchange<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, bytes: &[u8]) -> Answer {
    io.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(answer) = parse_h1_answer(&got, false) {
            return answer;
        }
        let n = io.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return parse_h1_answer(&got, true).unwrap_or_else(|| {
                panic!(
                    "the answer ended unfinished: {:?}",
                    String::from_utf8_lossy(&got)
                )
            });
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// The answer in `got`, once it is whole (`eof`: the connection closed after it).
fn parse_h1_answer(got: &[u8], eof: bool) -> Option<Answer> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut slots);
    let head_len = match head.parse(got) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if !eof => return None,
        other => panic!(
            "not an answer ({other:?}): {:?}",
            String::from_utf8_lossy(got)
        ),
    };
    let status = head.code.unwrap();
    let fields: Vec<(String, String)> = head
        .headers
        .iter()
        .map(|h| {
            let value = String::from_utf8_lossy(h.value).into_owned();
            (h.name.to_owned(), value)
        })
        .collect();
    let rest = &got[head_len..];
    let chunked = fields.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let length = fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.trim().parse::<usize>().unwrap());
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(length) = length {
        rest.get(..length)?.to_vec()
    } else if eof {
        rest.to_vec()
    } else {
        return None;
    };
    Some(Answer {
        status,
        fields,
        body,
        raw_head: String::from_utf8_lossy(&got[..head_len]).into_owned(),
    })
}

/// A whole chunked body, decoded; `None` while it is not whole.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = find(rest, b"\r\n")?;
        let line = String::from_utf8_lossy(&rest[..line_end]);
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16)
            .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
        rest = &rest[line_end + 2..];
        if size == 0 {
            // Trailer fields, if any, end with an empty line.
            let done = rest.starts_with(b"\r\n") || find(rest, b"\r\n\r\n").is_some();
            return done.then_some(body);
        }
        let chunk = rest.get(..size + 2)?;
        assert_eq!(&chunk[size..], b"\r\n", "a chunk not ended by CRLF");
        body.extend_from_slice(&chunk[..size]);
        rest = &rest[size + 2..];
    }
}

/// One h2 request on a new connection (hyper's client), and the whole answer.
async fn h2_exchange<S>(io: S, uri: &str, call: &Call) -> Answer
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    let driving = tokio::spawn(conn);
    let mut request = Request::post(uri);
    for (k, v) in &call.fields {
        request = request.header(k.as_str(), v.as_str());
    }
    let request = request
        .body(Full::new(Bytes::from(call.body.clone())))
        .unwrap();
    let response = send.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let fields = response
        .headers()
        .iter()
        .map(|(k, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (k.as_str().to_owned(), value)
        })
        .collect();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    driving.abort();
    Answer {
        status,
        fields,
        body: body.to_vec(),
        raw_head: String::new(),
    }
}

// --- The fixture ---

/// One upstream kind: its scripted upstream (behind a TLS front for `https://`), and strata
/// in front of it twice: a plain listener and a TLS one.
struct Side {
    kind: UpstreamKind,
    upstream: ScriptedUpstream,
    plain: Running,
    tls: Running,
    _front: Option<TlsFront>,
}

impl Side {
    async fn start(
        kind: UpstreamKind,
        ca: &Ca,
        ca_file: &Path,
        listener_cert: &(PathBuf, PathBuf),
    ) -> Side {
        let upstream = ScriptedUpstream::spawn(answering).await;
        let (url, front) = if kind.tls() {
            let front = TlsFront::spawn(&ca.server(3), upstream.addr).await;
            (
                format!("https://localhost:{}", front.addr.port()),
                Some(front),
            )
        } else {
            (format!("http://{}", upstream.addr), None)
        };
        Side {
            kind,
            plain: start_strata(&url, kind, ca_file, None).await,
            tls: start_strata(&url, kind, ca_file, Some(listener_cert)).await,
            upstream,
            _front: front,
        }
    }

    /// The strata an agent of `agent` connects to.
    fn strata_for(&self, agent: AgentKind) -> &Running {
        if agent.tls() { &self.tls } else { &self.plain }
    }
}

struct Matrix {
    ca: Ca,
    /// The direct connection's upstream, and a TLS front for TLS agents.
    direct: ScriptedUpstream,
    direct_tls: TlsFront,
    sides: Vec<Side>,
}

impl Matrix {
    async fn start() -> Matrix {
        let dir = scratch_dir("route-matrix");
        let ca = Ca::new("route matrix");
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        let listener_cert = ca.server(1).write(&dir, "server");
        let direct = ScriptedUpstream::spawn(answering).await;
        let direct_tls = TlsFront::spawn(&ca.server(2), direct.addr).await;
        let mut sides = Vec::new();
        for kind in UPSTREAMS {
            sides.push(Side::start(kind, &ca, &ca_file, &listener_cert).await);
        }
        Matrix {
            ca,
            direct,
            direct_tls,
            sides,
        }
    }
}

async fn start_strata(
    url: &str,
    kind: UpstreamKind,
    ca_file: &Path,
    listener_cert: Option<&(PathBuf, PathBuf)>,
) -> Running {
    let mut config = Config::default_with_upstream(Upstream::parse(url).unwrap());
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
    config.timeouts.drain = Duration::from_millis(500);
    config.upstream_tls.ca_file = Some(ca_file.to_owned());
    if let Some((cert_file, key_file)) = listener_cert {
        config.tls = Some(ListenTls {
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            client_ca_file: None,
        });
    }
    if !kind.retries() {
        config.policy.retry.max_attempts = 1;
    }
    tokio::time::timeout(LIMIT, app::start(&config))
        .await
        .unwrap()
        .unwrap()
}

/// How a request's or an answer's body was framed, from its fields.
fn framing(fields: &Fields) -> String {
    let te = fields.get("transfer-encoding").map(|v| v.join(","));
    let cl = fields.get("content-length").map(|v| v.join(","));
    match (cl, te) {
        (Some(cl), None) => format!("length {cl}"),
        (None, Some(te)) => te,
        (None, None) => "none".to_owned(),
        (Some(cl), Some(te)) => format!("length {cl} + {te}"),
    }
}

/// The mismatches between `want` and `got`, one line per name.
fn diff(what: &str, want: &Fields, got: &Fields) -> Vec<String> {
    let mut names: Vec<&String> = want.keys().chain(got.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|k| want.get(*k) != got.get(*k))
        .map(|k| format!("{what} `{k}`: want {:?}, got {:?}", want.get(k), got.get(k)))
        .collect()
}

/// The framing the upstream should see for `agent`'s body of `length` bytes. strata writes
/// the length of a body it read whole (retries on, or a key) and of one whose length the
/// agent stated (hyper's client writes an exact size as `Content-Length`), as a direct
/// connection delivers it; a chunked body it streams goes on chunked.
fn request_framing(agent: AgentKind, upstream: UpstreamKind, keyed: bool, length: usize) -> String {
    let known = upstream.retries() || keyed || agent != AgentKind::ChunkedH1;
    match known {
        true => format!("length {length}"),
        false => "chunked".to_owned(),
    }
}

/// The `Host` the upstream's application should see (`host_header: preserve`): the agent's,
/// or for an h2 agent its `:authority` (`forward::set_host`).
fn preserved_host(agent: AgentKind, strata: &Running) -> String {
    match agent {
        AgentKind::H2 => strata.listen.to_string(),
        AgentKind::TlsH2 => format!("localhost:{}", strata.listen.port()),
        _ => "probe.local".to_owned(),
    }
}

/// `host` and, for h2, `:authority`, as the upstream got them.
fn host_seen(up: &Recorded) -> String {
    let host: Vec<_> = up.headers.get_all("host").iter().collect();
    match up.uri.authority() {
        Some(authority) => format!(":authority {authority}, host {host:?}"),
        None => format!("host {host:?}"),
    }
}

#[tokio::test]
async fn every_route_is_a_direct_connection_but_for_the_documented_changes() {
    let started = tokio::time::Instant::now();
    let m = Matrix::start().await;

    // The upstream's answer as it is on the wire in HTTP/1.1, the version strata reads it in:
    // the handler's, field for field.
    let wire_h1 = exchange(&Call::new(AgentKind::OwnH1, 0, None), m.direct.addr, &m.ca).await;
    let handler = map_fields(answering(&m.direct.last()).headers());
    assert_eq!(fields_of(&wire_h1.fields), handler, "{}", wire_h1.raw_head);

    let mut table = String::from(
        "| # | agent | upstream | key | upstream got: version, framing, host | agent got: framing |\n\
         |---|---|---|---|---|---|\n",
    );
    let mut failures: Vec<String> = Vec::new();
    let mut id = 0;
    for side in &m.sides {
        for agent in AGENTS {
            for keyed in [false, true] {
                id += 1;
                let route = format!(
                    "#{id} {agent:?} agent, {:?} upstream, key: {keyed}",
                    side.kind
                );
                // A key of its own per route: a repeat would be answered from the record.
                let key = keyed.then(|| format!("k-{id}"));
                let call = Call::new(agent, id, key.as_deref());

                // Directly: the same bytes to the same kind of server.
                let direct_at = if agent.tls() {
                    m.direct_tls.addr
                } else {
                    m.direct.addr
                };
                let direct_answer = exchange(&call, direct_at, &m.ca).await;
                let direct = m.direct.last();
                // The direct connection delivers the agent's fields and body as sent.
                assert_eq!(map_fields(&direct.headers), call.sent(), "{route}: direct");
                assert_eq!(direct.body.as_ref(), &call.body[..], "{route}: direct");
                assert_eq!(direct_answer.status, 200, "{route}: direct");
                assert_eq!(direct_answer.body, answer_body(id).as_bytes(), "{route}");

                // Through strata.
                let strata = side.strata_for(agent);
                let before = side.upstream.requests().len();
                let answer = exchange(&call, strata.listen, &m.ca).await;
                let seen = side.upstream.requests();
                let mut problems: Vec<String> = Vec::new();

                // (1) One request, its body byte for byte.
                if seen.len() != before + 1 {
                    problems.push(format!("the upstream saw {} requests", seen.len() - before));
                }
                let Some(up) = seen.last().filter(|_| seen.len() > before) else {
                    failures.push(format!("{route}: {problems:?}"));
                    continue;
                };
                if up.body != direct.body {
                    problems.push(format!("upstream body {:?}", up.body));
                }
                if up.method != direct.method
                    || up.uri.path_and_query() != direct.uri.path_and_query()
                {
                    problems.push(format!("upstream target {} {}", up.method, up.uri));
                }
                // No ALPN from strata: HTTP/1.1, though the TLS front prefers h2.
                if up.version != Version::HTTP_11 {
                    problems.push(format!("upstream version {:?}", up.version));
                }

                // (2) The fields: the direct ones with the documented changes; the framing
                // strata's own, never taken away by `Connection: content-length`.
                let up_fields = map_fields(&up.headers);
                let want = forwarded_request(
                    &map_fields(&direct.headers),
                    agent,
                    &preserved_host(agent, strata),
                );
                problems.extend(diff("upstream field", &want, &unframed(up_fields.clone())));
                let want = request_framing(agent, side.kind, keyed, call.body.len());
                if framing(&up_fields) != want {
                    problems.push(format!(
                        "upstream framing: want {want}, got {}",
                        framing(&up_fields)
                    ));
                }

                // (3) The answer: 200, the upstream's body, its fields with the changes, and
                // the upstream's length.
                let want = forwarded_answer(&fields_of(&wire_h1.fields));
                let got = fields_of(&answer.fields);
                if answer.status != 200 {
                    problems.push(format!("status {}", answer.status));
                }
                if answer.body != direct_answer.body {
                    problems.push(format!(
                        "answer body {:?}",
                        String::from_utf8_lossy(&answer.body)
                    ));
                }
                problems.extend(diff("answer field", &want, &unframed(got.clone())));
                // Header names in lower case (HTTP/1.1 names are case-insensitive; h2's are
                // lower case by the protocol).
                let cased: Vec<&str> = answer
                    .fields
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .filter(|k| k.bytes().any(|b| b.is_ascii_uppercase()))
                    .collect();
                if !cased.is_empty() {
                    problems.push(format!("answer names not in lower case: {cased:?}"));
                }
                let want = format!("length {}", direct_answer.body.len());
                if framing(&got) != want {
                    problems.push(format!(
                        "answer framing: want {want}, got {}",
                        framing(&got)
                    ));
                }

                let _ = writeln!(
                    table,
                    "| {id} | {agent:?} | {:?} | {} | {:?}, {}, {} | {} |",
                    side.kind,
                    if keyed { "yes" } else { "no" },
                    up.version,
                    framing(&up_fields),
                    host_seen(up),
                    framing(&got),
                );
                if !problems.is_empty() {
                    failures.push(format!(
                        "{route}:\n    {}\n    upstream got: {} {:?} {:?}\n    agent got: {:?}\n{}",
                        problems.join("\n    "),
                        up.method,
                        up.uri,
                        up.headers,
                        answer.fields,
                        answer.raw_head,
                    ));
                }
            }
        }
    }
    eprintln!(
        "{table}\nroute matrix: {id} routes in {:?}",
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
