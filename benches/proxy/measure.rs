//! The measurements, each interleaved over the targets (direct, nginx, strata): the order of
//! the targets rotates every round, so a slow spell of the shared machine lands on all of
//! them. Each returns its figures as JSON, the form the report and the saved run share.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use crate::Plan;
use crate::load;
use crate::procs::{self, Target};
use crate::wire::Wire;

/// One load scenario: which upstream, which response shape, how many agents.
pub(crate) struct LoadSpec {
    pub(crate) upstream: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) agents: usize,
    pub(crate) path: &'static str,
    pub(crate) body: Bytes,
    /// Targets whose calls each carry a fresh `Idempotency-Key` (the keys part); none
    /// elsewhere.
    pub(crate) keyed: &'static [&'static str],
}

impl LoadSpec {
    /// The fixed upstream's JSON tools/call at `agents`, no call keyed: the scenario the parts
    /// that compare configurations (and generators) share.
    pub(crate) fn fixed_json(agents: usize) -> LoadSpec {
        LoadSpec {
            upstream: "fixed",
            kind: "json",
            agents,
            path: "/json",
            body: Bytes::from_static(load::TOOLS_CALL),
            keyed: &[],
        }
    }

    pub(crate) fn name(&self) -> String {
        format!("{} {} c={}", self.upstream, self.kind, self.agents)
    }
}

pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// `order[r]`: the targets in the order round `r` visits them.
fn rotated(targets: &[Target], r: usize) -> impl Iterator<Item = (usize, &Target)> {
    (0..targets.len()).map(move |k| {
        let i = (r + k) % targets.len();
        (i, &targets[i])
    })
}

/// Latency and throughput: warm-up, then `plan.rounds` interleaved rounds per target.
/// A part's loads (inspector, limits, keys): JSON tools/call to the fixed upstream at 1 and
/// 64 agents, through `rows` interleaved with `direct` (the upstream at `up`) and `base`
/// when the run has one; `keyed`: rows whose calls carry a fresh `Idempotency-Key`.
pub(crate) fn part_loads(
    rt: &Runtime,
    plan: &Plan,
    up: std::net::SocketAddr,
    base: Option<&Target>,
    rows: &[&Target],
    keyed: &'static [&'static str],
    ticks_per_s: u64,
) -> anyhow::Result<Map<String, Value>> {
    let direct = Target {
        name: "direct",
        addr: up,
        pids: Vec::new(),
        admin: None,
    };
    std::thread::sleep(Duration::from_millis(500));
    let mut loads = Map::new();
    for agents in [1, 64] {
        let mut targets = vec![direct.clone()];
        targets.extend(base.cloned());
        targets.extend(rows.iter().map(|t| (*t).clone()));
        let spec = LoadSpec {
            keyed,
            ..LoadSpec::fixed_json(agents)
        };
        let figures = self::load(rt, plan, &targets, &spec, ticks_per_s)?;
        loads.insert(spec.name(), figures);
    }
    Ok(loads)
}

pub(crate) fn load(
    rt: &Runtime,
    plan: &Plan,
    targets: &[Target],
    spec: &LoadSpec,
    ticks_per_s: u64,
) -> anyhow::Result<Value> {
    let wires = vec![Wire::H1; targets.len()];
    load_on(rt, plan, targets, &wires, &[], spec, ticks_per_s)
}

