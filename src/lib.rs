//! strata: a layer-aware MCP gateway sidecar.
pub mod admin;
pub mod calllog;
pub mod classify;
pub mod cli;
pub mod config;
pub mod metrics;
pub mod telemetry;
pub mod testbed;
