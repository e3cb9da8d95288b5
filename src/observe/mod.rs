//! What strata sees of each call, from its request to its outcome: the request inspector
//! (`inspect.rs`), the call tracker that carries every JSON-RPC call to its outcome
//! (`tracker.rs`), calls parked for a resumed stream (`resume.rs`), the agent's own retries
//! told apart (`client_retry.rs`), a call's session (`session.rs`) and its client's name
//! (`session_clients.rs`), the per-call record and its log line (`call_record.rs`), what a
//! call's trace needs (`call_trace.rs`) on its way to OpenTelemetry export (`telemetry/`),
//! and the recent calls the inspector keeps (`recent.rs`).

pub mod call_record;
pub mod call_trace;
pub mod client_retry;
pub mod inspect;
pub mod recent;
pub mod resume;
pub mod session;
pub mod session_clients;
pub mod telemetry;
pub mod tracker;
