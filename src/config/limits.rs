//! Typed settings of the call limits (`limits.calls`) and the circuit (`circuit`). Plain
//! data; `policy/limits/` builds the runtime from it.

use std::time::Duration;

use super::policy::Glob;

/// One `limits.calls` rule: which calls it covers and the limits it sets. The first rule
/// that matches a call decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRule {
    /// Glob on the tool name (tools/call only); `None` matches any call of `method`.
    pub tool: Option<Glob>,
    /// Glob on the JSON-RPC method; `None` with a `tool` means tools/call.
    pub method: Option<Glob>,
    /// Calls in flight to the upstream at once.
    pub max_concurrent: Option<u32>,
    /// Calls let through on average (a token bucket).
    pub rate: Option<Rate>,
    /// The bucket's size: calls let through at once after a quiet spell (default: the
    /// rate's count, at least 1).
    pub burst: Option<u32>,
    /// How long a call may wait for a slot or a token (zero: refused at once).
    pub queue: Duration,
    /// How a refused call is answered (`None`: by the method's default).
    pub refuse_as: Option<RefuseAs>,
}

/// `N/s`, `N/m`, `N/h` or `N/<duration>`: `calls` per `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub calls: u32,
    pub per: Duration,
}

/// How strata answers a call it refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefuseAs {
    /// A tools/call result with `isError: true` and a sentence the model reads (a JSON-RPC
    /// error for any other method, which has no such result).
    ToolError,
    /// A JSON-RPC error (code `-32029`) with the request's id.
    JsonRpcError,
    /// HTTP 429 (a limit) or 503 (the circuit), with `Retry-After`.
    Http429,
}

/// A failure the circuit counts toward opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CircuitOn {
    ConnectError,
    UpstreamReset,
    Http502,
    Http503,
    Http504,
    /// A 2xx answer that ended without the call's response (`STREAM_INCOMPLETE`).
    StreamIncomplete,
}

/// Failure accrual for the upstream (`circuit`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CircuitConfig {
    /// Consecutive failures (of `on`) that open the circuit.
    pub consecutive_failures: u32,
    /// How long the first trip keeps it open; each re-trip doubles it.
    pub open_for: Duration,
    /// The longest it stays open.
    pub max_open_for: Duration,
    pub on: Vec<CircuitOn>,
    pub refuse_as: Option<RefuseAs>,
}

// === impl Rate ===

impl Rate {
    /// Calls per second.
    pub fn per_second(self) -> f64 {
        f64::from(self.calls) / self.per.as_secs_f64()
    }

    /// `10/s`, `600/m`, `5/h`, `3/100ms`.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let hint = || {
            format!(
                "expected calls per time, like 10/s, 600/m or 5/100ms; got {}",
                super::error::quoted(text)
            )
        };
        let (calls, per) = text.trim().split_once('/').ok_or_else(hint)?;
        let calls: u32 = calls.trim().parse().map_err(|_| hint())?;
        let per = match per.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => super::units::duration(other).map_err(|_| hint())?,
        };
        if calls == 0 || per.is_zero() {
            return Err(format!(
                "must let at least one call through; got {}",
                super::error::quoted(text)
            ));
        }
        Ok(Rate { calls, per })
    }
}

// === impl RefuseAs ===

impl RefuseAs {
    pub const ALL: [RefuseAs; 3] = [
        RefuseAs::ToolError,
        RefuseAs::JsonRpcError,
        RefuseAs::Http429,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            RefuseAs::ToolError => "tool_error",
            RefuseAs::JsonRpcError => "jsonrpc_error",
            RefuseAs::Http429 => "http_429",
        }
    }

    pub fn parse(word: &str) -> Option<RefuseAs> {
        RefuseAs::ALL
            .into_iter()
            .find(|r| r.as_str() == word.trim())
    }
}

// === impl CircuitOn ===

impl CircuitOn {
    pub const ALL: [CircuitOn; 6] = [
        CircuitOn::ConnectError,
        CircuitOn::UpstreamReset,
        CircuitOn::Http502,
        CircuitOn::Http503,
        CircuitOn::Http504,
        CircuitOn::StreamIncomplete,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            CircuitOn::ConnectError => "connect_error",
            CircuitOn::UpstreamReset => "upstream_reset",
            CircuitOn::Http502 => "http_502",
            CircuitOn::Http503 => "http_503",
            CircuitOn::Http504 => "http_504",
            CircuitOn::StreamIncomplete => "stream_incomplete",
        }
    }

    pub fn parse(word: &str) -> Option<CircuitOn> {
        CircuitOn::ALL
            .into_iter()
            .find(|r| r.as_str() == word.trim())
    }

    /// The failure an upstream HTTP status is, if any.
    pub fn of_status(status: u16) -> Option<CircuitOn> {
        match status {
            502 => Some(CircuitOn::Http502),
            503 => Some(CircuitOn::Http503),
            504 => Some(CircuitOn::Http504),
            _ => None,
        }
    }
}

impl Default for CircuitConfig {
    fn default() -> Self {
        CircuitConfig {
            consecutive_failures: 5,
            open_for: Duration::from_secs(10),
            max_open_for: Duration::from_secs(120),
            on: CircuitOn::ALL.to_vec(),
            refuse_as: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_calls_per_time() {
        assert_eq!(Rate::parse("10/s").map(Rate::per_second), Ok(10.0));
        assert_eq!(Rate::parse("600/m").map(Rate::per_second), Ok(10.0));
        assert_eq!(Rate::parse(" 3 / 100ms").map(Rate::per_second), Ok(30.0));
        assert!(Rate::parse("10").is_err());
        assert!(Rate::parse("0/s").is_err());
        assert!(Rate::parse("ten/s").is_err());
        assert!(Rate::parse("1/0s").is_err());
    }
}
