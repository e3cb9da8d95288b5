//! A small MCP-over-HTTP client for `strata demo` and the tests: just enough of the Streamable
//! HTTP transport to drive the testbed directly or through strata, and to look at the wire.
//!
//! - Legacy era (2025-03-26 … 2025-11-25): [`McpClient::initialize`] runs the handshake
//!   (`initialize`, then `notifications/initialized`) and keeps the `Mcp-Session-Id` the server
//!   minted; every later request carries it and `MCP-Protocol-Version` (2025-11-25 transports
//!   §Session Management, §Protocol Version Header).
//! - 2026-07-28: no handshake; every POST carries `MCP-Protocol-Version`, `Mcp-Method` and (for
//!   tools/call) `Mcp-Name`, and `params._meta` repeats the version with the client's
//!   capabilities and info (2026-07-28 transports §Request Metadata, basic §Statelessness).
//!
//! Calls come back whole ([`Reply`]: status, headers, body bytes, whether the body broke) or as
//! the response itself, for reading an SSE stream event by event with [`SseReader`]. Every
//! wait is bounded by the client's timeout. Nothing here interprets a result: the point is to
//! see what an agent would see.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap};
use http::request::Builder;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Map, Value, json};
use tokio::time::{Instant, timeout};

use super::MCP_PATH;

/// The legacy revision [`McpClient::initialize`] asks for unless told otherwise.
pub const LEGACY_VERSION: &str = "2025-11-25";
/// The stateless revision.
pub const MODERN_VERSION: &str = "2026-07-28";
/// How long any one wait (a response head, a body, an SSE event) may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// What every POST accepts: "the client MUST include an Accept header, listing both"
/// (2025-03-26 … 2026-07-28 transports §Sending Messages).
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

const SESSION: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// Why a client operation failed. The server's answer itself is never an error: a 503 or a
/// malformed body comes back as a [`Reply`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot build the request: {0}")]
    Build(#[from] http::Error),
    #[error("the HTTP exchange failed: {0}")]
    Http(#[from] hyper_util::client::legacy::Error),
    #[error("the response body failed: {0}")]
    Body(#[from] hyper::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("initialize was answered with {status} and no usable Mcp-Session-Id")]
    Handshake { status: StatusCode },
}

/// How the client reaches the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    #[default]
    Http1,
    /// HTTP/2 over cleartext with prior knowledge (no upgrade), as gRPC-style clients do.
    Http2,
}

/// The protocol era the client speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// 2025-03-26 … 2025-11-25. `session` is `None` until [`McpClient::initialize`].
    Legacy {
        version: String,
        session: Option<String>,
    },
    /// 2026-07-28: stateless.
    Modern,
}

/// A whole response.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The JSON-RPC id the request carried (`Value::Null` for a request without one).
    pub id: Value,
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Every body byte received (up to the break, when the body broke).
    pub body: Bytes,
    /// The body ended with an error (reset, cut short) instead of cleanly: its text.
    pub broken: Option<String>,
}

/// An MCP client over Streamable HTTP, for one endpoint.
pub struct McpClient {
    http: Client<HttpConnector, Full<Bytes>>,
    endpoint: Uri,
    mode: Mode,
    next_id: AtomicU64,
    timeout: Duration,
}

// === impl Reply ===

impl Reply {
    /// The `Content-Type`, if any and readable.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    /// The body as one JSON value, if it is one.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The body's SSE events (an event cut off by the body's end is left out).
    pub fn sse_events(&self) -> Vec<SseEvent> {
        let mut framer = SseFramer::default();
        framer.push(&self.body);
        let mut out = Vec::new();
        while let Some(event) = framer.next_event(true, 0) {
            out.push(event);
        }
        out
    }
}

// === impl McpClient ===

impl McpClient {
    /// A legacy-era client for `http://addr/mcp`; call [`McpClient::initialize`] first.
    pub fn legacy(addr: SocketAddr) -> Self {
        Self::new(
            addr,
            Mode::Legacy {
                version: LEGACY_VERSION.to_owned(),
                session: None,
            },
        )
    }

    /// A 2026-07-28 client for `http://addr/mcp`.
    pub fn modern(addr: SocketAddr) -> Self {
        Self::new(addr, Mode::Modern)
    }

