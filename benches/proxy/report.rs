//! The report: the targets the issue sets (each met or missed, from ratios of this one run),
//! one printed table, the run saved as JSON, and a comparison with the previous saved run.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::Plan;
use crate::targets::{Check, checks, f0, f1, f2, f3};

/// Every target a run can have, in table order (`base` only with `--baseline`, `haproxy` when
/// it is installed).
const TARGETS: [&str; 6] = [
    "direct",
    "nginx",
    "haproxy",
    "haproxy-splice",
    "base",
    "strata",
];
const SCAN_BODIES: [&str; 5] = [
    "tool_result_1k",
    "text_result_64k",
    "string_heavy_16m",
    "tools_list_4m",
    "sse_progress_32k",
];

pub(crate) fn num(v: &Value, ptr: &str) -> Option<f64> {
    v.pointer(ptr).and_then(Value::as_f64)
}

/// In a load scenario `s`: target `x`'s figure `k` ÷ target `y`'s.
pub(crate) fn ratio(s: &Value, x: &str, y: &str, k: &str) -> Option<f64> {
    let v = |t: &str| num(s, &format!("/targets/{t}/{k}"));
    v(x).zip(v(y)).map(|(a, b)| a / b)
}

/// In a load scenario `s`: target `x`'s figure `k` − target `y`'s.
pub(crate) fn minus(s: &Value, x: &str, y: &str, k: &str) -> Option<f64> {
    let v = |t: &str| num(s, &format!("/targets/{t}/{k}"));
    v(x).zip(v(y)).map(|(a, b)| a - b)
}

fn shell(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text).trim().to_owned()
        })
        .unwrap_or_default()
}