/// [`load`] with the agents of `targets[i]` speaking `wires[i]`, each call carrying the
/// fields `extra` besides.
pub(crate) fn load_on(
    rt: &Runtime,
    plan: &Plan,
    targets: &[Target],
    wires: &[Wire],
    extra: &'static [(&'static str, &'static str)],
    spec: &LoadSpec,
    ticks_per_s: u64,
) -> anyhow::Result<Value> {
    anyhow::ensure!(targets.len() == wires.len(), "a wire for every target");
    let run = |i: usize, secs: Duration| {
        let t = &targets[i];
        let calls = load::Calls {
            path: spec.path,
            body: &spec.body,
            extra,
            keyed: spec.keyed.contains(&t.name),
        };
        rt.block_on(load::round_on(
            t,
            &wires[i],
            &calls,
            spec.agents,
            secs,
            plan.max_calls,
        ))
    };
    for i in 0..targets.len() {
        run(i, plan.warmup)?;
    }
    let mut rounds: Vec<Vec<load::Round>> = targets.iter().map(|_| Vec::new()).collect();
    for r in 0..plan.rounds {
        for (i, _) in rotated(targets, r) {
            rounds[i].push(run(i, plan.round)?);
        }
    }
    let mut out = Map::new();
    let mut line = format!("{:<22}", spec.name());
    for (t, rs) in targets.iter().zip(&rounds) {
        let us = |ns: u64| ns as f64 / 1e3;
        let per_round: Vec<Value> = rs
            .iter()
            .map(|r| {
                json!({
                    "p50_us": us(r.hist.quantile(0.5)),
                    "p99_us": us(r.hist.quantile(0.99)),
                    "rps": r.hist.count() as f64 / r.elapsed.as_secs_f64(),
                    "calls": r.hist.count(),
                    "errors": r.errors,
                    "cpu_s": r.cpu_ticks as f64 / ticks_per_s as f64,
                })
            })
            .collect();
        let pick = |key: &str| median(per_round.iter().filter_map(|v| v[key].as_f64()).collect());
        let metered = !t.pids.is_empty();
        let cpu_per_10k = median(
            rs.iter()
                .map(|r| {
                    r.cpu_ticks as f64 / ticks_per_s as f64 * 1e4 / r.hist.count().max(1) as f64
                })
                .collect(),
        );
        let rss = rs.iter().map(|r| r.rss_max_kib).max().unwrap_or(0) as f64 / 1024.0;
        let rps = pick("rps");
        line.push_str(&format!(" {}={:.0}/s", t.name, rps));
        out.insert(
            t.name.into(),
            json!({
                "p50_us": pick("p50_us"),
                "p99_us": pick("p99_us"),
                "rps": rps,
                "calls": rs.iter().map(|r| r.hist.count()).sum::<u64>(),
                "errors": rs.iter().map(|r| r.errors).sum::<u64>(),
                "cpu_s_per_10k": metered.then_some(cpu_per_10k),
                "rss_max_mib": metered.then_some(rss),
                "rounds": per_round,
            }),
        );
    }
    eprintln!("{line}");
    Ok(json!({
        "upstream": spec.upstream,
        "kind": spec.kind,
        "agents": spec.agents,
        "targets": out,
    }))
}

/// SSE event delivery: per round and target, [`STREAMS`] streams at once (their starts
/// spread over one period), events 100 ms apart; the delay of each event from the upstream's
/// send to the agent's read.
pub(crate) fn sse_delivery(rt: &Runtime, plan: &Plan, targets: &[Target]) -> anyhow::Result<Value> {
    const PERIOD_MS: u64 = 100;
    const STREAMS: u64 = 10;
    let mut delays: Vec<Vec<u64>> = targets.iter().map(|_| Vec::new()).collect();
    for r in 0..plan.rounds {
        for (i, t) in rotated(targets, r) {
            let streams: Vec<_> = (0..STREAMS)
                .map(|k| {
                    let (t, n) = (t.clone(), plan.tick_events);
                    rt.spawn(async move {
                        tokio::time::sleep(Duration::from_millis(k * PERIOD_MS / STREAMS)).await;
                        load::ticks(&t, n, PERIOD_MS).await
                    })
                })
                .collect();
            for s in streams {
                delays[i].extend(rt.block_on(s)??);
            }
        }
    }
    let mut out = Map::new();
    for (t, mut d) in targets.iter().zip(delays) {
        d.sort_unstable();
        let q = |q: f64| {
            let rank = ((q * d.len() as f64).ceil() as usize).clamp(1, d.len().max(1));
            d.get(rank - 1).map_or(f64::NAN, |&ns| ns as f64 / 1e3)
        };
        out.insert(
            t.name.into(),
            json!({
                "events": d.len(),
                "p50_us": q(0.5),
                "p99_us": q(0.99),
                "max_us": q(1.0),
            }),
        );
    }
    eprintln!(
        "sse delivery: {} events per target",
        plan.rounds as u64 * plan.tick_events * STREAMS
    );
    Ok(json!({ "period_ms": PERIOD_MS, "streams": STREAMS, "targets": out }))
}

/// One large response per round and target: throughput, and the target's peak RSS growth
/// over its RSS just before (VmHWM after `clear_refs`).
pub(crate) fn big(rt: &Runtime, plan: &Plan, targets: &[Target]) -> anyhow::Result<Value> {
    let mut rates: Vec<Vec<f64>> = targets.iter().map(|_| Vec::new()).collect();
    let mut growth: Vec<f64> = targets.iter().map(|_| 0.0).collect();
    let mut peak_reset = true;
    for r in 0..plan.big_rounds {
        for (i, t) in rotated(targets, r) {
            let before = procs::rss_kib(&t.pids);
            peak_reset &= procs::reset_peak(&t.pids);
            let (n, elapsed) = rt.block_on(load::big(t, plan.big_bytes))?;
            let peak = procs::peak_kib(&t.pids);
            anyhow::ensure!(n >= plan.big_bytes, "{}: short body ({n} bytes)", t.name);
            rates[i].push(n as f64 / elapsed.as_secs_f64() / 1e6);
            growth[i] = growth[i].max(peak.saturating_sub(before) as f64 / 1024.0);
        }
    }
    let mut out = Map::new();
    for ((t, rs), g) in targets.iter().zip(rates).zip(growth) {
        let metered = !t.pids.is_empty() && peak_reset;
        out.insert(
            t.name.into(),
            json!({
                "mb_s": median(rs.clone()),
                "rounds_mb_s": rs,
                "peak_growth_mib": metered.then_some(g),
            }),
        );
    }
    eprintln!(
        "large response: {} MiB x {} rounds",
        plan.big_bytes >> 20,
        plan.big_rounds
    );
    Ok(json!({ "bytes": plan.big_bytes, "targets": out }))
}

