//! Raw config → typed [`Config`]: the one place strings become durations, addresses and URLs.
//!
//! Every value is checked even after one fails, so the user sees all problems at once. A bad
//! value is reported and replaced by its default so the remaining checks (like "listen and
//! admin differ") still run on something sensible; the result is discarded if anything failed.
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::Path;

use serde_saphyr::Spanned;

use super::error::{ConfigError, ConfigErrors, Position, quoted};
use super::origins::{self, Origins};
use super::raw::{RawConfig, RawLimits, RawLog, RawMetrics, RawTimeouts, RawUpstreamTls};
use super::sections::{
    DEFAULT_ADMIN, DEFAULT_LISTEN, Limits, LogConfig, MAX_CONNECTIONS_RANGE, MAX_H2_STREAMS_RANGE,
    MAX_HEADER_BYTES_RANGE, MAX_HEADERS_RANGE, MAX_METHODS_RANGE, MAX_TOOLS_RANGE, MetricsConfig,
    REQUEST_INSPECT_BYTES_RANGE, Timeouts, UnknownWord, UpstreamTls,
};
use super::units::{self, Zero};
use super::{Config, LogFormat, Overrides, Upstream};

mod capture;
mod inspector;
mod limits;
mod policy;
mod redis;
mod telemetry;
mod tls;

pub use policy::{MAX_ATTEMPTS_RANGE, MAX_ENTRIES_RANGE, REPLAY_BUFFER_RANGE};

/// Where the raw config came from.
#[derive(Clone, Copy, Debug)]
pub(super) struct Source<'a> {
    /// The file as the user named it, for messages; `None` when there is no file.
    pub(super) file: Option<&'a str>,
    /// What relative paths in the file are relative to.
    pub(super) dir: &'a Path,
}

/// Collects errors as values are parsed.
struct Validator<'a> {
    source: Source<'a>,
    errors: Vec<ConfigError>,
}

/// Turns `raw` plus command-line `overrides` into a [`Config`], or reports every problem.
pub(super) fn validate(
    raw: RawConfig,
    source: Source<'_>,
    overrides: &Overrides,
) -> Result<Config, ConfigErrors> {
    let mut v = Validator {
        source,
        errors: Vec::new(),
    };

    // Flags replace file values before validation, so a bad value the flag hides is moot.
    let listen_from = Origin::of(overrides.listen.is_some(), raw.listen.as_ref());
    let admin_from = Origin::of(overrides.admin.is_some(), raw.admin.as_ref());
    let listen = overrides
        .listen
        .unwrap_or_else(|| v.parse(raw.listen, "listen", DEFAULT_LISTEN, socket_addr));
    let admin = overrides
        .admin
        .unwrap_or_else(|| v.parse(raw.admin, "admin", DEFAULT_ADMIN, socket_addr));
    let upstream = v.upstream(raw.upstream, overrides.upstream.as_deref());
    let workers = v.parse(raw.workers, "workers", Default::default(), str::parse);
    let host_header = v.parse(raw.host_header, "host_header", Default::default(), |s| {
        s.parse().map_err(|e| format!("{e}"))
    });
    let upstream_tls = v.upstream_tls(raw.upstream_tls.unwrap_or_default());
    let tls = v.listen_tls(raw.tls.unwrap_or_default());
    let timeouts = v.timeouts(raw.timeouts.unwrap_or_default());
    let log = v.log(raw.log.unwrap_or_default(), overrides.log_format);
    let metrics = v.metrics(raw.metrics.unwrap_or_default());
    let limits = v.limits(raw.limits.unwrap_or_default());
    let circuit = raw.circuit.map(|raw| v.circuit(raw));
    let policy = v.policy(raw.retry, raw.tools, raw.trust_annotations, raw.idempotency);
    let origins = v.origins(raw.origins.unwrap_or_default());
    let telemetry = v.telemetry(raw.telemetry, &overrides.otel_env);
    let inspector = v.inspector(raw.inspector.unwrap_or_default(), admin);
    let capture = v.capture(raw.capture, overrides.capture.as_ref());
    let watch_config = overrides.watch_config.or(raw.watch_config).unwrap_or(true);
    v.check_distinct((listen, listen_from), (admin, admin_from));

    match (ConfigErrors::new(v.errors), upstream) {
        (None, Some(upstream)) => Ok(Config {
            listen,
            upstream,
            admin,
            workers,
            host_header,
            upstream_tls,
            tls,
            timeouts,
            log,
            metrics,
            limits,
            circuit,
            policy,
            origins,
            telemetry,
            inspector,
            capture,
            watch_config,
        }),
        (Some(errors), _) => Err(errors),
        // `upstream` is only `None` after an error was reported; this arm is for the compiler.
        (None, None) => Err(ConfigErrors::one(missing_upstream(source))),
    }
}

fn missing_upstream(source: Source<'_>) -> ConfigError {
    let message = "upstream is required: set `upstream` in the config file or pass --upstream";
    match source.file {
        Some(file) => ConfigError::in_file(file, None, message.to_owned()),
        None => ConfigError::on_command_line(message.to_owned()),
    }
}

