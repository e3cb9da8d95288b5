//! The paired-rounds rule. Both generators interleave their rounds over the targets, so round
//! r of strata and round r of nginx ran back to back, on the same machine state, and are
//! compared as a pair. A difference of the medians is a direction only when the pairs bear it
//! out — strata on the medians' side in [`CONSISTENT`] of them — so a single loud round cannot
//! decide it.

use std::cmp::Ordering;

use serde_json::Value;

/// The share of paired rounds that must put strata on the medians' side: 4 of 5.
const CONSISTENT: f64 = 0.8;

/// A figure read from one round's record (`/targets/{target}/rounds/{r}`).
pub(crate) type Figure = fn(&Value) -> Option<f64>;

/// CPU seconds per call in one round.
pub(crate) fn cpu_per_call(round: &Value) -> Option<f64> {
    Some(round["cpu_s"].as_f64()? / round["calls"].as_f64()?)
}

pub(crate) fn p50(round: &Value) -> Option<f64> {
    round["p50_us"].as_f64()
}

pub(crate) fn p99(round: &Value) -> Option<f64> {
    round["p99_us"].as_f64()
}

/// Whether the rounds of a measured load (`s`) put strata on `side` of nginx — below (-1) or
/// above (1) — in at least [`CONSISTENT`] of the pairs. Added latency compares as the raw
/// figure: both targets' rounds subtract the same direct round.
pub(crate) fn borne_out(s: &Value, side: Ordering, figure: Figure) -> bool {
    let rounds = |t: &str| -> Vec<f64> {
        s.pointer(&format!("/targets/{t}/rounds"))
            .and_then(Value::as_array)
            .map(|rs| rs.iter().filter_map(figure).collect())
            .unwrap_or_default()
    };
    let (strata, nginx) = (rounds("strata"), rounds("nginx"));
    let pairs = strata.len().min(nginx.len());
    let on_side = strata
        .iter()
        .zip(&nginx)
        .filter(|(a, b)| side != Ordering::Equal && a.partial_cmp(b) == Some(side))
        .count();
    pairs > 0 && on_side as f64 >= CONSISTENT * pairs as f64
}