/// Many open SSE streams through one proxy: its RSS growth per stream (each stream is an
/// agent connection and an upstream connection), then how its RSS comes back once they close
/// ([`settle`]) against `idle_mib`, its RSS when fresh.
pub(crate) fn streams(
    rt: &Runtime,
    plan: &Plan,
    target: &Target,
    idle_mib: f64,
) -> anyhow::Result<Value> {
    const BATCH: usize = 200;
    let base = procs::rss_kib(&target.pids);
    let (held, failed) = rt.block_on(async {
        let mut held = Vec::with_capacity(plan.streams);
        let mut failed = 0usize;
        while held.len() + failed < plan.streams {
            let n = BATCH.min(plan.streams - held.len() - failed);
            let opens: Vec<_> = (0..n)
                .map(|_| tokio::spawn(load::hold(target.addr)))
                .collect();
            for open in opens {
                match open.await {
                    Ok(Ok(h)) => held.push(h),
                    _ => failed += 1,
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        (held, failed)
    });
    let open = procs::rss_kib(&target.pids);
    let opened = held.len();
    let settled = rt.block_on(async {
        drop(held);
        settle(target, idle_mib).await
    });
    let per_stream = open.saturating_sub(base) as f64 / opened.max(1) as f64;
    eprintln!(
        "open streams via {}: {opened} open, {failed} failed, {per_stream:.1} KiB each; \
         after close {:.1} MiB at 1 s, {:.1} MiB at {} s, within {} MiB of idle {idle_mib:.1} \
         after {}",
        target.name,
        settled.at_1s_mib,
        settled.last_mib,
        SETTLE.as_secs(),
        NEAR_IDLE_MIB,
        settled
            .near_idle_s
            .map_or("never".into(), |s| format!("{s:.1} s")),
    );
    Ok(json!({
        "opened": opened,
        "failed": failed,
        "idle_mib": idle_mib,
        "base_mib": base as f64 / 1024.0,
        "open_mib": open as f64 / 1024.0,
        "after_close_mib": settled.at_1s_mib,
        "after_close_10s_mib": settled.last_mib,
        "near_idle_s": settled.near_idle_s,
        "kib_per_stream": per_stream,
    }))
}

/// How long [`settle`] watches a proxy's RSS after its streams close.
const SETTLE: Duration = Duration::from_secs(10);
/// How near its idle RSS a proxy's RSS has to come back.
const NEAR_IDLE_MIB: f64 = 8.0;
/// How often [`settle`] reads the RSS.
const SAMPLE: Duration = Duration::from_millis(100);

/// A proxy's RSS after its streams close: at 1 s, at [`SETTLE`], and the first time it was
/// within [`NEAR_IDLE_MIB`] of idle (seconds after the close), if it was.
struct Settled {
    at_1s_mib: f64,
    last_mib: f64,
    near_idle_s: Option<f64>,
}

/// Reads `target`'s RSS every [`SAMPLE`] for [`SETTLE`] from now (the moment its streams
/// were dropped).
async fn settle(target: &Target, idle_mib: f64) -> Settled {
    let closed = tokio::time::Instant::now();
    let mut settled = Settled {
        at_1s_mib: f64::NAN,
        last_mib: f64::NAN,
        near_idle_s: None,
    };
    let ticks = (SETTLE.as_millis() / SAMPLE.as_millis()) as u32;
    for k in 1..=ticks {
        tokio::time::sleep_until(closed + SAMPLE * k).await;
        let mib = procs::rss_kib(&target.pids) as f64 / 1024.0;
        if settled.near_idle_s.is_none() && mib <= idle_mib + NEAR_IDLE_MIB {
            settled.near_idle_s = Some(closed.elapsed().as_secs_f64());
        }
        if SAMPLE * k == Duration::from_secs(1) {
            settled.at_1s_mib = mib;
        }
        settled.last_mib = mib;
    }
    settled
}

/// RSS of each metered target now, in MiB.
pub(crate) fn rss(targets: &[Target]) -> Value {
    let mut out = Map::new();
    for t in targets.iter().filter(|t| !t.pids.is_empty()) {
        out.insert(
            t.name.into(),
            json!(procs::rss_kib(&t.pids) as f64 / 1024.0),
        );
    }
    Value::Object(out)
}
