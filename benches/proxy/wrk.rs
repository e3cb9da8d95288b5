//! The wrk part (`--only wrk`): the fixed JSON scenario driven by an outside load generator
//! beside the harness's own, so a figure of the harness can be told from a habit of its
//! client. Debian's `wrk` (4.1: one thread, no correction for coordinated omission) posts the
//! tools/call every load sends, with the same fields, from a Lua script; the harness's own
//! generator runs the same scenario on the same processes. At 1 and 64 agents (connections),
//! through nginx and strata (each logging every call to /dev/null) in front of the fixed
//! upstream, beside direct; both generators interleave their rounds over the targets.
//!
//! What it checks: the two generators agree in direction on strata against nginx. Each puts
//! strata's CPU per call and added p50 below, level with or above nginx's; they disagree when
//! one puts strata below and the other above (the check is in `targets.rs`). Level is no
//! direction: the medians within [`LEVEL`] of each other, or paired rounds that do not bear
//! the medians out ([`crate::paired`]) — the noise of one run.
//!
//! What it shows besides: where a call's CPU goes under wrk, for strata, nginx and HAProxy in
//! TCP mode (the layer-4 floor, when installed) — user and kernel time, context switches, and
//! syscalls (`perf stat`, in a round of its own) a call — so the part of a call above the
//! floor is told apart into the proxy's own work and the kernel's.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Map, Value, json};

use crate::Plan;
use crate::load::TOOLS_CALL;
use crate::measure::{self, LoadSpec, median};
use crate::paired;
use crate::procs::{self, NginxCache, Target};
use crate::report::{minus, ratio};
use crate::run::Part;

