//! The data path: agent → strata → MCP server, and back. Bytes pass unchanged; the request
//! inspector and the classifier only look at them as they go by.

mod body;
mod call;
pub mod client;
mod clients;
mod forward;
mod inspect;
mod local;
mod resume;
pub mod server;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Response, Uri, Version};
use hyper::body::Incoming;
use tokio::time::Instant;

use crate::classify::exchange::Exchange;
use crate::config::{self, Config, HostHeader};
use crate::metrics::{HttpMethod, Limit, Metrics};

pub use body::{BodyEnd, BodySink, BoxError, IdleTimeout, ObservedBody, ProxyBody, UpstreamBody};
pub use call::{CallContext, CallMeta, CallTracker};
pub use client::{ClientError, UpstreamClient};
pub use resume::ResumeRegistry;

use inspect::{InspectSink, Inspection};
use local::LocalError;

/// The header an MCP session travels in (2025-03-26 … 2025-11-25 transports §Session
/// Management). Header names are case-insensitive; 2025-11-25 spells it `MCP-Session-Id`.
const SESSION: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";

/// The response body strata hands to hyper.
pub type AgentBody = ProxyBody<CallTracker>;

/// The proxy: shared by every connection and request.
pub struct Proxy {
    client: UpstreamClient,
    ctx: Arc<CallContext>,
    scheme: Scheme,
    authority: Authority,
    rewrite_host: bool,
    response_head_timeout: Duration,
    body_idle: Option<Duration>,
    inspect_cap: usize,
}

// === impl Proxy ===

impl Proxy {
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Arc<Proxy>, ClientError> {
        let client = client::build(&config.upstream_tls, config.timeouts.connect)?;
        let scheme = match config.upstream.scheme {
            config::Scheme::Http => Scheme::HTTP,
            config::Scheme::Https => Scheme::HTTPS,
        };
        let upstream: Arc<str> = format!("{}://{}", scheme, config.upstream.authority).into();
        let ctx = Arc::new(CallContext {
            metrics,
            upstream,
            log_error_messages: config.log.error_messages,
            resume: ResumeRegistry::new(config.timeouts.resume_window),
            clients: clients::SessionClients::default(),
        });
        Ok(Arc::new(Proxy {
            client,
            ctx,
            scheme,
            authority: config.upstream.authority.clone(),
            rewrite_host: config.host_header == HostHeader::Upstream,
            response_head_timeout: config.timeouts.response_head,
            body_idle: config.timeouts.body_idle,
            inspect_cap: config.limits.request_inspect_bytes,
        }))
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.ctx.metrics
    }

    pub fn resume_registry(&self) -> &Arc<ResumeRegistry> {
        &self.ctx.resume
    }

