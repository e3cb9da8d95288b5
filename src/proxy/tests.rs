use super::*;
use crate::observe::tracker::CallTracker;

/// hyper keeps room for the response body type in every agent connection for the
/// connection's life, and an SSE stream lives for hours: what it carries counts in the
/// memory per open stream (the target: at most 32 KiB per open stream). The call tracker is
/// boxed (inline, the response is ~650 bytes, moved half a dozen times per call) and is kept
/// beside it for the stream's life too; what only some calls carry in it (the inspector's
/// place among the calls in flight, a capture's recorder) is boxed. The bounds sit just
/// above today's sizes (112 and 488 bytes; `UpstreamBody`'s held-back error is boxed): the
/// tracker back inline, or an idempotency claim or anything as large put back in either,
/// fails here.
#[test]
fn what_an_open_stream_keeps_per_response_stays_small() {
    assert!(
        std::mem::size_of::<AgentBody>() <= 128,
        "AgentBody is {} bytes",
        std::mem::size_of::<AgentBody>()
    );
    assert!(
        std::mem::size_of::<CallTracker>() <= 496,
        "CallTracker is {} bytes",
        std::mem::size_of::<CallTracker>()
    );
}

/// `handle`'s future is allocated (boxed by both agent connections) and moved once per call,
/// and strata's own agent connection keeps it while the upstream works on the call. It holds
/// the attempt in flight (the largest part) beside the call's state; the bound sits just
/// above today's size: a phase's state held across an await by mistake, or an unboxed rare
/// path, fails here.
#[test]
fn the_handle_future_stays_small() {
    let upstream = crate::config::Upstream::parse("http://127.0.0.1:9").unwrap();
    let config = Config::default_with_upstream(upstream);
    let metrics = Metrics::new(64, 64).unwrap();
    let proxy = Proxy::new(&config, metrics, None).unwrap();
    let peer = Peer::new(std::net::SocketAddr::from(([127, 0, 0, 1], 1)));
    let request = http::Request::new(FromAgent::Whole(None));
    let mut repeated = RepeatedFields::default();
    let future = proxy.handle(request, None, &peer, HeadTimer::new(None), &mut repeated);
    let size = std::mem::size_of_val(&future);
    assert!(size <= 3300, "handle's future is {size} bytes");
}

/// Without `limits.calls` or `circuit` the proxy holds no limits (the limit phase is one
/// `Option` check) and reads bodies as before; with them, a POST body is read ahead.
#[test]
fn limits_off_cost_one_option_and_on_read_the_body_ahead() {
    let upstream = crate::config::Upstream::parse("http://127.0.0.1:9").unwrap();
    let mut config = Config::default_with_upstream(upstream);
    config.policy.retry.max_attempts = 1;
    let proxy = Proxy::new(&config, Metrics::new(64, 64).unwrap(), None).unwrap();
    assert!(proxy.limits.is_none());
    assert!(
        proxy.read_plan.body_read_ahead(false).is_none(),
        "retries off: streamed"
    );
    config.circuit = Some(crate::config::CircuitConfig::default());
    let proxy = Proxy::new(&config, Metrics::new(64, 64).unwrap(), None).unwrap();
    assert!(proxy.limits.is_some());
    assert!(
        proxy.read_plan.body_read_ahead(false).is_some(),
        "read for the limits"
    );
}
