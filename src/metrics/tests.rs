use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::classify::Outcome;

type Labels = BTreeMap<String, String>;

/// (labels, value) for every series of `family`; histograms report their sample count.
fn series(m: &Metrics, family: &str) -> Vec<(Labels, f64)> {
    let Some(mf) = m.registry.gather().into_iter().find(|f| f.name() == family) else {
        return Vec::new();
    };
    mf.get_metric()
        .iter()
        .map(|s| {
            let labels = s
                .get_label()
                .iter()
                .map(|l| (l.name().to_owned(), l.value().to_owned()))
                .collect();
            let value = match mf.get_field_type() {
                prometheus::proto::MetricType::COUNTER => s.get_counter().get_value(),
                prometheus::proto::MetricType::GAUGE => s.get_gauge().get_value(),
                prometheus::proto::MetricType::HISTOGRAM => {
                    s.get_histogram().get_sample_count() as f64
                }
                other => panic!("unexpected metric type {other:?}"),
            };
            (labels, value)
        })
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A gauge's value, over its shards.
fn total(gauge: &PerWorker<IntGauge>) -> i64 {
    gauge.iter().map(IntGauge::get).sum()
}

fn metrics() -> Arc<Metrics> {
    Metrics::new(8, 8).expect("metric families register")
}

/// Records one of everything, so every family has a series.
fn exercise(m: &Metrics) {
    let call = m.call("tools/call", "echo");
    call.record(Outcome::ToolSuccess, Duration::from_millis(30));
    call.retry(RetryReason::Http503);
    call.suppressed(SuppressReason::NotIdempotent);
    let _inflight = m.inflight_guard(1);
    let _sse = m.sse_stream_guard();
    let _pending = m.pending_resumable_guard();
    m.upstream_connect_error();
    m.http_request(HttpMethod::Post);
    m.response_bytes_here().add(10);
    m.limit_hit(Limit::HeaderSize);
    m.idempotent_replay(ReplayResult::Replayed);
    m.config_reload(ReloadResult::Ok);
    m.tls_handshake_error(TlsFailure::Timeout);
}

#[test]
fn handle_arrays_are_indexed_by_discriminant() {
    // `calls.rs` and `Metrics` index arrays with `value as usize`.
    for (i, o) in Outcome::ALL.iter().enumerate() {
        assert_eq!(*o as usize, i, "{o}");
    }
    for (i, r) in RetryReason::ALL.iter().enumerate() {
        assert_eq!(*r as usize, i, "{r}");
    }
    for (i, r) in SuppressReason::ALL.iter().enumerate() {
        assert_eq!(*r as usize, i, "{r}");
    }
    for (i, l) in Limit::ALL.iter().enumerate() {
        assert_eq!(*l as usize, i, "{l}");
    }
    for (i, f) in TlsFailure::ALL.iter().enumerate() {
        assert_eq!(*f as usize, i, "{f}");
    }
}

#[test]
fn methods_beyond_the_cap_are_other() {
    let m = Metrics::new(2, 8).unwrap();
    assert_eq!(m.call("initialize", "").method_label(), "initialize");
    assert_eq!(m.call("tools/list", "").method_label(), "tools/list");
    assert_eq!(m.call("resources/list", "").method_label(), OTHER);
    assert_eq!(m.call("made/up", "").method_label(), OTHER);
    // Values admitted before the cap filled keep their own label.
    assert_eq!(m.call("initialize", "").method_label(), "initialize");
}

#[test]
fn tools_beyond_the_cap_are_other_and_empty_tool_is_free() {
    let m = Metrics::new(8, 2).unwrap();
    for method in ["initialize", "tools/list", "ping"] {
        assert_eq!(m.call(method, "").tool_label(), "");
    }
    assert_eq!(m.call("tools/call", "a").tool_label(), "a");
    assert_eq!(m.call("tools/call", "b").tool_label(), "b");
    assert_eq!(m.call("tools/call", "c").tool_label(), OTHER);
    assert_eq!(m.call("tools/call", "a").tool_label(), "a");
    // Tools are capped across methods, not per method.
    assert_eq!(m.call("other/method", "d").tool_label(), OTHER);
    assert_eq!(m.call("ping", "").tool_label(), "");
}

#[test]
fn overlong_values_and_zero_caps_are_other() {
    let m = Metrics::new(8, 8).unwrap();
    let long = "x".repeat(MAX_LABEL_BYTES + 1);
    assert_eq!(m.call("tools/call", &long).tool_label(), OTHER);
    assert_eq!(m.call(&long, "").method_label(), OTHER);
    let fits = "y".repeat(MAX_LABEL_BYTES);
    assert_eq!(m.call("tools/call", &fits).tool_label(), fits);

    let none = Metrics::new(0, 0).unwrap();
    let h = none.call("tools/call", "echo");
    assert_eq!((h.method_label(), h.tool_label()), (OTHER, OTHER));
    assert_eq!(none.call("ping", "").tool_label(), "");
}

#[test]
fn capped_calls_share_one_series() {
    let m = Metrics::new(8, 1).unwrap();
    m.call("tools/call", "a")
        .record(Outcome::ToolError, Duration::ZERO);
    m.call("tools/call", "b")
        .record(Outcome::ToolError, Duration::ZERO);
    m.call("tools/call", "c")
        .record(Outcome::ToolError, Duration::ZERO);
    let calls = series(&m, "strata_calls_total");
    let tools: Vec<(&str, f64)> = calls
        .iter()
        .map(|(l, v)| (l["tool"].as_str(), *v))
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        tools.contains(&("a", 1.0)) && tools.contains(&(OTHER, 2.0)),
        "{tools:?}"
    );
}

