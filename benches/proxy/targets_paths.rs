//! The paths part's targets: strata at or below nginx on every path (judged by the paired
//! rounds, [`crate::paired`]), and strata's work above the layer-4 floor (HAProxy in TCP mode)
//! at most half of nginx's.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::paired;
use crate::report::num;
use crate::targets::{Check, check};

/// strata's CPU per call above the floor, at most this share of nginx's above it.
const FLOOR_SHARE: f64 = 0.5;
/// Added p50 at 1 agent, at most the floor's plus this (µs).
const FLOOR_P50_SLACK_US: f64 = 5.0;

/// One row's figures: CPU per 10,000 calls, added p50 and p99 over direct.
struct Figures {
    cpu: f64,
    p50: f64,
    p99: f64,
}

/// The figures where strata's median is above nginx's, one line each: those the paired rounds
/// bear out ([`paired`]), and those they do not (the noise of one run).
#[derive(Default)]
struct Above {
    borne_out: Vec<String>,
    median_only: Vec<String>,
}

impl Figures {
    /// Where these figures (strata's, in `row`) are above nginx's, with the second strata
    /// process's figure beside where one ran.
    fn above(
        &self,
        row: &Value,
        name: &str,
        nginx: &Figures,
        again: Option<&Figures>,
        out: &mut Above,
    ) {
        let note = |a: Option<String>| a.map_or(String::new(), |a| format!(" (again {a})"));
        let cpu_again = note(again.map(|a| format!("x{:.2}", a.cpu / nginx.cpu)));
        let latency = |what: &str, s: f64, n: f64, a: Option<f64>| {
            let a = note(a.map(|a| format!("{a:.0}")));
            format!("{name} {what} {s:.0} vs {n:.0} us{a}")
        };
        let figures: [(bool, String, paired::Figure); 3] = [
            (
                self.cpu > nginx.cpu,
                format!("{name} cpu x{:.2}{cpu_again}", self.cpu / nginx.cpu),
                paired::cpu_per_call,
            ),
            (
                self.p50 > nginx.p50,
                latency("+p50", self.p50, nginx.p50, again.map(|a| a.p50)),
                paired::p50,
            ),
            (
                self.p99 > nginx.p99,
                latency("+p99", self.p99, nginx.p99, again.map(|a| a.p99)),
                paired::p99,
            ),
        ];
        for (_, line, figure) in figures.into_iter().filter(|(is_above, ..)| *is_above) {
            match paired::borne_out(row, Ordering::Greater, figure) {
                true => out.borne_out.push(line),
                false => out.median_only.push(line),
            }
        }
    }

    fn of(load: &Value, target: &str) -> Option<Figures> {
        let t = |k: &str| num(load, &format!("/targets/{target}/{k}"));
        let d = |k: &str| num(load, &format!("/targets/direct/{k}"));
        Some(Figures {
            cpu: t("cpu_s_per_10k")?,
            p50: t("p50_us")? - d("p50_us")?,
            p99: t("p99_us")? - d("p99_us")?,
        })
    }
}

/// Both targets; without the paths part in the run, each line says n/a.
pub(crate) fn paths(r: &Value, out: &mut Vec<Check>) {
    // Row names hold `/` (`tools/list 4m`): walked as a map, not by pointer.
    let none = Map::new();
    let load = r
        .pointer("/paths/load")
        .and_then(Value::as_object)
        .unwrap_or(&none);
    at_most_nginx(load, out);
    floor(load, out);
}

/// Every row where both ran: strata's CPU per call, added p50 and added p99 at most nginx's.
/// A figure is above when its median is and the paired rounds bear it out; a miss names the
/// row, and the second strata process's figure where one ran (`base`). Medians above that the
/// rounds do not bear out are listed, and do not miss.
fn at_most_nginx(load: &Map<String, Value>, out: &mut Vec<Check>) {
    let mut rows = 0;
    let mut above = Above::default();
    for (name, row) in load {
        let (Some(s), Some(n)) = (Figures::of(row, "strata"), Figures::of(row, "nginx")) else {
            continue;
        };
        rows += 1;
        let again = Figures::of(row, "base");
        let name = name.trim_start_matches("paths ");
        s.above(row, name, &n, again.as_ref(), &mut above);
    }
    let median_only = match above.median_only.is_empty() {
        true => String::new(),
        false => format!(
            "; above by the median only, not borne out by the paired rounds: {}",
            above.median_only.join("; ")
        ),
    };
    let figures = if rows == 0 {
        "n/a".to_owned()
    } else if above.borne_out.is_empty() {
        format!("{rows} rows, none above{median_only}")
    } else {
        format!(
            "{rows} rows; above: {}{median_only}",
            above.borne_out.join("; ")
        )
    };
    out.push(check(
        "paths: strata <= nginx in CPU, +p50, +p99",
        figures,
        (rows > 0).then_some(above.borne_out.is_empty()),
    ));
}

/// The fixed JSON and SSE paths at 1 and 64 agents: strata's CPU per call above HAProxy's at
/// most [`FLOOR_SHARE`] of nginx's above it (compared as differences, so a row where nginx is
/// at the floor asks strata to be there too), and at 1 agent its added p50 at most the
/// floor's plus [`FLOOR_P50_SLACK_US`].
fn floor(load: &Map<String, Value>, out: &mut Vec<Check>) {
    for kind in ["json", "sse"] {
        for agents in [1, 64] {
            let row = load.get(&format!("paths {kind} c={agents}"));
            let f = |t| row.and_then(|row| Figures::of(row, t));
            let what = format!("paths {kind} c={agents}: close to the layer-4 floor");
            let (Some(s), Some(n), Some(h)) = (f("strata"), f("nginx"), f("haproxy")) else {
                out.push(check(what, "n/a".into(), None));
                continue;
            };
            let (above, nginx_above) = (s.cpu - h.cpu, n.cpu - h.cpu);
            let cpu_met = above <= FLOOR_SHARE * nginx_above;
            let p50_met = agents > 1 || s.p50 <= h.p50 + FLOOR_P50_SLACK_US;
            out.push(check(
                what,
                format!(
                    "CPU above the floor strata {above:.3}, nginx {nginx_above:.3} s/10k \
                     (at most x{FLOOR_SHARE}); +p50 strata {:.1}, floor {:.1} us",
                    s.p50, h.p50
                ),
                Some(cpu_met && p50_met),
            ));
        }
    }
}
