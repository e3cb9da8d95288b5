use super::call::CallTracker;
use super::*;

/// hyper keeps room for the response body type in every agent connection for the
/// connection's life, and an SSE stream lives for hours: what it carries counts in the
/// memory per open stream (issue 6's target: at most 32 KiB, 30.1 KiB measured in session 8).
/// The bounds sit between today's sizes (552 and 424 bytes) and those before the
/// idempotency claim was boxed (768 and 624): a claim, or anything as large, put back
/// inline fails here.
#[test]
fn what_an_open_stream_keeps_per_response_stays_small() {
    assert!(
        std::mem::size_of::<AgentBody>() <= 600,
        "AgentBody is {} bytes",
        std::mem::size_of::<AgentBody>()
    );
    assert!(
        std::mem::size_of::<CallTracker>() <= 480,
        "CallTracker is {} bytes",
        std::mem::size_of::<CallTracker>()
    );
}