#[test]
fn record_increments_exactly_the_right_series() {
    let m = metrics();
    let call = m.call("tools/call", "echo");
    call.record(Outcome::ToolSuccess, Duration::from_millis(150));
    call.record(Outcome::ToolSuccess, Duration::from_millis(30));
    m.call("initialize", "")
        .record(Outcome::HttpError, Duration::from_secs(400));

    let mut calls = series(&m, "strata_calls_total");
    calls.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        calls,
        vec![
            (
                labels(&[
                    ("layer", "application"),
                    ("method", "tools/call"),
                    ("outcome", "TOOL_SUCCESS"),
                    ("tool", "echo"),
                ]),
                2.0
            ),
            (
                labels(&[
                    ("layer", "transport"),
                    ("method", "initialize"),
                    ("outcome", "HTTP_ERROR"),
                    ("tool", ""),
                ]),
                1.0
            ),
        ]
    );
    let durations = series(&m, "strata_call_duration_seconds");
    assert_eq!(durations.len(), 2);
    let echo = labels(&[
        ("method", "tools/call"),
        ("outcome", "TOOL_SUCCESS"),
        ("tool", "echo"),
    ]);
    assert!(durations.contains(&(echo, 2.0)), "{durations:?}");

    let text = m.render();
    assert!(text.contains(
        r#"strata_call_duration_seconds_bucket{method="tools/call",outcome="TOOL_SUCCESS",tool="echo",le="0.05"} 1"#
    ), "{text}");
    assert!(text.contains(
        r#"strata_call_duration_seconds_bucket{method="tools/call",outcome="TOOL_SUCCESS",tool="echo",le="0.2"} 2"#
    ), "{text}");
    // 400 s is past the last bucket: only +Inf counts it.
    assert!(text.contains(
        r#"strata_call_duration_seconds_bucket{method="initialize",outcome="HTTP_ERROR",tool="",le="300"} 0"#
    ), "{text}");
}

#[test]
fn retries_and_suppressions_count_by_reason() {
    let m = metrics();
    let call = m.call("tools/call", "echo");
    call.retry(RetryReason::Http502);
    call.retry(RetryReason::Http502);
    call.suppressed(SuppressReason::BudgetExhausted);
    let key = |reason| {
        labels(&[
            ("method", "tools/call"),
            ("reason", reason),
            ("tool", "echo"),
        ])
    };
    assert_eq!(
        series(&m, "strata_retries_total"),
        vec![(key("http_502"), 2.0)]
    );
    assert_eq!(
        series(&m, "strata_retries_suppressed_total"),
        vec![(key("budget_exhausted"), 1.0)]
    );
}

#[test]
fn gauge_guards_decrement_on_drop() {
    let m = metrics();
    let a = m.inflight_guard(1);
    let b = m.inflight_guard(3);
    let s = m.sse_stream_guard();
    assert_eq!(total(&m.inflight), 4);
    assert_eq!(total(&m.sse_streams_open), 1);
    drop(a);
    assert_eq!(total(&m.inflight), 3);
    drop((b, s));
    assert_eq!((total(&m.inflight), total(&m.sse_streams_open)), (0, 0));
}

#[test]
fn closed_label_sets_exist_before_the_first_event() {
    let m = metrics();
    let limits = series(&m, "strata_limit_hits_total");
    assert_eq!(limits.len(), Limit::COUNT);
    assert!(limits.iter().all(|(_, v)| *v == 0.0));
    m.limit_hit(Limit::ReplayBuffer);
    assert!(
        series(&m, "strata_limit_hits_total")
            .contains(&(labels(&[("limit", "replay_buffer")]), 1.0))
    );
    let info = series(&m, "strata_build_info");
    assert_eq!(
        info,
        vec![(labels(&[("version", env!("CARGO_PKG_VERSION"))]), 1.0)]
    );
}

