//! The soak's mix: which call the k-th call is, and what strata must count it as.
//!
//! One cycle holds every testbed scenario in both protocol eras (legacy-only scenarios in the
//! legacy era only) and both response modes, an agent that leaves mid-stream, and the plain
//! methods (`tools/list`, `ping`, `server/discover`). Call k is `cycle[k % len]`, so every
//! kind runs `calls / len` times, give or take one.
//!
//! Expected outcomes come from the scenario catalogue (`Scenario::expected_outcome`, the first
//! call's outcome). Four scenarios answer by how many calls of them their scope has seen
//! (`fails`): in a legacy session a worker runs its calls one at a time, so it knows exactly
//! which of its calls fail; stateless calls share one testbed-wide counter and race, so each
//! is expected by the status it got, and the failures are checked in total at the end.

use serde_json::{Value, json};
use strata::classify::Outcome;
use strata::testbed::{SCENARIOS, Scenario};

/// The protocol era of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Era {
    /// 2025-11-25, in a session.
    Legacy,
    /// 2026-07-28, stateless.
    Modern,
}

/// What a call does.
#[derive(Clone, Copy, Debug)]
pub enum Call {
    /// tools/call of a scenario, asking for a JSON or an SSE answer (`arguments.response_mode`;
    /// scenarios whose point is a shape ignore it).
    Tool {
        scenario: &'static Scenario,
        sse: bool,
    },
    /// tools/call of `sse_drip` with a long pause after the first event; the agent reads that
    /// event and leaves: `CLIENT_CANCELLED`.
    Leave,
    /// A method other than tools/call; always `SUCCESS`.
    Method(&'static str),
}

#[derive(Clone, Copy, Debug)]
pub struct Kind {
    pub era: Era,
    pub call: Call,
}

/// What strata must count a call as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Is(Outcome),
    /// A stateless call of a counting scenario: `TOOL_SUCCESS` on 200, else `HTTP_ERROR`.
    ByStatus,
}

/// The scenario `leave` drips: one event, then a pause no soak call waits out.
pub const LEAVE_TOOL: &str = "sse_drip";
const LEAVE_PAUSE_MS: u64 = 60_000;

/// Scenarios whose upstream body breaks on purpose (the agent may see a reset).
pub const BREAKING: [&str; 2] = ["json_reset", "sse_reset"];

/// The testbed's default `fail_first_n`.
const FAIL_FIRST_N: u64 = 1;

/// Whether the `nth` (1-based) call of `tool` in its scope fails, for the scenarios that count
/// their calls; `None` for every other scenario.
pub fn fails(tool: &str, nth: u64) -> Option<bool> {
    match tool {
        "http_503_then_200" => Some(nth % 2 == 1),
        "read_flaky" | "write_flaky" | "read_rate_limited" => Some(nth <= FAIL_FIRST_N),
        _ => None,
    }
}

/// The status a counting scenario fails with.
pub fn failure_status(tool: &str) -> u16 {
    if tool == "read_rate_limited" {
        429
    } else {
        503
    }
}

/// The cycle of call kinds.
pub fn cycle() -> Vec<Kind> {
    let mut kinds = Vec::new();
    for era in [Era::Legacy, Era::Modern] {
        for scenario in SCENARIOS {
            if era == Era::Modern && scenario.legacy_only {
                continue;
            }
            for sse in [false, true] {
                kinds.push(Kind {
                    era,
                    call: Call::Tool { scenario, sse },
                });
            }
        }
        kinds.push(Kind {
            era,
            call: Call::Leave,
        });
        for method in ["tools/list", "ping"] {
            kinds.push(Kind {
                era,
                call: Call::Method(method),
            });
        }
    }
    kinds.push(Kind {
        era: Era::Modern,
        call: Call::Method("server/discover"),
    });
    kinds
}

