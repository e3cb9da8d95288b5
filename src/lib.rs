//! strata: a layer-aware MCP gateway sidecar.
pub mod admin;
pub mod app;
pub mod calllog;
pub mod classify;
pub mod cli;
pub mod config;
pub mod demo;
pub mod http;
pub mod metrics;
pub mod per_worker;
pub mod policy;
pub mod proxy;
pub mod telemetry;
pub mod testbed;
