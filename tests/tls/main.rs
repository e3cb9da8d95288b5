//! TLS on both sides of strata, with certificates made at test time (`pki.rs`):
//! - agent-facing termination: h1 and h2 over TLS, mutual TLS, failed handshakes counted,
//!   certificates reloaded with the config (`agent.rs`);
//! - the upstream client: verification on by default, a private CA, SNI, and the loudly
//!   logged opt-out (`upstream.rs`);
//! - both at once, with SSE events streamed as they come (`streaming.rs`);
//! - the `tls` config section (`config.rs`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failure should fail the test"
)]
#![allow(unreachable_pub, reason = "helper modules of one test crate")]

#[path = "../support/mod.rs"]
mod support;

mod agent;
mod config;
mod framing;
mod peers;
mod pki;
mod route_matrix;
mod streaming;
mod upstream;
