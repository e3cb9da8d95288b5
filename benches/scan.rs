//! The classifier's cost per byte, against what a buffering classifier would pay.
//!
//! For each body, five measurements, all reported as throughput (bytes of the body per second):
//! - `strata`: the streaming classifier as the proxy runs it — `Exchange::new` for the
//!   request, the response head, the body fed in 16 KiB chunks (JSON scanner, or SSE framer
//!   plus a JSON scanner per event), and the end with its verdicts;
//! - `serde_value`: `serde_json::from_slice::<serde_json::Value>` on the whole buffer (what a
//!   buffering classifier does);
//! - `serde_ignored`: `serde_json::from_slice::<serde::de::IgnoredAny>` on the whole buffer
//!   (validation only, nothing kept);
//! - `memchr_absent`: `memchr::memchr(0xFF, body)` — a byte that never occurs in UTF-8 text,
//!   so the pass reads every byte and stops nowhere: the cost of merely reading the bytes;
//! - `memchr_quotes`: `memchr::memchr_iter(b'"', body).count()`, for reference.
//!
//! For the SSE stream the serde baselines parse each event's `data`, framed from the buffered
//! stream by the cheapest framer that handles it (`bodies::for_each_document`), and
//! `serde_ignored_cut` parses the data cut out beforehand (no framing: a floor, for
//! information); the memchr passes run over the whole stream.
//!
//! `bench/scan-ratios.sh` runs this and prints the ratios. Defaults: 1 s warm-up, 3 s
//! measurement, 20 samples; criterion's own flags override them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[path = "common/bodies.rs"]
mod bodies;

use bodies::{cases, classify, for_each_document, requests};
use strata::classify::exchange::ContentKind;

fn scan(c: &mut Criterion) {
    for case in cases() {
        let reqs = requests(case.request);
        // What is measured is the path that reaches the expected verdict.
        assert_eq!(classify(&reqs, &case), case.expect, "{}", case.name);
        for doc in &case.documents {
            serde_json::from_slice::<serde_json::Value>(doc).expect("valid JSON");
        }
        let mut group = c.benchmark_group(format!("scan_{}", case.name));
        group.throughput(Throughput::Bytes(case.body.len() as u64));
        group.bench_function("strata", |b| {
            b.iter(|| classify(&reqs, &case));
        });
        let mut scratch = Vec::new();
        group.bench_function("serde_value", |b| {
            b.iter(|| {
                for_each_document(&case, &mut scratch, |doc| {
                    let v: serde_json::Value = serde_json::from_slice(black_box(doc)).unwrap();
                    black_box(v);
                });
            });
        });
        group.bench_function("serde_ignored", |b| {
            b.iter(|| {
                for_each_document(&case, &mut scratch, |doc| {
                    let v: serde::de::IgnoredAny = serde_json::from_slice(black_box(doc)).unwrap();
                    black_box(v);
                });
            });
        });
        if case.content == ContentKind::Sse {
            group.bench_function("serde_ignored_cut", |b| {
                b.iter(|| {
                    for doc in &case.documents {
                        let v: serde::de::IgnoredAny =
                            serde_json::from_slice(black_box(doc)).unwrap();
                        black_box(v);
                    }
                });
            });
        }
        group.bench_function("memchr_absent", |b| {
            b.iter(|| memchr::memchr(0xFF, black_box(&case.body)));
        });
        group.bench_function("memchr_quotes", |b| {
            b.iter(|| memchr::memchr_iter(b'"', black_box(&case.body)).count());
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = scan
}
criterion_main!(benches);
