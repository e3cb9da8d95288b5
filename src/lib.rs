//! strata: a layer-aware MCP gateway sidecar.
pub mod admin;
pub mod app;
pub mod classify;
pub mod cli;
pub mod config;
pub mod demo;
pub mod http;
pub mod idempotency;
pub mod listen;
pub mod metrics;
pub mod observe;
pub mod policy;
pub mod proxy;
pub mod runtime;
pub mod telemetry;
pub mod testbed;
