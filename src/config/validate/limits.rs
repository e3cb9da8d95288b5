//! Validation of the call limits (`limits.calls`) and the circuit (`circuit`).

use std::ops::RangeInclusive;
use std::time::Duration;

use serde_saphyr::Spanned;

use super::super::error::{Position, quoted};
use super::super::limits::{CallRule, CircuitConfig, CircuitOn, Rate, RefuseAs};
use super::super::policy::Glob;
use super::super::raw::{RawCallRule, RawCircuit};
use super::super::units::{self, Zero};
use super::{Validator, count};

/// Calls in flight under one rule.
pub(super) const MAX_CONCURRENT_RANGE: RangeInclusive<usize> = 1..=1_000_000;
/// A bucket's size.
pub(super) const BURST_RANGE: RangeInclusive<usize> = 1..=1_000_000;
/// Consecutive failures that open the circuit.
pub(super) const CONSECUTIVE_FAILURES_RANGE: RangeInclusive<usize> = 1..=10_000;

impl Validator<'_> {
    pub(super) fn call_rule(&mut self, i: usize, raw: Spanned<RawCallRule>) -> Option<CallRule> {
        let at = Position::of(&raw);
        let rule = raw.value;
        let path = format!("limits.calls[{i}]");
        let tool = self.glob(rule.pattern, &format!("{path}.match"));
        let method = self.glob(rule.method, &format!("{path}.method"));
        if tool.is_none() && method.is_none() {
            self.report(
                at,
                format!("{path}: give `match` (a tool-name glob) or `method`"),
            );
            return None;
        }
        let max_concurrent = rule.max_concurrent.map(|raw| {
            let key = format!("{path}.max_concurrent");
            self.parse(Some(raw), &key, 1, |s| count(s, MAX_CONCURRENT_RANGE)) as u32
        });
        let rate = rule.rate.map(|raw| {
            let fallback = Rate {
                calls: 1,
                per: Duration::from_secs(1),
            };
            self.parse(Some(raw), &format!("{path}.rate"), fallback, Rate::parse)
        });
        let burst_at = rule.burst.as_ref().and_then(Position::of);
        let burst = rule.burst.map(|raw| {
            let key = format!("{path}.burst");
            self.parse(Some(raw), &key, 1, |s| count(s, BURST_RANGE)) as u32
        });
        if burst.is_some() && rate.is_none() {
            self.report(burst_at, format!("{path}.burst: needs a `rate`"));
        }
        if max_concurrent.is_none() && rate.is_none() {
            self.report(
                at,
                format!("{path}: give `max_concurrent` or `rate` (a rule that limits nothing)"),
            );
            return None;
        }
        let queue = self.parse(rule.queue, &format!("{path}.queue"), Duration::ZERO, |s| {
            units::duration_setting(s, Zero::Allowed).map(Option::unwrap_or_default)
        });
        let refuse_as = self.refuse_as(rule.refuse_as, &format!("{path}.refuse_as"));
        Some(CallRule {
            tool,
            method,
            max_concurrent,
            rate,
            burst,
            queue,
            refuse_as,
        })
    }

    pub(super) fn circuit(&mut self, raw: Spanned<RawCircuit>) -> CircuitConfig {
        let raw = raw.value;
        let d = CircuitConfig::default();
        let consecutive_failures = self.parse(
            raw.consecutive_failures,
            "circuit.consecutive_failures",
            d.consecutive_failures as usize,
            |s| count(s, CONSECUTIVE_FAILURES_RANGE),
        ) as u32;
        let open_for = self.parse(raw.open_for, "circuit.open_for", d.open_for, |s| {
            units::duration_setting(s, Zero::Rejected).map(Option::unwrap_or_default)
        });
        let max_open_at = raw.max_open_for.as_ref().and_then(Position::of);
        let max_open_for = self.parse(
            raw.max_open_for,
            "circuit.max_open_for",
            d.max_open_for.max(open_for),
            |s| units::duration_setting(s, Zero::Rejected).map(Option::unwrap_or_default),
        );
        if max_open_for < open_for {
            self.report(
                max_open_at,
                format!(
                    "circuit.max_open_for: {max_open_for:?} is less than circuit.open_for {open_for:?}"
                ),
            );
        }
        CircuitConfig {
            consecutive_failures,
            open_for,
            max_open_for,
            on: raw.on.map_or(d.on, |words| self.circuit_on(words)),
            refuse_as: self.refuse_as(raw.refuse_as, "circuit.refuse_as"),
        }
    }

    fn circuit_on(&mut self, words: Vec<Spanned<String>>) -> Vec<CircuitOn> {
        let mut on = Vec::new();
        for word in words {
            match CircuitOn::parse(&word.value) {
                Some(failure) if !on.contains(&failure) => on.push(failure),
                Some(_) => {}
                None => {
                    let expected: Vec<&str> = CircuitOn::ALL.iter().map(|c| c.as_str()).collect();
                    self.report(
                        Position::of(&word),
                        format!(
                            "circuit.on: unknown failure {}; expected some of: {}",
                            quoted(&word.value),
                            expected.join(", ")
                        ),
                    );
                }
            }
        }
        on
    }

    fn refuse_as(&mut self, raw: Option<Spanned<String>>, path: &str) -> Option<RefuseAs> {
        let raw = raw?;
        self.parse(Some(raw), path, None, |s| {
            RefuseAs::parse(s).map(Some).ok_or_else(|| {
                format!(
                    "unknown answer {}; expected one of: tool_error, jsonrpc_error, http_429",
                    quoted(s)
                )
            })
        })
    }

    fn glob(&mut self, raw: Option<Spanned<String>>, path: &str) -> Option<Glob> {
        let raw = raw?;
        if raw.value.trim().is_empty() {
            self.report(Position::of(&raw), format!("{path}: must not be empty"));
            return None;
        }
        Some(Glob::new(raw.value.trim()))
    }
}
