//! Answers strata writes itself, when there is no upstream answer to forward. Each says which
//! side failed (header `x-strata-error`) and carries a JSON-RPC error body with a null id (the
//! SDK clients read a JSON-RPC error from a non-2xx body).

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

use super::body::{BodySink, ProxyBody};

/// Why strata answered itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StrataError {
    /// The agent's request target could not be forwarded (downstream side; not retryable).
    BadRequestTarget,
    /// The agent's request head cannot be forwarded as one message: `Host` twice, or
    /// `Content-Length` values that differ (downstream side; RFC 9112 §3.2, RFC 9110 §8.6).
    BadRequestHead,
    /// The agent's request body broke while strata read it into the replay buffer
    /// (downstream side).
    BadRequestBody,
    /// No connection to the upstream (upstream side; nothing was sent, a retry is safe).
    UpstreamConnect,
    /// The upstream connection broke before a response head (upstream side; the request may
    /// have been processed, so a retry is safe only for idempotent calls).
    UpstreamBroken,
    /// No response head within `timeouts.response_head` (upstream side; same as above).
    UpstreamTimeout,
    /// The `Idempotency-Key` is in use by a call still running (downstream side: retry later).
    IdempotencyInFlight,
    /// The `Idempotency-Key` was used before with a different request (downstream side).
    IdempotencyMismatch,
    /// The agent's request body paused past `timeouts.request_body_idle` (downstream side).
    RequestBodyTimeout,
    /// A browser's `Origin` is not in `origins` (downstream side; DNS-rebinding defence).
    OriginForbidden,
}

impl StrataError {
    pub(super) fn status(self) -> StatusCode {
        match self {
            StrataError::BadRequestTarget
            | StrataError::BadRequestHead
            | StrataError::BadRequestBody => StatusCode::BAD_REQUEST,
            StrataError::UpstreamConnect | StrataError::UpstreamBroken => StatusCode::BAD_GATEWAY,
            StrataError::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            StrataError::IdempotencyInFlight => StatusCode::CONFLICT,
            StrataError::IdempotencyMismatch => StatusCode::UNPROCESSABLE_ENTITY,
            StrataError::OriginForbidden => StatusCode::FORBIDDEN,
            StrataError::RequestBodyTimeout => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// The `x-strata-error` value: `side:reason`.
    pub(super) fn code(self) -> &'static str {
        match self {
            StrataError::BadRequestTarget => "downstream:bad_request_target",
            StrataError::BadRequestHead => "downstream:bad_request_head",
            StrataError::BadRequestBody => "downstream:request_body_broken",
            StrataError::UpstreamConnect => "upstream:connect_error",
            StrataError::UpstreamBroken => "upstream:reset_before_response",
            StrataError::UpstreamTimeout => "upstream:response_head_timeout",
            StrataError::IdempotencyInFlight => "downstream:idempotency_key_in_flight",
            StrataError::IdempotencyMismatch => "downstream:idempotency_key_reused",
            StrataError::OriginForbidden => "downstream:origin_not_allowed",
            StrataError::RequestBodyTimeout => "downstream:request_body_timeout",
        }
    }

    fn message(self) -> &'static str {
        match self {
            StrataError::BadRequestTarget => "strata: the request target cannot be forwarded",
            StrataError::BadRequestHead => {
                "strata: the request head repeats Host or states conflicting lengths"
            }
            StrataError::BadRequestBody => "strata: the request body broke before it was read",
            StrataError::UpstreamConnect => "strata: cannot connect to the MCP server (upstream)",
            StrataError::UpstreamBroken => {
                "strata: the MCP server (upstream) closed the connection before responding"
            }
            StrataError::UpstreamTimeout => {
                "strata: the MCP server (upstream) sent no response in time"
            }
            StrataError::IdempotencyInFlight => {
                "strata: a call with this Idempotency-Key is still in progress; retry later"
            }
            StrataError::IdempotencyMismatch => {
                "strata: this Idempotency-Key was used with a different request"
            }
            StrataError::OriginForbidden => "strata: this Origin is not allowed",
            StrataError::RequestBodyTimeout => "strata: the request body paused for too long",
        }
    }
}

/// The response for a local error.
pub(super) fn response<S: BodySink>(why: StrataError) -> Response<ProxyBody<S>> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32000,"message":"{}"}}}}"#,
        why.message()
    );
    let mut response = Response::new(ProxyBody::local(body));
    *response.status_mut() = why.status();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert("x-strata-error", HeaderValue::from_static(why.code()));
    response
}