    pub fn new(addr: SocketAddr, mode: Mode) -> Self {
        let endpoint = Uri::builder()
            .scheme("http")
            .authority(addr.to_string().as_str())
            .path_and_query(MCP_PATH)
            .build()
            .unwrap_or_else(|_| Uri::from_static("http://127.0.0.1/mcp"));
        McpClient {
            http: Client::builder(TokioExecutor::new()).build(connector()),
            endpoint,
            mode,
            next_id: AtomicU64::new(1),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Speaks `transport` from now on (a fresh connection pool).
    pub fn with_transport(mut self, transport: Transport) -> Self {
        let mut builder = Client::builder(TokioExecutor::new());
        if transport == Transport::Http2 {
            builder.http2_only(true);
        }
        self.http = builder.build(connector());
        self
    }

    /// Bounds every wait by `limit` instead of [`DEFAULT_TIMEOUT`].
    pub fn with_timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// `http://addr/mcp`.
    pub fn endpoint(&self) -> &Uri {
        &self.endpoint
    }

    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The legacy session, once initialized.
    pub fn session(&self) -> Option<&str> {
        match &self.mode {
            Mode::Legacy { session, .. } => session.as_deref(),
            Mode::Modern => None,
        }
    }

    /// The version this client puts in `MCP-Protocol-Version`.
    pub fn protocol_version(&self) -> &str {
        match &self.mode {
            Mode::Legacy { version, .. } => version,
            Mode::Modern => MODERN_VERSION,
        }
    }

    /// A fresh request id (1, 2, 3, …).
    pub fn next_id(&self) -> Value {
        json!(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// The legacy handshake at `version`: `initialize` (the session id comes back in
    /// `Mcp-Session-Id`), then `notifications/initialized`. Returns initialize's reply.
    pub async fn initialize(&mut self, version: &str) -> Result<Reply, ClientError> {
        self.mode = Mode::Legacy {
            version: version.to_owned(),
            session: None,
        };
        let params = json!({
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": client_info(),
        });
        let reply = self.request("initialize", params).await?;
        let session = reply
            .headers
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (Some(session), true) = (session, reply.status.is_success()) else {
            return Err(ClientError::Handshake {
                status: reply.status,
            });
        };
        self.mode = Mode::Legacy {
            version: version.to_owned(),
            session: Some(session),
        };
        self.notify("notifications/initialized", Value::Null)
            .await?;
        Ok(reply)
    }

    /// The JSON-RPC body of a request: `params` gets the 2026-07-28 `_meta` fields in that era.
    pub fn request_body(&self, id: &Value, method: &str, params: Value) -> Value {
        let params = self.with_meta(params);
        let mut msg = Map::new();
        msg.insert("jsonrpc".into(), json!("2.0"));
        msg.insert("id".into(), id.clone());
        msg.insert("method".into(), json!(method));
        if !params.is_null() {
            msg.insert("params".into(), params);
        }
        Value::Object(msg)
    }

    /// A tools/call body.
    pub fn tool_call_body(&self, id: &Value, tool: &str, arguments: Value) -> Value {
        self.request_body(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    }

    fn with_meta(&self, params: Value) -> Value {
        if self.mode != Mode::Modern {
            return params;
        }
        let mut params = match params {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(META_VERSION.into(), json!(MODERN_VERSION));
            meta.insert(META_CAPABILITIES.into(), json!({}));
            meta.insert(META_CLIENT_INFO.into(), client_info());
        }
        Value::Object(params)
    }

    /// A POST to the endpoint with every header this era needs: `Accept`, `Content-Type`, the
    /// session and version, and (2026-07-28) `Mcp-Method` and `Mcp-Name`. Add more headers,
    /// then `.body(...)`.
    pub fn post_builder(&self, method: &str, name: Option<&str>) -> Builder {
        let mut b = self
            .builder(Method::POST)
            .header(header::ACCEPT, ACCEPT_BOTH)
            .header(header::CONTENT_TYPE, "application/json");
        if self.mode == Mode::Modern {
            b = b.header("mcp-method", method);
            if let Some(name) = name {
                b = b.header("mcp-name", name);
            }
        }
        b
    }

    /// A request to the endpoint carrying the session and version headers (the version only
    /// once there is one to send: not on a legacy `initialize`).
    pub fn builder(&self, method: Method) -> Builder {
        let mut b = Request::builder().method(method).uri(self.endpoint.clone());
        match &self.mode {
            Mode::Legacy {
                version,
                session: Some(session),
            } => {
                b = b
                    .header(SESSION, session.as_str())
                    .header(PROTOCOL_VERSION, version.as_str());
            }
            Mode::Legacy { session: None, .. } => {}
            Mode::Modern => b = b.header(PROTOCOL_VERSION, MODERN_VERSION),
        }
        b
    }

    /// Sends a request; returns once the response head is in.
    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, ClientError> {
        match timeout(self.timeout, self.http.request(req)).await {
            Ok(resp) => Ok(resp?),
            Err(_) => Err(ClientError::Timeout(self.timeout)),
        }
    }

    /// Sends a request and reads the whole response.
    pub async fn exchange(
        &self,
        id: Value,
        req: Request<Full<Bytes>>,
    ) -> Result<Reply, ClientError> {
        let resp = self.send(req).await?;
        collect(id, resp, self.timeout).await
    }

    /// A request (`method`, `params`) with a fresh id, read whole.
    pub async fn request(&self, method: &str, params: Value) -> Result<Reply, ClientError> {
        let id = self.next_id();
        let name = params.get("name").and_then(Value::as_str);
        let body = self.request_body(&id, method, params.clone());
        let req = self
            .post_builder(method, name)
            .body(Full::new(Bytes::from(body.to_string())))?;
        self.exchange(id, req).await
    }

    /// A notification; returns the status (202 expected).
    pub async fn notify(&self, method: &str, params: Value) -> Result<StatusCode, ClientError> {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null()
            && let Some(obj) = msg.as_object_mut()
        {
            obj.insert("params".into(), params);
        }
        let req = self
            .post_builder(method, None)
            .body(Full::new(Bytes::from(msg.to_string())))?;
        Ok(self.exchange(Value::Null, req).await?.status)
    }

    /// tools/call `tool` with `arguments`, read whole.
    pub async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Reply, ClientError> {
        let (id, resp) = self.open_tool(tool, arguments).await?;
        collect(id, resp, self.timeout).await
    }

    /// tools/call `tool`; returns the id sent and the response with its body unread (read an
    /// SSE answer with [`SseReader`]).
    pub async fn open_tool(
        &self,
        tool: &str,
        arguments: Value,
    ) -> Result<(Value, Response<Incoming>), ClientError> {
        let id = self.next_id();
        let body = self.tool_call_body(&id, tool, arguments);
        let req = self
            .post_builder("tools/call", Some(tool))
            .body(Full::new(Bytes::from(body.to_string())))?;
        Ok((id, self.send(req).await?))
    }

    /// GET the endpoint: the standalone SSE stream, or with `last_event_id` the resumption of
    /// a stream (2025-11-25 transports §Listening for Messages, §Resumability).
    pub async fn get_stream(
        &self,
        last_event_id: Option<&str>,
    ) -> Result<Response<Incoming>, ClientError> {
        let mut b = self
            .builder(Method::GET)
            .header(header::ACCEPT, "text/event-stream");
        if let Some(last) = last_event_id {
            b = b.header("last-event-id", last);
        }
        self.send(b.body(Full::default())?).await
    }

    /// DELETE the endpoint: end the legacy session.
    pub async fn delete_session(&self) -> Result<Reply, ClientError> {
        let req = self.builder(Method::DELETE).body(Full::default())?;
        self.exchange(Value::Null, req).await
    }
}

/// A connector with `TCP_NODELAY`, as agents' HTTP stacks set it: an h2 request is a HEADERS
/// and a DATA frame written apart, and with Nagle's algorithm the second waits for the peer's
/// delayed ACK (~40 ms on Linux).
fn connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http
}

fn client_info() -> Value {
    json!({"name": "strata-testbed-client", "version": env!("CARGO_PKG_VERSION")})
}

/// Reads a whole response; a body that breaks is reported in [`Reply::broken`], with the bytes
/// that came before the break.
pub async fn collect(
    id: Value,
    resp: Response<Incoming>,
    limit: Duration,
) -> Result<Reply, ClientError> {
    let (parts, mut body) = resp.into_parts();
    let mut bytes = BytesMut::new();
    let mut broken = None;
    loop {
        match timeout(limit, body.frame()).await {
            Err(_) => return Err(ClientError::Timeout(limit)),
            Ok(None) => break,
            Ok(Some(Err(err))) => {
                broken = Some(err.to_string());
                break;
            }
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
            }
        }
    }
    Ok(Reply {
        id,
        status: parts.status,
        headers: parts.headers,
        body: bytes.freeze(),
        broken,
    })
}

/// One SSE event (a block ended by a blank line), as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The block's bytes, blank line included.
    pub raw: Bytes,
    pub id: Option<String>,
    pub event: Option<String>,
    /// `data` lines joined by LF; `None` when the block had no `data` field (a comment or a
    /// lone `retry`), which a client never dispatches.
    pub data: Option<String>,
    /// The 1-based number of the body frame (one read) that completed this event.
    pub frame: u64,
}

impl SseEvent {
    /// The data as JSON, if it is.
    pub fn json(&self) -> Option<Value> {
        self.data
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
    }
}

/// Reads an SSE response body event by event, as it arrives.
pub struct SseReader {
    body: Incoming,
    framer: SseFramer,
    frames: u64,
    ended: bool,
    limit: Duration,
}

impl SseReader {
    pub fn new(body: Incoming) -> Self {
        SseReader {
            body,
            framer: SseFramer::default(),
            frames: 0,
            ended: false,
            limit: DEFAULT_TIMEOUT,
        }
    }

    /// Bounds each wait for the next event by `limit`.
    pub fn with_timeout(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// The next event with the instant it was complete, or `None` once the body ended
    /// cleanly. A body that breaks is an error.
    pub async fn next_event(&mut self) -> Result<Option<(SseEvent, Instant)>, ClientError> {
        loop {
            if let Some(event) = self.framer.next_event(self.ended, self.frames) {
                return Ok(Some((event, Instant::now())));
            }
            if self.ended {
                return Ok(None);
            }
            match timeout(self.limit, self.body.frame()).await {
                Err(_) => return Err(ClientError::Timeout(self.limit)),
                Ok(None) => self.ended = true,
                Ok(Some(Err(err))) => return Err(err.into()),
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.frames += 1;
                        self.framer.push(data);
                    }
                }
            }
        }
    }

    /// Data frames (reads) received so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes after the last complete event (an event cut off by the end of the body).
    pub fn leftover(&self) -> &[u8] {
        &self.framer.buf
    }
}

/// Splits a byte stream into SSE blocks. Line ends are LF, CR or CRLF (WHATWG HTML §9.2.6); a
/// CR at the end of the buffer waits for the next bytes unless the stream has ended.
#[derive(Default)]
struct SseFramer {
    buf: BytesMut,
}

impl SseFramer {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    fn next_event(&mut self, eof: bool, frame: u64) -> Option<SseEvent> {
        let end = block_end(&self.buf, eof)?;
        let raw = self.buf.split_to(end).freeze();
        Some(parse_block(raw, frame))
    }
}

/// Where the first block ends (just past its blank line), if the buffer holds one.
fn block_end(buf: &[u8], eof: bool) -> Option<usize> {
    let mut line_start = 0;
    let mut i = 0;
    while let Some(&b) = buf.get(i) {
        if b != b'\n' && b != b'\r' {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        if b == b'\r' {
            match buf.get(i + 1) {
                Some(b'\n') => end += 1,
                Some(_) => {}
                None if eof => {}
                None => return None,
            }
        }
        if i == line_start {
            return Some(end);
        }
        line_start = end;
        i = end;
    }
    None
}

fn parse_block(raw: Bytes, frame: u64) -> SseEvent {
    let text = String::from_utf8_lossy(&raw).into_owned();
    let mut event = SseEvent {
        raw,
        id: None,
        event: None,
        data: None,
        frame,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    for line in text.split(['\n', '\r']).filter(|l| !l.is_empty()) {
        if line.starts_with(':') {
            continue;
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "data" => match &mut event.data {
                // Later `data` lines are joined to the first by LF.
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => event.data = Some(value.to_owned()),
            },
            "id" => event.id = Some(value.to_owned()),
            "event" => event.event = Some(value.to_owned()),
            _ => {}
        }
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(bytes: &[u8], eof: bool) -> Vec<SseEvent> {
        let mut f = SseFramer::default();
        f.push(bytes);
        std::iter::from_fn(|| f.next_event(eof, 1)).collect()
    }

    #[test]
    fn blocks_split_on_any_line_end() {
        let evs = events(
            b"id: a\nevent: message\ndata: {\"x\":1}\n\n: ok\r\n\r\ndata: 1\rdata: 2\r\r",
            true,
        );
        assert_eq!(evs.len(), 3);
        assert_eq!(evs[0].id.as_deref(), Some("a"));
        assert_eq!(evs[0].event.as_deref(), Some("message"));
        assert_eq!(evs[0].json(), Some(json!({"x": 1})));
        assert_eq!(evs[1].data, None);
        assert_eq!(&evs[1].raw[..], b": ok\r\n\r\n");
        assert_eq!(evs[2].data.as_deref(), Some("1\n2"));
    }

    #[test]
    fn a_trailing_cr_waits_for_more_unless_the_stream_ended() {
        assert!(events(b"data: 1\r\n\r", false).is_empty());
        assert_eq!(events(b"data: 1\r\n\r", true).len(), 1);
        assert!(events(b"data: 1\n", true).is_empty());
    }

    #[test]
    fn priming_event_has_empty_data() {
        let evs = events(b"id: s1-0\ndata: \n\n", false);
        assert_eq!(evs[0].data.as_deref(), Some(""));
        assert_eq!(evs[0].id.as_deref(), Some("s1-0"));
    }
}
