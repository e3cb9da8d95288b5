//! The data path: agent → strata → MCP server, and back. Bytes pass unchanged; the request
//! inspector and the classifier only look at them as they go by.

pub mod agent_h1;
mod attempt;
mod body;
#[doc(hidden)]
pub mod differential;
mod from_agent;
pub mod h1_conns;
mod head_timer;
mod idempotency_key;
mod in_flight;
mod pending;
pub mod pooled_client;
mod request_body;
mod sse_keepalive;
mod strata_error;

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Response, Uri, Version};
use tokio::time::Instant;

use crate::config::{self, Config, HostHeader};
use crate::http::forward;
use crate::http::names::IDEMPOTENCY_KEY;
use crate::metrics::{HttpMethod, Limit, Metrics};
use crate::runtime::per_worker::PerWorker;

use crate::http::fields::{HeadFields, Headers};
pub use crate::http::forward::Peer;
use crate::http::names::Known;
pub use crate::observe::resume::ResumeRegistry;
use crate::observe::tracker::SentAs;
pub use crate::observe::tracker::{CallContext, CallMeta, CallTracker};
pub use body::{
    BodyEnd, BodySink, BoxError, FromUpstream, IdleTimeout, ObservedBody, ProxyBody, UpstreamBody,
};
pub use from_agent::FromAgent;
use h1_conns::{H1Conns, ResponseBody, SendError};
pub(crate) use head_timer::{Deadline, HeadTimer, Timer};
use in_flight::Sending;
pub use pooled_client::{ClientError, UpstreamClient};
pub use sse_keepalive::KeepAlive;

use crate::observe::inspect::{InspectSink, Inspection};
use attempt::{BodyKind, Template, add_attempts, attempt_failure};
use idempotency_key::{KeyClaim, replay_record};
use pending::PendingCall;
use request_body::{Buffered, ReadError, RequestBody};
use strata_error::StrataError;

use crate::idempotency::{Recording, Store as IdempotencyStore, recordable_status};
use crate::policy::{Annotations, Attempt, Next, Policy};

/// An answer's fields as the upstream sent them, for strata's own agent connection to
/// write (`agent_h1/response.rs`): [`Proxy::handle`] gives them for a request whose fields
/// were read as sent, and its response then has no header map.
pub(crate) struct AnswerFields {
    pub fields: HeadFields,
    /// This hop's `Via` entry.
    pub via: &'static str,
    /// Upstream attempts (`strata-attempts` is written above 1).
    pub attempts: u32,
}

/// What strata's own upstream connection gives back: the response, and its fields when kept
/// as read.
type H1Answer = (Response<ResponseBody>, Option<HeadFields>);

/// The response body strata hands to hyper. The call tracker is boxed: the response moves
/// half a dozen times between the upstream's head and the agent's connection, ~650 bytes
/// each with the tracker inline, ~230 with it boxed (one allocation of its own instead).
pub type AgentBody = ProxyBody<Box<CallTracker>>;

/// The proxy: shared by every connection and request.
pub struct Proxy {
    client: UpstreamClient,
    /// `http://` upstreams: strata's own HTTP/1.1 connections (`h1_conns.rs`), for requests
    /// whose body is known whole; `https://` ones, and streamed bodies, go through `client`.
    h1: Option<Arc<H1Conns>>,
    /// A copy per worker (`per_worker.rs`): each call clones its worker's, and a reference
    /// count both workers wrote on every call moved its cache line between cores each time.
    ctxs: PerWorker<Arc<CallContext>>,
    scheme: Scheme,
    authority: Authority,
    rewrite_host: bool,
    response_head_timeout: Duration,
    body_idle: Option<Duration>,
    sse_keepalive: Option<Duration>,
    request_body_idle: Option<Duration>,
    inspect_cap: usize,
    origins: config::Origins,
    policy: Policy,
    carried: Carried,
}

