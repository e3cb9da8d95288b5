//! Configuration: a YAML file plus command-line overrides, turned into a typed [`Config`].
//!
//! The path is raw serde mirror (`raw.rs`) → one validation pass (`validate.rs`) → [`Config`].
//! Runtime code only ever sees the typed result: `Duration`s, `SocketAddr`s, an [`Upstream`]
//! and enums, never strings to parse. Validation reports every problem it finds, each as
//! `FILE:LINE:COL: key.path: message` (see [`ConfigError`]).
use std::net::SocketAddr;
use std::path::Path;

use serde_saphyr::{MessageFormatter, UserMessageFormatter};

mod capture;
mod error;
mod files;
mod inspector;
mod limits;
mod locate;
mod origins;
mod policy;
mod raw;
mod redis;
mod sections;
mod telemetry;
mod units;
mod upstream;
mod validate;

/// Re-exported so config users need not know the log module owns the type.
pub use crate::log::LogFormat;
pub use capture::{ALWAYS_REDACTED, CAPTURE_MAX_BODY_RANGE, CAPTURE_MAX_FILE_RANGE, CaptureConfig};
pub use error::{ConfigError, ConfigErrors, Position};
pub use inspector::{
    BearerToken, INSPECTOR_MAX_BYTES_RANGE, INSPECTOR_RECENT_RANGE, InspectorConfig,
};
pub use limits::{CallRule, CircuitConfig, CircuitOn, Rate, RefuseAs};
pub use origins::Origins;
pub use policy::{
    Glob, IdempotencyConfig, PolicyConfig, RetryBudget, RetryConfig, RetryOn, StoreKind, ToolRule,
};
pub use redis::{REDIS_TIMEOUT_RANGE, RedisConfig, RedisNode, RedisPassword, RedisTopology};
pub use sections::{
    DEFAULT_ADMIN, DEFAULT_LISTEN, HostHeader, Limits, ListenTls, LogConfig, MAX_CONNECTIONS_RANGE,
    MAX_H2_STREAMS_RANGE, MAX_HEADER_BYTES_RANGE, MAX_HEADERS_RANGE, MAX_METHODS_RANGE,
    MAX_TOOLS_RANGE, MetricsConfig, REQUEST_INSPECT_BYTES_RANGE, Timeouts, TlsRoots, UnknownWord,
    UpstreamTls, WORKERS_RANGE, Workers,
};
pub use telemetry::{
    OtelEnv, OtlpProtocol, Propagate, SamplerConfig, SpanBatching, TelemetryConfig,
};
pub use units::MAX_DURATION;
pub use upstream::{Scheme, Upstream, UpstreamError};
pub use validate::{MAX_ATTEMPTS_RANGE, MAX_ENTRIES_RANGE, REPLAY_BUFFER_RANGE};

use validate::Source;

/// The validated configuration. Plain data: building the runtime from it is someone else's job.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Where the agent connects.
    pub listen: SocketAddr,
    /// The MCP server strata forwards to.
    pub upstream: Upstream,
    /// The admin listener: `/metrics`, `/healthz`, `/readyz`.
    pub admin: SocketAddr,
    /// Threads serving agent connections.
    pub workers: Workers,
    pub host_header: HostHeader,
    pub upstream_tls: UpstreamTls,
    /// TLS termination for agents; `None`: plain TCP.
    pub tls: Option<ListenTls>,
    pub timeouts: Timeouts,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    pub limits: Limits,
    /// Failure accrual for the upstream; `None` (the default): no circuit.
    pub circuit: Option<CircuitConfig>,
    /// Retry and idempotency policy.
    pub policy: PolicyConfig,
    /// Browser origins allowed to call (empty: no check).
    pub origins: Origins,
    /// OpenTelemetry export; `None` when no endpoint is set (or `OTEL_SDK_DISABLED=true`).
    pub telemetry: Option<TelemetryConfig>,
    /// The recent calls inspector (`/calls` on the admin listener, `strata tap`).
    pub inspector: InspectorConfig,
    /// Traffic capture to a HAR file; `None` (the default) when no path is set.
    pub capture: Option<CaptureConfig>,
    /// Reload when the config file, or a file it names, changes on disk.
    pub watch_config: bool,
}

