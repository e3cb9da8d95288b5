//! The telemetry part (`--only telemetry`): what OpenTelemetry export costs a call, and that a
//! collector which stalls or is down costs the calls nothing and strata's memory a bound.
//!
//! Against the fixed upstream, JSON tools/call, interleaved round by round as every load:
//!
//! - `off`: strata as the other parts run it (no `telemetry` section);
//! - `r0.01`, `r1`: export on, `traceidratio` 0.01 and 1.0, to an answering [`Sink`] each;
//! - `stall` (1 agent only): export on at 1.0 to a sink that reads each request and never
//!   answers;
//! - `base` (with `--baseline`): the other binary, export off;
//! - `direct`, for the added latency.
//!
//! Then memory with the collector down: two fresh strata processes, `off` and `down` (export
//! on at 1.0 to a loopback port nothing listens on), `plan.telemetry_calls` calls each at 64
//! agents, one after the other; RSS before and after, and `strata_telemetry_dropped_total`
//! from the admin listener at the end.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use crate::Plan;
use crate::load::{self, TOOLS_CALL};
use crate::measure::{self, LoadSpec};
use crate::procs::{self, Proc, Target};
use crate::run::Part;
use crate::sink::{Mode, Sink};

/// Agents of the two load rows.
const AGENTS: [usize; 2] = [1, 64];
/// Agents of the memory runs.
const MEMORY_AGENTS: usize = 64;
/// A SERVER span and one CLIENT span per call (the fixed upstream answers every call at the
/// first attempt).
const SPANS_PER_CALL: u64 = 2;
/// How long to wait, after the memory run, for the last batch to be given up on: the span
/// queue's schedule delay (5 s) and some.
const DROP_WAIT: Duration = Duration::from_secs(7);

pub(crate) fn run(part: Part<'_>) -> anyhow::Result<Value> {
    let (rt, plan, scratch, ticks_per_s) = (part.rt, part.plan, part.scratch, part.ticks_per_s);
    let (up_proc, up) = procs::upstream(false)?;
    let up_url = format!("http://{up}");
    let dir = scratch.path();
    let mut out = Map::new();

    // The load rows: one answering sink per traced process (so each one's counts are its
    // own), a stalling sink for the stall row.
    {
        let sinks = [
            ("r0.01", Sink::start(Mode::Answer)?),
            ("r1", Sink::start(Mode::Answer)?),
            ("stall", Sink::start(Mode::Stall)?),
        ];
        let endpoint = |i: usize| sinks[i].1.endpoint();
        let mut procs: Vec<Proc> = Vec::new();
        let mut start = |name: &'static str, bin: &std::path::Path, extra: String| {
            let (p, t) = procs::strata(
                name,
                bin,
                &up_url,
                dir,
                &format!("telemetry-{name}"),
                &extra,
            )
            .with_context(|| format!("telemetry row {name}"))?;
            procs.push(p);
            anyhow::Ok(t)
        };
        let base = match &plan.baseline {
            Some(bin) => Some(start("base", bin, String::new())?),
            None => None,
        };
        let off = start("off", &plan.strata, String::new())?;
        let low = start(
            "r0.01",
            &plan.strata,
            procs::telemetry_yaml(&endpoint(0), 0.01),
        )?;
        let all = start("r1", &plan.strata, procs::telemetry_yaml(&endpoint(1), 1.0))?;
        let stall = start(
            "stall",
            &plan.strata,
            procs::telemetry_yaml(&endpoint(2), 1.0),
        )?;
        let direct = Target {
            name: "direct",
            addr: up,
            pids: Vec::new(),
            admin: None,
        };
        std::thread::sleep(Duration::from_millis(500));
        let mut loads = Map::new();
        for agents in AGENTS {
            let mut targets = vec![direct.clone()];
            targets.extend(base.clone());
            targets.extend([off.clone(), low.clone(), all.clone()]);
            if agents == 1 {
                targets.push(stall.clone());
            }
            let spec = LoadSpec::fixed_json(agents);
            let figures = measure::load(rt, plan, &targets, &spec, ticks_per_s)?;
            loads.insert(spec.name(), figures);
        }
        out.insert("load".into(), Value::Object(loads));
        // What each process counted (its admin listener, while it runs), then what its sink
        // read, once it has exited: a traced strata flushes its last batch as it exits.
        let counted: Vec<(&'static str, Option<f64>, Option<f64>)> = base
            .iter()
            .chain([&off, &low, &all, &stall])
            .map(|t| {
                let (calls, dropped) = counters(rt, t);
                (t.name, calls, dropped)
            })
            .collect();
        drop(procs);
        let mut exports = Map::new();
        for (name, calls, dropped) in counted {
            let figures = sinks
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, s)| s.figures());
            let bytes = figures
                .as_ref()
                .and_then(|f| f.pointer("/traces/bytes")?.as_f64());
            exports.insert(
                name.into(),
                json!({
                    "calls": calls,
                    "dropped_spans": dropped,
                    "sink": figures,
                    "trace_bytes_per_call": bytes.zip(calls).map(|(b, c)| b / c.max(1.0)),
                }),
            );
        }
        let line: Vec<String> = exports
            .iter()
            .map(|(name, e)| {
                let n = |k: &str| e.pointer(k).and_then(Value::as_f64).unwrap_or(0.0);
                format!(
                    "{name} {:.0} calls, {:.0} trace requests, {:.0} dropped",
                    n("/calls"),
                    n("/sink/traces/requests"),
                    n("/dropped_spans")
                )
            })
            .collect();
        eprintln!("telemetry exports: {}", line.join("; "));
        out.insert("exports".into(), Value::Object(exports));
        drop(sinks);
    }

    // Memory with the collector down.
    let closed = format!("http://127.0.0.1:{}", procs::free_port()?);
    let (off_proc, off) =
        procs::strata("off", &plan.strata, &up_url, dir, "telemetry-mem-off", "")?;
    let (down_proc, down) = procs::strata(
        "down",
        &plan.strata,
        &up_url,
        dir,
        "telemetry-mem-down",
        &procs::telemetry_yaml(&closed, 1.0),
    )?;
    std::thread::sleep(Duration::from_millis(500));
    let mut memory = Map::new();
    for t in [&off, &down] {
        memory.insert(t.name.into(), memory_run(rt, plan, t)?);
    }
    drop((down_proc, off_proc));
    out.insert(
        "memory".into(),
        json!({
            "calls": plan.telemetry_calls,
            "agents": MEMORY_AGENTS,
            "endpoint": closed,
            "targets": memory,
        }),
    );
    drop(up_proc);
    Ok(Value::Object(out))
}

