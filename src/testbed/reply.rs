//! Small builders for the testbed's HTTP responses.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::Value;

use super::ResponseMode;
use super::body::{self, Body};
use super::rpc;
use super::sse;

pub(crate) const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A response with `status`, `Content-Type` (if any) and `body`.
pub(crate) fn with(
    status: StatusCode,
    content_type: Option<HeaderValue>,
    body: Body,
) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    if let Some(ct) = content_type {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}

/// `status` with an `application/json` body of raw bytes (which need not be valid JSON).
pub(crate) fn json_bytes(status: StatusCode, bytes: impl Into<Bytes>) -> Response<Body> {
    with(status, Some(APPLICATION_JSON), body::full(bytes))
}

pub(crate) fn json(status: StatusCode, value: &Value) -> Response<Body> {
    json_bytes(status, value.to_string())
}

/// A bare status: empty body, no `Content-Type` — the realistic shape of a gateway's 503 or
/// 429.
pub(crate) fn status_only(status: StatusCode) -> Response<Body> {
    with(status, None, body::empty())
}

/// A transport-level rejection with the TS SDK's body shape (`id: null`).
pub(crate) fn rejection(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    json_bytes(status, rpc::transport_error(code, message))
}

/// One JSON-RPC message as the answer to a request: a JSON body, or a one-event SSE stream.
/// "The client MUST support both" (2025-03-26 … 2026-07-28 transports §Sending Messages).
pub(crate) fn message(mode: ResponseMode, value: &Value) -> Response<Body> {
    match mode {
        ResponseMode::Json => json(StatusCode::OK, value),
        ResponseMode::Sse => sse::response(body::full(sse::message(value))),
    }
}

/// 405 for methods the endpoint does not serve, with the `Allow` header RFC 9110 requires.
pub(crate) fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut resp = rejection(
        StatusCode::METHOD_NOT_ALLOWED,
        rpc::SDK_BAD_REQUEST,
        "Method Not Allowed",
    );
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    resp
}