/// Command-line values that replace the file's, applied before validation.
///
/// Addresses and the log format are already typed (clap parsed them); the upstream URL is
/// validated like the file's, with errors naming `--upstream`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub upstream: Option<String>,
    pub admin: Option<SocketAddr>,
    pub log_format: Option<LogFormat>,
    /// The process's `OTEL_*` environment variables (read under the file's `telemetry`).
    pub otel_env: OtelEnv,
    /// `--capture FILE`: replaces `capture.path` (and turns capture on).
    pub capture: Option<std::path::PathBuf>,
    /// `--watch-config`: replaces `watch_config`.
    pub watch_config: Option<bool>,
}

// === impl Config ===

impl Config {
    /// Every setting at its default, forwarding to `upstream`.
    pub fn default_with_upstream(upstream: Upstream) -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            upstream,
            admin: DEFAULT_ADMIN,
            workers: Workers::default(),
            host_header: HostHeader::default(),
            upstream_tls: UpstreamTls::default(),
            tls: None,
            timeouts: Timeouts::default(),
            log: LogConfig::default(),
            metrics: MetricsConfig::default(),
            limits: Limits::default(),
            circuit: None,
            policy: PolicyConfig::default(),
            origins: Origins::default(),
            telemetry: None,
            inspector: InspectorConfig::default(),
            capture: None,
            watch_config: true,
        }
    }

    /// Reads and validates the file at `path`, with no command-line overrides.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigErrors> {
        Self::load_with(path, &Overrides::default())
    }

    /// Reads and validates the file at `path`, with `overrides` replacing its values.
    ///
    /// Errors name the file as `path` displays, so they match what the user typed.
    pub fn load_with(path: impl AsRef<Path>, overrides: &Overrides) -> Result<Self, ConfigErrors> {
        let path = path.as_ref();
        let file_name = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, &file_name, overrides),
            Err(e) => Err(ConfigErrors::one(ConfigError::in_file(
                &file_name,
                None,
                format!("cannot read config file: {e}"),
            ))),
        }
    }

    /// Validates config `text`. `file_name` labels errors, and its directory is what a relative
    /// `upstream_tls.ca_file` is resolved against.
    pub fn parse(text: &str, file_name: &str, overrides: &Overrides) -> Result<Self, ConfigErrors> {
        let raw: raw::RawConfig = serde_saphyr::from_str(text)
            .map_err(|e| ConfigErrors::one(yaml_error(&e, text, file_name)))?;
        let source = Source {
            file: Some(file_name),
            dir: Path::new(file_name).parent().unwrap_or(Path::new("")),
        };
        validate::validate(raw, source, overrides)
    }

    /// Builds a config from command-line values alone, for running without a file.
    pub fn from_overrides(overrides: &Overrides) -> Result<Self, ConfigErrors> {
        let source = Source {
            file: None,
            dir: Path::new(""),
        };
        validate::validate(raw::RawConfig::default(), source, overrides)
    }
}

/// Turns serde-saphyr's error (a YAML syntax error, an unknown key, a wrong type) into ours:
/// its position, and its message with the key path in front.
fn yaml_error(error: &serde_saphyr::Error, text: &str, file_name: &str) -> ConfigError {
    // The message for the underlying error, without the snippet and alias wrappers, which the
    // formatter expects its caller to remove.
    let mut inner = error;
    while let serde_saphyr::Error::WithSnippet { error, .. }
    | serde_saphyr::Error::AliasError { error, .. } = inner
    {
        inner = error;
    }
    // serde-saphyr words type errors in parser terms; say what the user should write instead.
    let message = match inner {
        serde_saphyr::Error::Unexpected {
            expected: "string scalar",
            ..
        } => "expected a single value, not a list or mapping".to_owned(),
        serde_saphyr::Error::Unexpected {
            expected: "mapping start",
            ..
        } => "expected a mapping of keys to values".to_owned(),
        other => error::sanitized(&UserMessageFormatter.format_message(other)),
    };
    let position = error.location().and_then(Position::from_location);
    let message = match position.and_then(|at| locate::key_path(text, at)) {
        Some(path) => format!("{path}: {message}"),
        None => message,
    };
    ConfigError::in_file(file_name, position, message)
}
