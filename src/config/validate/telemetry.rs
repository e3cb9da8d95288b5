//! Validation of `telemetry` (OpenTelemetry export over OTLP), merged with the standard
//! `OTEL_*` environment variables of the OpenTelemetry SDK specification.
//!
//! Each value comes from the file when set there, else from its variable, else from the
//! default. Variables are read from the [`OtelEnv`] the caller captured, never from the
//! process. A bad variable is reported without a position, its message starting with the
//! variable's name (`OTEL_TRACES_SAMPLER_ARG: ...`).
//!
//! The file is always validated. The variables are read only when export is on: an endpoint
//! is set (in the file or in the environment) and `OTEL_SDK_DISABLED` is not `true`. A
//! variable that nothing would use does not stop strata from starting.
//!
//! Not read: the per-signal variants of the protocol, headers, timeout and certificate
//! (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_METRICS_HEADERS`, ...). Both
//! signals go to one collector set up once, so the shared variable serves both. Only the
//! endpoints have per-signal variables here, since traces and metrics may go to different
//! places.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};
use serde_saphyr::Spanned;

use super::super::error::{Position, quoted};
use super::super::raw::{RawMap, RawTelemetry, RawTraces};
use super::super::sections::UnknownWord;
use super::super::telemetry::{
    OtelEnv, OtlpProtocol, Propagate, SamplerConfig, SpanBatching, TelemetryConfig,
};
use super::super::units::{self, MAX_DURATION, Zero};
use super::tls::existing_file;
use super::{Validator, count};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_RATIO: f64 = 1.0;
const SERVICE_NAME: &str = "service.name";
const DEFAULT_SERVICE_NAME: &str = "strata";
/// `OTEL_BSP_MAX_QUEUE_SIZE`.
const MAX_QUEUE_SIZE_RANGE: RangeInclusive<usize> = 1..=1_000_000;
const SAMPLERS: &str = "always_on, always_off, traceidratio, parentbased_always_on, \
                        parentbased_always_off, parentbased_traceidratio";

const DISABLED: &str = "OTEL_SDK_DISABLED";
const BASE_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Any of these set turns export on (unless `OTEL_SDK_DISABLED=true`).
const ENDPOINT_VARIABLES: [&str; 3] = [
    BASE_ENDPOINT,
    Signal::Traces.variable(),
    Signal::Metrics.variable(),
];
const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";

/// A value that may come from the file or, when the file lacks it, from a variable.
#[derive(Clone, Copy)]
struct Setting {
    key: &'static str,
    variable: &'static str,
}

const PROTOCOL: Setting = Setting {
    key: "telemetry.otlp.protocol",
    variable: "OTEL_EXPORTER_OTLP_PROTOCOL",
};
const TIMEOUT: Setting = Setting {
    key: "telemetry.otlp.timeout",
    variable: "OTEL_EXPORTER_OTLP_TIMEOUT",
};
const CA_FILE: Setting = Setting {
    key: "telemetry.otlp.ca_file",
    variable: "OTEL_EXPORTER_OTLP_CERTIFICATE",
};
const SAMPLER: Setting = Setting {
    key: "telemetry.traces.sampler",
    variable: "OTEL_TRACES_SAMPLER",
};
const RATIO: Setting = Setting {
    key: "telemetry.traces.ratio",
    variable: "OTEL_TRACES_SAMPLER_ARG",
};
const METRICS_INTERVAL: Setting = Setting {
    key: "telemetry.metrics.interval",
    variable: "OTEL_METRIC_EXPORT_INTERVAL",
};

/// One exported signal, for its endpoint.
#[derive(Clone, Copy)]
enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    /// Appended to a base endpoint for OTLP/HTTP.
    const fn path(self) -> &'static str {
        match self {
            Self::Traces => "/v1/traces",
            Self::Metrics => "/v1/metrics",
        }
    }

    /// The signal's own endpoint, used as is.
    const fn variable(self) -> &'static str {
        match self {
            Self::Traces => "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            Self::Metrics => "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        }
    }
}

