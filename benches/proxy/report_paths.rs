//! The paths part's table: per path and agent count, each target's latency and CPU per call,
//! its added latency over the direct connection, and its CPU per call against nginx's.

use std::fmt::Write as _;

use serde_json::Value;

use crate::report::{minus, num, ratio};
use crate::targets::{f0, f1, f2};

/// Targets of the paths rows, in table order (`base` only with `--baseline`, on the plain
/// front's paths).
pub(crate) const PATHS_TARGETS: [&str; 5] = ["direct", "nginx", "haproxy", "strata", "base"];

pub(crate) fn table(t: &mut String, r: &Value) {
    let _ = writeln!(
        t,
        "\nPaths, fixed upstream: each beside nginx doing the same job and HAProxy in TCP mode \
         (the layer-4 floor, where it can do the job; {}); every TLS connection {}; direct: \
         HTTP/1.1 to the plain upstream",
        r["haproxy"].as_str().unwrap_or("(absent)"),
        r["tls"].as_str().unwrap_or("?"),
    );
    if let Some(paths) = r["paths"].as_object() {
        for (name, p) in paths {
            let fields: Vec<&str> = p["fields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let _ = writeln!(
                t,
                "  {:<14} agents {}, {} upstream, POST {} of {} bytes{}{}{}",
                name,
                p["agent"].as_str().unwrap_or("?"),
                p["upstream"].as_str().unwrap_or("?"),
                p["url"].as_str().unwrap_or("?"),
                f0(num(p, "/request_bytes")),
                if fields.is_empty() {
                    String::new()
                } else {
                    format!(", {}", fields.join(", "))
                },
                if p["keyed"].as_array().is_some_and(|k| !k.is_empty()) {
                    ", each proxied call with a fresh Idempotency-Key"
                } else {
                    ""
                },
                p["no_floor"]
                    .as_str()
                    .map_or(String::new(), |why| format!("; no HAProxy row: {why}")),
            );
            if let Some(by) = r["replayed"][name.as_str()].as_object() {
                let by: Vec<&str> = by.keys().map(String::as_str).collect();
                let _ = writeln!(
                    t,
                    "  {:<14} after the loads, a key sent twice was replayed by {}",
                    "",
                    by.join(", ")
                );
            }
        }
    }
    let _ = writeln!(
        t,
        "{:<26} {:<7} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9} {:>9} {:>6}",
        "load",
        "via",
        "p50 us",
        "p99 us",
        "calls/s",
        "+p50",
        "+p99",
        "cpu s/10k",
        "cpu/nginx",
        "errors"
    );
    let Some(load) = r["load"].as_object() else {
        return;
    };
    for (name, s) in load {
        rows(t, name, s);
    }
}

/// One load's rows.
fn rows(t: &mut String, name: &str, s: &Value) {
    let v = |x: &str, k: &str| num(s, &format!("/targets/{x}/{k}"));
    let present = PATHS_TARGETS
        .iter()
        .filter(|x| s["targets"].get(**x).is_some());
    for (i, x) in present.enumerate() {
        let proxied = *x != "direct";
        let added = |k: &str| proxied.then(|| Some(v(x, k)? - v("direct", k)?)).flatten();
        let cpu_nginx = (proxied && *x != "nginx")
            .then(|| Some(v(x, "cpu_s_per_10k")? / v("nginx", "cpu_s_per_10k")?))
            .flatten();
        let _ = writeln!(
            t,
            "{:<26} {:<7} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9} {:>9} {:>6}",
            if i == 0 { name } else { "" },
            x,
            f1(v(x, "p50_us")),
            f1(v(x, "p99_us")),
            f0(v(x, "rps")),
            dash(added("p50_us"), f1),
            dash(added("p99_us"), f1),
            dash(v(x, "cpu_s_per_10k"), f2),
            dash(cpu_nginx, f2),
            f0(v(x, "errors")),
        );
    }
}

fn dash(x: Option<f64>, f: fn(Option<f64>) -> String) -> String {
    x.map_or("-".into(), |x| f(Some(x)))
}

/// Key figures for the comparison with the previous run: strata's CPU per call against
/// nginx's, and its added p50, per path.
pub(crate) fn key_figures(r: &Value, out: &mut Vec<(String, Option<f64>)>) {
    let Some(load) = r["paths"]["load"].as_object() else {
        return;
    };
    for (name, s) in load {
        out.push((
            format!("{name}: strata cpu / nginx"),
            ratio(s, "strata", "nginx", "cpu_s_per_10k"),
        ));
        out.push((
            format!("{name}: strata +p50 us"),
            minus(s, "strata", "direct", "p50_us"),
        ));
    }
}