// === impl Validator ===

impl Validator<'_> {
    fn report(&mut self, at: Option<Position>, message: String) {
        self.errors.push(match self.source.file {
            Some(file) => ConfigError::in_file(file, at, message),
            None => ConfigError::on_command_line(message),
        });
    }

    /// Parses an optional value, reporting `path: <parse error>` at its position.
    ///
    /// Returns `default` when the key is absent, and also when it is invalid (after reporting).
    fn parse<T>(
        &mut self,
        raw: Option<Spanned<String>>,
        path: &str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> T {
        let Some(raw) = raw else { return default };
        match parse(&raw.value) {
            Ok(value) => value,
            Err(message) => {
                self.report(Position::of(&raw), format!("{path}: {message}"));
                default
            }
        }
    }

    fn upstream(&mut self, raw: Option<Spanned<String>>, flag: Option<&str>) -> Option<Upstream> {
        if let Some(text) = flag {
            return Upstream::parse(text)
                .map_err(|e| {
                    self.errors
                        .push(ConfigError::on_command_line(format!("--upstream: {e}")))
                })
                .ok();
        }
        let Some(raw) = raw else {
            self.errors.push(missing_upstream(self.source));
            return None;
        };
        Upstream::parse(&raw.value)
            .map_err(|e| self.report(Position::of(&raw), format!("upstream: {e}")))
            .ok()
    }

    fn upstream_tls(&mut self, raw: RawUpstreamTls) -> UpstreamTls {
        let d = UpstreamTls::default();
        let dir = self.source.dir;
        UpstreamTls {
            roots: self.parse(raw.roots, "upstream_tls.roots", d.roots, |s| {
                s.parse().map_err(|e| format!("{e}"))
            }),
            ca_file: self.parse(raw.ca_file, "upstream_tls.ca_file", None, |s| {
                let path = dir.join(s);
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_file() => Ok(Some(path)),
                    Ok(_) => Err(format!("{} is not a file", quoted(s))),
                    Err(e) => Err(format!("cannot read {}: {e}", quoted(s))),
                }
            }),
            insecure_skip_verify: raw.insecure_skip_verify.unwrap_or(d.insecure_skip_verify),
        }
    }

    fn timeouts(&mut self, raw: RawTimeouts) -> Timeouts {
        let d = Timeouts::default();
        // Only `Zero::MeansOff` yields `None`, so the `unwrap_or_default` never fires.
        let mut required = |raw, path, default, zero| {
            self.parse(raw, path, default, |s| {
                units::duration_setting(s, zero).map(Option::unwrap_or_default)
            })
        };
        let connect = required(raw.connect, "timeouts.connect", d.connect, Zero::Rejected);
        let response_head = required(
            raw.response_head,
            "timeouts.response_head",
            d.response_head,
            Zero::Rejected,
        );
        let resume_window = required(
            raw.resume_window,
            "timeouts.resume_window",
            d.resume_window,
            Zero::Allowed,
        );
        let header_read = required(
            raw.header_read,
            "timeouts.header_read",
            d.header_read,
            Zero::Rejected,
        );
        let drain = required(raw.drain, "timeouts.drain", d.drain, Zero::Allowed);
        let body_idle = self.parse(raw.body_idle, "timeouts.body_idle", d.body_idle, |s| {
            units::duration_setting(s, Zero::MeansOff)
        });
        let sse_keepalive = self.parse(
            raw.sse_keepalive,
            "timeouts.sse_keepalive",
            d.sse_keepalive,
            |s| units::duration_setting(s, Zero::MeansOff),
        );
        let request_body_idle = self.parse(
            raw.request_body_idle,
            "timeouts.request_body_idle",
            d.request_body_idle,
            |s| units::duration_setting(s, Zero::MeansOff),
        );
        Timeouts {
            connect,
            response_head,
            body_idle,
            resume_window,
            header_read,
            drain,
            sse_keepalive,
            request_body_idle,
        }
    }

    fn log(&mut self, raw: RawLog, format_flag: Option<LogFormat>) -> LogConfig {
        let d = LogConfig::default();
        LogConfig {
            format: match format_flag {
                Some(format) => format,
                None => self.parse(raw.format, "log.format", d.format, |s| {
                    // Worded like our other enum words rather than the log filter's parse error.
                    s.parse()
                        .map_err(|_| UnknownWord::new(s, "json, pretty").to_string())
                }),
            },
            level: self.parse(raw.level, "log.level", d.level, |s| {
                if s.trim().is_empty() {
                    return Err(
                        "must not be empty; e.g. info or strata=debug,hyper=warn".to_owned()
                    );
                }
                tracing_subscriber::EnvFilter::try_new(s)
                    .map(|_| s.to_owned())
                    .map_err(|e| format!("invalid filter {}: {e}", quoted(s)))
            }),
            error_messages: raw.error_messages.unwrap_or(d.error_messages),
        }
    }

    fn metrics(&mut self, raw: RawMetrics) -> MetricsConfig {
        let d = MetricsConfig::default();
        MetricsConfig {
            max_tools: self.parse(raw.max_tools, "metrics.max_tools", d.max_tools, |s| {
                count(s, MAX_TOOLS_RANGE)
            }),
            max_methods: self.parse(raw.max_methods, "metrics.max_methods", d.max_methods, |s| {
                count(s, MAX_METHODS_RANGE)
            }),
        }
    }

    fn limits(&mut self, raw: RawLimits) -> Limits {
        let d = Limits::default();
        Limits {
            request_inspect_bytes: self.parse(
                raw.request_inspect_bytes,
                "limits.request_inspect_bytes",
                d.request_inspect_bytes,
                |s| size_in(s, REQUEST_INSPECT_BYTES_RANGE),
            ),
            max_header_bytes: self.parse(
                raw.max_header_bytes,
                "limits.max_header_bytes",
                d.max_header_bytes,
                |s| size_in(s, MAX_HEADER_BYTES_RANGE),
            ),
            max_headers: self.parse(raw.max_headers, "limits.max_headers", d.max_headers, |s| {
                count(s, MAX_HEADERS_RANGE)
            }),
            max_connections: self.parse(
                raw.max_connections,
                "limits.max_connections",
                d.max_connections,
                |s| count(s, MAX_CONNECTIONS_RANGE),
            ),
            max_h2_streams: self.parse(
                raw.max_h2_streams,
                "limits.max_h2_streams",
                d.max_h2_streams,
                // The range keeps it within u32.
                |s| count(s, MAX_H2_STREAMS_RANGE).map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            ),
            calls: raw
                .calls
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .filter_map(|(i, rule)| self.call_rule(i, rule))
                .collect(),
        }
    }

    fn origins(&mut self, raw: Vec<Spanned<String>>) -> Origins {
        let mut entries = Vec::with_capacity(raw.len());
        for (i, entry) in raw.into_iter().enumerate() {
            let path = format!("origins[{i}]");
            if let Some(origin) = self.parse(Some(entry), &path, None, |s| {
                origins::parse_origin(s).map(Some)
            }) {
                entries.push(origin);
            }
        }
        Origins::new(entries)
    }

    /// The proxy and admin listeners cannot share a port: the second bind would fail at
    /// startup, after `check-config` said the file was fine. The error points at the admin
    /// address if the user set it, since that is the one more likely to be moved.
    fn check_distinct(&mut self, listen: (SocketAddr, Origin), admin: (SocketAddr, Origin)) {
        let ((listen, listen_from), (admin, admin_from)) = (listen, admin);
        let overlapping_ip = listen.ip() == admin.ip()
            || listen.ip().is_unspecified()
            || admin.ip().is_unspecified();
        // Port 0 asks the OS for a free port, so two of them never clash.
        if listen.port() == 0 || listen.port() != admin.port() || !overlapping_ip {
            return;
        }
        let message = format!("listen ({listen}) and admin ({admin}) would bind the same port");
        let (origin, key) = match admin_from {
            Origin::Default => (listen_from, "listen"),
            _ => (admin_from, "admin"),
        };
        match origin {
            Origin::Flag => {
                let error = ConfigError::on_command_line(format!("--{key}: {message}"));
                self.errors.push(error);
            }
            Origin::File(at) => self.report(at, format!("{key}: {message}")),
            // The two defaults differ, so this cannot happen; report it rather than assume.
            Origin::Default => self.report(None, format!("{key}: {message}")),
        }
    }
}

