//! Failure accrual for the upstream: a circuit that opens after `consecutive_failures`
//! failures named in `circuit.on`, stays open for `open_for` (doubled on each re-trip, up to
//! `max_open_for`), then lets one probe call through (half-open). The probe's success closes
//! it; its failure opens it again for the next, longer, period.
//!
//! ```text
//!   closed ──N consecutive failures──► open ──open period over, a call comes──► half-open
//!     ▲                                  ▲                                          │
//!     └────────── the probe succeeds ────┼──────────────────────────────────────────┤
//!                                        └────────── the probe fails ───────────────┘
//! ```
//!
//! A call through a closed circuit takes no lock: an atomic mirrors whether the circuit is
//! closed, and with failures counted, so admitting a call and reporting its success are
//! loads. The lock is taken for a failure, a success after failures, and the probe.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{CircuitConfig, CircuitOn, MAX_DURATION};
use crate::metrics::{CircuitHandles, CircuitState};

/// The upstream's circuit, shared by every worker.
#[derive(Debug)]
pub struct Circuit {
    consecutive_failures: u32,
    open_for: Duration,
    max_open_for: Duration,
    on: Vec<CircuitOn>,
    phase: Mutex<Phase>,
    /// The phase as calls through a closed circuit read it: [`CLEAN`], [`FAILING`] or
    /// [`NOT_CLOSED`], written with the phase, under its lock.
    mirror: AtomicU8,
    handles: CircuitHandles,
}

/// Closed, no failure counted.
const CLEAN: u8 = 0;
/// Closed, failures counted.
const FAILING: u8 = 1;
/// Open or half-open.
const NOT_CLOSED: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Closed {
        failures: u32,
    },
    /// `trips`: times it opened since it was last closed.
    Open {
        until: Instant,
        trips: u32,
    },
    HalfOpen {
        probing: bool,
        trips: u32,
    },
}

/// How a call passes the circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The circuit is closed.
    Call,
    /// The one call a half-open circuit lets through: its result decides.
    Probe,
}

/// How long a refused call waits while a probe is out.
const PROBE_WAIT: Duration = Duration::from_secs(1);

impl Circuit {
    pub fn new(config: &CircuitConfig, handles: CircuitHandles) -> Circuit {
        handles.starts_closed();
        Circuit {
            consecutive_failures: config.consecutive_failures.max(1),
            open_for: config.open_for,
            max_open_for: config.max_open_for.max(config.open_for),
            on: config.on.clone(),
            phase: Mutex::new(Phase::Closed { failures: 0 }),
            mirror: AtomicU8::new(CLEAN),
            handles,
        }
    }

    /// Whether `failure` counts toward opening.
    pub fn counts(&self, failure: CircuitOn) -> bool {
        self.on.contains(&failure)
    }

    /// A call passes, or is refused with the time until the circuit may pass one.
    pub fn admit(&self, now: Instant) -> Result<Pass, Duration> {
        if self.closed() {
            return Ok(Pass::Call);
        }
        let mut phase = self.lock();
        match *phase {
            Phase::Closed { .. } => Ok(Pass::Call),
            Phase::Open { until, .. } if now < until => Err(until - now),
            Phase::Open { trips, .. }
            | Phase::HalfOpen {
                probing: false,
                trips,
            } => {
                self.move_to(
                    &mut phase,
                    Phase::HalfOpen {
                        probing: true,
                        trips,
                    },
                );
                Ok(Pass::Probe)
            }
            Phase::HalfOpen { probing: true, .. } => Err(PROBE_WAIT),
        }
    }

    /// Whether a retry may go to the upstream: only while the circuit is closed.
    pub fn closed(&self) -> bool {
        self.mirror.load(Ordering::Acquire) != NOT_CLOSED
    }

    /// A call (or one of its attempts) failed in a way `on` names.
    pub fn failed(&self, pass: Pass, now: Instant) {
        let mut phase = self.lock();
        match (*phase, pass) {
            (Phase::Closed { failures }, Pass::Call) => {
                let failures = failures + 1;
                let next = match failures >= self.consecutive_failures {
                    true => self.open(now, 1),
                    false => Phase::Closed { failures },
                };
                self.move_to(&mut phase, next);
            }
            (Phase::HalfOpen { trips, .. }, Pass::Probe) => {
                let next = self.open(now, trips + 1);
                self.move_to(&mut phase, next);
            }
            // A call let through before the circuit opened: the trip already counted.
            _ => {}
        }
    }

    /// A call was answered by the upstream without a failure `on` names.
    pub fn succeeded(&self, pass: Pass) {
        // A call's success matters only to a count of failures, and a probe's always.
        if pass == Pass::Call && self.mirror.load(Ordering::Acquire) != FAILING {
            return;
        }
        let mut phase = self.lock();
        match (*phase, pass) {
            (Phase::Closed { failures }, _) if failures > 0 => {
                self.move_to(&mut phase, Phase::Closed { failures: 0 });
            }
            (Phase::HalfOpen { .. }, Pass::Probe) => {
                self.move_to(&mut phase, Phase::Closed { failures: 0 });
            }
            _ => {}
        }
    }