/// State that outlives a config reload.
#[derive(Clone)]
struct Carried {
    metrics: Arc<Metrics>,
    resume: Arc<ResumeRegistry>,
    clients: Arc<crate::observe::session_clients::SessionClients>,
    /// The upstream's tool annotations learnt so far.
    annotations: Arc<Annotations>,
    /// Idempotency records (the memory store must outlive a reload).
    idempotency: IdempotencyStore,
    /// Recent failed calls, to tell the agent's own retries.
    recent: Arc<crate::observe::client_retry::RecentFailures>,
}

/// The proxy in force. A reload swaps it; each request takes the one current when it
/// arrives and keeps it for its whole life.
pub struct CurrentProxy {
    proxy: std::sync::RwLock<Arc<Proxy>>,
    /// Bumped by each `store`, after the swap: a connection's [`ProxyCache`] reads it, not the
    /// lock, to know whether the proxy it holds is still the one in force.
    generation: AtomicU64,
}

/// A connection's copy of the proxy in force, taken again only after a reload.
///
/// Taking it per request meant a read lock and an `Arc` clone per call on cache lines every
/// worker thread writes (both counts go up and down): on 2 cores at 64 agents the lock alone
/// was 0.5 % of strata's CPU (`perf`), with the line passed between the cores each call. A
/// generation only read stays in both cores' caches until a reload writes it.
pub(crate) struct ProxyCache<'a> {
    current: &'a CurrentProxy,
    generation: u64,
    proxy: Arc<Proxy>,
}

impl CurrentProxy {
    pub fn new(proxy: Arc<Proxy>) -> Arc<Self> {
        Arc::new(CurrentProxy {
            proxy: std::sync::RwLock::new(proxy),
            generation: AtomicU64::new(0),
        })
    }

    pub fn load(&self) -> Arc<Proxy> {
        self.proxy.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn store(&self, proxy: Arc<Proxy>) {
        *self.proxy.write().unwrap_or_else(|e| e.into_inner()) = proxy;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A cache of the proxy in force, for a connection.
    pub(crate) fn cache(&self) -> ProxyCache<'_> {
        // The generation first: a reload between the two reads is seen at the next `get`.
        let generation = self.generation.load(Ordering::Acquire);
        ProxyCache {
            current: self,
            generation,
            proxy: self.load(),
        }
    }
}

impl ProxyCache<'_> {
    /// The proxy in force now.
    pub(crate) fn get(&mut self) -> &Arc<Proxy> {
        if self.current.generation.load(Ordering::Acquire) != self.generation {
            *self = self.current.cache();
        }
        &self.proxy
    }
}

// === impl Proxy ===

impl Proxy {
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Arc<Proxy>, ClientError> {
        let carried = Carried {
            metrics,
            resume: ResumeRegistry::new(config.timeouts.resume_window),
            clients: Arc::default(),
            annotations: Arc::default(),
            idempotency: IdempotencyStore::new(&config.policy.idempotency),
            recent: Arc::default(),
        };
        Self::build(config, carried)
    }

    /// A proxy for a reloaded config that carries on this one's state: metric handles, calls
    /// parked for a resumed stream, and what is known of sessions. The new upstream client
    /// starts a new pool; in-flight exchanges finish on the old one.
    pub fn reload(&self, config: &Config) -> Result<Arc<Proxy>, ClientError> {
        Self::build(config, self.carried.clone())
    }

    fn build(config: &Config, carried: Carried) -> Result<Arc<Proxy>, ClientError> {
        let client = pooled_client::build(&config.upstream_tls, config.timeouts.connect)?;
        let scheme = match config.upstream.scheme {
            config::Scheme::Http => Scheme::HTTP,
            config::Scheme::Https => Scheme::HTTPS,
        };
        let upstream: Arc<str> = format!("{}://{}", scheme, config.upstream.authority).into();
        let trusted = config.policy.trust_annotations;
        let ctx = CallContext {
            metrics: carried.metrics.clone(),
            upstream,
            log_error_messages: config.log.error_messages,
            resume: carried.resume.clone(),
            clients: carried.clients.clone(),
            annotations: trusted.then(|| carried.annotations.clone()),
            recent: carried.recent.clone(),
        };
        let h1 = (scheme == Scheme::HTTP).then(|| {
            H1Conns::new(
                &config.upstream.authority,
                config.timeouts.connect,
                pooled_client::POOL_IDLE_TIMEOUT,
            )
        });
        Ok(Arc::new(Proxy {
            client,
            h1,
            ctxs: PerWorker::new(|| Arc::new(ctx.clone())),
            scheme,
            authority: config.upstream.authority.clone(),
            rewrite_host: config.host_header == HostHeader::Upstream,
            response_head_timeout: config.timeouts.response_head,
            body_idle: config.timeouts.body_idle,
            sse_keepalive: config.timeouts.sse_keepalive,
            request_body_idle: config.timeouts.request_body_idle,
            inspect_cap: config.limits.request_inspect_bytes,
            origins: config.origins.clone(),
            policy: Policy::new(&config.policy, carried.annotations.clone()),
            carried,
        }))
    }

