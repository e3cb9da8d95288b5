//! The scan benchmark's ratios, measured interleaved: every round runs each function on each
//! body for a short slice of time, in turn, and each function keeps its best round. On a
//! shared machine the load moves between seconds; side by side, a ratio sees the same load on
//! both sides, and the best round is the one least disturbed. criterion (`benches/scan.rs`)
//! gives the distributions; this gives the verdict on the targets:
//!
//! - at least 3× the throughput of `serde_json::Value` on every body;
//! - not slower than `serde::de::IgnoredAny` on any body;
//! - on the 16 MiB string-heavy body, at least 20 % of a plain `memchr` pass.
//!
//! The serde baselines parse what a buffering classifier would parse: the whole body, or for
//! the SSE stream each event's data, framed from the buffered stream by the cheapest framer
//! that handles these streams (`bodies::for_each_document`). The SSE line also shows
//! `IgnoredAny` on the data cut out beforehand (`Ignored cut`: no framing at all, a floor no
//! classifier of an SSE stream has), for information; the target is judged on the framed one.
//!
//! `cargo bench --bench scan_ratios` (or `bench/scan-ratios.sh`). Exit status 1 when a target
//! is missed. `STRATA_SCAN_ROUNDS` (default 25) and `STRATA_SCAN_SLICE_MS` (default 25) set
//! the effort.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_types
)]

#[path = "common/bodies.rs"]
mod bodies;

use std::hint::black_box;
use std::time::{Duration, Instant};

use bodies::{Case, cases, classify, for_each_document, requests};
use strata::classify::exchange::ContentKind;

const FUNCS: [&str; 6] = [
    "strata",
    "serde_value",
    "serde_ignored",
    "memchr_absent",
    "utf8_only",
    "serde_ignored_cut",
];

/// Runs `f` repeatedly for about `slice`; returns nanoseconds per run.
fn time_slice(slice: Duration, mut f: impl FnMut()) -> f64 {
    // One run first: the slice is measured warm.
    f();
    let start = Instant::now();
    let mut runs = 0u64;
    while start.elapsed() < slice {
        f();
        runs += 1;
    }
    start.elapsed().as_nanos() as f64 / runs.max(1) as f64
}

fn run(case: &Case, func: &str, slice: Duration) -> f64 {
    let reqs = requests(case.request);
    let mut scratch = Vec::new();
    match func {
        "strata" => time_slice(slice, || {
            black_box(classify(&reqs, case));
        }),
        "serde_value" => time_slice(slice, || {
            for_each_document(case, &mut scratch, |doc| {
                let v: serde_json::Value = serde_json::from_slice(black_box(doc)).unwrap();
                black_box(v);
            });
        }),
        "serde_ignored" => time_slice(slice, || {
            for_each_document(case, &mut scratch, |doc| {
                let v: serde::de::IgnoredAny = serde_json::from_slice(black_box(doc)).unwrap();
                black_box(v);
            });
        }),
        "serde_ignored_cut" => time_slice(slice, || {
            for doc in &case.documents {
                let v: serde::de::IgnoredAny = serde_json::from_slice(black_box(doc)).unwrap();
                black_box(v);
            }
        }),
        "memchr_absent" => time_slice(slice, || {
            black_box(memchr::memchr(0xFF, black_box(&case.body)));
        }),
        // UTF-8 validation alone (simdutf8, SIMD): what a separate validating pass costs,
        // shown beside the memchr pass. (strata validates inside its string pass.)
        _ => time_slice(slice, || {
            black_box(simdutf8::basic::from_utf8(black_box(&case.body)).is_ok());
        }),
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument picks bodies by name. Without it
    // (`cargo test --all-targets`), only check that each body reaches its expected verdict.
    let bench = std::env::args().any(|a| a == "--bench");
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rounds = env_or("STRATA_SCAN_ROUNDS", 25);
    let slice = Duration::from_millis(env_or("STRATA_SCAN_SLICE_MS", 25));
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| filter.is_empty() || filter.iter().any(|f| c.name.contains(f.as_str())))
        .collect();
    for case in &cases {
        assert_eq!(classify(&requests(case.request), case), case.expect);
        // The baselines' framing finds exactly the documents cut out in advance.
        let mut framed = Vec::new();
        for_each_document(case, &mut Vec::new(), |doc| framed.push(doc.to_vec()));
        assert_eq!(framed, case.documents, "{}: framed documents", case.name);
    }
    if !bench {
        println!("scan_ratios: each body classified as expected; measure with --bench");
        return;
    }
    // best[case][func]: the fewest nanoseconds per run over the rounds.
    let mut best = vec![[f64::INFINITY; FUNCS.len()]; cases.len()];
    for _ in 0..rounds {
        for (c, case) in cases.iter().enumerate() {
            for (f, func) in FUNCS.iter().enumerate() {
                if *func == "serde_ignored_cut" && case.content != ContentKind::Sse {
                    continue; // the same as `serde_ignored` on a JSON body
                }
                best[c][f] = best[c][f].min(run(case, func, slice));
            }
        }
    }
    println!(
        "best of {rounds} interleaved rounds, GB/s (10^9 bytes/s)\n{:<18} {:>9} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "body",
        "bytes",
        "strata",
        "Value",
        "Ignored",
        "memchr",
        "utf8",
        "÷Value",
        "÷Ignored",
        "÷memchr"
    );
    let mut missed = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        let gbps = |f: usize| case.body.len() as f64 / best[c][f];
        let (s, v, i, m, u) = (gbps(0), gbps(1), gbps(2), gbps(3), gbps(4));
        println!(
            "{:<18} {:>9} {:>8.2} {:>8.2} {:>8.2} {:>10.1} {:>9.1} {:>8.2}x {:>8.2}x {:>8.1}%",
            case.name,
            case.body.len(),
            s,
            v,
            i,
            m,
            u,
            s / v,
            s / i,
            100.0 * s / m
        );
        if s < 3.0 * v {
            missed.push(format!(
                "{}: {:.2}x the Value parse (target >= 3x)",
                case.name,
                s / v
            ));
        }
        if s < i {
            missed.push(format!(
                "{}: {:.2}x IgnoredAny (target >= 1x)",
                case.name,
                s / i
            ));
        }
        if case.name == "string_heavy_16m" && s < 0.2 * m {
            missed.push(format!(
                "{}: {:.1}% of memchr (target >= 20%)",
                case.name,
                100.0 * s / m
            ));
        }
    }
    for (c, case) in cases.iter().enumerate() {
        if case.content == ContentKind::Sse {
            let cut = case.body.len() as f64 / best[c][5];
            let s = case.body.len() as f64 / best[c][0];
            println!(
                "{}: IgnoredAny on the data cut out beforehand (no framing) {cut:.2} GB/s, strata {:.2}x that (information, not a target)",
                case.name,
                s / cut
            );
        }
    }
    if missed.is_empty() {
        println!("\nall targets met");
    } else {
        println!("\nMISSED:");
        for m in &missed {
            println!("  {m}");
        }
        std::process::exit(1);
    }
}
