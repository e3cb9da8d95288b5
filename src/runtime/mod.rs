//! The runtime: worker threads, each with its own current-thread tokio runtime and its own
//! listening socket (`workers.rs`), the balance of connections between them (`balance.rs`),
//! and state kept once per worker (`per_worker.rs`).
//!
//! State kept per thread takes one of three forms, each for what the others cannot hold:
//! - [`per_worker::PerWorker`]: shared state that every call writes (counters, the retry
//!   budget, the call context), one copy per worker so no cache line is written by two
//!   cores, and summed by whoever reads the whole. Copies may be shared by two threads, so
//!   they are `Sync`.
//! - `thread_local::ThreadLocal`: a value of one object that must be exactly one thread's —
//!   not `Sync` (the metric handles' `RefCell` cache in `metrics/calls.rs`), or bound to the
//!   thread's runtime (the idle upstream connections in `proxy/h1_conns.rs`).
//! - `std::thread_local!`: process-wide per-thread caches with no owner (the date line, the
//!   spare buffers, the log line's buffer).

pub mod balance;
pub mod per_worker;
pub mod workers;
