//! The limits part (`--only limits`): what a `limits.calls` rule, and the circuit, cost a call
//! that they let through.
//!
//! Against the fixed upstream, JSON tools/call, interleaved round by round as every load:
//!
//! - `none`: strata as the other parts run it (no `limits.calls`, no `circuit`);
//! - `limits`: one rule on the benchmarked tool, too generous ever to refuse ([`RULE`]): each
//!   call takes a slot and a token;
//! - `circuit`: the same rule and a `circuit` section ([`CIRCUIT`]), so each call also goes
//!   through the circuit (asked before the attempt, told the outcome after);
//! - `base` (with `--baseline`): the other binary with the `limits` row's config;
//! - `direct`, for the added latency.
//!
//! That the rule is on the call's path is checked, not assumed: before the load, a `probe`
//! strata with the same `match` and a bucket of one token must pass the first call and refuse
//! the second (`x-strata-error: downstream:rate_limited`); after the load, the measured
//! processes must have refused nothing (`strata_limit_hits_total` 0).

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use crate::Plan;
use crate::instructions::{self, Row};
use crate::load::{self, TOOLS_CALL};
use crate::measure;
use crate::procs::{self, Target};
use crate::run::Part;
use crate::telemetry::metric_sum;

/// The tool [`TOOLS_CALL`] calls.
const TOOL: &str = "ok";
/// The rule of the `limits` and `circuit` rows: a slot and a token per call, never short of
/// either (the bucket refills at a million a second and holds as many).
pub(crate) const RULE: &str =
    "calls: [ { match: \"ok\", max_concurrent: 100000, rate: 1000000/s, burst: 1000000 } ]";
/// The probe's rule: one token, refilled once an hour.
const PROBE_RULE: &str = "calls: [ { match: \"ok\", rate: 1/h, burst: 1 } ]";
/// The `circuit` row's section: every failure word counts (the default); the fixed upstream
/// never fails, so it stays closed.
pub(crate) const CIRCUIT: &str =
    "circuit: { consecutive_failures: 5, open_for: 10s, max_open_for: 2m }\n";

pub(crate) fn run(part: Part<'_>) -> anyhow::Result<Value> {
    let (rt, plan, scratch, ticks_per_s) = (part.rt, part.plan, part.scratch, part.ticks_per_s);
    let (_up_proc, up) = procs::upstream(false)?;
    let up_url = format!("http://{up}");
    let dir = scratch.path();
    let limited = procs::limits_yaml(RULE);
    let mut rows = procs::Rows::new("limits", up_url.clone(), dir);
    let probe = rows.start("probe", &plan.strata, &procs::limits_yaml(PROBE_RULE))?;
    let probed = probe_rule(rt, &probe).context("the probe strata")?;
    eprintln!(
        "limits probe: first call {}, second {}",
        probed["first"], probed["second"]
    );
    let base = match &plan.baseline {
        Some(bin) => Some(rows.start("base", bin, &limited)?),
        None => None,
    };
    let none = rows.start("none", &plan.strata, "")?;
    // The same as `none`: how far two identical processes differ in this run.
    let again = rows.start("again", &plan.strata, "")?;
    let limits = rows.start("limits", &plan.strata, &limited)?;
    let circuit = rows.start("circuit", &plan.strata, &format!("{limited}{CIRCUIT}"))?;
    let measured = [&none, &again, &limits, &circuit];
    let loads = measure::part_loads(rt, plan, up, base.as_ref(), &measured, &[], ticks_per_s)?;
    let mut hits = Map::new();
    for t in base.iter().chain([&limits, &circuit]) {
        let text = rt
            .block_on(load::get(t.admin.context("no admin address")?, "/metrics"))
            .with_context(|| format!("{}: admin /metrics", t.name))?;
        hits.insert(
            t.name.into(),
            json!({
                "limit_hits": metric_sum(&text, "strata_limit_hits_total", ""),
                "calls": metric_sum(&text, "strata_calls_total", ""),
            }),
        );
    }
    eprintln!("limits: refusals and calls counted by the measured processes: {hits:?}");
    drop(rows);
    let counted = count_instructions(rt, plan, &up_url, dir, &limited)?;
    Ok(json!({
        "tool": TOOL,
        "rule": RULE,
        "circuit": CIRCUIT.trim_end(),
        "probe": probed,
        "counted": hits,
        "load": loads,
        "instructions": counted,
    }))
}

/// The rows' instructions per call (none, again, limits, circuit; base, the other binary with
/// the limits row's config, with `--baseline`) at 1 and 64 agents, counted
/// by Cachegrind where valgrind is installed: the cost a rule and the circuit add, far below
/// what CPU time per call resolves on a shared machine.
fn count_instructions(
    rt: &Runtime,
    plan: &Plan,
    upstream: &str,
    dir: &std::path::Path,
    limited: &str,
) -> anyhow::Result<Value> {
    let circuit = format!("{limited}{CIRCUIT}");
    let bin = &plan.strata;
    let row = |name, bin, extra| Row {
        name,
        bin,
        extra,
        keyed: false,
    };
    let mut rows = vec![
        row("none", bin, ""),
        row("again", bin, ""),
        row("limits", bin, limited),
        row("circuit", bin, &circuit),
    ];
    if let Some(base) = &plan.baseline {
        rows.push(row("base", base, limited));
    }
    instructions::count(rt, plan, "limits", upstream, dir, &rows)
}

/// Two calls through the probe: what each was answered (`passed`, or the `x-strata-error`
/// strata answered with), and whether the rule is on the call's path (the first passed, the
/// second was refused for its rate).
fn probe_rule(rt: &Runtime, t: &Target) -> anyhow::Result<Value> {
    let answers = rt.block_on(async {
        let mut conn = load::connect(t.addr).await?;
        let mut answers = Vec::new();
        for _ in 0..2 {
            let req = load::request(t.addr, "/json", &Bytes::from_static(TOOLS_CALL));
            conn.ready().await?;
            let resp =
                tokio::time::timeout(Duration::from_secs(10), conn.send_request(req)).await??;
            let refused = resp
                .headers()
                .get("x-strata-error")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let ok = resp.status().is_success();
            let body = resp.into_body().collect().await?.to_bytes();
            let is_error = memchr::memmem::find(&body, br#""isError":true"#).is_some();
            answers.push(match refused {
                Some(e) => e,
                None if ok && !is_error => "passed".to_owned(),
                None => format!("failed ({})", String::from_utf8_lossy(&body)),
            });
        }
        anyhow::Ok(answers)
    })?;
    let first = answers.first().cloned().unwrap_or_default();
    let second = answers.get(1).cloned().unwrap_or_default();
    Ok(json!({
        "first": first,
        "second": second,
        "matched": first == "passed" && second == "downstream:rate_limited",
    }))
}