    /// Serves one agent request.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        agent: SocketAddr,
    ) -> Result<Response<AgentBody>, Infallible> {
        let started = Instant::now();
        self.ctx
            .metrics
            .http_request(HttpMethod::from_http(req.method()));
        let (mut parts, body) = req.into_parts();
        let method = parts.method.clone();

        let session: Option<Arc<str>> = header_str(&parts.headers, SESSION).map(Arc::from);
        let protocol_version = header_str(&parts.headers, PROTOCOL_VERSION).map(Box::from);
        let ended_session = (method == Method::DELETE)
            .then(|| session.clone())
            .flatten();

        // What this exchange may classify: a POST's requests, or parked calls a resumed
        // stream may answer (GET + Last-Event-ID on a session).
        let mut inspection = None;
        let mut resumed = Vec::new();
        let upstream_body = if parts.method == Method::POST {
            let i = Inspection::new();
            let sink = i.sink(self.inspect_cap);
            inspection = Some(i);
            ObservedBody::new(body, sink)
        } else {
            let last_event_id = parts.headers.get(LAST_EVENT_ID);
            if let (true, Some(session), Some(last)) =
                (parts.method == Method::GET, &session, last_event_id)
            {
                resumed = self.ctx.resume.take_for_resume(session, last.as_bytes());
            }
            ObservedBody::new(body, InspectSink::inert())
        };

        let uri = match self.upstream_uri(parts.uri.path_and_query()) {
            Ok(uri) => uri,
            Err(_) => return Ok(local::response(LocalError::BadRequestTarget)),
        };
        forward::set_host(
            &mut parts.headers,
            &parts.uri,
            &self.authority,
            self.rewrite_host,
        );
        forward::strip_hop_by_hop(&mut parts.headers);
        forward::add_via(&mut parts.headers, parts.version);
        forward::add_forwarded_for(&mut parts.headers, agent.ip());
        parts.uri = uri;
        // hyper's client picks h1 or h2 per connection (ALPN); the agent's version is not ours.
        parts.version = Version::HTTP_11;

        // Until the upstream answers, a dropped future (the agent left) must still give every
        // request its outcome: the guard does that on drop.
        let mut waiting = Waiting {
            proxy: &self,
            inspection,
            resumed,
            session,
            protocol_version,
            started,
        };
        let sent = tokio::time::timeout(
            self.response_head_timeout,
            self.client
                .request(Request::from_parts(parts, upstream_body)),
        )
        .await;
        let response = match sent {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => {
                let why = if err.is_connect() {
                    self.ctx.metrics.upstream_connect_error();
                    LocalError::UpstreamConnect
                } else {
                    LocalError::UpstreamBroken
                };
                tracing::debug!(error = %err, "upstream request failed");
                if let Some(mut tracker) = waiting.take_tracker() {
                    tracker.no_response(why.status().as_u16());
                }
                return Ok(local::response(why));
            }
            Err(_elapsed) => {
                let why = LocalError::UpstreamTimeout;
                if let Some(mut tracker) = waiting.take_tracker() {
                    tracker.no_response(why.status().as_u16());
                }
                return Ok(local::response(why));
            }
        };

        let (mut parts, body) = response.into_parts();
        forward::strip_hop_by_hop(&mut parts.headers);
        forward::add_via(&mut parts.headers, parts.version);
        parts.version = Version::HTTP_11;
        let body = UpstreamBody::new(body, self.body_idle, self.ctx.metrics.clone());
        let body = match waiting.take_tracker() {
            Some(mut tracker) => {
                let content_type = parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .map(HeaderValue::as_bytes);
                tracker.response_head(parts.status.as_u16(), content_type);
                if let Some(assigned) = header_str(&parts.headers, SESSION) {
                    tracker.learn_session(assigned);
                }
                ProxyBody::Observed(ObservedBody::new(body, tracker))
            }
            None => {
                if method == Method::DELETE
                    && parts.status.is_success()
                    && let Some(session) = &ended_session
                {
                    self.ctx.clients.forget(session);
                }
                ProxyBody::Plain(body)
            }
        };
        Ok(Response::from_parts(parts, body))
    }

    fn upstream_uri(&self, pq: Option<&PathAndQuery>) -> Result<Uri, http::Error> {
        let pq = pq
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(pq)
            .build()
    }
}

/// An exchange waiting for the upstream's head. Dropped unconverted (the agent left): every
/// request it carried is CLIENT_CANCELLED.
struct Waiting<'a> {
    proxy: &'a Arc<Proxy>,
    inspection: Option<Inspection>,
    resumed: Vec<resume::Parked>,
    session: Option<Arc<str>>,
    protocol_version: Option<Box<str>>,
    started: Instant,
}

impl Waiting<'_> {
    /// The tracker for what this exchange carries, or `None` when it carries no call.
    fn take_tracker(&mut self) -> Option<CallTracker> {
        let ctx = self.proxy.ctx.clone();
        if let Some(inspection) = self.inspection.take() {
            if inspection.was_cut() {
                ctx.metrics.limit_hit(Limit::RequestInspectBytes);
            }
            let found = inspection.take();
            if found.overflow > 0 {
                ctx.metrics.limit_hit(Limit::BatchRequests);
            }
            if found.requests.is_empty() {
                return None;
            }
            let meta = vec![
                CallMeta {
                    started: self.started,
                    statuses: Vec::new(),
                    sse_events: 0,
                };
                found.requests.len()
            ];
            let exchange = Exchange::new(found.requests, found.batch);
            return Some(CallTracker::new(
                ctx,
                exchange,
                meta,
                self.session.clone(),
                self.protocol_version.take(),
            ));
        }
        if self.resumed.is_empty() {
            return None;
        }
        let parked = std::mem::take(&mut self.resumed);
        let protocol_version = parked.first().and_then(|p| p.protocol_version.clone());
        let (requests, meta): (Vec<_>, Vec<_>) =
            parked.into_iter().map(|p| (p.request, p.meta)).unzip();
        Some(CallTracker::new(
            ctx,
            Exchange::new(requests, false),
            meta,
            self.session.clone(),
            protocol_version,
        ))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        // Converting and dropping the tracker records CLIENT_CANCELLED for each request.
        drop(self.take_tracker());
    }
}

fn header_str<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
