//! The wrk part's tables: per agent count, each generator's figures for every target side by
//! side, and whether the two agree in direction on strata against nginx; then where a call's
//! CPU goes under wrk, and how much of it is above the layer-4 floor.

use std::fmt::Write as _;

use serde_json::Value;

use crate::report::{minus, num, ratio};
use crate::targets::{f0, f1, f2, f3};

pub(crate) fn table(t: &mut String, r: &Value) {
    let _ = writeln!(
        t,
        "\nThe fixed JSON scenario through two load generators, the harness's and {}",
        r["wrk"].as_str().unwrap_or("wrk")
    );
    // The columns of [`rows`].
    t.push_str("load               by       via       p50 us   p99 us   calls/s     +p50 cpu s/10k cpu/nginx errors\n");
    let Some(load) = r["load"].as_object() else {
        return;
    };
    for (name, s) in load {
        for by in ["harness", "wrk"] {
            rows(t, name, by, &s[by]);
        }
        let word = |by: &str, k: usize| match s["sides"][by][k].as_i64() {
            Some(-1) => "below",
            Some(0) => "level",
            Some(1) => "above",
            _ => "?",
        };
        let _ = writeln!(
            t,
            "{:<18} strata against nginx (level: within 5 %, or not so in 4 of 5 rounds), harness / wrk: CPU per call {} / {}, \
             added p50 {} / {}",
            "",
            word("harness", 0),
            word("wrk", 0),
            word("harness", 1),
            word("wrk", 1),
        );
    }
    split(t, load);
}

/// Per agent count under wrk: each proxy's user and kernel time, syscalls and context switches
/// a call, and for strata and nginx what lies above HAProxy's (the layer-4 floor).
fn split(t: &mut String, load: &serde_json::Map<String, Value>) {
    t.push_str(
        "\nWhere a call's CPU goes under wrk (a call: user and kernel us, syscalls, context \
         switches; above the floor: minus HAProxy's)\n\
         load               via       user us kernel us  syscalls  switches | above floor: user us kernel us\n",
    );
    for (name, s) in load {
        let s = &s["wrk"];
        let v = |x: &str, k: &str| num(s, &format!("/targets/{x}/{k}"));
        for (i, x) in ["nginx", "strata", "haproxy"].into_iter().enumerate() {
            if s.pointer(&format!("/targets/{x}")).is_none() {
                continue;
            }
            let above = |k: &str| match x {
                "haproxy" => None,
                _ => v(x, k).zip(v("haproxy", k)).map(|(a, b)| a - b),
            };
            let _ = writeln!(
                t,
                "{:<18} {:<7} {:>9} {:>9} {:>9} {:>9} | {:>20} {:>9}",
                if i == 0 { name.as_str() } else { "" },
                x,
                f2(v(x, "user_us")),
                f2(v(x, "system_us")),
                f2(v(x, "syscalls")),
                f3(v(x, "switches")),
                above("user_us").map_or("-".into(), |a| f2(Some(a))),
                above("system_us").map_or("-".into(), |a| f2(Some(a))),
            );
        }
    }
}

fn rows(t: &mut String, name: &str, by: &str, s: &Value) {
    let v = |x: &str, k: &str| num(s, &format!("/targets/{x}/{k}"));
    for (i, x) in ["direct", "nginx", "strata", "haproxy"]
        .into_iter()
        .enumerate()
    {
        if s.pointer(&format!("/targets/{x}")).is_none() {
            continue;
        }
        let proxied = x != "direct";
        let added = proxied.then(|| minus(s, x, "direct", "p50_us")).flatten();
        let cpu_nginx = (x == "strata")
            .then(|| ratio(s, x, "nginx", "cpu_s_per_10k"))
            .flatten();
        let _ = writeln!(
            t,
            "{:<18} {:<8} {:<7} {:>8} {:>8} {:>9} {:>8} {:>9} {:>9} {:>6}",
            if i == 0 && by == "harness" { name } else { "" },
            if i == 0 { by } else { "" },
            x,
            f1(v(x, "p50_us")),
            f1(v(x, "p99_us")),
            f0(v(x, "rps")),
            added.map_or("-".into(), |a| f1(Some(a))),
            v(x, "cpu_s_per_10k").map_or("-".into(), |c| f2(Some(c))),
            cpu_nginx.map_or("-".into(), |c| f2(Some(c))),
            f0(v(x, "errors")),
        );
    }
}