    /// One attempt: the request out, the response head back.
    ///
    /// `fields`: the agent's fields as read, when `request` has no map (`handle` passes them
    /// only for a body known whole to an `http://` upstream, which is what takes them here);
    /// the answer's fields are then kept as read too, into `answer_fields`. `now`: the
    /// attempt's start.
    fn send<'a>(
        &'a self,
        mut request: Request<RequestBody>,
        fields: Option<&'a HeadFields>,
        hop: &'a forward::Hop<'a>,
        answer_fields: &'a mut Option<HeadFields>,
        now: Instant,
    ) -> (
        Sending<'a, impl Future<Output = Result<H1Answer, SendError>> + Send + 'a>,
        Option<http::request::Parts>,
    ) {
        // strata's own connections take a body known whole (the replay buffer's, or none).
        if let Some(conns) = &self.h1
            && let Some(body) = request.body_mut().take_whole()
        {
            // The head is written before the future is made: its parts come back, unchanged,
            // for a retry's template.
            let (parts, _taken) = request.into_parts();
            let sending = Sending::Own {
                sending: conns.send(&parts, fields, body, hop, now),
                answer_fields,
            };
            return (sending, Some(parts));
        }
        hop.apply(request.headers_mut());
        let sending = Sending::Pooled {
            sending: self.client.request(request),
        };
        (sending, None)
    }

    /// How much of a POST body strata's own agent connection (`agent_h1.rs`) may read before
    /// the request is served, and the pause it may wait between reads: the replay buffer's cap
    /// and `timeouts.request_body_idle`, when `handle` would read this body into that buffer
    /// anyway (retries on, or an `Idempotency-Key`); `None` when it streams it.
    pub(crate) fn body_read_ahead(
        &self,
        idempotency_key: bool,
    ) -> Option<(usize, Option<Duration>)> {
        (self.policy.retries_enabled() || idempotency_key)
            .then(|| (self.policy.replay_cap(), self.request_body_idle))
    }

    /// Whether `handle` takes this request's fields as strata's own connection read them
    /// (`head_fields.rs`) rather than in a map: a POST whose body goes into the replay
    /// buffer (retries on) to an `http://` upstream, without an `Idempotency-Key` (whose
    /// record and claim read the map).
    pub(crate) fn forwards_fields_as_read(&self, method: &Method, idempotency_key: bool) -> bool {
        *method == Method::POST
            && !idempotency_key
            && self.h1.is_some()
            && self.policy.retries_enabled()
    }

    /// The call context, this worker's copy.
    fn ctx(&self) -> &Arc<CallContext> {
        self.ctxs.here()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.ctx().metrics
    }

    pub fn resume_registry(&self) -> &Arc<ResumeRegistry> {
        &self.ctx().resume
    }

    /// Serves one agent request.
    ///
    /// `fields`: the agent's header fields as strata's own connection read them, for a request
    /// [`forwards_fields_as_read`](Self::forwards_fields_as_read) takes (`req` then has no
    /// header map); `None` when they are in `req`'s map.
    ///
    /// `answer_fields`: set when the answer's fields were kept as the upstream sent them (for
    /// a request with `fields`); the response then has no header map, and strata's own agent
    /// connection writes them (`agent_h1/response.rs`).
    ///
    /// `head_timer`: bounds each attempt's wait for the response head; the agent connection
    /// lends its own (`head_timer.rs`).
    // Not `async fn`: see the block below.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn handle(
        self: &Arc<Self>,
        req: Request<FromAgent>,
        mut fields: Option<HeadFields>,
        // Borrowed: the agent connection's own, not a clone per call (its `X-Forwarded-For`
        // entry is reference-counted).
        peer: &Peer,
        answer_fields: &mut Option<AnswerFields>,
        mut head_timer: HeadTimer<'_>,
    ) -> impl Future<Output = Result<Response<AgentBody>, Infallible>> + Send {
        // An `async` block, not an `async fn`: an `async fn` moves each argument from its
        // captured slot into a local of its own as it starts, and the future keeps room for
        // both (`req` 264 bytes twice); the block uses them where they were captured.
        async move {
            let agent = peer.addr;
            let started = Instant::now();
            self.ctx()
                .metrics
                .http_request(HttpMethod::from_http(req.method()));
            let (mut parts, body) = req.into_parts();
            let read_whole = matches!(body, FromAgent::Whole(_));
            let headers = match &fields {
                Some(fields) => Headers::Own(fields),
                None => Headers::Map(&parts.headers),
            };
            // Before anything is read or forwarded: a browser page from another origin must not
            // reach the MCP server (DNS rebinding; 2025-11-25 transports §Security Warning).
            // One message, one target host (RFC 9112 §3.2): a second `Host` is refused
            // before anything is forwarded.
            if headers.repeats(Known::Host) {
                tracing::debug!(%agent, "request refused: Host appears more than once");
                return Ok(strata_error::response(StrataError::BadRequestHead));
            }
            if !self.origin_allowed(headers) {
                self.ctx().metrics.limit_hit(Limit::Origin);
                tracing::debug!("request refused: its Origin is not in `origins`");
                return Ok(strata_error::response(StrataError::OriginForbidden));
            }
            let method = parts.method.clone();

            let session: Option<Arc<str>> = headers.get_str(Known::McpSessionId).map(Arc::from);
            let protocol_version = headers.get_str(Known::McpProtocolVersion).map(Box::from);
            let has_key = headers.contains(Known::IdempotencyKey);
            let ended_session = (method == Method::DELETE)
                .then(|| session.clone())
                .flatten();

            // What this exchange may classify: a POST's requests, or parked calls a resumed
            // stream may answer (GET + Last-Event-ID on a session).
            let mut inspection = None;
            let mut resumed = Vec::new();
            let mut replay = None;
            let mut body_kind = BodyKind::Other;
            // A streamed POST body, handed back if the upstream client drops it unsent.
            let mut unsent = None;
            if let (true, Some(session), Some(last)) = (
                parts.method == Method::GET,
                &session,
                headers.get(Known::LastEventId),
            ) {
                resumed = self.ctx().resume.take_for_resume(session, last);
            }
            let first_body = if parts.method == Method::POST {
                if self.policy.retries_enabled() || has_key {
                    let cap = self.policy.replay_cap();
                    // A body strata's own connection read is whole already; hyper's has frames to
                    // wait for, boxed: that wait's room would be in every call's future.
                    // Taken, not cloned: a clone is a reference count up and down again.
                    let read = match body {
                        FromAgent::Whole(whole)
                            if whole.as_ref().is_none_or(|w| w.len() <= cap) =>
                        {
                            Ok(Buffered::Whole(whole.unwrap_or_default()))
                        }
                        body => {
                            Box::pin(request_body::read_up_to(body, cap, self.request_body_idle))
                                .await
                        }
                    };
                    match read {
                        Ok(Buffered::Whole(bytes)) => {
                            inspection = Some(Inspection::unread(bytes.clone(), self.inspect_cap));
                            replay = Some(bytes.clone());
                            body_kind = BodyKind::Whole;
                            RequestBody::Replay(Some(bytes))
                        }
                        Ok(Buffered::Over { prefix, rest }) => {
                            self.ctx().metrics.limit_hit(Limit::ReplayBuffer);
                            body_kind = BodyKind::Over;
                            let (i, sink) = Inspection::streaming(self.inspect_cap);
                            inspection = Some(i);
                            RequestBody::prefixed(prefix, rest, sink)
                        }
                        // The agent's body broke: nothing can be forwarded.
                        Err(ReadError::Broken) => {
                            return Ok(strata_error::response(StrataError::BadRequestBody));
                        }
                        Err(ReadError::Idle) => {
                            self.ctx().metrics.limit_hit(Limit::RequestBodyTimeout);
                            tracing::info!(%agent, "request body paused past timeouts.request_body_idle; 408");
                            return Ok(strata_error::response(StrataError::RequestBodyTimeout));
                        }
                    }
                } else {
                    let (i, sink) = Inspection::streaming(self.inspect_cap);
                    inspection = Some(i);
                    let (body, back) = RequestBody::stream(ObservedBody::new(body, sink));
                    unsent = Some(back);
                    body
                }
            } else {
                RequestBody::stream(ObservedBody::new(body, InspectSink::inert())).0
            };

            // Fields as read go out only through strata's own upstream connection, which takes a
            // body known whole; anything else takes a map. (Not reached from `agent_h1`, which
            // passes fields only for such requests: `forwards_fields_as_read`.)
            if (body_kind != BodyKind::Whole || self.h1.is_none())
                && let Some(own) = fields.take()
            {
                match own.to_map() {
                    Some(map) => parts.headers = map,
                    None => return Ok(strata_error::response(StrataError::BadRequestBody)),
                }
            }
            // hyper's client takes the upstream's absolute URI; strata's own connection writes
            // the target in origin form, which is what fields read as sent already have.
            let uri = match fields {
                Some(_) => None,
                None => match self.upstream_uri(parts.uri.path_and_query()) {
                    Ok(uri) => Some(uri),
                    Err(_) => return Ok(strata_error::response(StrataError::BadRequestTarget)),
                },
            };
            match &mut fields {
                // Rewritten as they are written out (`h1_conns/wire.rs`).
                Some(fields) => fields.set_host(self.rewrite_host, self.authority.as_str()),
                None => {
                    forward::set_host(
                        &mut parts.headers,
                        &parts.uri,
                        &self.authority,
                        self.rewrite_host,
                    );
                    if forward::apply_hop_rules(&mut parts.headers).is_err() {
                        return Ok(strata_error::response(StrataError::BadRequestHead));
                    }
                    // Only an h2 connection keeps values after sending them (`own_values`): a
                    // `https://` upstream may be h2 (ALPN); `http://` ones are spoken to in HTTP/1.1.
                    if self.h1.is_none() {
                        forward::own_values(&mut parts.headers);
                    }
                }
            }
            let hop = forward::Hop::new(parts.version, peer);
            let agent_version = parts.version;
            if let Some(uri) = uri {
                parts.uri = uri;
            }
            // hyper's client picks h1 or h2 per connection (ALPN); the agent's version is not ours.
            parts.version = Version::HTTP_11;

            // Until the upstream answers, a dropped future (the agent left) must still give every
            // request its outcome: the guard does that on drop.
            let mut waiting = PendingCall {
                proxy: self,
                inspection,
                resumed,
                session,
                protocol_version,
                started,
                attempts: 1,
                statuses: Vec::new(),
                client_retry: false,
                body: None,
            };
            // Idempotency-Key: a repeat is answered from the record, a conflict refused, and a
            // first call claims the key (issue "Retry and idempotency policy").
            let mut claimed = None;
            // (A request with a key comes with its map: `forwards_fields_as_read`.)
            if let (Some(body), Some(value)) = (&replay, parts.headers.get(IDEMPOTENCY_KEY)) {
                waiting.read_inspection();
                // Boxed: only calls with a key take this path, and its future would be a third
                // of every call's (see the send future below).
                match Box::pin(self.claim_key(&parts, value.as_bytes(), body)).await {
                    KeyClaim::None => {}
                    KeyClaim::Fresh(ticket, ids) => claimed = Some((ticket, ids)),
                    KeyClaim::Replay(record, ids) => {
                        waiting.client_retry = true;
                        return Ok(replay_record(waiting.take_tracker(), &record, &ids));
                    }
                    KeyClaim::Refuse(why) => {
                        if let Some(mut tracker) = waiting.take_tracker() {
                            tracker.no_response(why.status().as_u16());
                        }
                        return Ok(strata_error::response(why));
                    }
                }
            }
            // Remembered by its target and body, should the call fail (the agent's retry of it).
            if let Some(body) = &replay {
                let target = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
                waiting.body = Some(SentAs::new(target, body));
            }
            // A retry can only happen for an idempotent call whose body is in the replay buffer;
            // the head is kept for re-sending until the policy has said (as the first attempt
            // went out, below). strata's own connection gives the head back once written: the
            // template is then made of it, moved, and only for a call the policy may retry
            // (a clone of the target is a reference count up and down, per call).
            let retries = replay.is_some() && self.policy.retries_enabled();
            let mut template = (retries && self.h1.is_none()).then(|| Template::of(&parts));
            let mut plan = None;
            let mut first = Some((parts, first_body));
            // The answer's fields, when kept as read (a request with `fields`).
            let mut upstream_fields = None;
            let response = loop {
                let request = match (first.take(), &template) {
                    (Some((parts, body)), _) => Request::from_parts(parts, body),
                    (None, Some(template)) => template.request(RequestBody::Replay(replay.clone())),
                    (None, None) => break Err(StrataError::UpstreamBroken),
                };
                // This attempt's answer only (one that fails before a head leaves none).
                upstream_fields = None;
                // A body strata's own connection read whole goes out as the call starts: its
                // first attempt counts from `started` (a clock read fewer per call).
                let now = if waiting.attempts == 1 && read_whole {
                    started
                } else {
                    Instant::now()
                };
                let (sent, plan) = {
                    let (sending, given_back) =
                        self.send(request, fields.as_ref(), &hop, &mut upstream_fields, now);
                    let mut sent =
                        pin!(head_timer.within(now + self.response_head_timeout, sending));
                    match plan {
                        Some(plan) => (sent.await, plan),
                        None => {
                            // The first attempt: its request goes out (the first poll writes it to a
                            // pooled connection) before the body is read for its calls, which then
                            // happens while the upstream works on the call — not in front of it.
                            let retryable = matches!(body_kind, BodyKind::Whole | BodyKind::Over);
                            let sent = poll_fn(|cx| {
                                let polled = sent.as_mut().poll(cx);
                                if plan.is_none() {
                                    plan = Some(waiting.plan(retryable, has_key));
                                }
                                polled
                            })
                            .await;
                            let decided = plan.unwrap_or_default();
                            if !(decided.applies && decided.idempotent) {
                                template = None;
                            } else if retries && let Some(parts) = given_back {
                                template.get_or_insert_with(|| Template::from_parts(parts));
                            }
                            (sent, decided)
                        }
                    }
                };
                let (failure, outcome) = attempt_failure(sent, &self.ctx().metrics);
                let Some(failure) = failure.filter(|_| plan.applies) else {
                    break outcome;
                };
                let attempt = Attempt {
                    made: waiting.attempts,
                    idempotent: plan.idempotent,
                    replayable: replay.is_some(),
                    elapsed: started.elapsed(),
                    retry_after: outcome.as_ref().ok().and_then(|r| {
                        let headers = match &upstream_fields {
                            Some(fields) => Headers::Own(fields),
                            None => Headers::Map(r.headers()),
                        };
                        headers.get(Known::RetryAfter)
                    }),
                };
                match self.policy.next(failure, &attempt) {
                    Next::Retry { wait, reason } => {
                        waiting.count(&self.ctx().metrics, |h| h.retry(reason));
                        waiting.statuses.push(failure.status());
                        waiting.attempts += 1;
                        drop(outcome);
                        tokio::time::sleep(wait).await;
                    }
                    Next::GiveUp(why) => {
                        if let Some(why) = why {
                            waiting.count(&self.ctx().metrics, |h| h.suppressed(why));
                        }
                        break outcome;
                    }
                }
            };
            let response = match response {
                Ok(response) => response,
                Err(why) => {
                    if let Some(body) = unsent.and_then(|mut back| back.try_recv().ok()) {
                        // Never sent (no connection): read it here so its calls get an outcome.
                        // Boxed: a rare path, whose room would be in every call's future.
                        Box::pin(request_body::read_unsent(body, self.inspect_cap)).await;
                    }
                    if let Some(mut tracker) = waiting.take_tracker() {
                        tracker.no_response(why.status().as_u16());
                    }
                    let mut response = strata_error::response(why);
                    add_attempts(response.headers_mut(), waiting.attempts);
                    return Ok(response);
                }
            };

            let (mut parts, body) = response.into_parts();
            // The idempotency record reads a map (a request with a key has one: never fields).
            if claimed.is_some()
                && let Some(own) = upstream_fields.take()
            {
                match own.to_map() {
                    Some(map) => parts.headers = map,
                    None => return Ok(strata_error::response(StrataError::UpstreamBroken)),
                }
            }
            // This hop's `Via` names the version the upstream answered in.
            let via = forward::via(parts.version);
            if upstream_fields.is_none() {
                // Conflicting lengths (hyper's client and strata's own refuse them first).
                if forward::apply_hop_rules(&mut parts.headers).is_err() {
                    if let Some(mut tracker) = waiting.take_tracker() {
                        tracker.no_response(StrataError::UpstreamBroken.status().as_u16());
                    }
                    return Ok(strata_error::response(StrataError::UpstreamBroken));
                }
                if agent_version == Version::HTTP_2 {
                    forward::own_values(&mut parts.headers);
                }
                forward::add_via(&mut parts.headers, parts.version);
                add_attempts(&mut parts.headers, waiting.attempts);
            }
            parts.version = Version::HTTP_11;
            let headers = match &upstream_fields {
                Some(fields) => Headers::Own(fields),
                None => Headers::Map(&parts.headers),
            };
            let body = UpstreamBody::new(
                body,
                self.body_idle,
                self.ctx().metrics.response_bytes_here(),
            );
            let body = match waiting.take_tracker() {
                Some(mut tracker) => {
                    tracker.response_head(parts.status.as_u16(), headers.get(Known::ContentType));
                    if let Some((ticket, ids)) = claimed
                        && recordable_status(parts.status.as_u16())
                    {
                        let recording = Recording::new(
                            parts.status,
                            &parts.headers,
                            ids,
                            self.carried.idempotency.record_cap(),
                        );
                        tracker.record_for(ticket, recording);
                    }
                    if let Some(assigned) = headers.get_str(Known::McpSessionId) {
                        tracker.learn_session(assigned);
                    }
                    ProxyBody::Observed(ObservedBody::new(body, tracker))
                }
                None => {
                    if method == Method::DELETE
                        && parts.status.is_success()
                        && let Some(session) = &ended_session
                    {
                        self.ctx().clients.forget(session);
                    }
                    ProxyBody::Plain(body)
                }
            };
            let body = match self.sse_keepalive {
                Some(every) if keepalive_applies(parts.status, headers) => {
                    ProxyBody::KeepAlive(Box::pin(sse_keepalive::KeepAlive::new(body, every)))
                }
                _ => body,
            };
            if let Some(fields) = upstream_fields {
                *answer_fields = Some(AnswerFields {
                    fields,
                    via,
                    attempts: waiting.attempts,
                });
            }
            Ok(Response::from_parts(parts, body))
        }
    }

    /// Every `Origin` header the request carries must be allowed (a request without one
    /// passes: non-browser agents send none).
    fn origin_allowed(&self, headers: Headers<'_>) -> bool {
        self.origins.is_empty() || headers.all(Known::Origin, |v| self.origins.allows(v))
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

/// Keep-alive comments go only into a 2xx SSE stream of unknown length: a stated
/// `Content-Length` could not hold the added bytes.
fn keepalive_applies(status: http::StatusCode, headers: Headers<'_>) -> bool {
    let sse = headers
        .get(Known::ContentType)
        .is_some_and(|v| v.starts_with(b"text/event-stream"));
    sse && status.is_success() && !headers.contains(Known::ContentLength)
}

#[cfg(test)]
mod tests;
