//! One upstream attempt and what the retry policy needs to know of it.

use http::header::HeaderValue;
use http::{HeaderMap, Method, Request, Response, Uri, Version};

use crate::metrics::Metrics;
use crate::policy::Failure;

use super::body::FromUpstream;
use super::h1_conns::SendError;
use super::head_timer::HeadTimedOut;
use super::request_body::RequestBody;
use super::strata_error::StrataError;

/// The response header that tells the agent how many attempts its call took (sent only when
/// strata re-sent it).
pub(super) const ATTEMPTS_HEADER: &str = "strata-attempts";

/// What kind of request body an exchange has, for the retry plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodyKind {
    /// A POST body kept whole in the replay buffer.
    Whole,
    /// A POST body past the replay cap: forwarded, never re-sent.
    Over,
    /// Anything else (retries off, GET, DELETE).
    Other,
}

/// The head of a request, kept to send it again.
pub(super) struct Template {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
}

/// What the policy decided about a call, as its first attempt went out.
#[derive(Clone, Copy, Default)]
pub(super) struct RetryPlan {
    /// The call is subject to the retry policy (a POST carrying requests, retries enabled).
    pub applies: bool,
    /// Every request in the body may be re-sent.
    pub idempotent: bool,
}

impl Template {
    /// The template of a head that was sent and given back (`Proxy::send`): moved, not
    /// copied.
    pub(super) fn from_parts(parts: http::request::Parts) -> Template {
        Template {
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            headers: parts.headers,
        }
    }

    pub(super) fn request(&self, body: RequestBody) -> Request<RequestBody> {
        let mut request = Request::new(body);
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Sorts an attempt's result into the failure the policy knows (if any) and what the agent
/// would get: the upstream's response, or strata's own answer.
pub(super) fn attempt_failure(
    sent: Result<Result<Response<FromUpstream>, SendError>, HeadTimedOut>,
    metrics: &Metrics,
) -> (Option<Failure>, Result<Response<FromUpstream>, StrataError>) {
    match sent {
        Ok(Ok(response)) => {
            let failure = matches!(response.status().as_u16(), 429 | 502 | 503 | 504)
                .then(|| Failure::Status(response.status()));
            (failure, Ok(response))
        }
        Ok(Err(err)) if err.is_connect() => {
            metrics.upstream_connect_error();
            tracing::debug!(error = %err, "upstream connect failed");
            (
                Some(Failure::ConnectError),
                Err(StrataError::UpstreamConnect),
            )
        }
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "upstream request failed before a response head");
            (
                Some(Failure::UpstreamReset),
                Err(StrataError::UpstreamBroken),
            )
        }
        Err(HeadTimedOut) => (
            Some(Failure::HeadTimeout),
            Err(StrataError::UpstreamTimeout),
        ),
    }
}

/// Adds `strata-attempts` when the call took more than one attempt.
pub(super) fn add_attempts(headers: &mut HeaderMap, attempts: u32) {
    if attempts > 1 {
        headers.insert(ATTEMPTS_HEADER, HeaderValue::from(attempts));
    }
}