impl Validator<'_> {
    /// `None` when export is off: no endpoint anywhere, or `OTEL_SDK_DISABLED=true`.
    pub(super) fn telemetry(
        &mut self,
        raw: Option<RawTelemetry>,
        env: &OtelEnv,
    ) -> Option<TelemetryConfig> {
        let raw = raw.unwrap_or_default();
        let wanted = raw.otlp.as_ref().is_some_and(|o| o.endpoint.is_some())
            || ENDPOINT_VARIABLES
                .iter()
                .any(|name| env.get(name).is_some());
        let disabled = wanted && self.sdk_disabled(env);
        let unread = OtelEnv::default();
        let env = if wanted && !disabled { env } else { &unread };
        let config = self.telemetry_config(raw, env);
        let exporting = config.traces_endpoint.is_some() || config.metrics_endpoint.is_some();
        (exporting && !disabled).then_some(config)
    }

    fn telemetry_config(&mut self, raw: RawTelemetry, env: &OtelEnv) -> TelemetryConfig {
        let otlp = raw.otlp.unwrap_or_default();
        let protocol = self
            .layered(otlp.protocol, PROTOCOL, env, protocol, |s| {
                protocol(&s.to_ascii_lowercase())
            })
            .unwrap_or_default();
        let (traces_endpoint, metrics_endpoint) = self.endpoints(otlp.endpoint, protocol, env);
        let interval = raw.metrics.and_then(|m| m.interval);
        TelemetryConfig {
            protocol,
            traces_endpoint,
            metrics_endpoint,
            headers: self.headers(otlp.headers, env),
            timeout: self
                .layered(otlp.timeout, TIMEOUT, env, positive_duration, millis)
                .unwrap_or(DEFAULT_TIMEOUT),
            ca_file: self.ca_file(otlp.ca_file, env),
            sampler: self.sampler(raw.traces.unwrap_or_default(), env),
            batching: self.batching(env),
            metrics_interval: self
                .layered(interval, METRICS_INTERVAL, env, positive_duration, millis)
                .unwrap_or(DEFAULT_METRICS_INTERVAL),
            propagate: self.parse(
                raw.propagate,
                "telemetry.propagate",
                Propagate::default(),
                propagate,
            ),
            resource: self.resource(raw.resource, env),
        }
    }

    /// The variable `name` parsed, reporting `NAME: <parse error>` without a position.
    ///
    /// Returns `None` when the variable is unset (or empty), and when it is invalid.
    fn variable<T>(
        &mut self,
        env: &OtelEnv,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let text = env.get(name)?;
        parse(text)
            .map_err(|message| self.report(None, format!("{name}: {message}")))
            .ok()
    }

    /// The file's value if it has one, else the variable's; `None` when neither is set, and
    /// when the one that counts is invalid (after reporting it).
    fn layered<T>(
        &mut self,
        raw: Option<Spanned<String>>,
        setting: Setting,
        env: &OtelEnv,
        from_file: impl FnOnce(&str) -> Result<T, String>,
        from_env: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        match raw {
            Some(raw) => self.parse(Some(raw), setting.key, None, |s| from_file(s).map(Some)),
            None => self.variable(env, setting.variable, from_env),
        }
    }

    /// `OTEL_SDK_DISABLED`: only `true` disables (any case); a value other than `true` or
    /// `false` is an error rather than silently "not disabled".
    fn sdk_disabled(&mut self, env: &OtelEnv) -> bool {
        self.variable(env, DISABLED, |s| match s.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(format!("expected true or false, got {}", quoted(s))),
        })
        .unwrap_or(false)
    }

    /// The traces and metrics endpoints. The file's `endpoint` is a base for both; without
    /// it, each signal's own variable is used as is, else `OTEL_EXPORTER_OTLP_ENDPOINT` as a
    /// base.
    fn endpoints(
        &mut self,
        raw: Option<Spanned<String>>,
        protocol: OtlpProtocol,
        env: &OtelEnv,
    ) -> (Option<String>, Option<String>) {
        if let Some(raw) = raw {
            let key = "telemetry.otlp.endpoint";
            let base = self.parse(Some(raw), key, None, |s| {
                base_endpoint(s, protocol).map(Some)
            });
            let url = |signal| base.as_deref().map(|b| signal_url(b, protocol, signal));
            return (url(Signal::Traces), url(Signal::Metrics));
        }
        let own = |signal: Signal| env.get(signal.variable()).is_some();
        // Read only when a signal falls back to it, so an unused value is not reported.
        let base = if own(Signal::Traces) && own(Signal::Metrics) {
            None
        } else {
            self.variable(env, BASE_ENDPOINT, |s| base_endpoint(s, protocol))
        };
        let mut endpoint = |signal: Signal| {
            if own(signal) {
                self.variable(env, signal.variable(), endpoint_url)
            } else {
                base.as_deref().map(|b| signal_url(b, protocol, signal))
            }
        };
        (endpoint(Signal::Traces), endpoint(Signal::Metrics))
    }

    /// `OTEL_EXPORTER_OTLP_HEADERS` overlaid by the file's `headers`, name by name; names
    /// lower-cased, sorted. Values are never quoted in errors: they are often credentials.
    fn headers(&mut self, raw: RawMap, env: &OtelEnv) -> Vec<(String, String)> {
        let mut headers = BTreeMap::new();
        for (name, value) in self.variable(env, HEADERS, key_values).unwrap_or_default() {
            match header_name(&name).and_then(|name| Ok((name, header_value(&value)?))) {
                Ok((name, value)) => {
                    headers.insert(name, value);
                }
                Err(message) => self.report(None, format!("{HEADERS}: {message}")),
            }
        }
        let key = "telemetry.otlp.headers";
        for (name, value) in entries(raw) {
            let path = format!("{key}.{}", name.value.trim().escape_debug());
            let name = self.parse(Some(name), key, None, |s| header_name(s).map(Some));
            let value = self.parse(Some(value), &path, None, |s| header_value(s).map(Some));
            if let (Some(name), Some(value)) = (name, value) {
                headers.insert(name, value);
            }
        }
        headers.into_iter().collect()
    }

    /// A PEM CA file: the file's (relative to its directory), else the variable's (relative
    /// to the working directory, as the SDKs read it).
    fn ca_file(&mut self, raw: Option<Spanned<String>>, env: &OtelEnv) -> Option<PathBuf> {
        let dir = self.source.dir;
        self.layered(
            raw,
            CA_FILE,
            env,
            |s| existing_file(dir, s),
            |s| existing_file(Path::new(""), s),
        )
    }

    /// The sampler and, for the two ratio samplers, its ratio (default 1.0).
    fn sampler(&mut self, raw: RawTraces, env: &OtelEnv) -> SamplerConfig {
        let errors_before = self.errors.len();
        let ratio_at = raw.ratio.as_ref().map(Position::of);
        let sampler = self
            .layered(raw.sampler, SAMPLER, env, sampler_word, |s| {
                sampler_word(&s.to_ascii_lowercase())
            })
            .unwrap_or_default();
        // After a bad sampler word, whether a ratio belongs is unknown: say nothing of it.
        if self.errors.len() > errors_before {
            return sampler;
        }
        if !takes_ratio(sampler) {
            if let Some(at) = ratio_at {
                let message = "only used by traceidratio and parentbased_traceidratio";
                self.report(at, format!("{}: {message}", RATIO.key));
            }
            return sampler;
        }
        let ratio = self
            .layered(raw.ratio, RATIO, env, ratio, ratio)
            .unwrap_or(DEFAULT_RATIO);
        with_ratio(sampler, ratio)
    }

    /// The span batch processor's `OTEL_BSP_*` variables (no file keys).
    fn batching(&mut self, env: &OtelEnv) -> SpanBatching {
        let d = SpanBatching::default();
        let schedule_delay = self.variable(env, "OTEL_BSP_SCHEDULE_DELAY", millis);
        let max_queue_size = self
            .variable(env, "OTEL_BSP_MAX_QUEUE_SIZE", |s| {
                count(s, MAX_QUEUE_SIZE_RANGE)
            })
            .unwrap_or(d.max_queue_size);
        // A batch never exceeds the queue: an explicit larger batch is an error, while the
        // default shrinks to fit a smaller queue (as the SDKs do).
        let max_export_batch_size = self
            .variable(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", |s| {
                count(s, 1..=max_queue_size)
            })
            .unwrap_or(d.max_export_batch_size.min(max_queue_size));
        SpanBatching {
            schedule_delay: schedule_delay.unwrap_or(d.schedule_delay),
            max_queue_size,
            max_export_batch_size,
        }
    }

    /// `service.name=strata`, overlaid by `OTEL_RESOURCE_ATTRIBUTES`, then
    /// `OTEL_SERVICE_NAME`, then the file's `resource`; sorted by key.
    fn resource(&mut self, raw: RawMap, env: &OtelEnv) -> Vec<(String, String)> {
        let mut resource =
            BTreeMap::from([(SERVICE_NAME.to_owned(), DEFAULT_SERVICE_NAME.to_owned())]);
        let attributes = self.variable(env, RESOURCE_ATTRIBUTES, key_values);
        resource.extend(attributes.unwrap_or_default());
        if let Some(name) = env.get(SERVICE_NAME_VAR) {
            resource.insert(SERVICE_NAME.to_owned(), name.to_owned());
        }
        for (key, value) in entries(raw) {
            let key = self.parse(Some(key), "telemetry.resource", None, |s| match s.trim() {
                "" => Err("an attribute key must not be empty".to_owned()),
                key => Ok(Some(key.to_owned())),
            });
            if let Some(key) = key {
                resource.insert(key, value.value);
            }
        }
        resource.into_iter().collect()
    }
}

