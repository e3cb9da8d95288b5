//! JSON-RPC shapes the testbed reads and writes, and the protocol era of a request.
//!
//! Response ids always echo the request's `id` value as parsed (string or number), because
//! "a response MUST include the same ID as the request" (2025-11-25 basic §Responses).

use serde_json::{Map, Value, json};

/// Revisions that use `initialize` and `Mcp-Session-Id` (2025-11-25 transports §Session
/// Management), oldest first.
pub(crate) const LEGACY_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
/// The revision a legacy client gets when it asks for one we do not speak (2025-11-25
/// lifecycle §Version Negotiation: the server answers with its latest).
pub(crate) const LATEST_LEGACY: &str = "2025-11-25";
/// The stateless revision: no session, no handshake, `resultType` on every result.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// What `server/discover` and the -32022 error advertise, newest first.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];

/// `_meta` key a 2026-07-28 request repeats its header version in (2026-07-28 basic §_meta).
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// SDK code (TS and C# servers) for transport-level rejections: bad Accept, missing session.
pub(crate) const SDK_BAD_REQUEST: i64 = -32000;
/// SDK code (TS and C# servers) for an unknown or ended session, sent with 404.
pub(crate) const SDK_SESSION_NOT_FOUND: i64 = -32001;
/// 2026-07-28: header and body disagree (HTTP 400).
pub(crate) const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the requested protocol version is not supported (HTTP 400).
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The protocol era of one request, decided by its `MCP-Protocol-Version` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// 2025-03-26 … 2025-11-25: sessions, GET streams, no `resultType`.
    Legacy,
    /// 2026-07-28: stateless, every result carries `resultType`.
    Modern,
}

impl Era {
    /// Reads the era from the header value. `None` means legacy: "if the server receives a
    /// request without an MCP-Protocol-Version header … it SHOULD assume 2025-03-26"
    /// (2025-06-18 transports §Protocol Version Header). `Err` carries an unsupported value.
    pub(crate) fn from_header(value: Option<&str>) -> Result<Era, String> {
        match value.map(str::trim) {
            None => Ok(Era::Legacy),
            Some(MODERN_VERSION) => Ok(Era::Modern),
            Some(v) if LEGACY_VERSIONS.contains(&v) => Ok(Era::Legacy),
            Some(v) => Err(v.to_owned()),
        }
    }
}

/// One POSTed JSON-RPC message, classified by shape.
#[derive(Debug)]
pub(crate) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification,
    /// A client's answer to a server→client request (legacy SSE `roots/list`, …).
    Response,
}

impl Incoming {
    /// Classifies a parsed body. Batches (2025-03-26 only) are not supported by the testbed.
    pub(crate) fn from_value(value: Value) -> Result<Incoming, &'static str> {
        let Value::Object(mut obj) = value else {
            return Err("Invalid Request: the testbed accepts one JSON-RPC object, not a batch");
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err("Invalid Request: jsonrpc must be \"2.0\"");
        }
        match (obj.remove("method"), obj.remove("id")) {
            (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request {
                id,
                method,
                params: obj.remove("params").unwrap_or(Value::Null),
            }),
            (Some(Value::String(_)), None) => Ok(Incoming::Notification),
            (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => {
                Ok(Incoming::Response)
            }
            _ => Err("Invalid Request: neither a request, a notification nor a response"),
        }
    }
}

/// The body's `_meta` protocol version, if the request carries one.
pub(crate) fn meta_version(params: &Value) -> Option<&str> {
    params
        .get("_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str)
}

/// `params._meta.progressToken` if present, else the request id (which is what the TS client
/// uses as its token anyway, per its `protocol.ts`).
pub(crate) fn progress_token(params: &Value, id: &Value) -> Value {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .cloned()
        .unwrap_or_else(|| id.clone())
}

pub(crate) fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(crate) fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// An error that answers no particular request (transport rejections); the TS server's
/// exact shape, `id: null` last.
pub(crate) fn transport_error(code: i64, message: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","error":{{"code":{code},"message":{}}},"id":null}}"#,
        Value::String(message.to_owned())
    )
}

/// Adds `resultType: "complete"` in the 2026-07-28 era, where it is required
/// (2026-07-28 schema `Result.resultType`); legacy results never carry it.
pub(crate) fn complete(era: Era, mut result: Map<String, Value>) -> Value {
    if era == Era::Modern {
        result.insert("resultType".into(), Value::String("complete".into()));
    }
    Value::Object(result)
}

/// A `CallToolResult` with one text block.
pub(crate) fn tool_result(era: Era, text: &str, is_error: bool) -> Value {
    let mut m = Map::new();
    m.insert("content".into(), json!([{"type": "text", "text": text}]));
    m.insert("isError".into(), Value::Bool(is_error));
    complete(era, m)
}

pub(crate) fn progress(token: &Value, progress: u64, total: u64) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": token, "progress": progress, "total": total},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn era_follows_the_header() {
        assert_eq!(Era::from_header(None), Ok(Era::Legacy));
        assert_eq!(Era::from_header(Some("2025-06-18")), Ok(Era::Legacy));
        assert_eq!(Era::from_header(Some("2026-07-28")), Ok(Era::Modern));
        assert_eq!(
            Era::from_header(Some("1999-01-01")),
            Err("1999-01-01".into())
        );
    }

    #[test]
    fn incoming_shapes() {
        let req = Incoming::from_value(json!({"jsonrpc":"2.0","id":"a","method":"ping"}));
        assert!(matches!(req, Ok(Incoming::Request { id, .. }) if id == json!("a")));
        let note = Incoming::from_value(json!({"jsonrpc":"2.0","method":"notifications/x"}));
        assert!(matches!(note, Ok(Incoming::Notification)));
        let resp = Incoming::from_value(json!({"jsonrpc":"2.0","id":0,"result":{}}));
        assert!(matches!(resp, Ok(Incoming::Response)));
        assert!(Incoming::from_value(json!([])).is_err());
        assert!(Incoming::from_value(json!({"jsonrpc":"1.0","id":1,"method":"x"})).is_err());
    }

    #[test]
    fn transport_error_matches_the_ts_sdk_bytes() {
        assert_eq!(
            transport_error(SDK_SESSION_NOT_FOUND, "Session not found"),
            r#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}"#
        );
    }
}