/// `plan.telemetry_calls` calls through `t` at [`MEMORY_AGENTS`], bounded in time too; RSS
/// before and after, and what strata counted.
fn memory_run(rt: &Runtime, plan: &Plan, t: &Target) -> anyhow::Result<Value> {
    let before = procs::rss_kib(&t.pids);
    // At least 1,000 calls a second, on the slowest machine this runs on.
    let limit = Duration::from_secs(plan.telemetry_calls / 1000 + 10);
    let round = rt.block_on(load::round(
        t,
        "/json",
        &Bytes::from_static(TOOLS_CALL),
        MEMORY_AGENTS,
        limit,
        plan.telemetry_calls,
        false,
    ))?;
    std::thread::sleep(Duration::from_secs(1));
    let after = procs::rss_kib(&t.pids);
    // Every span of a call ends as sent or as dropped; with nothing listening, dropped. The
    // last batch waits for the queue's schedule delay first: wait for it, bounded.
    let (mut calls, mut dropped) = counters(rt, t);
    if t.name != "off" {
        let until = tokio::time::Instant::now() + DROP_WAIT;
        while tokio::time::Instant::now() < until
            && dropped
                .zip(calls)
                .is_none_or(|(d, c)| d < c * SPANS_PER_CALL as f64)
        {
            std::thread::sleep(Duration::from_millis(250));
            (calls, dropped) = counters(rt, t);
        }
    }
    let after_drops = procs::rss_kib(&t.pids);
    let mib = |kib: u64| kib as f64 / 1024.0;
    eprintln!(
        "telemetry memory via {}: {} calls in {:.1} s, RSS {:.1} -> {:.1} MiB, dropped {}",
        t.name,
        round.hist.count(),
        round.elapsed.as_secs_f64(),
        mib(before),
        mib(after),
        dropped.map_or("-".into(), |d| format!("{d:.0}")),
    );
    Ok(json!({
        "calls": round.hist.count(),
        "errors": round.errors,
        "secs": round.elapsed.as_secs_f64(),
        "counted_calls": calls,
        "spans": calls.map(|c| c * SPANS_PER_CALL as f64),
        "dropped_spans": dropped,
        "before_mib": mib(before),
        "after_mib": mib(after),
        "after_drops_mib": mib(after_drops),
        "max_mib": mib(round.rss_max_kib),
        "growth_mib": mib(after) - mib(before),
    }))
}

/// strata's own counts, from its admin listener: calls (`strata_calls_total`, every series)
/// and spans lost (`strata_telemetry_dropped_total{signal="traces"}`; 0 when never counted).
fn counters(rt: &Runtime, t: &Target) -> (Option<f64>, Option<f64>) {
    let Some(admin) = t.admin else {
        return (None, None);
    };
    match rt.block_on(load::get(admin, "/metrics")) {
        Ok(text) => (
            Some(metric_sum(&text, "strata_calls_total", "")),
            Some(metric_sum(
                &text,
                "strata_telemetry_dropped_total",
                "signal=\"traces\"",
            )),
        ),
        Err(err) => {
            eprintln!("{}: admin /metrics: {err:#}", t.name);
            (None, None)
        }
    }
}

/// The sum of a family's samples in Prometheus text, over the series whose labels contain
/// `label`.
pub(crate) fn metric_sum(text: &str, family: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            (name == family && labels.contains(label))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}
