//! The runtime: worker threads, each with its own current-thread tokio runtime and its own
//! listening socket (`workers.rs`), the balance of connections between them (`balance.rs`),
//! and state kept once per worker (`per_worker.rs`).

pub mod balance;
pub mod per_worker;
pub mod workers;