pub(crate) fn run(part: Part<'_>) -> anyhow::Result<Value> {
    let (rt, plan, scratch, ticks_per_s) = (part.rt, part.plan, part.scratch, part.ticks_per_s);
    let version = version(&plan.wrk).context("wrk (apt-get install wrk, or --wrk PATH)")?;
    let dir = scratch.path().join("wrk");
    std::fs::create_dir_all(&dir)?;
    let script = dir.join("post.lua");
    std::fs::write(&script, lua())?;
    let (_up_proc, up) = procs::upstream(false)?;
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let (nginx_proc, nginx) =
        procs::nginx(&plan.nginx, up, &dir, "wrk", cores, "", NginxCache::None)?;
    let up_url = format!("http://{up}");
    let (strata_proc, strata) = procs::strata("strata", &plan.strata, &up_url, &dir, "wrk", "")?;
    let direct = Target {
        name: "direct",
        addr: up,
        pids: Vec::new(),
        admin: None,
    };
    let mut targets = vec![direct, nginx, strata];
    let mut procs = vec![nginx_proc, strata_proc];
    if plan.haproxy.exists() {
        let (haproxy_proc, haproxy) =
            procs::haproxy_relay(&plan.haproxy, &dir, up, procs::Relay::Copying)?;
        targets.push(haproxy);
        procs.push(haproxy_proc);
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut loads = Map::new();
    for agents in [1, 64] {
        let spec = LoadSpec::fixed_json(agents);
        let harness = measure::load(rt, plan, &targets, &spec, ticks_per_s)?;
        let wrk = load(plan, &targets, &script, agents, ticks_per_s)?;
        let sides = json!({ "harness": sides(&harness), "wrk": sides(&wrk) });
        loads.insert(
            spec.name(),
            json!({ "harness": harness, "wrk": wrk, "sides": sides }),
        );
    }
    drop(procs);
    Ok(json!({ "wrk": version, "load": loads }))
}

/// How far apart strata's and nginx's figures may be and still be level, as a share of nginx's:
/// two identical strata processes differ by up to ×0.97–1.03 in CPU per call in one run (the
/// limits part's `none` and `again`).
const LEVEL: f64 = 0.05;

/// Where strata stands against nginx: -1 below, 0 level (within [`LEVEL`]), 1 above.
fn side(strata: f64, nginx: f64) -> i8 {
    if (strata - nginx).abs() <= LEVEL * nginx.abs() {
        0
    } else if strata < nginx {
        -1
    } else {
        1
    }
}

/// `side` kept only when the paired rounds bear it out; level otherwise.
fn borne_out(s: &Value, side: i8, figure: paired::Figure) -> i8 {
    match paired::borne_out(s, side.cmp(&0), figure) {
        true => side,
        false => 0,
    }
}

/// Where one generator puts strata against nginx: `[CPU per call, added p50]` (over its own
/// direct connection), each [`side`], [`borne_out`] by the rounds.
fn sides(s: &Value) -> Value {
    let cpu = ratio(s, "strata", "nginx", "cpu_s_per_10k")
        .map(|r| borne_out(s, side(r, 1.0), paired::cpu_per_call));
    let added = |t: &str| minus(s, t, "direct", "p50_us");
    let p50 = added("strata")
        .zip(added("nginx"))
        .map(|(a, b)| borne_out(s, side(a, b), paired::p50));
    json!([cpu, p50])
}

/// The script wrk runs: the harness's request ([`crate::load::request`]'s fields).
fn lua() -> String {
    let body = String::from_utf8_lossy(TOOLS_CALL).replace('\'', "\\'");
    format!(
        "-- Generated by benches/proxy/wrk.rs.\n\
         wrk.method = \"POST\"\n\
         wrk.body = '{body}'\n\
         wrk.headers[\"Content-Type\"] = \"application/json\"\n\
         wrk.headers[\"Accept\"] = \"application/json, text/event-stream\"\n\
         wrk.headers[\"mcp-protocol-version\"] = \"2026-07-28\"\n"
    )
}

fn version(bin: &Path) -> anyhow::Result<String> {
    // `wrk -v` prints its version and usage, and exits 1.
    let out = Command::new(bin).arg("-v").output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // `wrk debian/4.1.0-3+b2 [epoll] Copyright …`: the name and the version.
    let line = text.lines().find(|l| l.starts_with("wrk "));
    line.map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .ok_or_else(|| anyhow::anyhow!("{} printed no version", bin.display()))
}

/// wrk's rounds over `targets`, interleaved as the harness's: a warm-up each, then
/// `plan.rounds` rounds of `plan.round` (whole seconds: wrk's `-d` takes no fraction).
fn load(
    plan: &Plan,
    targets: &[Target],
    script: &Path,
    agents: usize,
    ticks_per_s: u64,
) -> anyhow::Result<Value> {
    let secs = plan.round.as_secs_f64().ceil().max(1.0) as u64;
    for t in targets {
        round(plan, t, script, agents, 1)?;
    }
    let mut rounds: Vec<Vec<Round>> = targets.iter().map(|_| Vec::new()).collect();
    for r in 0..plan.rounds {
        for k in 0..targets.len() {
            let i = (r + k) % targets.len();
            rounds[i].push(round(plan, &targets[i], script, agents, secs)?);
        }
    }
    let mut out = Map::new();
    for (t, rs) in targets.iter().zip(&rounds) {
        let pick = |f: &dyn Fn(&Round) -> f64| median(rs.iter().map(f).collect());
        let cpu = |r: &Round| r.cpu_ticks as f64 / ticks_per_s as f64 * 1e4 / r.calls.max(1.0);
        let user = |r: &Round| r.user_ticks as f64 / ticks_per_s as f64 * 1e6 / r.calls.max(1.0);
        let system = |r: &Round| {
            (r.cpu_ticks - r.user_ticks) as f64 / ticks_per_s as f64 * 1e6 / r.calls.max(1.0)
        };
        let metered = !t.pids.is_empty();
        // One more wrk run through `t`, counted by `perf` (none for direct).
        let syscalls = syscalls(plan, t, script, agents, secs);
        out.insert(
            t.name.into(),
            json!({
                "p50_us": pick(&|r| r.p50_us),
                "p99_us": pick(&|r| r.p99_us),
                "rps": pick(&|r| r.rps),
                "calls": rs.iter().map(|r| r.calls).sum::<f64>(),
                "errors": rs.iter().map(|r| r.errors).sum::<u64>(),
                "cpu_s_per_10k": metered.then(|| pick(&cpu)),
                "user_us": metered.then(|| pick(&user)),
                "system_us": metered.then(|| pick(&system)),
                "switches": metered.then(|| pick(&|r| r.switches as f64 / r.calls.max(1.0))),
                "syscalls": syscalls,
                "rounds": rs.iter().map(|r| json!({
                    "calls": r.calls,
                    "cpu_s": r.cpu_ticks as f64 / ticks_per_s as f64,
                    "p50_us": r.p50_us,
                })).collect::<Vec<_>>(),
            }),
        );
    }
    eprintln!(
        "wrk c={agents:<3} {}",
        targets
            .iter()
            .map(|t| format!("{}={:.0}/s", t.name, out[t.name]["rps"]))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(json!({ "agents": agents, "targets": out }))
}

/// What one wrk run printed, and the CPU its target's processes used meanwhile.
struct Round {
    p50_us: f64,
    p99_us: f64,
    rps: f64,
    calls: f64,
    errors: u64,
    cpu_ticks: u64,
    /// The user part of `cpu_ticks`.
    user_ticks: u64,
    /// Context switches of the target's threads.
    switches: u64,
}

fn round(
    plan: &Plan,
    t: &Target,
    script: &Path,
    agents: usize,
    secs: u64,
) -> anyhow::Result<Round> {
    let before = (
        procs::user_system_ticks(&t.pids),
        procs::context_switches(&t.pids),
    );
    let out = Command::new(&plan.wrk)
        .args(["-t1", &format!("-c{agents}"), &format!("-d{secs}s")])
        .args(["--timeout", "10s", "--latency", "-s"])
        .arg(script)
        .arg(format!("http://{}/json", t.addr))
        .output()
        .with_context(|| format!("running {}", plan.wrk.display()))?;
    let ((user, system), switches) = (
        procs::user_system_ticks(&t.pids),
        procs::context_switches(&t.pids),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(out.status.success(), "wrk via {}: {text}", t.name);
    let mut round = parse(&text).with_context(|| format!("wrk via {} printed: {text}", t.name))?;
    round.user_ticks = user.saturating_sub(before.0.0);
    round.cpu_ticks = round.user_ticks + system.saturating_sub(before.0.1);
    round.switches = switches.saturating_sub(before.1);
    Ok(round)
}

/// Syscalls a call through `t`: one more wrk run, `perf stat` counting the
/// `raw_syscalls:sys_enter` tracepoint in `t`'s processes for as long (a count per syscall,
/// so kept out of the rounds whose CPU is compared). `None` for direct, or without a `perf`
/// that can count it.
fn syscalls(plan: &Plan, t: &Target, script: &Path, agents: usize, secs: u64) -> Option<f64> {
    if t.pids.is_empty() {
        return None;
    }
    let pids: Vec<String> = t.pids.iter().map(u32::to_string).collect();
    let perf = Command::new("perf")
        .args([
            "stat",
            "-x,",
            "-e",
            "raw_syscalls:sys_enter",
            "-p",
            &pids.join(","),
        ])
        .args(["--", "sleep", &secs.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let calls = round(plan, t, script, agents, secs).ok()?.calls;
    let out = perf.wait_with_output().ok()?;
    // `-x,`: `COUNT,UNIT,EVENT,…`.
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .find(|l| l.contains("raw_syscalls:sys_enter"))?;
    let count: f64 = line.split(',').next()?.trim().parse().ok()?;
    Some(count / calls.max(1.0))
}

/// Reads wrk's report: the `--latency` distribution's 50 % and 99 %, the requests done, the
/// non-2xx answers and socket errors, requests per second (the CPU is the caller's to fill).
fn parse(text: &str) -> anyhow::Result<Round> {
    let mut round = Round {
        p50_us: f64::NAN,
        p99_us: f64::NAN,
        rps: f64::NAN,
        calls: f64::NAN,
        errors: 0,
        cpu_ticks: 0,
        user_ticks: 0,
        switches: 0,
    };
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["50%", v] => round.p50_us = micros(v)?,
            ["99%", v] => round.p99_us = micros(v)?,
            ["Requests/sec:", v] => round.rps = v.parse()?,
            [n, "requests", "in", ..] => round.calls = n.parse()?,
            ["Non-2xx", "or", "3xx", "responses:", n] => round.errors += n.parse::<u64>()?,
            ["Socket", "errors:", rest @ ..] => {
                round.errors += rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum::<u64>();
            }
            _ => {}
        }
    }
    anyhow::ensure!(
        round.p50_us.is_finite() && round.rps.is_finite() && round.calls.is_finite(),
        "no latency distribution or request count"
    );
    Ok(round)
}

/// wrk's durations: `47.00us`, `1.20ms`, `1.00s`.
fn micros(v: &str) -> anyhow::Result<f64> {
    let (n, scale) = if let Some(n) = v.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1e6)
    } else {
        anyhow::bail!("a duration without a unit: {v}")
    };
    Ok(n.parse::<f64>()? * scale)
}
