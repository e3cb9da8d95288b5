//! The `capture` section, typed: opt-in recording of the MCP traffic strata proxies, as HAR
//! 1.2 that `strata classify` reads (`src/capture/`). Off unless a path is set (in the file
//! or with `--capture`); [`Config::capture`](super::Config) is then `None`.

use std::ops::RangeInclusive;
use std::path::PathBuf;

/// Allowed `capture.max_body`: per side of each exchange.
pub const CAPTURE_MAX_BODY_RANGE: RangeInclusive<usize> = 0..=(64 << 20);
/// Allowed `capture.max_file`: big enough for an entry or two, at most 64 GiB.
pub const CAPTURE_MAX_FILE_RANGE: RangeInclusive<usize> = (4 << 10)..=(64 << 30);

/// Header names whose values a capture never holds, whatever `capture.redact` says.
pub const ALWAYS_REDACTED: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "idempotency-key",
];

/// Capture, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureConfig {
    /// The HAR file written; rotated to `FILE.1` when it would pass `max_file`.
    pub path: PathBuf,
    /// Body bytes kept per side of an exchange; the rest is counted, not kept.
    pub max_body: usize,
    /// Bytes a file may reach before it is rotated.
    pub max_file: u64,
    /// Header names (lower case) whose values are written as `[redacted]`: these and
    /// [`ALWAYS_REDACTED`].
    pub redact: Vec<String>,
}

impl CaptureConfig {
    /// Default limits, writing to `path`.
    pub fn at(path: PathBuf) -> Self {
        CaptureConfig {
            path,
            max_body: 64 << 10,
            max_file: 100 << 20,
            redact: Vec::new(),
        }
    }
}
