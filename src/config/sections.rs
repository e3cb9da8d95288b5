//! The typed sections of [`super::Config`], their defaults and their allowed ranges.
//!
//! Defaults live here and nowhere else: validation starts from `Default::default()` and
//! overwrites what the file sets, and `config/strata.yaml` documents the same values (a test
//! checks that the example file parses to these defaults).
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::log::LogFormat;

/// Where the agent connects.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7000));
/// Where `/metrics`, `/healthz` and `/readyz` are served; loopback so metrics are not exposed
/// by accident.
pub const DEFAULT_ADMIN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9464));

/// Allowed `metrics.max_tools`: each value is a label set per outcome, so this bounds series.
pub const MAX_TOOLS_RANGE: RangeInclusive<usize> = 1..=10_000;
/// Allowed `metrics.max_methods`.
pub const MAX_METHODS_RANGE: RangeInclusive<usize> = 1..=1_000;
/// Allowed `limits.request_inspect_bytes`: at least one byte, at most 1 GiB.
pub const REQUEST_INSPECT_BYTES_RANGE: RangeInclusive<usize> = 1..=(1 << 30);
/// Allowed `limits.max_header_bytes`. hyper's HTTP/1 `max_buf_size` panics below 8 KiB, and
/// HTTP/2's `max_header_list_size` takes a `u32`; 16 MiB is far above any sane header block.
pub const MAX_HEADER_BYTES_RANGE: RangeInclusive<usize> = (8 << 10)..=(16 << 20);

/// Allowed `limits.max_headers` (HTTP/1.1 request header lines; hyper's default is 100).
pub const MAX_HEADERS_RANGE: RangeInclusive<usize> = 1..=10_000;
/// Allowed `workers` as a number.
pub const WORKERS_RANGE: RangeInclusive<usize> = 1..=1024;
/// Allowed `limits.max_connections`.
pub const MAX_CONNECTIONS_RANGE: RangeInclusive<usize> = 1..=1_000_000;
/// Allowed `limits.max_h2_streams` (a `u32` in h2's SETTINGS; more than this is no bound).
pub const MAX_H2_STREAMS_RANGE: RangeInclusive<usize> = 1..=65_536;

/// How many threads serve agent connections, each with a runtime of its own
/// (`runtime/workers.rs`): nginx's `worker_processes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Workers {
    /// One per core this process may run on.
    #[default]
    Auto,
    Count(usize),
}

/// What `Host` header the upstream sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HostHeader {
    /// Keep the agent's `Host`. MCP servers check `Host` and `Origin` to defend against DNS
    /// rebinding; rewriting `Host` to the upstream's address would silently defeat that check.
    #[default]
    Preserve,
    /// Rewrite `Host` to the upstream's authority, as nginx's `proxy_pass` does.
    Upstream,
}

/// TLS settings for an `https` upstream; ignored for `http`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpstreamTls {
    pub roots: TlsRoots,
    /// Extra PEM CA certificates, trusted in addition to `roots`. A relative path in the file is
    /// resolved against the config file's directory; the file existed at validation.
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate. For testbeds only.
    pub insecure_skip_verify: bool,
}

/// Agent-facing TLS: strata terminates TLS on `listen` with this certificate. Absent from
/// [`super::Config`] (`None`) means plain TCP. Paths are resolved like `upstream_tls.ca_file`
/// and existed at validation; their contents are read when the listener is built (at start
/// and at every reload), so a renewed certificate is picked up by a reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenTls {
    /// PEM certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of the leaf.
    pub key_file: PathBuf,
    /// PEM CA certificates; when set, agents must present a certificate signed by one of them.
    pub client_ca_file: Option<PathBuf>,
}

/// Which root certificates to trust.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TlsRoots {
    /// Mozilla's roots compiled into the binary: same behaviour on every host.
    #[default]
    Webpki,
    /// The operating system's store: follows corporate CAs installed on the host.
    Native,
}