#[test]
fn render_has_help_for_every_family() {
    let m = metrics();
    exercise(&m);
    let text = m.render();
    for (name, _) in PINNED {
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "no HELP for {name}:\n{text}"
        );
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "no TYPE for {name}:\n{text}"
        );
    }
}

/// The exported contract: family names and label names. Changing this list is a breaking
/// change for every dashboard and alert built on strata; do it deliberately.
const PINNED: &[(&str, &[&str])] = &[
    ("strata_build_info", &["version"]),
    (
        "strata_call_duration_seconds",
        &["method", "outcome", "tool"],
    ),
    (
        "strata_calls_total",
        &["layer", "method", "outcome", "tool"],
    ),
    ("strata_capture_entries_total", &["result"]),
    ("strata_circuit_state", &["scope"]),
    ("strata_circuit_transitions_total", &["scope", "to"]),
    ("strata_config_reloads_total", &["result"]),
    ("strata_http_requests_total", &["method"]),
    ("strata_idempotent_replays_total", &["result"]),
    ("strata_inflight_calls", &[]),
    ("strata_limit_hits_total", &["limit"]),
    ("strata_pending_resumable_calls", &[]),
    ("strata_response_bytes_total", &[]),
    (
        "strata_retries_suppressed_total",
        &["method", "reason", "tool"],
    ),
    ("strata_retries_total", &["method", "reason", "tool"]),
    ("strata_sse_streams_open", &[]),
    ("strata_telemetry_dropped_total", &["signal"]),
    ("strata_tls_handshake_errors_total", &["reason"]),
    ("strata_upstream_connect_errors_total", &[]),
];

#[test]
fn exported_families_and_labels_are_pinned() {
    let m = metrics();
    exercise(&m);
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    for mf in m.registry.gather() {
        assert!(!mf.help().is_empty(), "{} has no HELP", mf.name());
        let mut names: Vec<String> = mf.get_metric()[0]
            .get_label()
            .iter()
            .map(|l| l.name().to_owned())
            .collect();
        names.sort();
        found.push((mf.name().to_owned(), names));
    }
    found.sort();
    let pinned: Vec<(String, Vec<String>)> = PINNED
        .iter()
        .map(|(n, ls)| {
            (
                (*n).to_owned(),
                ls.iter().map(|l| (*l).to_owned()).collect(),
            )
        })
        .collect();
    assert_eq!(found, pinned);
}

#[test]
fn label_values_are_pinned() {
    let all = |v: &[&'static str]| v.join(",");
    assert_eq!(
        all(&RetryReason::ALL.map(RetryReason::as_str)),
        "http_502,http_503,http_504,http_429,connect_error,upstream_reset"
    );
    assert_eq!(
        all(&SuppressReason::ALL.map(SuppressReason::as_str)),
        "not_idempotent,budget_exhausted,body_too_large,retry_after_too_long,committed,deadline,attempts_exhausted,limited"
    );
    assert_eq!(
        all(&HttpMethod::ALL.map(HttpMethod::as_str)),
        "GET,POST,DELETE,OTHER"
    );
    assert_eq!(
        all(&Limit::ALL.map(Limit::as_str)),
        "header_size,header_timeout,request_inspect_bytes,max_connections,replay_buffer,pending_calls,batch_requests,origin,request_body_timeout,rate,concurrency,circuit"
    );
    assert_eq!(
        all(&CircuitState::ALL.map(CircuitState::as_str)),
        "closed,open,half_open"
    );
    assert_eq!(
        all(&ReplayResult::ALL.map(ReplayResult::as_str)),
        "replayed,conflict,mismatch,store_error"
    );
    assert_eq!(
        all(&ReloadResult::ALL.map(ReloadResult::as_str)),
        "ok,error"
    );
    assert_eq!(
        all(&TlsFailure::ALL.map(TlsFailure::as_str)),
        "timeout,client_cert,error"
    );
    assert_eq!(
        HttpMethod::from_http(&http::Method::PATCH),
        HttpMethod::Other
    );
    assert_eq!(
        HttpMethod::from_http(&http::Method::DELETE),
        HttpMethod::Delete
    );
}

#[test]
fn concurrent_first_calls_respect_the_cap() {
    let m = Metrics::new(8, 4).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let m = &m;
            s.spawn(move || {
                for i in 0..50 {
                    m.call("tools/call", &format!("tool-{}", (t * 50 + i) % 20))
                        .record(Outcome::ToolSuccess, Duration::ZERO);
                }
            });
        }
    });
    let calls = series(&m, "strata_calls_total");
    let total: f64 = calls.iter().map(|(_, v)| v).sum();
    assert_eq!(total, 400.0);
    // Four admitted tools plus `_other`.
    assert_eq!(calls.len(), 5, "{calls:?}");
}