/// A mapping's entries in file order.
fn entries(raw: RawMap) -> Vec<(Spanned<String>, Spanned<String>)> {
    let mut entries: Vec<_> = raw.unwrap_or_default().into_iter().collect();
    entries.sort_by_key(|(key, _)| Position::of(key));
    entries
}

fn protocol(text: &str) -> Result<OtlpProtocol, String> {
    match text.trim() {
        "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
        "grpc" => Ok(OtlpProtocol::Grpc),
        "http/json" => Err("http/json is not supported; use http/protobuf or grpc".to_owned()),
        other => Err(UnknownWord::new(other, "http/protobuf, grpc").to_string()),
    }
}

fn propagate(text: &str) -> Result<Propagate, String> {
    match text.trim() {
        "none" => Ok(Propagate::None),
        "header" => Ok(Propagate::Header),
        other => Err(UnknownWord::new(other, "none, header").to_string()),
    }
}

/// A sampler by its `OTEL_TRACES_SAMPLER` name; ratio samplers carry the default ratio until
/// [`with_ratio`] sets theirs.
fn sampler_word(text: &str) -> Result<SamplerConfig, String> {
    Ok(match text.trim() {
        "always_on" => SamplerConfig::AlwaysOn,
        "always_off" => SamplerConfig::AlwaysOff,
        "traceidratio" => SamplerConfig::TraceIdRatio(DEFAULT_RATIO),
        "parentbased_always_on" => SamplerConfig::ParentBasedAlwaysOn,
        "parentbased_always_off" => SamplerConfig::ParentBasedAlwaysOff,
        "parentbased_traceidratio" => SamplerConfig::ParentBasedTraceIdRatio(DEFAULT_RATIO),
        other => return Err(UnknownWord::new(other, SAMPLERS).to_string()),
    })
}

