use super::*;
use crate::observe::tracker::CallTracker;

/// hyper keeps room for the response body type in every agent connection for the
/// connection's life, and an SSE stream lives for hours: what it carries counts in the
/// memory per open stream (the target: at most 32 KiB per open stream). The call tracker is
/// boxed (inline, the response is ~650 bytes, moved half a dozen times per call) and is kept
/// beside it for the stream's life too. The bounds sit just above today's sizes (112 and 424
/// bytes; `UpstreamBody`'s held-back error is boxed): the tracker back inline, or an
/// idempotency claim or anything as large put back in either, fails here.
#[test]
fn what_an_open_stream_keeps_per_response_stays_small() {
    assert!(
        std::mem::size_of::<AgentBody>() <= 128,
        "AgentBody is {} bytes",
        std::mem::size_of::<AgentBody>()
    );
    assert!(
        std::mem::size_of::<CallTracker>() <= 480,
        "CallTracker is {} bytes",
        std::mem::size_of::<CallTracker>()
    );
}
