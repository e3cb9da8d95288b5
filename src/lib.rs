//! strata: a layer-aware MCP gateway sidecar.
pub mod classify;
pub mod metrics;
pub mod calllog;
pub mod telemetry;
