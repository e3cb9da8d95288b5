//! POST `/mcp`: transport checks, the era split, the legacy handshake and session rules, and
//! method dispatch.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming as IncomingBody;
use serde_json::{Map, Value, json};

use super::Testbed;
use super::body::Body;
use super::reply;
use super::rpc::{self, Era, Incoming};
use super::scenarios;
use super::session::Session;
use super::tools;

/// Largest request body read; bigger bodies get 413. Generous: the testbed's own requests are
/// tiny, but transparency tests may push large tool arguments through.
pub(crate) const MAX_REQUEST_BYTES: usize = 4 << 20;

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Case-insensitive substring test, as the TS SDK server does for `Accept`.
pub(crate) fn header_mentions(headers: &HeaderMap, name: header::HeaderName, what: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains(what))
}

/// 400 with -32022 (2026-07-28 basic §Versioning `UnsupportedProtocolVersionError`); legacy
/// revisions only require "400 Bad Request" for an unsupported header (2025-06-18 transports
/// §Protocol Version Header), so one shape serves both.
pub(crate) fn unsupported_version(requested: &str) -> Response<Body> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": rpc::UNSUPPORTED_PROTOCOL_VERSION,
            "message": "Unsupported protocol version",
            "data": {"supported": rpc::SUPPORTED_VERSIONS, "requested": requested},
        },
    });
    reply::json(StatusCode::BAD_REQUEST, &body)
}

/// A request refused before dispatch; kept small so `Result`s stay cheap.
#[derive(Debug)]
pub(crate) enum Reject {
    /// 2025-11-25 transports §Session Management: a server that requires a session SHOULD
    /// answer 400 to a request without the header.
    MissingSession,
    /// … and MUST answer 404 to a session id it does not know (or has ended).
    UnknownSession,
    UnsupportedVersion(String),
    /// GET or DELETE in the 2026-07-28 era.
    MethodNotAllowed,
}

impl Reject {
    pub(crate) fn response(self) -> Response<Body> {
        match self {
            Reject::MissingSession => reply::rejection(
                StatusCode::BAD_REQUEST,
                rpc::SDK_BAD_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            ),
            Reject::UnknownSession => reply::rejection(
                StatusCode::NOT_FOUND,
                rpc::SDK_SESSION_NOT_FOUND,
                "Session not found",
            ),
            Reject::UnsupportedVersion(requested) => unsupported_version(&requested),
            Reject::MethodNotAllowed => reply::method_not_allowed("POST"),
        }
    }
}

/// The legacy session named by the request.
pub(crate) fn require_session(tb: &Testbed, headers: &HeaderMap) -> Result<Arc<Session>, Reject> {
    let id = header_str(headers, SESSION_HEADER).ok_or(Reject::MissingSession)?;
    tb.sessions.get(id).ok_or(Reject::UnknownSession)
}

pub(crate) async fn handle(tb: &Arc<Testbed>, req: Request<IncomingBody>) -> Response<Body> {
    tb.count_post();
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    // Transport rules every revision states: Accept lists both types, the body is JSON
    // (2025-03-26 … 2026-07-28 transports §Sending Messages). Status codes per the TS SDK.
    if !(header_mentions(headers, header::ACCEPT, "application/json")
        && header_mentions(headers, header::ACCEPT, "text/event-stream"))
    {
        return reply::rejection(
            StatusCode::NOT_ACCEPTABLE,
            rpc::SDK_BAD_REQUEST,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        );
    }
    if !header_mentions(headers, header::CONTENT_TYPE, "application/json") {
        return reply::rejection(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            rpc::SDK_BAD_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let era = match Era::from_header(header_str(headers, VERSION_HEADER)) {
        Ok(era) => era,
        Err(requested) => return unsupported_version(&requested),
    };
    let bytes = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return reply::rejection(
                StatusCode::PAYLOAD_TOO_LARGE,
                rpc::SDK_BAD_REQUEST,
                "Payload Too Large",
            );
        }
        Err(_) => {
            return reply::rejection(
                StatusCode::BAD_REQUEST,
                rpc::SDK_BAD_REQUEST,
                "Bad Request: could not read the body",
            );
        }
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return reply::rejection(StatusCode::BAD_REQUEST, rpc::PARSE_ERROR, "Parse error");
    };
    let msg = match Incoming::from_value(value) {
        Ok(msg) => msg,
        Err(why) => return reply::rejection(StatusCode::BAD_REQUEST, rpc::INVALID_REQUEST, why),
    };
    // The record's key: the request id as JSON text, as strata logs it (`jsonrpc_id`).
    let record_key = match (&tb.sent, &msg) {
        (Some(_), Incoming::Request { id, .. }) => Some(id.to_string()),
        _ => None,
    };
    let resp = match era {
        Era::Legacy => legacy(tb, headers, msg).await,
        Era::Modern => modern(tb, headers, msg).await,
    };
    match (&tb.sent, record_key) {
        (Some(log), Some(key)) => log.record(key, resp),
        _ => resp,
    }
}