/// [`cycle`], or only its kinds whose tool or method `STRATA_SOAK_ONLY` (comma-separated)
/// names: to find which traffic a figure comes from.
pub fn cycle_from_env() -> Vec<Kind> {
    let Ok(only) = std::env::var("STRATA_SOAK_ONLY") else {
        return cycle();
    };
    let names: Vec<&str> = only.split(',').map(str::trim).collect();
    let kinds: Vec<Kind> = cycle()
        .into_iter()
        .filter(|k| names.contains(&k.tool()) || names.contains(&k.method()))
        .collect();
    assert!(!kinds.is_empty(), "STRATA_SOAK_ONLY={only} selects nothing");
    kinds
}

impl Kind {
    pub fn method(&self) -> &'static str {
        match self.call {
            Call::Tool { .. } | Call::Leave => "tools/call",
            Call::Method(m) => m,
        }
    }

    /// The `tool` label: the tool name for tools/call, `""` otherwise.
    pub fn tool(&self) -> &'static str {
        match self.call {
            Call::Tool { scenario, .. } => scenario.tool,
            Call::Leave => LEAVE_TOOL,
            Call::Method(_) => "",
        }
    }

    /// tools/call arguments: small values for the scenarios whose defaults are slow (a 1 s
    /// `slow`, a 0.5 s drip, a 1 MiB result), and the response mode.
    pub fn arguments(&self) -> Value {
        match self.call {
            Call::Tool { scenario, sse } => {
                let mode = if sse { "sse" } else { "json" };
                let mut args = match scenario.tool {
                    "slow" => json!({"ms": 5}),
                    "sse_drip" => json!({"count": 3, "interval_ms": 2}),
                    "large_result" => json!({"bytes": 150_000}),
                    _ => json!({}),
                };
                args["response_mode"] = json!(mode);
                args
            }
            Call::Leave => json!({"count": 1, "interval_ms": LEAVE_PAUSE_MS}),
            Call::Method(_) => Value::Null,
        }
    }

    /// What strata must count this call as, given (legacy era) how many calls of this tool its
    /// session has seen before it.
    pub fn expect(&self, seen_in_session: u64) -> Expect {
        match self.call {
            Call::Method(_) => Expect::Is(Outcome::Success),
            Call::Leave => Expect::Is(Outcome::ClientCancelled),
            Call::Tool { scenario, .. } => {
                match (fails(scenario.tool, seen_in_session + 1), self.era) {
                    (Some(true), Era::Legacy) => Expect::Is(Outcome::HttpError),
                    (Some(false), Era::Legacy) => Expect::Is(Outcome::ToolSuccess),
                    (Some(_), Era::Modern) => Expect::ByStatus,
                    (None, _) => Expect::Is(
                        Outcome::from_label(scenario.expected_outcome)
                            .unwrap_or_else(|| panic!("{}: bad label", scenario.tool)),
                    ),
                }
            }
        }
    }

    pub fn breaks(&self) -> bool {
        BREAKING.contains(&self.tool()) && matches!(self.call, Call::Tool { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cycle_covers_every_scenario_in_every_era_it_runs_in() {
        let kinds = cycle();
        for s in SCENARIOS {
            for era in [Era::Legacy, Era::Modern] {
                let n = kinds
                    .iter()
                    .filter(|k| k.era == era && k.tool() == s.tool)
                    .filter(|k| matches!(k.call, Call::Tool { .. }))
                    .count();
                let want = if era == Era::Modern && s.legacy_only {
                    0
                } else {
                    2
                };
                assert_eq!(n, want, "{} {era:?}", s.tool);
            }
        }
    }

    #[test]
    fn counting_scenarios_fail_as_the_testbed_does() {
        assert_eq!(fails("http_503_then_200", 1), Some(true));
        assert_eq!(fails("http_503_then_200", 2), Some(false));
        assert_eq!(fails("read_flaky", 1), Some(true));
        assert_eq!(fails("read_flaky", 2), Some(false));
        assert_eq!(fails("ok", 1), None);
    }
}
