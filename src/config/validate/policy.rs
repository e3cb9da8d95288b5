//! Validation of the policy sections: `retry`, `tools`, `trust_annotations`, `idempotency`.

use std::ops::RangeInclusive;
use std::time::Duration;

use serde_saphyr::Spanned;

use super::super::error::{Position, quoted};
use super::super::policy::{
    Glob, IdempotencyConfig, PolicyConfig, RetryBudget, RetryConfig, RetryOn, ToolRule,
};
use super::super::raw::{RawBudget, RawIdempotency, RawRetry, RawToolRule};
use super::super::units::{self, Zero};
use super::{Validator, count, size_in};

/// Attempts in all (first included).
pub const MAX_ATTEMPTS_RANGE: RangeInclusive<usize> = 1..=10;
/// The replay buffer: up to 16 MiB (0: never buffer, never retry a request with a body).
pub const REPLAY_BUFFER_RANGE: RangeInclusive<usize> = 0..=(16 << 20);
/// Records in the memory idempotency store.
pub const MAX_ENTRIES_RANGE: RangeInclusive<usize> = 1..=10_000_000;
/// Budget window: Linkerd's and tower's `TpsBudget` bounds.
const BUDGET_WINDOW: RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(60);

impl Validator<'_> {
    pub(super) fn policy(
        &mut self,
        retry: Option<RawRetry>,
        tools: Option<Vec<Spanned<RawToolRule>>>,
        trust_annotations: Option<bool>,
        idempotency: Option<RawIdempotency>,
    ) -> PolicyConfig {
        let d = PolicyConfig::default();
        PolicyConfig {
            retry: self.retry(retry.unwrap_or_default()),
            tools: tools
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .filter_map(|(i, rule)| self.tool_rule(i, rule))
                .collect(),
            trust_annotations: trust_annotations.unwrap_or(d.trust_annotations),
            idempotency: self.idempotency(idempotency.unwrap_or_default()),
        }
    }

    fn duration(
        &mut self,
        raw: Option<Spanned<String>>,
        path: &str,
        default: Duration,
        zero: Zero,
    ) -> Duration {
        self.parse(raw, path, default, |s| {
            units::duration_setting(s, zero).map(Option::unwrap_or_default)
        })
    }

    fn retry(&mut self, raw: RawRetry) -> RetryConfig {
        let d = RetryConfig::default();
        let max_attempts = self.parse(
            raw.max_attempts,
            "retry.max_attempts",
            d.max_attempts as usize,
            |s| count(s, MAX_ATTEMPTS_RANGE),
        ) as u32;
        let initial_backoff = self.duration(
            raw.initial_backoff,
            "retry.initial_backoff",
            d.initial_backoff,
            Zero::Rejected,
        );
        let max_backoff_at = raw.max_backoff.as_ref().and_then(Position::of);
        let max_backoff = self.duration(
            raw.max_backoff,
            "retry.max_backoff",
            d.max_backoff,
            Zero::Rejected,
        );
        if max_backoff < initial_backoff {
            self.report(
                max_backoff_at,
                format!(
                    "retry.max_backoff: {max_backoff:?} is less than retry.initial_backoff {initial_backoff:?}"
                ),
            );
        }
        let on = match raw.on {
            None => d.on,
            Some(words) => {
                let mut on = Vec::new();
                for word in words {
                    match RetryOn::parse(&word.value) {
                        Some(r) if !on.contains(&r) => on.push(r),
                        Some(_) => {}
                        None => {
                            let expected: Vec<&str> =
                                RetryOn::ALL.iter().map(|r| r.as_str()).collect();
                            self.report(
                                Position::of(&word),
                                format!(
                                    "retry.on: unknown failure {}; expected some of: {}",
                                    quoted(&word.value),
                                    expected.join(", ")
                                ),
                            );
                        }
                    }
                }
                on
            }
        };
        RetryConfig {
            max_attempts,
            initial_backoff,
            max_backoff,
            on,
            budget: self.budget(raw.budget.unwrap_or_default()),
            max_retry_after: self.duration(
                raw.max_retry_after,
                "retry.max_retry_after",
                d.max_retry_after,
                Zero::Allowed,
            ),
            replay_buffer: self.parse(
                raw.replay_buffer,
                "retry.replay_buffer",
                d.replay_buffer,
                |s| size_in(s, REPLAY_BUFFER_RANGE),
            ),
            deadline: self.duration(raw.deadline, "retry.deadline", d.deadline, Zero::Allowed),
        }
    }

    fn budget(&mut self, raw: RawBudget) -> RetryBudget {
        let d = RetryBudget::default();
        RetryBudget {
            ratio: self.parse(raw.ratio, "retry.budget.ratio", d.ratio, |s| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=10.0).contains(r))
                    .ok_or_else(|| {
                        format!("expected a number in 0..=10 (0.2 = 20%), got {}", quoted(s))
                    })
            }),
            min_per_second: self.parse(
                raw.min_per_second,
                "retry.budget.min_per_second",
                d.min_per_second as usize,
                |s| count(s, 0..=100_000),
            ) as u32,
            window: self.parse(raw.window, "retry.budget.window", d.window, |s| {
                let w = units::duration(s.trim())?;
                if BUDGET_WINDOW.contains(&w) {
                    Ok(w)
                } else {
                    Err(format!("must be between 1s and 60s, got {}", quoted(s)))
                }
            }),
        }
    }

    fn tool_rule(&mut self, i: usize, raw: Spanned<RawToolRule>) -> Option<ToolRule> {
        let at = Position::of(&raw);
        let rule = raw.value;
        let path = format!("tools[{i}]");
        let Some(idempotent) = rule.idempotent else {
            self.report(at, format!("{path}: `idempotent: true|false` is required"));
            return None;
        };
        let glob = |raw: Option<Spanned<String>>, v: &mut Self, key: &str| {
            let raw = raw?;
            if raw.value.trim().is_empty() {
                v.report(
                    Position::of(&raw),
                    format!("{path}.{key}: must not be empty"),
                );
                return None;
            }
            Some(Glob::new(raw.value.trim()))
        };
        let tool = glob(rule.pattern, self, "match");
        let method = glob(rule.method, self, "method");
        if tool.is_none() && method.is_none() {
            self.report(
                at,
                format!("{path}: give `match` (a tool-name glob) or `method`"),
            );
            return None;
        }
        Some(ToolRule {
            tool,
            method,
            idempotent,
        })
    }

    fn idempotency(&mut self, raw: RawIdempotency) -> IdempotencyConfig {
        let d = IdempotencyConfig::default();
        IdempotencyConfig {
            store: self.store(raw.store, raw.redis),
            ttl: self.duration(raw.ttl, "idempotency.ttl", d.ttl, Zero::Rejected),
            max_entries: self.parse(
                raw.max_entries,
                "idempotency.max_entries",
                d.max_entries,
                |s| count(s, MAX_ENTRIES_RANGE),
            ),
            max_bytes: self.parse(raw.max_bytes, "idempotency.max_bytes", d.max_bytes, |s| {
                size_in(s, 1..=(1 << 34))
            }),
            max_record_bytes: self.parse(
                raw.max_record_bytes,
                "idempotency.max_record_bytes",
                d.max_record_bytes,
                |s| size_in(s, 1..=(1 << 30)),
            ),
            upstream_honours_keys: raw.upstream_honours_keys.unwrap_or(d.upstream_honours_keys),
        }
    }
}
