//! The YAML file exactly as written: a serde mirror of the config with every key optional.
//!
//! Values that need checking (addresses, URLs, durations, sizes, enum words, numbers with
//! ranges) are read as `Spanned<String>` so validation can collect every bad value, each with
//! its line:col, instead of stopping at serde's first type error. serde-saphyr hands any scalar
//! (`5`, `true`, `1MiB`) to a `String` as its text. Only booleans are typed here: a wrong
//! boolean is a plain type error, and serde-saphyr reports it with its position.
//!
//! Sections are `Option` so that a key written with no value (`timeouts:`) means "defaults".
use std::collections::HashMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

type Text = Option<Spanned<String>>;

/// A mapping of names to values the user chooses (header names, resource attributes), each
/// with its position. serde-saphyr rejects a duplicate key itself; validation sorts entries
/// back into file order by position.
pub(super) type RawMap = Option<HashMap<Spanned<String>, Spanned<String>>>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) listen: Text,
    pub(super) upstream: Text,
    pub(super) admin: Text,
    pub(super) workers: Text,
    pub(super) host_header: Text,
    pub(super) upstream_tls: Option<RawUpstreamTls>,
    pub(super) tls: Option<RawTls>,
    pub(super) timeouts: Option<RawTimeouts>,
    pub(super) log: Option<RawLog>,
    pub(super) metrics: Option<RawMetrics>,
    pub(super) limits: Option<RawLimits>,
    pub(super) circuit: Option<Spanned<RawCircuit>>,
    pub(super) retry: Option<RawRetry>,
    pub(super) tools: Option<Vec<Spanned<RawToolRule>>>,
    pub(super) trust_annotations: Option<bool>,
    pub(super) idempotency: Option<RawIdempotency>,
    pub(super) origins: Option<Vec<Spanned<String>>>,
    pub(super) telemetry: Option<RawTelemetry>,
    pub(super) inspector: Option<RawInspector>,
    pub(super) capture: Option<RawCapture>,
    pub(super) watch_config: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstreamTls {
    pub(super) roots: Text,
    pub(super) ca_file: Text,
    pub(super) insecure_skip_verify: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub(super) cert_file: Text,
    pub(super) key_file: Text,
    pub(super) client_ca_file: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimeouts {
    pub(super) connect: Text,
    pub(super) response_head: Text,
    pub(super) body_idle: Text,
    pub(super) resume_window: Text,
    pub(super) header_read: Text,
    pub(super) drain: Text,
    pub(super) sse_keepalive: Text,
    pub(super) request_body_idle: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    pub(super) format: Text,
    pub(super) level: Text,
    pub(super) error_messages: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub(super) max_tools: Text,
    pub(super) max_methods: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) request_inspect_bytes: Text,
    pub(super) max_header_bytes: Text,
    pub(super) max_headers: Text,
    pub(super) max_connections: Text,
    pub(super) max_h2_streams: Text,
    pub(super) calls: Option<Vec<Spanned<RawCallRule>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCallRule {
    #[serde(rename = "match")]
    pub(super) pattern: Text,
    pub(super) method: Text,
    pub(super) max_concurrent: Text,
    pub(super) rate: Text,
    pub(super) burst: Text,
    pub(super) queue: Text,
    pub(super) refuse_as: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCircuit {
    pub(super) consecutive_failures: Text,
    pub(super) open_for: Text,
    pub(super) max_open_for: Text,
    pub(super) on: Option<Vec<Spanned<String>>>,
    pub(super) refuse_as: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    pub(super) max_attempts: Text,
    pub(super) initial_backoff: Text,
    pub(super) max_backoff: Text,
    pub(super) on: Option<Vec<Spanned<String>>>,
    pub(super) budget: Option<RawBudget>,
    pub(super) max_retry_after: Text,
    pub(super) replay_buffer: Text,
    pub(super) deadline: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    pub(super) ratio: Text,
    pub(super) min_per_second: Text,
    pub(super) window: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolRule {
    #[serde(rename = "match")]
    pub(super) pattern: Text,
    pub(super) method: Text,
    pub(super) idempotent: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdempotency {
    pub(super) store: Text,
    pub(super) ttl: Text,
    pub(super) max_entries: Text,
    pub(super) max_bytes: Text,
    pub(super) max_record_bytes: Text,
    pub(super) upstream_honours_keys: Option<bool>,
    pub(super) redis: Option<Spanned<RawRedis>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedis {
    pub(super) password_file: Text,
    pub(super) ca_file: Text,
    pub(super) sentinel: Option<Spanned<RawSentinel>>,
    pub(super) cluster: Option<Vec<Spanned<String>>>,
    pub(super) timeout: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSentinel {
    pub(super) master: Text,
    pub(super) addresses: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    pub(super) otlp: Option<RawOtlp>,
    pub(super) traces: Option<RawTraces>,
    pub(super) metrics: Option<RawTelemetryMetrics>,
    pub(super) propagate: Text,
    pub(super) resource: RawMap,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOtlp {
    pub(super) endpoint: Text,
    pub(super) protocol: Text,
    pub(super) headers: RawMap,
    pub(super) timeout: Text,
    pub(super) ca_file: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTraces {
    pub(super) sampler: Text,
    pub(super) ratio: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetryMetrics {
    pub(super) interval: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInspector {
    /// Spanned: the safety rule's error points at it.
    pub(super) enabled: Option<Spanned<bool>>,
    pub(super) recent: Text,
    pub(super) max_bytes: Text,
    pub(super) token_file: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapture {
    pub(super) path: Text,
    pub(super) max_body: Text,
    pub(super) max_file: Text,
    pub(super) redact: Option<Vec<Spanned<String>>>,
}