    /// The probe ended with no word on the upstream (the agent left): the next call probes.
    pub fn released(&self, pass: Pass) {
        if pass == Pass::Call {
            return;
        }
        let mut phase = self.lock();
        if let Phase::HalfOpen { trips, .. } = *phase {
            let next = Phase::HalfOpen {
                probing: false,
                trips,
            };
            self.move_to(&mut phase, next);
        }
    }

    /// Open for the `trips`-th time: `open_for` doubled per earlier trip, capped.
    fn open(&self, now: Instant, trips: u32) -> Phase {
        let doubled = self
            .open_for
            .checked_mul(1u32 << trips.saturating_sub(1).min(20))
            .unwrap_or(self.max_open_for);
        // Validation caps both at a year; a config built in code may not.
        let open = doubled.min(self.max_open_for).min(MAX_DURATION);
        Phase::Open {
            until: now.checked_add(open).unwrap_or(now),
            trips,
        }
    }

    fn move_to(&self, phase: &mut Phase, next: Phase) {
        let state = |p: &Phase| match p {
            Phase::Closed { .. } => CircuitState::Closed,
            Phase::Open { .. } => CircuitState::Open,
            Phase::HalfOpen { .. } => CircuitState::HalfOpen,
        };
        if state(phase) != state(&next) {
            self.handles.moved(state(&next));
            tracing::info!(to = state(&next).as_str(), "upstream circuit");
        }
        let mirror = match next {
            Phase::Closed { failures: 0 } => CLEAN,
            Phase::Closed { .. } => FAILING,
            Phase::Open { .. } | Phase::HalfOpen { .. } => NOT_CLOSED,
        };
        *phase = next;
        self.mirror.store(mirror, Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn circuit(metrics: &Metrics) -> Circuit {
        let config = CircuitConfig {
            consecutive_failures: 3,
            open_for: Duration::from_secs(10),
            max_open_for: Duration::from_secs(25),
            on: CircuitOn::ALL.to_vec(),
            refuse_as: None,
        };
        Circuit::new(&config, metrics.circuit().clone())
    }

    fn trip(c: &Circuit) {
        for _ in 0..3 {
            assert_eq!(c.admit(Instant::now()), Ok(Pass::Call));
            c.failed(Pass::Call, Instant::now());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn consecutive_failures_open_it_and_a_success_resets_the_count() {
        let metrics = Metrics::new(8, 8).unwrap();
        let c = circuit(&metrics);
        c.failed(Pass::Call, Instant::now());
        c.failed(Pass::Call, Instant::now());
        c.succeeded(Pass::Call);
        c.failed(Pass::Call, Instant::now());
        c.failed(Pass::Call, Instant::now());
        assert!(c.closed(), "two in a row since the success");
        c.failed(Pass::Call, Instant::now());
        assert_eq!(c.admit(Instant::now()), Err(Duration::from_secs(10)));
        assert!(!c.closed());
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_open_period_one_probe_passes_and_its_success_closes_it() {
        let metrics = Metrics::new(8, 8).unwrap();
        let c = circuit(&metrics);
        trip(&c);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(c.admit(Instant::now()), Ok(Pass::Probe));
        assert_eq!(c.admit(Instant::now()), Err(PROBE_WAIT));
        c.succeeded(Pass::Probe);
        assert_eq!(c.admit(Instant::now()), Ok(Pass::Call));
        let rendered = metrics.render();
        assert!(rendered.contains("strata_circuit_state{scope=\"upstream\"} 0"));
        for to in ["open", "half_open", "closed"] {
            let line =
                format!("strata_circuit_transitions_total{{scope=\"upstream\",to=\"{to}\"}} 1");
            assert!(rendered.contains(&line), "{line} in {rendered}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_reopens_it_for_twice_as_long_up_to_the_cap() {
        let metrics = Metrics::new(8, 8).unwrap();
        let c = circuit(&metrics);
        trip(&c);
        let mut waits = Vec::new();
        for _ in 0..3 {
            tokio::time::advance(Duration::from_secs(30)).await;
            assert_eq!(c.admit(Instant::now()), Ok(Pass::Probe));
            c.failed(Pass::Probe, Instant::now());
            waits.push(c.admit(Instant::now()).unwrap_err());
        }
        let secs = |s| Duration::from_secs(s);
        assert_eq!(waits, [secs(20), secs(25), secs(25)]);
        assert!(
            metrics
                .render()
                .contains("strata_circuit_state{scope=\"upstream\"} 1")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_the_agent_left_lets_the_next_call_probe() {
        let metrics = Metrics::new(8, 8).unwrap();
        let c = circuit(&metrics);
        trip(&c);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(c.admit(Instant::now()), Ok(Pass::Probe));
        c.released(Pass::Probe);
        assert_eq!(c.admit(Instant::now()), Ok(Pass::Probe));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_of_calls_let_through_before_it_opened_do_not_extend_it() {
        let metrics = Metrics::new(8, 8).unwrap();
        let c = circuit(&metrics);
        trip(&c);
        c.failed(Pass::Call, Instant::now());
        assert_eq!(c.admit(Instant::now()), Err(Duration::from_secs(10)));
    }
}
