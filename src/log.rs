//! Log setup: one `tracing` subscriber for the process, JSON lines or human-readable lines on
//! stdout, filtered by `RUST_LOG` or the configured level. Also a capture helper so tests can
//! read back exactly what would have been logged.

mod json;
pub(crate) use json::{
    Fields, Name, decimal, write_fields, write_fields_object, write_string, write_timestamp_millis,
    write_u64,
};
mod stdout;
pub(crate) use stdout::{batch_this_thread as batch_log_lines, flush_batched as flush_log_lines};

use std::io::{self, IsTerminal, Write};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};

use tracing::Subscriber;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::ParseError;
use tracing_subscriber::fmt::MakeWriter;

use stdout::StdoutLines;

/// How log events are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line, event fields flattened to the top level: for log collectors.
    #[default]
    Json,
    /// One human-readable line per event: for terminals.
    Pretty,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid log filter {directives:?} (from {origin}): {source}")]
    Filter {
        /// Where the directives came from: `RUST_LOG` or the configured level.
        origin: &'static str,
        directives: String,
        #[source]
        source: ParseError,
    },
    #[error("unknown log format {0:?} (expected \"json\" or \"pretty\")")]
    UnknownFormat(String),
}

/// A shared in-memory log sink, from [`capture_json`]. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

/// The writer [`CapturedLogs`] hands to the formatter for each event.
#[derive(Debug)]
pub struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

/// Installs the process-wide subscriber.
///
/// `RUST_LOG`, when set and not empty, replaces `level` entirely (it is the operator's
/// override); `level` is any `EnvFilter` directive string, e.g. `"info"` or
/// `"info,strata::call=off"`. If a global subscriber is already installed (a second call, or
/// a test harness), that one is kept and this returns `Ok(())`.
pub fn init(format: LogFormat, level: &str) -> Result<(), LogError> {
    let filter = filter_from_env_or(level)?;
    let ansi = io::stdout().is_terminal();
    let installed = match (format, StdoutLines::new()) {
        (LogFormat::Json, Some(lines)) => {
            tracing::subscriber::set_global_default(json_subscriber(filter, lines))
        }
        (LogFormat::Json, None) => {
            tracing::subscriber::set_global_default(json_subscriber(filter, io::stdout))
        }
        (LogFormat::Pretty, Some(lines)) => {
            tracing::subscriber::set_global_default(pretty_subscriber(filter, lines, ansi))
        }
        (LogFormat::Pretty, None) => {
            tracing::subscriber::set_global_default(pretty_subscriber(filter, io::stdout, ansi))
        }
    };
    // The only error is "a global default already exists"; keeping it is what makes `init`
    // safe to call twice.
    if installed.is_err() {
        tracing::debug!("a global log subscriber was already installed; keeping it");
    }
    Ok(())
}

/// Writes one line of `record`'s fields straight to the log, in the JSON format, when the
/// subscriber in force is strata's JSON one writing to stdout or to a capture: what it would
/// write for an event with those fields, without building the event and visiting its fields
/// through `dyn` calls. `false` otherwise (the
/// pretty format, another subscriber): the caller records an event instead. The caller has
/// checked that the event would be enabled (`tracing::enabled!`).
pub(crate) fn write_direct(
    level: &tracing::Level,
    target: &str,
    record: impl FnOnce(&mut Fields<'_, String>),
) -> bool {
    let mut record = Some(record);
    tracing::dispatcher::get_default(|current| {
        if !current.is::<json::JsonLines>() {
            return false;
        }
        let Some(record) = record.take() else {
            return false;
        };
        if let Some(lines) = current.downcast_ref::<StdoutLines>() {
            write_line_to(lines, level, target, record);
        } else if let Some(capture) = current.downcast_ref::<CapturedLogs>() {
            write_line_to(capture, level, target, record);
        } else {
            return false;
        }
        true
    })
}

/// [`write_direct`]'s line, built in this thread's line buffer (or one of its own when that
/// is in use: a line built inside another) and written in one piece. A failed log write has
/// nobody to tell; the line is dropped, as the subscriber's own failed writes are.
fn write_line_to<M: for<'w> MakeWriter<'w>>(
    writer: &M,
    level: &tracing::Level,
    target: &str,
    record: impl FnOnce(&mut Fields<'_, String>),
) {
    let write = |line: &str| {
        writer
            .make_writer()
            .write_all(line.as_bytes())
            .map_err(|_| std::fmt::Error)
    };
    let mut record = Some(record);
    let mut build = |line: &mut String| match record.take() {
        Some(record) => json::write_fields_line(line, level, target, record),
        None => Ok(()),
    };
    if json::in_line_buffer(&mut build, write).is_none() {
        let mut line = String::new();
        if build(&mut line).is_ok() {
            let _ = write(&line);
        }
    }
}

/// Routes this thread's log events, at every level, into a buffer as JSON lines (the same
/// shape [`init`] writes) until the guard drops. For tests.
///
/// Thread-local: events from other threads (e.g. a multi-threaded tokio runtime's workers) are
/// not captured; use `#[tokio::test]`'s default current-thread runtime.
pub fn capture_json() -> (DefaultGuard, CapturedLogs) {
    let logs = CapturedLogs::default();
    let guard =
        tracing::subscriber::set_default(json_subscriber(EnvFilter::new("trace"), logs.clone()));
    (guard, logs)
}

fn filter_from_env_or(level: &str) -> Result<EnvFilter, LogError> {
    match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(env) if !env.trim().is_empty() => parse_filter("RUST_LOG", &env),
        _ => parse_filter("the configured log level", level),
    }
}

fn parse_filter(origin: &'static str, directives: &str) -> Result<EnvFilter, LogError> {
    EnvFilter::try_new(directives).map_err(|source| LogError::Filter {
        origin,
        directives: directives.to_owned(),
        source,
    })
}

/// Spans are left out of each line: strata's per-call facts are event fields
/// (`observe::call_record::CallRecord`), and span lists would repeat them on every line.
fn json_subscriber<W>(filter: EnvFilter, writer: W) -> impl Subscriber + Send + Sync + 'static
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .event_format(json::JsonLines)
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

/// The default `fmt` format rather than `.pretty()`: one line per event, which is what
/// `grep` and a scrolling terminal want.
fn pretty_subscriber<W>(
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> impl Subscriber + Send + Sync + 'static
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_ansi(ansi)
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

// === impl LogFormat ===

impl LogFormat {
    pub const fn as_str(self) -> &'static str {
        match self {
            LogFormat::Json => "json",
            LogFormat::Pretty => "pretty",
        }
    }
}

impl FromStr for LogFormat {
    type Err = LogError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" => Ok(LogFormat::Json),
            "pretty" => Ok(LogFormat::Pretty),
            other => Err(LogError::UnknownFormat(other.to_owned())),
        }
    }
}

