//! Closed label vocabularies. Every label value strata exports is either one of these enums
//! or a capped value from traffic (see `calls.rs`), so a scrape's size is bounded by design.

use std::fmt;

/// The label value that stands in for every method or tool beyond the configured cap.
pub const OTHER: &str = "_other";

/// Longest method or tool value exported as itself; anything longer becomes [`OTHER`].
///
/// MCP 2025-11-25 (server/tools §Tool names) says tool names SHOULD be 1 to 128 characters, so a
/// longer name is either broken or hostile, and neither deserves its own series.
pub const MAX_LABEL_BYTES: usize = 128;

/// Declares a fieldless label enum with `ALL`, `COUNT`, `as_str()` and `Display`.
///
/// `ALL` lists the variants in declaration order, so `variant as usize` indexes arrays of
/// pre-resolved handles sized `COUNT` (tests pin that correspondence).
macro_rules! label_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// How many values this label can take.
            pub const COUNT: usize = [$( $label ),+].len();

            /// Every value, in declaration order.
            pub const ALL: [$name; $name::COUNT] = [$( $name::$variant ),+];

            /// The exported label value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

label_enum! {
    /// Why the proxy re-sent a call upstream (`strata_retries_total{reason}`).
    RetryReason {
        /// Upstream answered 502 Bad Gateway.
        Http502 => "http_502",
        /// Upstream answered 503 Service Unavailable.
        Http503 => "http_503",
        /// Upstream answered 504 Gateway Timeout.
        Http504 => "http_504",
        /// Upstream answered 429 Too Many Requests.
        Http429 => "http_429",
        /// The connection to the upstream could not be established (nothing was sent).
        ConnectError => "connect_error",
        /// The upstream reset the connection before any response byte reached the agent.
        UpstreamReset => "upstream_reset",
    }
}

label_enum! {
    /// Why a call that failed in a retryable way was not re-sent
    /// (`strata_retries_suppressed_total{reason}`).
    SuppressReason {
        /// Neither config, tool annotations nor an `Idempotency-Key` make the call safe to resend.
        NotIdempotent => "not_idempotent",
        /// The retry budget (retries as a share of calls) is spent.
        BudgetExhausted => "budget_exhausted",
        /// The request body did not fit the bounded replay buffer.
        BodyTooLarge => "body_too_large",
        /// The upstream's `Retry-After` asks for a longer wait than the configured cap.
        RetryAfterTooLong => "retry_after_too_long",
        /// A response byte already went to the agent; the call can no longer be replaced.
        Committed => "committed",
        /// The call's deadline would pass before another attempt could finish.
        Deadline => "deadline",
        /// The configured maximum number of attempts has been made.
        AttemptsExhausted => "attempts_exhausted",
        /// The call's rule had no token for it, or the upstream's circuit is not closed.
        Limited => "limited",
    }
}

label_enum! {
    /// The downstream request's HTTP method (`strata_http_requests_total{method}`).
    /// MCP Streamable HTTP uses only POST, GET and DELETE; anything else is `OTHER`.
    HttpMethod {
        Get => "GET",
        Post => "POST",
        Delete => "DELETE",
        Other => "OTHER",
    }
}

label_enum! {
    /// A named limit that was hit (`strata_limit_hits_total{limit}`). Each one corresponds to
    /// a named constant or config setting whose doc says what happens on overflow.
    Limit {
        /// Downstream request head larger than allowed.
        HeaderSize => "header_size",
        /// Downstream request head not received in time.
        HeaderTimeout => "header_timeout",
        /// The request inspector stopped reading a body past its byte limit.
        RequestInspectBytes => "request_inspect_bytes",
        /// A downstream connection was refused at the connection cap.
        MaxConnections => "max_connections",
        /// A request body exceeded the retry replay buffer.
        ReplayBuffer => "replay_buffer",
        /// The table of calls awaiting a resumed SSE stream was full.
        PendingCalls => "pending_calls",
        /// A 2025-03-26 batch held more requests than are classified.
        BatchRequests => "batch_requests",
        /// A request from a browser `Origin` not in `origins` was refused (403).
        Origin => "origin",
        /// A request body paused longer than `timeouts.request_body_idle` (408).
        RequestBodyTimeout => "request_body_timeout",
        /// A call found its rule's token bucket empty (`limits.calls[].rate`).
        Rate => "rate",
        /// A call found its rule's calls in flight at `limits.calls[].max_concurrent`.
        Concurrency => "concurrency",
        /// A call found the upstream's circuit open (`circuit`).
        Circuit => "circuit",
    }
}

label_enum! {
    /// A state of the upstream's circuit (`strata_circuit_transitions_total{to}`); the
    /// gauge `strata_circuit_state` holds its index (0 closed, 1 open, 2 half-open).
    CircuitState {
        /// Calls pass; consecutive failures are counted.
        Closed => "closed",
        /// Calls are refused without reaching the upstream.
        Open => "open",
        /// One probe call passes; its result closes or re-opens the circuit.
        HalfOpen => "half_open",
    }
}

label_enum! {
    /// What an `Idempotency-Key` lookup did (`strata_idempotent_replays_total{result}`).
    ReplayResult {
        /// A stored response was returned instead of calling the upstream again.
        Replayed => "replayed",
        /// The same key is still in flight.
        Conflict => "conflict",
        /// The same key arrived with a different request body.
        Mismatch => "mismatch",
        /// The store could not answer; the call went upstream without idempotency.
        StoreError => "store_error",
    }
}

label_enum! {
    /// Result of a config reload (`strata_config_reloads_total{result}`).
    ReloadResult {
        Ok => "ok",
        Error => "error",
    }
}

label_enum! {
    /// Why an agent's TLS handshake failed (`strata_tls_handshake_errors_total{reason}`).
    TlsFailure {
        /// Not finished within `timeouts.header_read`.
        Timeout => "timeout",
        /// `tls.client_ca_file` is set and the agent sent no certificate, or one that does not
        /// verify against it.
        ClientCert => "client_cert",
        /// Anything else: not TLS at all, no common version or cipher suite, a reset.
        Error => "error",
    }
}

label_enum! {
    /// What OpenTelemetry export lost (`strata_telemetry_dropped_total{signal}`).
    TelemetrySignal {
        /// Spans: the queue was full, or the collector refused or did not take a batch.
        Traces => "traces",
        /// Metric data points the collector refused or did not take.
        Metrics => "metrics",
    }
}

label_enum! {
    /// What became of a captured exchange (`strata_capture_entries_total{result}`).
    CaptureResult {
        /// Appended to the capture file.
        Written => "written",
        /// Lost: the writer's queue was full, or the file could not be written.
        Dropped => "dropped",
    }
}

// === impl HttpMethod ===

impl HttpMethod {
    pub fn from_http(method: &http::Method) -> HttpMethod {
        match *method {
            http::Method::GET => HttpMethod::Get,
            http::Method::POST => HttpMethod::Post,
            http::Method::DELETE => HttpMethod::Delete,
            _ => HttpMethod::Other,
        }
    }
}