fn takes_ratio(sampler: SamplerConfig) -> bool {
    matches!(
        sampler,
        SamplerConfig::TraceIdRatio(_) | SamplerConfig::ParentBasedTraceIdRatio(_)
    )
}

fn with_ratio(sampler: SamplerConfig, ratio: f64) -> SamplerConfig {
    match sampler {
        SamplerConfig::TraceIdRatio(_) => SamplerConfig::TraceIdRatio(ratio),
        SamplerConfig::ParentBasedTraceIdRatio(_) => SamplerConfig::ParentBasedTraceIdRatio(ratio),
        other => other,
    }
}

fn ratio(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| format!("expected a number from 0 to 1, got {}", quoted(text)))
}

/// A file duration such as `10s`, greater than zero.
fn positive_duration(text: &str) -> Result<Duration, String> {
    units::duration_setting(text, Zero::Rejected).map(Option::unwrap_or_default)
}

/// A variable's duration: whole milliseconds, greater than zero.
fn millis(text: &str) -> Result<Duration, String> {
    let digits = text.trim();
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse::<u64>().ok())
        .flatten()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .filter(|d| *d <= MAX_DURATION)
        .ok_or_else(|| {
            format!(
                "expected whole milliseconds from 1 to {}, got {}",
                MAX_DURATION.as_millis(),
                quoted(text)
            )
        })
}

/// An absolute `http` or `https` URL with a host, trimmed.
fn endpoint_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    let uri: Uri = text
        .parse()
        .map_err(|e| format!("invalid URL {}: {e}", quoted(text)))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(format!(
                "unsupported scheme {} in {}; expected http or https",
                quoted(other),
                quoted(text)
            ));
        }
        None => {
            return Err(format!(
                "URL {} has no scheme; expected e.g. http://127.0.0.1:4318",
                quoted(text)
            ));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("URL {} has no host", quoted(text)));
    }
    Ok(text.to_owned())
}