/// Every timeout strata applies. `None` means off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP and TLS connect to the upstream. Never zero.
    pub connect: Duration,
    /// Wait for the upstream response head. Long by default: a JSON-mode tools/call only
    /// answers when the tool has finished. Never zero.
    pub response_head: Duration,
    /// Longest silence between response body chunks. Off by default: quiet SSE streams are
    /// normal (servers may hold a stream open for server-initiated messages).
    pub body_idle: Option<Duration>,
    /// How long a call whose resumable SSE stream closed early stays pending, waiting for a
    /// resumed stream to deliver its response. Zero: STREAM_INCOMPLETE at once.
    pub resume_window: Duration,
    /// The agent must send its full request head within this. Never zero.
    pub header_read: Duration,
    /// Graceful shutdown: how long in-flight calls may finish. Zero: stop at once.
    pub drain: Duration,
    /// Send an SSE comment (`:` and a blank line) on a response stream idle this long, between
    /// events only. Off by default: it adds bytes the upstream did not send.
    pub sse_keepalive: Option<Duration>,
    /// Longest pause in a request body strata reads into the replay buffer; then 408.
    pub request_body_idle: Option<Duration>,
}

/// Logging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A `tracing_subscriber::EnvFilter` directive string; checked to parse at validation.
    /// `RUST_LOG`, when set, replaces it at startup (`log::init`).
    pub level: String,
    /// Log JSON-RPC error message text. Off by default: messages can echo tool arguments, so
    /// only their length is logged.
    pub error_messages: bool,
}

/// Caps on label cardinality.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Distinct `tool` label values before the rest become `_other`.
    pub max_tools: usize,
    /// Distinct `method` label values before the rest become `_other`.
    pub max_methods: usize,
}

/// Byte limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How much of a request body the inspector reads looking for `id`, `method` and
    /// `params.name`; the rest is forwarded without being looked at.
    pub request_inspect_bytes: usize,
    /// Largest request head accepted from the agent.
    pub max_header_bytes: usize,
    /// Most header lines in an HTTP/1.1 request head (h2 heads are bounded by bytes).
    pub max_headers: usize,
    /// Agent connections open at once; a connection beyond it is closed at once.
    pub max_connections: usize,
    /// Concurrent h2 streams per agent connection (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_h2_streams: u32,
    /// Per-call concurrency and rate limits (`limits.calls`), first match wins; empty: off.
    pub calls: Vec<super::limits::CallRule>,
}

/// A config word that is not one of the allowed spellings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?}; expected one of: {expected}")]
pub struct UnknownWord {
    pub value: String,
    pub expected: &'static str,
}

// === impl HostHeader ===

impl HostHeader {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Preserve => "preserve",
            Self::Upstream => "upstream",
        }
    }
}

impl FromStr for HostHeader {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "preserve" => Ok(Self::Preserve),
            "upstream" => Ok(Self::Upstream),
            _ => Err(UnknownWord::new(s, "preserve, upstream")),
        }
    }
}

// === impl TlsRoots ===

impl TlsRoots {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Webpki => "webpki",
            Self::Native => "native",
        }
    }
}

impl FromStr for TlsRoots {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "webpki" => Ok(Self::Webpki),
            "native" => Ok(Self::Native),
            _ => Err(UnknownWord::new(s, "webpki, native")),
        }
    }
}

// === impl Timeouts ===

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            response_head: Duration::from_secs(300),
            body_idle: None,
            resume_window: Duration::from_secs(30),
            header_read: Duration::from_secs(10),
            drain: Duration::from_secs(30),
            sse_keepalive: None,
            request_body_idle: Some(Duration::from_secs(30)),
        }
    }
}

// === impl LogConfig ===

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::default(),
            level: "info".to_owned(),
            error_messages: false,
        }
    }
}

// === impl Workers ===

impl Workers {
    /// The number of threads to start. Resolved at start-up, not at validation: the cores a
    /// process may use are the machine's (or the container's cgroup quota) when it runs.
    pub fn count(self) -> usize {
        match self {
            Workers::Auto => std::thread::available_parallelism().map_or(1, |n| n.get()),
            Workers::Count(n) => n,
        }
    }
}

impl std::str::FromStr for Workers {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim() == "auto" {
            return Ok(Workers::Auto);
        }
        super::validate::count(text, WORKERS_RANGE)
            .map(Workers::Count)
            .map_err(|e| format!("{e} (or \"auto\")"))
    }
}

// === impl MetricsConfig ===

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            max_tools: 200,
            max_methods: 64,
        }
    }
}

// === impl Limits ===

impl Default for Limits {
    fn default() -> Self {
        Self {
            request_inspect_bytes: 1 << 20,
            max_header_bytes: 64 << 10,
            max_headers: 100,
            max_connections: 1024,
            max_h2_streams: 256,
            calls: Vec::new(),
        }
    }
}

// === impl UnknownWord ===

impl UnknownWord {
    pub(super) fn new(value: &str, expected: &'static str) -> Self {
        Self {
            value: value.to_owned(),
            expected,
        }
    }
}
