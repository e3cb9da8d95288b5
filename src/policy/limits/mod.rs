//! Call limits and the upstream's circuit: strata protects the MCP server on the agent's
//! behalf. Each call is matched against `limits.calls` (per-rule concurrency and rate) and
//! passes the circuit; a refused call is answered at once, without reaching the upstream, in
//! a form its agent's model reads (`refusal.rs`). Design: `docs/limits.md`.

pub mod bucket;
pub mod circuit;
pub mod concurrency;
pub mod refusal;
pub mod rules;

use std::sync::Arc;

use tokio::time::Instant;

use crate::classify::Outcome;
use crate::config::{CallRule, CircuitConfig, CircuitOn, RefuseAs};
use crate::metrics::Metrics;
use crate::policy::Failure;

use circuit::{Circuit, Pass};
use concurrency::Slot;
use refusal::{Reason, Refusal};
use rules::{Limiter, Rule};

/// The limits in force: built once per config; `None` in the proxy when nothing is set.
#[derive(Debug)]
pub struct CallLimits {
    rules: Vec<Rule>,
    /// The circuit and the settings it was built from.
    circuit: Option<(Arc<Circuit>, CircuitConfig)>,
}

/// What a call that passed holds until its final answer: its slot, its rule's limiter (a
/// retry takes a token from it), and its pass through the circuit, which its result reports.
#[derive(Debug)]
pub struct Admission {
    limiter: Option<Arc<Limiter>>,
    _slot: Option<Slot>,
    circuit: Option<Ticket>,
}

/// A call's pass through the circuit, and whether its result was reported yet.
#[derive(Debug)]
struct Ticket {
    circuit: Arc<Circuit>,
    pass: Pass,
    reported: bool,
    /// A 2xx answer is judged at the call's outcome (`stream_incomplete` is in `on`).
    judge_body: bool,
}

impl CallLimits {
    /// The limits `rules` and `circuit` set; `None` when they set none (the data path then
    /// makes one `Option` check per call). A reload passes the limits in force: a rule left
    /// unchanged keeps its limiter (its calls in flight and its tokens), and the circuit its
    /// state when its settings are unchanged; a changed rule starts anew, while its calls in
    /// flight keep the slots they hold in the old limiter.
    pub fn new(
        rules: &[CallRule],
        circuit: Option<&CircuitConfig>,
        previous: Option<&CallLimits>,
        metrics: &Metrics,
    ) -> Option<Arc<CallLimits>> {
        if rules.is_empty() && circuit.is_none() {
            return None;
        }
        let now = Instant::now();
        let circuit = circuit.map(|config| {
            let kept = previous
                .and_then(|p| p.circuit.as_ref())
                .filter(|(_, old)| old == config)
                .map(|(circuit, _)| circuit.clone());
            let made = || Arc::new(Circuit::new(config, metrics.circuit().clone()));
            (kept.unwrap_or_else(made), config.clone())
        });
        Some(Arc::new(CallLimits {
            rules: rules
                .iter()
                .map(|rule| Rule::new(rule, previous.map_or(&[], |p| &p.rules), now))
                .collect(),
            circuit,
        }))
    }

    /// The limiter of the first rule that matches a call of `method` (`tool`: its tool, for
    /// tools/call), if any.
    pub fn rule(&self, method: &str, tool: &str) -> Option<Arc<Limiter>> {
        let rule = self.rules.iter().find(|r| r.matches(method, tool));
        rule.map(|rule| rule.limiter().clone())
    }

    /// Lets a call under `limiter` (its [`rule`](Self::rule)) through, waiting within the
    /// rule's `queue`, or refuses it with nothing held. `tool_call`: it is a tools/call.
    pub async fn admit(
        &self,
        limiter: Option<Arc<Limiter>>,
        tool_call: bool,
    ) -> Result<Admission, Refusal> {
        // One read of the clock for the call, unless the limiter made it wait.
        let mut now = Instant::now();
        let slot = match &limiter {
            Some(limiter) => limiter.admit(tool_call, &mut now).await?,
            None => None,
        };
        let circuit = match &self.circuit {
            Some((circuit, config)) => match circuit.admit(now) {
                Ok(pass) => Some(Ticket::new(circuit.clone(), pass)),
                Err(retry_after) => {
                    if let Some(limiter) = &limiter {
                        limiter.give_back();
                    }
                    let form = RefuseAs::for_call(config.refuse_as, tool_call);
                    let reason = Reason::Circuit;
                    return Err(Refusal {
                        reason,
                        retry_after,
                        form,
                    });
                }
            },
            None => None,
        };
        Ok(Admission {
            limiter,
            _slot: slot,
            circuit,
        })
    }
}

impl Failure {
    /// The failure as the circuit names it (strata's own 504 after no head in time is
    /// `http_504`); `None` for a 429, which the circuit does not count.
    pub fn circuit(self) -> Option<CircuitOn> {
        match self {
            Failure::ConnectError => Some(CircuitOn::ConnectError),
            Failure::UpstreamReset => Some(CircuitOn::UpstreamReset),
            Failure::HeadTimeout => Some(CircuitOn::Http504),
            Failure::Status(status) => CircuitOn::of_status(status.as_u16()),
        }
    }
}

impl Admission {
    /// Whether strata may re-send the call: the circuit is closed and the rule has a token
    /// (taken now). The slot stays the call's.
    pub fn may_retry(&self) -> bool {
        let closed = self.circuit.as_ref().is_none_or(|t| t.circuit.closed());
        closed && self.limiter.as_ref().is_none_or(|l| l.retry_token())
    }

    /// An attempt ended: with `failure` (as the circuit names it) or with the upstream's
    /// `status` (none when it failed before a head). A failure `on` names counts; any other
    /// answer is a success — for a 2xx when `stream_incomplete` counts, judged at the
    /// outcome; a failure without a head and not named says nothing.
    pub fn attempt_ended(&mut self, failure: Option<CircuitOn>, status: Option<u16>) {
        let Some(ticket) = &mut self.circuit else {
            return;
        };
        match (failure.filter(|f| ticket.circuit.counts(*f)), status) {
            (Some(_), _) => ticket.circuit.failed(ticket.pass, Instant::now()),
            (None, Some(status)) if (200..300).contains(&status) && ticket.judge_body => return,
            (None, Some(_)) => ticket.circuit.succeeded(ticket.pass),
            (None, None) => return,
        }
        ticket.reported = true;
    }

    /// The call's outcome, for a 2xx answer still to judge.
    pub fn finished(&mut self, outcome: Outcome) {
        let Some(ticket) = &mut self.circuit else {
            return;
        };
        if ticket.reported {
            return;
        }
        match outcome {
            Outcome::StreamIncomplete => ticket.circuit.failed(ticket.pass, Instant::now()),
            // The agent left: no word on the upstream.
            Outcome::ClientCancelled => return,
            _ => ticket.circuit.succeeded(ticket.pass),
        }
        ticket.reported = true;
    }
}

impl Ticket {
    fn new(circuit: Arc<Circuit>, pass: Pass) -> Ticket {
        Ticket {
            judge_body: circuit.counts(CircuitOn::StreamIncomplete),
            circuit,
            pass,
            reported: false,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.reported {
            self.circuit.released(self.pass);
        }
    }
}

#[cfg(test)]
mod tests;
