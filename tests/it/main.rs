//! strata's integration tests, in one binary: a module per area, shared helpers in
//! `tests/support/`, the reference classifier in `tests/oracle/`. Separate binaries only where
//! they must be: `alloc` (a counting global allocator), `soak` (the release binary under a
//! bounded load), `tls` (certificates made at test time), `deploy` (the deployment kit's
//! checks, with their own tools).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(
    unreachable_pub,
    dead_code,
    reason = "helper modules shared by every area"
)]

#[path = "../oracle/mod.rs"]
mod oracle;
#[path = "../tls/pki.rs"]
mod pki;
#[path = "../support/mod.rs"]
mod support;

mod admin;
mod agent_conn;
mod capture;
mod classify_capture;
mod classify_props;
mod config;
mod defences;
mod e2e;
mod faults;
mod faults_agent;
mod faults_conns;
mod idempotency;
mod idempotency_redis;
mod idempotency_store;
mod inspector;
mod inspector_page;
mod keepalive;
mod layers;
mod limits;
mod otel;
mod otlp_receiver;
mod reload;
mod retry;
mod sdk_clients;
mod streaming;
mod testbed;
mod testbed_record;
mod transparency;
mod upstream_conns;