pub(crate) fn meta(plan: &Plan, cores: usize, elapsed: Duration) -> Value {
    let dirty = !shell("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty();
    json!({
        "when": shell("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        "git": format!("{}{}", shell("git", &["rev-parse", "--short", "HEAD"]), if dirty { "-dirty" } else { "" }),
        "cores": cores,
        "kernel": shell("uname", &["-r"]),
        "nginx": shell(&plan.nginx.display().to_string(), &["-v"]),
        "strata_build": plan.build,
        "quick": plan.quick,
        "rounds": plan.rounds,
        "round_s": plan.round.as_secs_f64(),
        "warmup_s": plan.warmup.as_secs_f64(),
        "elapsed_s": elapsed.as_secs_f64(),
        "pgo_untrained": crate::run::UNTRAINED,
        "notes": "strata: release build, default config but limits.max_connections 12000, per-call \
                  JSON log on (stdout -> /dev/null), tokio workers = cores. nginx: worker_processes = \
                  cores, access_log /dev/null, proxy_buffering off, proxy_request_buffering off, \
                  HTTP/1.1 keepalive 64 to the upstream. CPU: utime+stime from /proc (nginx: master + \
                  workers). RSS: VmRSS (nginx: sum over master + workers). Telemetry rows: OTLP/HTTP \
                  export to a sink in the harness's process (own thread and runtime, same cores).",
    })
}

/// The classifier benchmark's figures (criterion's JSON, as bench/scan-ratios.sh reads them).
pub(crate) fn scan(dir: &Path) -> Value {
    let read = |body: &str, func: &str| -> Option<f64> {
        let d = dir.join(format!("scan_{body}")).join(func).join("new");
        let est: Value =
            serde_json::from_slice(&std::fs::read(d.join("estimates.json")).ok()?).ok()?;
        let bench: Value =
            serde_json::from_slice(&std::fs::read(d.join("benchmark.json")).ok()?).ok()?;
        let bytes =
            num(&bench, "/throughput/Bytes").or_else(|| num(&bench, "/throughput/BytesDecimal"))?;
        Some(bytes / num(&est, "/mean/point_estimate")?)
    };
    let mut out = Map::new();
    for body in SCAN_BODIES {
        if let (Some(s), Some(v), Some(i)) = (
            read(body, "strata"),
            read(body, "serde_value"),
            read(body, "serde_ignored"),
        ) {
            out.insert(
                body.into(),
                json!({"strata_gb_s": s, "value_gb_s": v, "ignored_gb_s": i,
                       "vs_value": s / v, "vs_ignored": s / i}),
            );
        }
    }
    Value::Object(out)
}

fn table(r: &Value, checks: &[Check]) -> String {
    let mut t = String::new();
    let m = &r["meta"];
    let _ = writeln!(
        t,
        "strata proxy bench  {}  git {}  strata build {}  {} cores  {} rounds x {} s, interleaved{}",
        m["when"].as_str().unwrap_or(""),
        m["git"].as_str().unwrap_or(""),
        m["strata_build"].as_str().unwrap_or("?"),
        m["cores"],
        m["rounds"],
        m["round_s"],
        if m["quick"].as_bool() == Some(true) {
            "  (QUICK: smoke test, not figures)"
        } else {
            ""
        },
    );
    let _ = writeln!(
        t,
        "latency: request sent -> last byte read, medians of rounds; +p50/+p99: added over direct"
    );
    if m["strata_build"].as_str() == Some("pgo") {
        let untrained: Vec<&str> = m["pgo_untrained"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let _ = writeln!(t, "the profile trains none of: {}", untrained.join("; "));
    }
    let _ = writeln!(
        t,
        "{:<22} {:<7} {:>8} {:>8} {:>9} {:>8} {:>8} {:>7} {:>9} {:>8} {:>6}",
        "load",
        "via",
        "p50 us",
        "p99 us",
        "calls/s",
        "+p50",
        "+p99",
        "/direct",
        "cpu s/10k",
        "rss MiB",
        "errors"
    );
    if let Some(load) = r["load"].as_object() {
        for (name, s) in load {
            let d = |k: &str| num(s, &format!("/targets/direct/{k}"));
            let present = TARGETS.iter().filter(|t| s["targets"].get(**t).is_some());
            for (i, target) in present.enumerate() {
                let v = |k: &str| num(s, &format!("/targets/{target}/{k}"));
                let added = |k: &str| (*target != "direct").then(|| Some(v(k)? - d(k)?)).flatten();
                let ratio = (*target != "direct")
                    .then(|| Some(v("rps")? / d("rps")?))
                    .flatten();
                let _ = writeln!(
                    t,
                    "{:<22} {:<7} {:>8} {:>8} {:>9} {:>8} {:>8} {:>7} {:>9} {:>8} {:>6}",
                    if i == 0 { name.as_str() } else { "" },
                    target,
                    f1(v("p50_us")),
                    f1(v("p99_us")),
                    f0(v("rps")),
                    dash(added("p50_us"), f1),
                    dash(added("p99_us"), f1),
                    dash(ratio, f2),
                    dash(v("cpu_s_per_10k"), f2),
                    dash(v("rss_max_mib"), f1),
                    f0(v("errors")),
                );
            }
            let sv = |t: &str, k: &str| num(s, &format!("/targets/{t}/{k}"));
            let add = |t: &str, k: &str| Some(sv(t, k)? - d(k)?);
            // nginx always; HAProxy and the baseline only when the run had them.
            for other in ["nginx", "haproxy", "base"] {
                if other != "nginx" && s["targets"].get(other).is_none() {
                    continue;
                }
                let rel = |k: &str| Some(sv("strata", k)? / sv(other, k)?);
                let _ = writeln!(
                    t,
                    "{:<22} strata vs {:<6} +p50 {} vs {} us, calls/s x{}, cpu x{}",
                    "",
                    format!("{other}:"),
                    f1(add("strata", "p50_us")),
                    f1(add(other, "p50_us")),
                    f2(rel("rps")),
                    f2(rel("cpu_s_per_10k")),
                );
            }
        }
    }
    if r.get("sse_delivery").is_some() {
        let _ = writeln!(
            t,
            "\nSSE delivery, {} streams at a time, events {} ms apart: delay upstream send -> agent read (us)",
            r["sse_delivery"]["streams"], r["sse_delivery"]["period_ms"]
        );
        for target in TARGETS
            .iter()
            .filter(|t| r["sse_delivery"]["targets"].get(**t).is_some())
        {
            let v = |k: &str| num(r, &format!("/sse_delivery/targets/{target}/{k}"));
            let d = |k: &str| num(r, &format!("/sse_delivery/targets/direct/{k}"));
            let _ = writeln!(
                t,
                "  {:<7} events {:>4}  p50 {:>8}  p99 {:>8}  max {:>8}  +p99 vs direct {:>7}",
                target,
                f0(v("events")),
                f1(v("p50_us")),
                f1(v("p99_us")),
                f1(v("max_us")),
                f1(v("p99_us").zip(d("p99_us")).map(|(a, b)| a - b)),
            );
        }
    }
    if r.get("big").is_some() {
        let _ = writeln!(
            t,
            "\nlarge response ({} MiB JSON tool result)",
            num(r, "/big/bytes").unwrap_or(0.0) as u64 >> 20
        );
        for target in TARGETS
            .iter()
            .filter(|t| r["big"]["targets"].get(**t).is_some())
        {
            let v = |k: &str| num(r, &format!("/big/targets/{target}/{k}"));
            let ratio = v("mb_s")
                .zip(num(r, "/big/targets/direct/mb_s"))
                .map(|(a, b)| a / b);
            let _ = writeln!(
                t,
                "  {:<14} {:>7} MB/s  /direct {:>5}  peak RSS growth {:>6} MiB",
                target,
                f0(v("mb_s")),
                f2(ratio),
                dash(v("peak_growth_mib"), f1),
            );
        }
    }
    let _ = writeln!(t, "\nRSS (MiB; nginx: master + workers)");
    for target in ["nginx", "base", "strata"] {
        if num(r, &format!("/idle_rss_mib/fresh/{target}")).is_none() {
            continue;
        }
        let v = |p: &str| num(r, &format!("/idle_rss_mib/{p}/{target}"));
        let s = |k: &str| num(r, &format!("/streams/targets/{target}/{k}"));
        let load_max = r["load"].as_object().and_then(|l| {
            l.values()
                .filter_map(|s| num(s, &format!("/targets/{target}/rss_max_mib")))
                .reduce(f64::max)
        });
        let _ = writeln!(
            t,
            "  {:<7} idle {:>5}  after load {:>5}  max under load {:>5}  | {} streams open: {:>6} -> {:>6} MiB, {:>5} KiB/stream, {} failed; after close {} (1 s), {} (10 s), within 8 of idle after {} s",
            target,
            f1(v("fresh")),
            f1(v("after_load")),
            f1(load_max),
            f0(s("opened")),
            f1(s("base_mib")),
            f1(s("open_mib")),
            f1(s("kib_per_stream")),
            f0(s("failed")),
            f1(s("after_close_mib")),
            f1(s("after_close_10s_mib")),
            dash(s("near_idle_s"), f1),
        );
    }
    if r.get("telemetry").is_some() {
        telemetry_table(&mut t, &r["telemetry"]);
    }
    if r.get("inspector").is_some() {
        inspector_table(&mut t, &r["inspector"]);
    }
    if r.get("limits").is_some() {
        limits_table(&mut t, &r["limits"]);
    }
    if r.get("keys").is_some() {
        keys_table(&mut t, &r["keys"]);
    }
    if r.get("wrk").is_some() {
        crate::report_wrk::table(&mut t, &r["wrk"]);
    }
    if r.get("paths").is_some() {
        crate::report_paths::table(&mut t, &r["paths"]);
    }
    if let Some(c) = r
        .get("classifier")
        .and_then(Value::as_object)
        .filter(|c| !c.is_empty())
    {
        let _ = writeln!(
            t,
            "\nclassifier (criterion, benches/scan.rs): GB/s and ratios"
        );
        for (body, v) in c {
            let _ = writeln!(
                t,
                "  {:<18} strata {:>5}  Value {:>5}  IgnoredAny {:>5}  /Value {:>5}  /IgnoredAny {:>5}",
                body,
                f2(num(v, "/strata_gb_s")),
                f2(num(v, "/value_gb_s")),
                f2(num(v, "/ignored_gb_s")),
                f2(num(v, "/vs_value")),
                f2(num(v, "/vs_ignored")),
            );
        }
    }
    let _ = writeln!(t, "\ntargets (ratios from this run)");
    for c in checks {
        let mark = match c.met {
            Some(true) => "met   ",
            Some(false) => "MISSED",
            None => "n/a   ",
        };
        let _ = writeln!(t, "  [{mark}] {:<55} {}", c.what, c.figures);
    }
    t
}

/// Targets of the inspector rows, in table order (`base` only with `--baseline`).
pub(crate) const INSPECTOR_TARGETS: [&str; 5] = ["direct", "base", "off", "on", "watched"];

/// The inspector part: its load rows (CPU per call and added latency against the inspector
/// off), and what the watcher read.
fn inspector_table(t: &mut String, r: &Value) {
    let _ = writeln!(
        t,
        "\nInspector, fixed upstream, JSON: off | enabled, nobody reading (on) | enabled, a page's \
         reader on /calls/stream and /calls/counts (watched)"
    );
    overhead_rows(t, r, &INSPECTOR_TARGETS, "off");
    let w = |k: &str| num(r, &format!("/watcher/{k}"));
    let _ = writeln!(
        t,
        "  the watcher read {} call events ({} KiB) and polled the counts {} times",
        f0(w("events")),
        f0(w("bytes").map(|b| b / 1024.0)),
        f0(w("polls")),
    );
}

/// Targets of the limits rows, in table order (`base` only with `--baseline`).
/// `again` is `none` once more: the run's own noise between two identical processes.
pub(crate) const LIMITS_TARGETS: [&str; 6] =
    ["direct", "base", "none", "again", "limits", "circuit"];

/// The limits part: its load rows (CPU per call and added latency against no limits), the
/// probe that shows the rule is on the call's path, and what the measured processes refused.
fn limits_table(t: &mut String, r: &Value) {
    let _ = writeln!(
        t,
        "\nCall limits, fixed upstream, JSON: none | a rule on the tool that never refuses (limits: {}) \
         | the rule and {} (circuit)",
        r["rule"].as_str().unwrap_or("?"),
        r["circuit"].as_str().unwrap_or("?"),
    );
    overhead_rows(t, r, &LIMITS_TARGETS, "none");
    versus(t, r, "limits", "base");
    let _ = writeln!(
        t,
        "  probe (the same match, one token an hour): first call {}, second {} -> {}",
        r["probe"]["first"].as_str().unwrap_or("?"),
        r["probe"]["second"].as_str().unwrap_or("?"),
        if r["probe"]["matched"].as_bool() == Some(true) {
            "the rule matches the benchmarked call"
        } else {
            "THE RULE DOES NOT MATCH THE BENCHMARKED CALL"
        },
    );
    instruction_rows(t, &r["instructions"]);
    if let Some(counted) = r["counted"].as_object() {
        let each: Vec<String> = counted
            .iter()
            .map(|(name, c)| {
                format!(
                    "{name} {} of {}",
                    f0(num(c, "/limit_hits")),
                    f0(num(c, "/calls"))
                )
            })
            .collect();
        let _ = writeln!(
            t,
            "  refused while measured (strata_limit_hits_total of strata_calls_total, warm-ups included): {}",
            each.join(", ")
        );
    }
}

/// The limits or keys part's instruction counts: each row's user-space instructions a call, and its
/// ratio to `none`'s (`instructions.rs`); a line saying why when valgrind was not there.
fn instruction_rows(t: &mut String, r: &Value) {
    let Some(agents) = r["agents"].as_object() else {
        let _ = writeln!(t, "  instructions a call: not counted (no valgrind)");
        return;
    };
    let _ = writeln!(
        t,
        "  instructions a call (Cachegrind, user space, {} calls a row; x: over none):",
        f0(num(r, "/calls"))
    );
    for (name, rows) in agents {
        let per_call = |x: &str| num(rows, &format!("/{x}/per_call"));
        let each: Vec<String> = ["none", "again", "limits", "circuit", "memory", "base"]
            .iter()
            .filter(|x| per_call(x).is_some())
            .map(|x| {
                let rel = per_call(x).zip(per_call("none")).map(|(a, b)| a / b);
                format!("{x} {} (x{})", f0(per_call(x)), f3(rel))
            })
            .collect();
        let _ = writeln!(t, "    {name}: {}", each.join(" | "));
    }
}

/// Targets of the keys rows, in table order (`base-*` only with `--baseline`), each store
/// beside the baseline build's.
pub(crate) const KEYS_TARGETS: [&str; 6] = [
    "direct",
    "none",
    "base-memory",
    "memory",
    "base-redis",
    "redis",
];

/// The keys part: its load rows (CPU per call and added latency against calls without a key),
/// each store against the baseline build's, and the checks that the keys were stored.
fn keys_table(t: &mut String, r: &Value) {
    let _ = writeln!(
        t,
        "\nIdempotency-Key, fixed upstream, JSON, a fresh key per call: none (no key) | memory store \
         | Redis store (redis-server {} on loopback) | base-*: the baseline build, the same stores",
        r["redis"]["version"].as_str().unwrap_or("?"),
    );
    overhead_rows(t, r, &KEYS_TARGETS, "none");
    versus(t, r, "memory", "base-memory");
    versus(t, r, "redis", "base-redis");
    if let Some(checked) = r["checked"].as_object() {
        let each: Vec<String> = checked
            .iter()
            .map(|(name, c)| {
                format!(
                    "{name} {} ({} store errors)",
                    if c["replayed"].as_bool() == Some(true) {
                        "replayed"
                    } else {
                        "NOT REPLAYED"
                    },
                    f0(num(c, "/store_errors")),
                )
            })
            .collect();
        let _ = writeln!(t, "  a key sent twice: {}", each.join(", "));
    }
    let _ = writeln!(
        t,
        "  Redis holds {} keys for {} keyed calls measured through it (warm-ups' and checks' keys too)",
        f0(num(r, "/redis/keys")),
        f0(num(r, "/redis/keyed_calls_measured")),
    );
    instruction_rows(t, &r["instructions"]);
}

/// Per load, `target` against `other` (when the run has both): added latency and CPU per call.
fn versus(t: &mut String, r: &Value, target: &str, other: &str) {
    let Some(load) = r["load"].as_object() else {
        return;
    };
    for (name, s) in load {
        if s["targets"].get(other).is_none() || s["targets"].get(target).is_none() {
            continue;
        }
        let v = |x: &str, k: &str| num(s, &format!("/targets/{x}/{k}"));
        let added = |x: &str, k: &str| Some(v(x, k)? - v("direct", k)?);
        let _ = writeln!(
            t,
            "  {name}: {target} vs {other}: +p50 {} vs {} us, +p99 {} vs {} us, cpu x{}",
            f1(added(target, "p50_us")),
            f1(added(other, "p50_us")),
            f1(added(target, "p99_us")),
            f1(added(other, "p99_us")),
            f2(v(target, "cpu_s_per_10k")
                .zip(v(other, "cpu_s_per_10k"))
                .map(|(a, b)| a / b)),
        );
    }
}

/// Targets of the telemetry rows, in table order (`base` only with `--baseline`).
pub(crate) const TELEMETRY_TARGETS: [&str; 6] = ["direct", "base", "off", "r0.01", "r1", "stall"];

/// The telemetry part: its load rows (CPU per call and added latency against export off), what
/// each traced process exported, and memory with the collector down.
fn telemetry_table(t: &mut String, r: &Value) {
    let _ = writeln!(
        t,
        "\nOpenTelemetry export, fixed upstream, JSON: off | traceidratio 0.01 (r0.01) and 1.0 (r1) to the \
         harness's OTLP sink | 1.0 to a sink that never answers (stall)"
    );
    overhead_rows(t, r, &TELEMETRY_TARGETS, "off");
    if let Some(exports) = r["exports"].as_object() {
        let _ = writeln!(
            t,
            "  exported over the rows (warm-ups included): calls counted by strata, OTLP requests and bytes the sink read, spans dropped"
        );
        for (name, e) in exports {
            let v = |k: &str| num(e, k);
            let sink = if e["sink"].is_null() {
                "no sink".to_owned()
            } else {
                format!(
                    "{} trace requests{}, {} KiB, {} B/call; {} metric requests",
                    f0(v("/sink/traces/requests")),
                    if name == "stall" { " (held)" } else { "" },
                    f0(v("/sink/traces/bytes").map(|b| b / 1024.0)),
                    f0(v("/trace_bytes_per_call")),
                    f0(v("/sink/metrics/requests")),
                )
            };
            let _ = writeln!(
                t,
                "  {:<7} {:>9} calls  dropped {:>9}  {}",
                name,
                f0(v("/calls")),
                f0(v("/dropped_spans")),
                sink
            );
        }
    }
    if let Some(m) = r["memory"].as_object() {
        let _ = writeln!(
            t,
            "  collector down ({}, nothing listening): {} calls at {} agents per process, RSS (MiB) before -> after",
            m.get("endpoint").and_then(Value::as_str).unwrap_or("?"),
            f0(m.get("calls").and_then(Value::as_f64)),
            f0(m.get("agents").and_then(Value::as_f64)),
        );
        for target in ["off", "down"] {
            let v = |k: &str| num(r, &format!("/memory/targets/{target}/{k}"));
            if v("before_mib").is_none() {
                continue;
            }
            let _ = writeln!(
                t,
                "  {:<7} {:>6} -> {:>6} ({:>+5}), max {:>6}, {:>5} after the drops; {} calls in {} s, {} errors; spans dropped {} of {}",
                target,
                f1(v("before_mib")),
                f1(v("after_mib")),
                f1(v("growth_mib")),
                f1(v("max_mib")),
                f1(v("after_drops_mib")),
                f0(v("calls")),
                f1(v("secs")),
                f0(v("errors")),
                dash(v("dropped_spans").filter(|_| target != "off"), f0),
                dash(v("spans").filter(|_| target != "off"), f0),
            );
        }
    }
}

/// Rows of a part that measures what a feature costs: each load's targets with their added
/// latency over direct, CPU per call, and both against `off` (the target without the
/// feature: `off`, or `none`).
fn overhead_rows(t: &mut String, r: &Value, targets: &[&str], off: &str) {
    let cpu_off = format!("cpu/{off}");
    let (p50_off, p99_off) = (format!("+p50-{off}"), format!("+p99-{off}"));
    let (rw, ow) = (cpu_off.len().max(7), p50_off.len().max(8));
    let vw = targets.iter().map(|t| t.len()).max().unwrap_or(0).max(7);
    let _ = writeln!(
        t,
        "{:<22} {:<vw$} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9} {:>rw$} {:>ow$} {:>ow$} {:>6}",
        "load",
        "via",
        "p50 us",
        "p99 us",
        "calls/s",
        "+p50",
        "+p99",
        "cpu s/10k",
        cpu_off,
        p50_off,
        p99_off,
        "errors"
    );
    if let Some(load) = r["load"].as_object() {
        for (name, s) in load {
            let v = |t: &str, k: &str| num(s, &format!("/targets/{t}/{k}"));
            let present = targets.iter().filter(|t| s["targets"].get(**t).is_some());
            for (i, target) in present.enumerate() {
                let proxied = *target != "direct";
                let added = |k: &str| {
                    proxied
                        .then(|| Some(v(target, k)? - v("direct", k)?))
                        .flatten()
                };
                let over_off = |k: &str| {
                    (proxied && *target != off)
                        .then(|| Some(v(target, k)? - v(off, k)?))
                        .flatten()
                };
                let cpu_ratio = (proxied && *target != off)
                    .then(|| Some(v(target, "cpu_s_per_10k")? / v(off, "cpu_s_per_10k")?))
                    .flatten();
                let _ = writeln!(
                    t,
                    "{:<22} {:<vw$} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9} {:>rw$} {:>ow$} {:>ow$} {:>6}",
                    if i == 0 { name.as_str() } else { "" },
                    target,
                    f1(v(target, "p50_us")),
                    f1(v(target, "p99_us")),
                    f0(v(target, "rps")),
                    dash(added("p50_us"), f1),
                    dash(added("p99_us"), f1),
                    dash(v(target, "cpu_s_per_10k"), f2),
                    dash(cpu_ratio, f2),
                    dash(over_off("p50_us"), f1),
                    dash(over_off("p99_us"), f1),
                    f0(v(target, "errors")),
                );
            }
        }
    }
}

fn dash(x: Option<f64>, f: fn(Option<f64>) -> String) -> String {
    x.map_or("-".into(), |x| f(Some(x)))
}

/// Key figures, for the comparison with the previous run.
fn key_figures(r: &Value) -> Vec<(String, Option<f64>)> {
    let mut out = Vec::new();
    if let Some(load) = r["load"].as_object() {
        for (name, s) in load {
            out.push((
                format!("{name}: strata calls/s / direct"),
                ratio(s, "strata", "direct", "rps"),
            ));
            out.push((
                format!("{name}: strata +p50 us"),
                minus(s, "strata", "direct", "p50_us"),
            ));
            out.push((
                format!("{name}: strata cpu s/10k"),
                num(s, "/targets/strata/cpu_s_per_10k"),
            ));
        }
    }
    out.push((
        "sse: strata p99 us".into(),
        num(r, "/sse_delivery/targets/strata/p99_us"),
    ));
    out.push((
        "large: strata MB/s".into(),
        num(r, "/big/targets/strata/mb_s"),
    ));
    out.push((
        "large: strata peak growth MiB".into(),
        num(r, "/big/targets/strata/peak_growth_mib"),
    ));
    out.push((
        "idle: strata MiB".into(),
        num(r, "/idle_rss_mib/fresh/strata"),
    ));
    out.push((
        "streams: strata KiB/stream".into(),
        num(r, "/streams/targets/strata/kib_per_stream"),
    ));
    out.push((
        "streams: strata MiB 10 s after close".into(),
        num(r, "/streams/targets/strata/after_close_10s_mib"),
    ));
    if let Some(load) = r["telemetry"]["load"].as_object() {
        for (name, s) in load {
            for t in ["r0.01", "r1"] {
                out.push((
                    format!("telemetry {name}: {t} cpu / off"),
                    ratio(s, t, "off", "cpu_s_per_10k"),
                ));
            }
        }
    }
    if let Some(load) = r["inspector"]["load"].as_object() {
        for (name, s) in load {
            for t in ["on", "watched"] {
                out.push((
                    format!("inspector {name}: {t} cpu / off"),
                    ratio(s, t, "off", "cpu_s_per_10k"),
                ));
            }
        }
    }
    for (part, off, rows) in [
        ("limits", "none", &["again", "limits", "circuit"][..]),
        ("keys", "none", &["memory", "redis"][..]),
    ] {
        if let Some(load) = r[part]["load"].as_object() {
            for (name, s) in load {
                for t in rows {
                    out.push((
                        format!("{part} {name}: {t} cpu / {off}"),
                        ratio(s, t, off, "cpu_s_per_10k"),
                    ));
                    out.push((
                        format!("{part} {name}: {t} +p50 us over {off}"),
                        minus(s, t, off, "p50_us"),
                    ));
                }
            }
        }
    }
    crate::report_paths::key_figures(r, &mut out);
    out.push((
        "telemetry down: RSS growth MiB".into(),
        num(r, "/telemetry/memory/targets/down/growth_mib"),
    ));
    out
}

fn compare(prev: &Value, now: &Value) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nchange since the previous run ({}, git {}, strata build {}); absolute figures move with the machine's load",
        prev["meta"]["when"].as_str().unwrap_or("?"),
        prev["meta"]["git"].as_str().unwrap_or("?"),
        prev["meta"]["strata_build"].as_str().unwrap_or("plain"),
    );
    let before: Vec<_> = key_figures(prev);
    for (name, value) in key_figures(now) {
        let old = before
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| *v);
        if let (Some(o), Some(n)) = (old, value) {
            let _ = writeln!(
                t,
                "  {name:<45} {o:>10.2} -> {n:>10.2}  ({:+.0}%)",
                (n - o) / o.abs().max(1e-9) * 100.0
            );
        }
    }
    t
}