async fn legacy(tb: &Arc<Testbed>, headers: &HeaderMap, msg: Incoming) -> Response<Body> {
    if let Incoming::Request { id, method, params } = &msg
        && method == "initialize"
    {
        return initialize(tb, id, params);
    }
    let session = match require_session(tb, headers) {
        Ok(session) => session,
        Err(reject) => return reject.response(),
    };
    match msg {
        // Notifications and responses are accepted with 202 and no body (all revisions,
        // transports §Sending Messages).
        Incoming::Notification | Incoming::Response => reply::status_only(StatusCode::ACCEPTED),
        Incoming::Request { id, method, params } => {
            dispatch(
                tb,
                Era::Legacy,
                Some(&session),
                headers,
                &id,
                &method,
                &params,
            )
            .await
        }
    }
}

async fn modern(tb: &Arc<Testbed>, headers: &HeaderMap, msg: Incoming) -> Response<Body> {
    // 2026-07-28: no sessions; an `Mcp-Session-Id` header is ignored, as the spec asks.
    let Incoming::Request { id, method, params } = msg else {
        return reply::status_only(StatusCode::ACCEPTED);
    };
    // 2026-07-28 transports §Protocol Version Header: the header MUST equal the `_meta`
    // version. A request without the `_meta` field is let through (lenient, for curl).
    if let Some(v) = rpc::meta_version(&params).filter(|v| *v != rpc::MODERN_VERSION) {
        let msg = format!("Header mismatch: MCP-Protocol-Version is 2026-07-28, _meta says {v}");
        return reply::json(
            StatusCode::BAD_REQUEST,
            &rpc::error(&id, rpc::HEADER_MISMATCH, &msg),
        );
    }
    dispatch(tb, Era::Modern, None, headers, &id, &method, &params).await
}

/// The legacy handshake (2025-11-25 lifecycle §Initialization): negotiate the version, mint a
/// session and return it in `Mcp-Session-Id` on the InitializeResult response.
fn initialize(tb: &Testbed, id: &Value, params: &Value) -> Response<Body> {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .and_then(|v| rpc::LEGACY_VERSIONS.iter().find(|known| **known == v))
        .copied()
        .unwrap_or(rpc::LATEST_LEGACY);
    let session = tb.sessions.create();
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": server_info(),
        "instructions": "strata testbed: every tool is a fault-injection scenario.",
    });
    let mut resp = reply::json(StatusCode::OK, &rpc::result(id, result));
    if let Ok(value) = HeaderValue::from_str(session.id()) {
        resp.headers_mut().insert(SESSION_HEADER, value);
    }
    tracing::debug!(session = %session.id(), version, "testbed: session initialized");
    resp
}

fn server_info() -> Value {
    json!({"name": "strata-testbed", "version": env!("CARGO_PKG_VERSION")})
}

async fn dispatch(
    tb: &Arc<Testbed>,
    era: Era,
    session: Option<&Arc<Session>>,
    headers: &HeaderMap,
    id: &Value,
    method: &str,
    params: &Value,
) -> Response<Body> {
    let ok = |result: Value| reply::json(StatusCode::OK, &rpc::result(id, result));
    match (method, era) {
        ("tools/call", _) => {
            let call = tools::Call {
                testbed: tb,
                era,
                session,
                id,
                params,
                headers,
            };
            tools::call(call).await
        }
        ("tools/list", _) => ok(scenarios::tools_list(era)),
        // `ping` is gone in 2026-07-28 but harmless to answer.
        ("ping", _) => ok(rpc::complete(era, Map::new())),
        ("server/discover", Era::Modern) => {
            let mut m = Map::new();
            m.insert("supportedVersions".into(), json!(rpc::SUPPORTED_VERSIONS));
            m.insert("capabilities".into(), json!({"tools": {}}));
            // Results name the server in `_meta` (2026-07-28 schema `ResultMetaObject`).
            m.insert(
                "_meta".into(),
                json!({"io.modelcontextprotocol/serverInfo": server_info()}),
            );
            // `DiscoverResult` is a `CacheableResult` (2026-07-28 schema): both fields required.
            m.insert("ttlMs".into(), json!(0));
            m.insert("cacheScope".into(), json!("public"));
            ok(rpc::complete(era, m))
        }
        _ => {
            // 2026-07-28 transports: an unimplemented method is 404 with -32601; legacy SDK
            // servers answer it in-band on 200.
            let status = match era {
                Era::Modern => StatusCode::NOT_FOUND,
                Era::Legacy => StatusCode::OK,
            };
            reply::json(
                status,
                &rpc::error(id, rpc::METHOD_NOT_FOUND, "Method not found"),
            )
        }
    }
}
