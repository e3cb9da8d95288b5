//! The retry policy: whether a failed attempt may be re-sent, and when.
//!
//! A call is re-sent only when all hold (README "Retries and idempotency keys"):
//! - it is idempotent ([`resendable::decide`]);
//! - the failure is transport-layer and named in `retry.on` (connect error, upstream reset
//!   before the head, 502/503/504/429) — never a JSON-RPC error or an `isError` result;
//! - no response byte has reached the agent (strata only retries before it forwards a head,
//!   so a call is committed from its first forwarded byte: gRPC's rule);
//! - its body fits the replay buffer; attempts remain; the deadline allows the wait; a
//!   `Retry-After` is within `max_retry_after`; the budget has room.

pub mod backoff;
pub mod budget;
pub mod limits;
pub mod resendable;
pub mod retry_after;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::StatusCode;

use crate::config::{PolicyConfig, RetryConfig, RetryOn, ToolRule};
use crate::metrics::{RetryReason, SuppressReason};

pub use budget::Budget;
pub use resendable::{Annotations, Verdict};

/// The runtime policy, built once from the config.
pub struct Policy {
    retry: RetryConfig,
    rules: Vec<ToolRule>,
    annotations: Option<Arc<Annotations>>,
    honours_keys: bool,
    budget: Budget,
}

/// How one attempt failed, when it failed in a way the policy knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Status(StatusCode),
    ConnectError,
    UpstreamReset,
    /// No head within `timeouts.response_head` (strata's own 504).
    HeadTimeout,
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Wait, then send again.
    Retry { wait: Duration, reason: RetryReason },
    /// Give the agent this attempt's answer.
    GiveUp(Option<SuppressReason>),
}

/// What the policy knows of the call when an attempt failed.
pub struct Attempt<'a> {
    /// Attempts made so far (1 after the first).
    pub made: u32,
    pub idempotent: bool,
    /// The request body is in the replay buffer.
    pub replayable: bool,
    pub elapsed: Duration,
    /// The answer's `Retry-After` value, when it had one.
    pub retry_after: Option<&'a [u8]>,
}

// === impl Failure ===

impl Failure {
    /// The status the attempt is logged with (strata's own 502/504 when the upstream sent none).
    pub fn status(self) -> u16 {
        match self {
            Failure::Status(s) => s.as_u16(),
            Failure::ConnectError | Failure::UpstreamReset => 502,
            Failure::HeadTimeout => 504,
        }
    }

    /// The `retry.on` word this failure is; `None` for statuses the policy never retries.
    pub fn condition(self) -> Option<RetryOn> {
        match self {
            Failure::Status(s) => match s.as_u16() {
                502 => Some(RetryOn::Http502),
                503 => Some(RetryOn::Http503),
                504 => Some(RetryOn::Http504),
                429 => Some(RetryOn::Http429),
                _ => None,
            },
            Failure::ConnectError => Some(RetryOn::ConnectError),
            Failure::UpstreamReset => Some(RetryOn::UpstreamReset),
            Failure::HeadTimeout => Some(RetryOn::Http504),
        }
    }
}

fn reason(on: RetryOn) -> RetryReason {
    match on {
        RetryOn::Http502 => RetryReason::Http502,
        RetryOn::Http503 => RetryReason::Http503,
        RetryOn::Http504 => RetryReason::Http504,
        RetryOn::Http429 => RetryReason::Http429,
        RetryOn::ConnectError => RetryReason::ConnectError,
        RetryOn::UpstreamReset => RetryReason::UpstreamReset,
    }
}

// === impl Policy ===

impl Policy {
    /// `annotations` are the upstream's tool hints learnt so far (kept across reloads); they
    /// count only with `trust_annotations`.
    pub fn new(config: &PolicyConfig, annotations: Arc<Annotations>) -> Policy {
        Policy {
            retry: config.retry.clone(),
            rules: config.tools.clone(),
            annotations: config.trust_annotations.then_some(annotations),
            honours_keys: config.idempotency.upstream_honours_keys,
            budget: Budget::new(&config.retry.budget),
        }
    }

    /// Whether strata may ever retry (and so buffers request bodies for replay).
    pub fn retries_enabled(&self) -> bool {
        self.retry.max_attempts > 1 && !self.retry.on.is_empty()
    }

    pub fn replay_cap(&self) -> usize {
        self.retry.replay_buffer
    }

    /// The upstream's tool annotations, when they are trusted.
    pub fn annotations(&self) -> Option<&Arc<Annotations>> {
        self.annotations.as_ref()
    }

    pub fn verdict(&self, method: &str, tool: &str, has_key: bool) -> Verdict {
        resendable::decide(
            &self.rules,
            self.annotations.as_deref(),
            self.honours_keys,
            method,
            tool,
            has_key,
        )
    }

    /// A call's first attempt goes out (the call arrived at `now`): it earns the budget its
    /// share.
    pub fn deposit(&self, now: tokio::time::Instant) {
        self.budget.deposit(now);
    }

    /// Decides after a failed attempt. Checks in the order that names the most useful reason.
    pub fn next(&self, failure: Failure, attempt: &Attempt<'_>) -> Next {
        let Some(on) = failure.condition().filter(|c| self.retry.on.contains(c)) else {
            return Next::GiveUp(None);
        };
        // A body past the replay buffer cannot be sent again, whatever the call is (and its
        // requests may not even be known yet when the connect failed).
        if !attempt.replayable {
            return Next::GiveUp(Some(SuppressReason::BodyTooLarge));
        }
        if !attempt.idempotent {
            return Next::GiveUp(Some(SuppressReason::NotIdempotent));
        }
        if attempt.made >= self.retry.max_attempts {
            return Next::GiveUp(Some(SuppressReason::AttemptsExhausted));
        }
        let asked = attempt
            .retry_after
            .and_then(|v| retry_after::parse_value(v, SystemTime::now()));
        let wait = match asked {
            Some(asked) if asked > self.retry.max_retry_after => {
                return Next::GiveUp(Some(SuppressReason::RetryAfterTooLong));
            }
            Some(asked) => asked,
            None => backoff::full_jitter(
                self.retry.initial_backoff,
                self.retry.max_backoff,
                attempt.made,
            ),
        };
        if attempt.elapsed + wait > self.retry.deadline {
            return Next::GiveUp(Some(SuppressReason::Deadline));
        }
        if !self.budget.withdraw() {
            return Next::GiveUp(Some(SuppressReason::BudgetExhausted));
        }
        Next::Retry {
            wait,
            reason: reason(on),
        }
    }
}

#[cfg(test)]
mod tests;