// === impl CapturedLogs ===

impl CapturedLogs {
    /// The shared buffer itself.
    pub fn buffer(&self) -> Arc<Mutex<Vec<u8>>> {
        self.0.clone()
    }

    /// Everything captured so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.0)).into_owned()
    }

    /// Every captured line that parses as JSON.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Captured JSON lines whose `target` is `target` (e.g. `"strata::call"`).
    pub fn json_lines_for(&self, target: &str) -> Vec<serde_json::Value> {
        self.json_lines()
            .into_iter()
            .filter(|l| l.get("target").and_then(|t| t.as_str()) == Some(target))
            .collect()
    }
}

impl<'a> MakeWriter<'a> for CapturedLogs {
    type Writer = CaptureWriter;

    fn make_writer(&'a self) -> Self::Writer {
        CaptureWriter(self.0.clone())
    }
}

// === impl CaptureWriter ===

impl Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        lock(&self.0).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// A panic while appending leaves at worst a partial line; the buffer is still usable.
fn lock(buf: &Mutex<Vec<u8>>) -> MutexGuard<'_, Vec<u8>> {
    buf.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_json_writes_one_flat_line_per_event() {
        let (guard, logs) = capture_json();
        tracing::info!(target: "strata::test", answer = 42, "hello");
        tracing::debug!(target: "strata::test", "second");
        drop(guard);
        tracing::info!(target: "strata::test", "after the guard: not captured");

        let lines = logs.json_lines_for("strata::test");
        assert_eq!(lines.len(), 2, "{}", logs.text());
        assert_eq!(lines[0]["answer"], 42);
        assert_eq!(lines[0]["message"], "hello");
        assert_eq!(lines[0]["level"], "INFO");
        assert!(lines[0].get("fields").is_none(), "fields are flattened");
        assert_eq!(logs.text().lines().count(), 2);
    }

    #[test]
    fn pretty_format_is_one_line_per_event() {
        let logs = CapturedLogs::default();
        let subscriber = pretty_subscriber(EnvFilter::new("info"), logs.clone(), false);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "strata::test", outcome = "TOOL_SUCCESS", "call");
            tracing::debug!(target: "strata::test", "filtered out");
        });
        let text = logs.text();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("strata::test: call outcome=\"TOOL_SUCCESS\""),
            "{text}"
        );
    }

    #[test]
    fn bad_filter_names_its_origin() {
        let err = parse_filter("the configured log level", "info,=[").unwrap_err();
        assert!(err.to_string().contains("configured log level"), "{err}");
        assert!(parse_filter("RUST_LOG", "info,strata::call=off").is_ok());
    }

    #[test]
    fn init_twice_is_ok() {
        // "off" keeps the test run's stdout clean (unless RUST_LOG overrides it); captures
        // in other tests are thread-local and still take precedence over this global one.
        assert!(init(LogFormat::Json, "off").is_ok());
        assert!(init(LogFormat::Pretty, "off").is_ok());
    }

    #[test]
    fn log_format_round_trips() {
        for f in [LogFormat::Json, LogFormat::Pretty] {
            assert_eq!(f.as_str().parse::<LogFormat>().unwrap(), f);
        }
        assert!("yaml".parse::<LogFormat>().is_err());
    }
}