/// A saved run (`proxy-*.json`) judged again by the current targets, its table printed; nothing
/// is written.
pub(crate) fn reprint(file: &Path) -> anyhow::Result<()> {
    let r: Value = serde_json::from_slice(&std::fs::read(file)?)?;
    println!("{}", table(&r, &checks(&r)));
    Ok(())
}

/// Prints the table (and the change since the last run), saves the run.
pub(crate) fn finish(plan: &Plan, mut r: Value) -> anyhow::Result<()> {
    let checks = checks(&r);
    r["targets"] = Value::Array(
        checks
            .iter()
            .map(|c| json!({"what": c.what, "figures": c.figures, "met": c.met}))
            .collect(),
    );
    let mut text = table(&r, &checks);
    std::fs::create_dir_all(&plan.out)?;
    let last = plan.out.join(if plan.quick {
        "proxy-quick-last.json"
    } else {
        "proxy-last.json"
    });
    if let Some(prev) = std::fs::read(&last)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    {
        text.push_str(&compare(&prev, &r));
    }
    println!("{text}");
    let stamp = shell("date", &["-u", "+%Y%m%dT%H%M%SZ"]);
    let file = plan.out.join(format!(
        "proxy-{}{stamp}.json",
        if plan.quick { "quick-" } else { "" }
    ));
    let json = serde_json::to_vec_pretty(&r)?;
    std::fs::write(&file, &json)?;
    std::fs::write(&last, &json)?;
    std::fs::write(file.with_extension("txt"), &text)?;
    println!("written: {} (and {})", file.display(), last.display());
    Ok(())
}
