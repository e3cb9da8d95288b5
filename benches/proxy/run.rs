//! The run: two stacks in turn — the fixed upstream with nginx and strata in front of it, then
//! the testbed with its own nginx and strata — every measurement on each, then the telemetry
//! part (its own processes: `telemetry.rs`), then the report.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use crate::Plan;
use crate::load::TOOLS_CALL;
use crate::measure::{self, LoadSpec};
use crate::procs::{self, NginxCache, Proc, Scratch, Target};
use crate::report;
use crate::sink::{Mode, Sink};
use crate::{inspector, keys, limits, paths, telemetry, wrk};

/// The testbed's SSE call: two progress notifications with no pause, then the result.
const TESTBED_SSE: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sse_drip","arguments":{"count":2,"interval_ms":0}}}"#;

/// Processes of one stack, ended (in reverse) when dropped; then its OTLP sinks (a traced
/// strata flushes to its sink as it exits), each saying what it received.
struct Stack {
    targets: Vec<Target>,
    procs: Vec<Proc>,
    sinks: Vec<Sink>,
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.procs.clear();
        for sink in self.sinks.drain(..) {
            let f = sink.figures();
            eprintln!(
                "otlp sink: {} trace requests ({} bytes), {} metric requests",
                f["traces"]["requests"], f["traces"]["bytes"], f["metrics"]["requests"]
            );
        }
    }
}

/// What every part's `run` is given: the harness's runtime, the plan, the scratch directory,
/// and the clock ticks a second `/proc` counts CPU time in.
#[derive(Clone, Copy)]
pub(crate) struct Part<'a> {
    pub(crate) rt: &'a Runtime,
    pub(crate) plan: &'a Plan,
    pub(crate) scratch: &'a Scratch,
    pub(crate) ticks_per_s: u64,
}

/// The paths training leaves out, which the profile lays out as cold: each is either a failure
/// path (profiled as hot, it would push the paths every call takes apart) or needs a part of
/// its own to drive it.
pub(crate) const UNTRAINED: &[&str] = &[
    "calls refused by a limit or an open circuit (the trained rule and circuit refuse nothing)",
    "OTLP export to a stalled or down collector",
    "the Redis idempotency store",
    "the inspector and a page reading it",
    "the admin listener (/metrics, /healthz, /readyz)",
];

fn stack(plan: &Plan, scratch: &Scratch, testbed: bool, cores: usize) -> anyhow::Result<Stack> {
    let tag = if testbed { "testbed" } else { "fixed" };
    let (up_proc, up) = if testbed {
        procs::testbed(&plan.strata)?
    } else {
        procs::upstream(false)?
    };
    let up_url = format!("http://{up}");
    if plan.train {
        // Training: strata's own paths only, with the default config, with retries off (the
        // body then streams to the upstream through hyper's client: the other common path),
        // with every call traced (OpenTelemetry export on at ratio 1.0, to the harness's
        // sink: the span-building and export paths) and through a `limits.calls` rule and the
        // circuit (the limits part's, which refuse nothing) and, in front of the fixed
        // upstream, to it over TLS (`https://`: rustls and hyper's client); another target's
        // load would only take time.
        let (default_proc, default) =
            procs::strata("strata", &plan.strata, &up_url, scratch.path(), tag, "")?;
        let (no_retry_proc, no_retry) = procs::strata(
            "no-retry",
            &plan.strata,
            &up_url,
            scratch.path(),
            &format!("{tag}-no-retry"),
            "retry: { max_attempts: 1 }\n",
        )?;
        let sink = Sink::start(Mode::Answer)?;
        let (traced_proc, traced) = procs::strata(
            "traced",
            &plan.strata,
            &up_url,
            scratch.path(),
            &format!("{tag}-traced"),
            &format!(
                "{}{}{}",
                procs::telemetry_yaml(&sink.endpoint(), 1.0),
                procs::limits_yaml(limits::RULE),
                limits::CIRCUIT
            ),
        )?;
        let mut targets = vec![default, no_retry, traced];
        let mut procs = vec![default_proc, no_retry_proc, traced_proc];
        if !testbed {
            let (tls_up_proc, tls_up) = procs::upstream(true)?;
            let (tls_proc, tls) = procs::strata(
                "tls-upstream",
                &plan.strata,
                &format!("https://{tls_up}"),
                scratch.path(),
                &format!("{tag}-tls"),
                "upstream_tls: { insecure_skip_verify: true }\n",
            )?;
            targets.push(tls);
            procs.extend([tls_proc, tls_up_proc]);
        }
        procs.push(up_proc);
        return Ok(Stack {
            targets,
            procs,
            sinks: vec![sink],
        });
    }
    let (nginx_proc, nginx) = procs::nginx(
        &plan.nginx,
        up,
        scratch.path(),
        tag,
        cores,
        "",
        NginxCache::None,
    )?;
    let (strata_proc, strata) =
        procs::strata("strata", &plan.strata, &up_url, scratch.path(), tag, "")?;
    let direct = Target {
        name: "direct",
        addr: up,
        pids: Vec::new(),
        admin: None,
    };
    let mut targets = vec![direct, nginx];
    // Dropped in this order: the proxies before their upstream.
    let mut procs = vec![strata_proc, nginx_proc];
    // The layer-4 floor, in front of the fixed upstream (its loads, SSE delivery, the large
    // response), when HAProxy is installed.
    if !testbed && plan.haproxy.exists() {
        let (haproxy_proc, haproxy) =
            procs::haproxy_relay(&plan.haproxy, scratch.path(), up, procs::Relay::Copying)?;
        targets.push(haproxy);
        procs.push(haproxy_proc);
    }
    if let Some(bin) = &plan.baseline {
        let (base_proc, base) = procs::strata(
            "base",
            bin,
            &up_url,
            scratch.path(),
            &format!("{tag}-base"),
            "",
        )?;
        targets.push(base);
        procs.insert(0, base_proc);
    }
    targets.push(strata);
    procs.push(up_proc);
    Ok(Stack {
        targets,
        procs,
        sinks: Vec::new(),
    })
}

