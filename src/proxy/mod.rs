//! The data path: agent → strata → MCP server, and back. Bytes pass unchanged; the request
//! inspector and the classifier only look at them as they go by.

mod after_ready;
pub mod agent_h1;
mod attempt;
mod attempts;
mod body;
#[doc(hidden)]
pub mod differential;
mod from_agent;
pub mod h1_conns;
mod head_timer;
mod idempotency_key;
mod in_flight;
mod journey;
mod limited;
mod pending;
pub mod pooled_client;
mod read_plan;
mod repeated_fields;
mod request_body;
mod sse_keepalive;
mod strata_error;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Response, Uri};

use crate::config::{self, Config, HostHeader};
use crate::metrics::Metrics;
use crate::runtime::per_worker::PerWorker;

use crate::http::fields::{HeadFields, Headers};
pub use crate::http::forward::Peer;
use crate::http::names::Known;
use crate::observe::recent::Inspector;
pub use crate::observe::resume::ResumeRegistry;
use crate::observe::telemetry::Telemetry;
pub use crate::observe::tracker::{CallContext, CallMeta, CallTracker};
pub use body::{
    BodyEnd, BodySink, BoxError, FromUpstream, IdleTimeout, ObservedBody, ProxyBody, Settling,
    UpstreamBody,
};
pub use from_agent::FromAgent;
use h1_conns::{H1Conns, ResponseBody};
pub(crate) use head_timer::{Deadline, HeadTimer, Timer};
pub use pooled_client::{ClientError, UpstreamClient};
pub use sse_keepalive::KeepAlive;

use read_plan::AsRead;
pub(crate) use read_plan::ReadPlan;
pub use repeated_fields::RepeatedFields;

use crate::idempotency::Store as IdempotencyStore;
use crate::policy::limits::CallLimits;
use crate::policy::{Annotations, Policy};

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
    /// strata's own HTTP/1.1 connections (`h1_conns.rs`), for requests whose body is known
    /// whole; streamed bodies go through `client`.
    h1: Arc<H1Conns>,
    /// A copy per worker (`runtime/per_worker.rs`): each call clones its worker's, since a
    /// reference count both workers write on every call moves its cache line between cores
    /// each time.
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
    read_plan: ReadPlan,
    /// Each attempt carries a `traceparent` naming its CLIENT span (`telemetry.propagate`).
    propagate: bool,
    /// `limits.calls` and the circuit; `None` when neither is set.
    limits: Option<Arc<CallLimits>>,
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
    /// OpenTelemetry export, when on (a reload may replace it: `app.rs`).
    telemetry: Option<Arc<Telemetry>>,
    /// The recent calls inspector; in the call context only while `inspector.enabled`.
    inspector: Arc<Inspector>,
    /// Traffic capture, when on (set at start: a reload keeps it).
    capture: Option<Arc<crate::capture::Capture>>,
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

    /// The proxy in force now, and how strata's own agent connection reads a request for it.
    pub(crate) fn get_with_plan(&mut self) -> (&Arc<Proxy>, ReadPlan) {
        self.get();
        (&self.proxy, self.proxy.read_plan)
    }
}

// === impl Proxy ===

impl Proxy {
    pub fn new(
        config: &Config,
        metrics: Arc<Metrics>,
        telemetry: Option<Arc<Telemetry>>,
    ) -> Result<Arc<Proxy>, ClientError> {
        Self::capturing(config, metrics, telemetry, None)
    }

    /// [`Proxy::new`], each exchange captured to `capture` when given.
    pub fn capturing(
        config: &Config,
        metrics: Arc<Metrics>,
        telemetry: Option<Arc<Telemetry>>,
        capture: Option<Arc<crate::capture::Capture>>,
    ) -> Result<Arc<Proxy>, ClientError> {
        let carried = Carried {
            metrics,
            resume: ResumeRegistry::new(config.timeouts.resume_window),
            clients: Arc::default(),
            annotations: Arc::default(),
            idempotency: {
                let store = IdempotencyStore::new(&config.policy.idempotency);
                store.warm();
                store
            },
            recent: Arc::default(),
            telemetry,
            inspector: Inspector::new(&config.inspector),
            capture,
        };
        Self::build(config, carried, None)
    }

    /// A proxy for a reloaded config that carries on this one's state: metric handles, calls
    /// parked for a resumed stream, and what is known of sessions. The new upstream client
    /// starts a new pool; in-flight exchanges finish on the old one.
    /// `telemetry`: the export in force from now on.
    pub fn reload(
        &self,
        config: &Config,
        telemetry: Option<Arc<Telemetry>>,
    ) -> Result<Arc<Proxy>, ClientError> {
        let mut carried = self.carried.clone();
        carried.telemetry = telemetry;
        Self::build(config, carried, self.limits.as_deref())
    }

    /// `previous`: the limits in force before a reload (an unchanged circuit is kept).
    fn build(
        config: &Config,
        carried: Carried,
        previous: Option<&CallLimits>,
    ) -> Result<Arc<Proxy>, ClientError> {
        let tls = pooled_client::tls_config(&config.upstream_tls)?;
        let client = pooled_client::build(&tls, config.timeouts.connect);
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
            telemetry: carried.telemetry.clone(),
            inspector: config.inspector.enabled.then(|| carried.inspector.clone()),
            capture: carried.capture.clone(),
        };
        let h1 = H1Conns::new(
            &config.upstream.authority,
            (scheme == Scheme::HTTPS).then(|| Arc::new(tls)),
            config.timeouts.connect,
            pooled_client::POOL_IDLE_TIMEOUT,
        )
        .map_err(|_| ClientError::ServerName(config.upstream.authority.host().to_owned()))?;
        let policy = Policy::new(&config.policy, carried.annotations.clone());
        let propagate = carried.telemetry.is_some()
            && config.telemetry.as_ref().is_some_and(|t| {
                t.propagate == config::Propagate::Header && t.traces_endpoint.is_some()
            });
        let read_ahead = (policy.replay_cap(), config.timeouts.request_body_idle);
        let limits = CallLimits::new(
            &config.limits.calls,
            config.circuit.as_ref(),
            previous,
            &carried.metrics,
        );
        let read_plan = ReadPlan {
            // Limits read a body in the replay buffer before it goes out, as retries do.
            retries: (policy.retries_enabled() || limits.is_some()).then_some(read_ahead),
            keyed: read_ahead,
            // strata's `traceparent` goes into a map.
            as_read: match (propagate, policy.retries_enabled()) {
                (true, _) => AsRead::None,
                (false, true) => AsRead::All,
                (false, false) => AsRead::Keyed,
            },
        };
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
            policy,
            read_plan,
            propagate,
            limits,
            carried,
        }))
    }

    /// The call context, this worker's copy.
    fn ctx(&self) -> &Arc<CallContext> {
        self.ctxs.here()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.ctx().metrics
    }

    /// The recent calls inspector (kept across reloads; `app.rs` applies its settings).
    pub fn inspector(&self) -> &Arc<Inspector> {
        &self.carried.inspector
    }

    pub fn resume_registry(&self) -> &Arc<ResumeRegistry> {
        &self.ctx().resume
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