/// `with_call` (the data path's: this thread's copy) gives the pair `call` gives, capping
/// included, whether the pair is in the thread's copy, just added to it, or past its bound.
#[test]
fn with_call_gives_what_call_gives() {
    let m = Metrics::new(8, 2).unwrap();
    let tools: Vec<String> = (0..calls::LOCAL_PAIRS + 8)
        .map(|i| format!("t{i}"))
        .collect();
    for _ in 0..2 {
        for tool in &tools {
            let (method, label) = m.with_call("tools/call", tool, |h| {
                (h.method_label().to_owned(), h.tool_label().to_owned())
            });
            let direct = m.call("tools/call", tool);
            assert_eq!(
                (method.as_str(), label.as_str()),
                (direct.method_label(), direct.tool_label())
            );
            m.with_call("tools/call", tool, |h| {
                h.record(Outcome::ToolError, Duration::ZERO)
            });
        }
    }
    // Two tools admitted, the rest share `_other`: every call counted once per round.
    let calls = series(&m, "strata_calls_total");
    let count = |tool: &str| {
        calls
            .iter()
            .filter(|(l, _)| l["tool"] == tool)
            .map(|(_, v)| *v)
            .sum::<f64>()
    };
    assert_eq!((count("t0"), count("t1")), (2.0, 2.0));
    assert_eq!(count(OTHER), 2.0 * (tools.len() - 2) as f64);
}

/// Each worker writes a shard of its own (`shards.rs`); a scrape sums them, series by
/// series: the same call counted on three threads is one series with the sum, the duration
/// histogram's buckets, count and sum add up, a series only one shard has is there too, and a
/// gauge raised on one thread and lowered on another is back to 0.
#[test]
fn a_scrape_sums_each_series_over_the_workers_shards() {
    let m = metrics();
    let guards: Vec<GaugeGuard> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|worker| {
                let m = &m;
                s.spawn(move || {
                    crate::runtime::per_worker::enter(worker);
                    let call = m.call("tools/call", "echo");
                    for _ in 0..=worker {
                        call.record(Outcome::ToolSuccess, Duration::from_millis(30));
                    }
                    if worker == 2 {
                        call.record(Outcome::ToolError, Duration::from_secs(3));
                    }
                    m.http_request(HttpMethod::Post);
                    m.response_bytes_here().add(100);
                    m.inflight_guard(2)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let key = |outcome: &str, layer: &str| {
        labels(&[
            ("method", "tools/call"),
            ("tool", "echo"),
            ("layer", layer),
            ("outcome", outcome),
        ])
    };
    let mut calls = series(&m, "strata_calls_total");
    calls.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        calls,
        vec![
            (key("TOOL_ERROR", "application"), 1.0),
            (key("TOOL_SUCCESS", "application"), 6.0)
        ]
    );
    let text = m.render();
    let line = |prefix: &str, has: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix) && l.contains("TOOL_SUCCESS") && l.contains(has))
            .map(str::to_owned)
    };
    let le = |bound: &str| {
        line(
            "strata_call_duration_seconds_bucket",
            &format!("le=\"{bound}\""),
        )
    };
    assert!(le("0.02").is_some_and(|l| l.ends_with(" 0")), "{text}");
    assert!(le("0.05").is_some_and(|l| l.ends_with(" 6")), "{text}");
    assert!(
        line("strata_call_duration_seconds_count", "").is_some_and(|l| l.ends_with(" 6")),
        "{text}"
    );
    let sum = line("strata_call_duration_seconds_sum", "")
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    assert!(sum.is_some_and(|s| (s - 0.18).abs() < 1e-9), "{sum:?}");
    assert_eq!(
        series(&m, "strata_http_requests_total")
            .into_iter()
            .find(|(l, _)| l == &labels(&[("method", "POST")])),
        Some((labels(&[("method", "POST")]), 3.0))
    );
    assert_eq!(series(&m, "strata_response_bytes_total")[0].1, 300.0);
    assert_eq!(series(&m, "strata_inflight_calls")[0].1, 6.0);
    // Lowered here, on a thread of no worker's: each guard takes back what it added where it
    // added it.
    drop(guards);
    assert_eq!(series(&m, "strata_inflight_calls")[0].1, 0.0);
    assert!(m.inflight.iter().all(|g| g.get() == 0));
}