/// The large response through every target of the fixed upstream's stack and, where HAProxy is
/// installed, through HAProxy splicing: what a relay reaches on this machine when the bytes
/// never come to user space, the floor beside strata's figure (strata reads every byte).
fn big(rt: &Runtime, plan: &Plan, scratch: &Scratch, targets: &[Target]) -> anyhow::Result<Value> {
    let upstream = targets.iter().find(|t| t.name == "direct").map(|t| t.addr);
    let splicing = match upstream {
        Some(up) if plan.haproxy.exists() => Some(procs::haproxy_relay(
            &plan.haproxy,
            scratch.path(),
            up,
            procs::Relay::Splicing,
        )?),
        _ => None,
    };
    let mut all = targets.to_vec();
    all.extend(splicing.as_ref().map(|(_, t)| t.clone()));
    measure::big(rt, plan, &all)
}

pub(crate) fn run(plan: &Plan) -> anyhow::Result<()> {
    anyhow::ensure!(
        plan.strata.exists(),
        "{} not found (cargo build --release first)",
        plan.strata.display()
    );
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let scratch = Scratch::new()?;
    let tck = procs::clock_ticks();
    let part = Part {
        rt: &rt,
        plan,
        scratch: &scratch,
        ticks_per_s: tck,
    };
    let started = std::time::SystemTime::now();
    let mut load = Map::new();
    let mut out = Map::new();

    {
        let s = stack(plan, &scratch, false, cores).context("fixed-upstream stack")?;
        std::thread::sleep(Duration::from_millis(500));
        let mut idle = Map::new();
        let fresh = measure::rss(&s.targets);
        idle.insert("fresh".into(), fresh.clone());
        if plan.runs("load") {
            for (kind, path, body) in [
                ("json", "/json", Bytes::from_static(TOOLS_CALL)),
                ("sse", "/sse", Bytes::from_static(TOOLS_CALL)),
            ] {
                for &agents in &plan.agents {
                    let spec = LoadSpec {
                        upstream: "fixed",
                        kind,
                        agents,
                        path,
                        body: body.clone(),
                        keyed: &[],
                    };
                    let figures = measure::load(&rt, plan, &s.targets, &spec, tck)?;
                    load.insert(spec.name(), figures);
                }
            }
        }
        if plan.runs("sse") {
            out.insert(
                "sse_delivery".into(),
                measure::sse_delivery(&rt, plan, &s.targets)?,
            );
        }
        if plan.runs("big") {
            out.insert("big".into(), big(&rt, plan, &scratch, &s.targets)?);
        }
        std::thread::sleep(Duration::from_secs(1));
        idle.insert("after_load".into(), measure::rss(&s.targets));
        out.insert("idle_rss_mib".into(), Value::Object(idle));
        if plan.runs("streams") {
            let mut streams = Map::new();
            // Not through HAProxy: its connection cap is below the streams' count.
            let held = s.targets.iter().filter(|t| !t.pids.is_empty());
            for t in held.filter(|t| t.name != "haproxy") {
                let idle_mib = fresh[t.name].as_f64().unwrap_or(f64::NAN);
                streams.insert(t.name.into(), measure::streams(&rt, plan, t, idle_mib)?);
            }
            out.insert(
                "streams".into(),
                json!({ "streams": plan.streams, "targets": streams }),
            );
        }
    }

    if plan.runs("testbed") {
        let s = stack(plan, &scratch, true, cores).context("testbed stack")?;
        for (kind, body) in [
            ("json", Bytes::from_static(TOOLS_CALL)),
            ("sse", Bytes::from_static(TESTBED_SSE)),
        ] {
            for &agents in &plan.agents {
                let spec = LoadSpec {
                    upstream: "testbed",
                    kind,
                    agents,
                    path: "/mcp",
                    body: body.clone(),
                    keyed: &[],
                };
                let figures = measure::load(&rt, plan, &s.targets, &spec, tck)?;
                load.insert(spec.name(), figures);
            }
        }
    }
    // Not in training: its stalling sink and closed port would lay out the paths of a
    // collector that fails as hot (the traced process above trains the export path).
    if plan.runs("telemetry") && !plan.train {
        out.insert(
            "telemetry".into(),
            telemetry::run(part).context("telemetry part")?,
        );
    }
    if plan.runs("inspector") && !plan.train {
        out.insert(
            "inspector".into(),
            inspector::run(part).context("inspector part")?,
        );
    }
    if plan.runs("limits") && !plan.train {
        out.insert("limits".into(), limits::run(part).context("limits part")?);
    }
    if plan.runs("keys") && !plan.train {
        out.insert("keys".into(), keys::run(part).context("keys part")?);
    }
    if plan.runs("wrk") && !plan.train {
        if plan.wrk.exists() {
            out.insert("wrk".into(), wrk::run(part).context("wrk part")?);
        } else {
            eprintln!(
                "wrk: {} not found: no cross-check (apt-get install wrk, or --wrk PATH)",
                plan.wrk.display()
            );
        }
    }
    // In training too: strata's rows alone, every path (h2, TLS, a streamed body, a large
    // answer), their loads checked with the others'.
    if plan.runs("paths") {
        let figures = paths::run(part).context("paths part")?;
        if plan.train {
            for (name, l) in figures["load"].as_object().into_iter().flatten() {
                load.insert(format!("paths {name}"), l.clone());
            }
        } else {
            out.insert("paths".into(), figures);
        }
    }
    if plan.train {
        // A profile of failing calls would lay out the error paths as hot: nearly every call
        // must have been answered (2xx) through every process trained. (Not every one: a
        // call cut by the bound on its time is no reason to stop a build.)
        let failed: Vec<String> = load
            .iter()
            .flat_map(|(scenario, figures)| {
                let targets = figures["targets"].as_object().cloned().unwrap_or_default();
                targets.into_iter().filter_map(move |(name, t)| {
                    let errors = t["errors"].as_u64().unwrap_or(0);
                    let calls = t["calls"].as_u64().unwrap_or(0);
                    (errors * 100 > calls)
                        .then(|| format!("{scenario} via {name}: {errors} of {}", calls + errors))
                })
            })
            .collect();
        anyhow::ensure!(
            failed.is_empty(),
            "training calls failed: {}",
            failed.join(", ")
        );
        println!(
            "proxy bench: trained {} on {} load scenarios in {:.0} s; untrained: {}",
            plan.strata.display(),
            load.len(),
            started.elapsed().unwrap_or_default().as_secs_f64(),
            UNTRAINED.join("; ")
        );
        return Ok(());
    }
    out.insert("load".into(), Value::Object(load));
    if let Some(dir) = &plan.scan {
        out.insert("classifier".into(), report::scan(dir));
    }
    let elapsed = started.elapsed().unwrap_or_default();
    out.insert("meta".into(), report::meta(plan, cores, elapsed));
    report::finish(plan, Value::Object(out))
}