/// A base endpoint, to which OTLP/HTTP appends each signal's path: so no query.
fn base_endpoint(text: &str, protocol: OtlpProtocol) -> Result<String, String> {
    let url = endpoint_url(text)?;
    if protocol == OtlpProtocol::HttpProtobuf && url.contains('?') {
        return Err(format!(
            "URL {} has a query; /v1/traces and /v1/metrics are appended to this URL",
            quoted(&url)
        ));
    }
    Ok(url)
}

/// A signal's endpoint from a base: for OTLP/HTTP the base's path (if any) plus the signal's
/// (`http://c:4318/otlp/` → `http://c:4318/otlp/v1/traces`); for gRPC the base as is.
fn signal_url(base: &str, protocol: OtlpProtocol, signal: Signal) -> String {
    match protocol {
        OtlpProtocol::HttpProtobuf => format!("{}{}", base.trim_end_matches('/'), signal.path()),
        OtlpProtocol::Grpc => base.to_owned(),
    }
}

fn header_name(text: &str) -> Result<String, String> {
    let name = text.trim().to_ascii_lowercase();
    HeaderName::from_bytes(name.as_bytes())
        .map(|_| name)
        .map_err(|_| format!("invalid header name {}", quoted(text)))
}

/// A header value; the message does not echo it.
fn header_value(text: &str) -> Result<String, String> {
    HeaderValue::from_str(text)
        .map(|_| text.to_owned())
        .map_err(|_| {
            "invalid header value; only visible ASCII characters, spaces and tabs are allowed"
                .to_owned()
        })
}

/// `key1=value1,key2=value2` (W3C baggage form, as `OTEL_EXPORTER_OTLP_HEADERS` and
/// `OTEL_RESOURCE_ATTRIBUTES` are written): spaces around keys and values trimmed, values
/// percent-decoded, empty entries skipped. Errors name entries by number, not by text, since
/// header values are often credentials.
fn key_values(text: &str) -> Result<Vec<(String, String)>, String> {
    let entries = text.split(',').map(str::trim).filter(|e| !e.is_empty());
    entries
        .enumerate()
        .map(|(i, entry)| {
            let n = i + 1;
            let (key, value) = entry
                .split_once('=')
                .ok_or_else(|| format!("entry {n} is not key=value"))?;
            let key = key.trim();
            if key.is_empty() {
                return Err(format!("entry {n} has an empty key"));
            }
            let value = percent_decode(value.trim())
                .ok_or_else(|| format!("entry {n} has an invalid percent-encoded value"))?;
            Ok((key.to_owned(), value))
        })
        .collect()
}

/// Decodes `%XX` escapes (two hex digits each); `None` for a malformed escape or a result
/// that is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let mut bytes = text.bytes();
    let mut out = Vec::with_capacity(text.len());
    while let Some(byte) = bytes.next() {
        if byte != b'%' {
            out.push(byte);
            continue;
        }
        let high = char::from(bytes.next()?).to_digit(16)?;
        let low = char::from(bytes.next()?).to_digit(16)?;
        out.push(u8::try_from(high * 16 + low).ok()?);
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b%2C%3d"), Some("a b,=".to_owned()));
        assert_eq!(percent_decode("%C3%A9"), Some("é".to_owned()));
        assert_eq!(percent_decode("plain"), Some("plain".to_owned()));
        for bad in ["%", "%2", "%zz", "%+1", "%FF"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn key_value_lists() {
        assert_eq!(
            key_values(" a = 1 ,, b=x%3Dy ,"),
            Ok(vec![
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x=y".to_owned())
            ])
        );
        assert_eq!(
            key_values("a=1,secret"),
            Err("entry 2 is not key=value".to_owned())
        );
        assert_eq!(key_values("=1"), Err("entry 1 has an empty key".to_owned()));
        assert_eq!(
            key_values("a=%G0"),
            Err("entry 1 has an invalid percent-encoded value".to_owned())
        );
    }

    #[test]
    fn signal_urls() {
        let http = OtlpProtocol::HttpProtobuf;
        assert_eq!(
            signal_url("http://c:4318", http, Signal::Traces),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            signal_url("http://c:4318/", http, Signal::Metrics),
            "http://c:4318/v1/metrics"
        );
        assert_eq!(
            signal_url("http://c/otlp/", http, Signal::Traces),
            "http://c/otlp/v1/traces"
        );
        assert_eq!(
            signal_url("http://c:4317", OtlpProtocol::Grpc, Signal::Traces),
            "http://c:4317"
        );
    }
}