/// Where a listener address came from, to blame the right place for a clash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Default,
    File(Option<Position>),
    Flag,
}

impl Origin {
    fn of(flag_given: bool, raw: Option<&Spanned<String>>) -> Self {
        match (flag_given, raw) {
            (true, _) => Self::Flag,
            (false, Some(raw)) => Self::File(Position::of(raw)),
            (false, None) => Self::Default,
        }
    }
}

fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "invalid address {}; expected IP:PORT, e.g. 127.0.0.1:7000 or [::1]:7000",
            quoted(text)
        )
    })
}

/// A whole number within `range`.
pub(super) fn count(text: &str, range: RangeInclusive<usize>) -> Result<usize, String> {
    let trimmed = text.trim();
    trimmed
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| trimmed.parse::<usize>().ok())
        .flatten()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            format!(
                "expected a whole number in {}..={}, got {}",
                range.start(),
                range.end(),
                quoted(text)
            )
        })
}

/// A byte size within `range`.
fn size_in(text: &str, range: RangeInclusive<usize>) -> Result<usize, String> {
    let bytes = units::size(text)?;
    usize::try_from(bytes)
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            format!(
                "{} is out of range; expected {}..={}",
                quoted(text),
                human_size(*range.start()),
                human_size(*range.end())
            )
        })
}

/// Spells a size in the largest binary unit that divides it exactly.
fn human_size(bytes: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    UNITS
        .iter()
        .find(|(unit, _)| bytes >= *unit && bytes.is_multiple_of(*unit))
        .map_or_else(
            || bytes.to_string(),
            |(unit, name)| format!("{}{name}", bytes / unit),
        )
}
