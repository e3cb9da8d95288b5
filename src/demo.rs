//! `strata demo` and `strata testbed`.
//!
//! The demo starts the testbed and strata in-process (both on `127.0.0.1:0`), makes one
//! `tools/call` per scenario through strata, and prints what strata made of each call: the
//! outcome comes from strata's own `strata_calls_total` counters (the delta each call caused),
//! not from the client. Scenarios that only exist in the legacy era (`legacy_only`) run in a
//! 2025-11-25 session; every other one runs as a stateless 2026-07-28 call.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use tokio::time::{Instant, sleep, timeout};

use crate::app::{self, Running};
use crate::classify::Outcome;
use crate::config::{Config, LogFormat, Upstream};
use crate::table::Table;
use crate::testbed::client::{self, LEGACY_VERSION, MODERN_VERSION, McpClient, Reply};
use crate::testbed::{SCENARIOS, Scenario, Testbed};

/// The whole demo must end within this (it takes about two seconds: `slow` waits 1 s and
/// `sse_drip` 0.5 s).
const DEMO_LIMIT: Duration = Duration::from_secs(30);
/// How long to wait for a call's classification to show in the counters after the agent saw
/// the end of its response (it is normally there already: strata counts before it forwards
/// the last frame).
const SETTLE_LIMIT: Duration = Duration::from_secs(2);
const SETTLE_POLL: Duration = Duration::from_millis(5);
/// The metric the table is read from.
const CALLS_TOTAL: &str = "strata_calls_total";

/// One `strata_calls_total` series.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallKey {
    pub method: String,
    pub tool: String,
    pub layer: String,
    pub outcome: String,
}

/// One line of the demo's table.
struct Row {
    scenario: &'static Scenario,
    era: &'static str,
    status: String,
    outcome: Option<CallKey>,
    note: Option<String>,
}

/// `strata testbed`: the fault-injection upstream alone, until Ctrl-C.
pub async fn testbed(listen: SocketAddr) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(err) => {
            eprintln!("strata testbed: cannot bind {listen}: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!("strata testbed: MCP upstream on http://{listen}/mcp (Ctrl-C to stop)");
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match Testbed::new().serve(listener, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("strata testbed: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `strata demo`: testbed + strata in-process, one call per scenario, the table, the metric
/// lines. Exits 0 when every scenario got its expected outcome.
pub async fn run() -> ExitCode {
    // Warnings only: the per-call records (INFO, target `strata::call`) would bury the table.
    // `RUST_LOG=strata::call=info strata demo` shows them.
    if let Err(err) = crate::log::init(LogFormat::Pretty, "warn") {
        eprintln!("strata demo: {err}");
        return ExitCode::FAILURE;
    }
    let mut out = std::io::stdout().lock();
    match timeout(DEMO_LIMIT, demo(&mut out)).await {
        Ok(Ok(true)) => ExitCode::SUCCESS,
        Ok(Ok(false)) => ExitCode::FAILURE,
        Ok(Err(err)) => {
            eprintln!("strata demo: {err:#}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("strata demo: did not finish within {DEMO_LIMIT:?}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the demo, writing to `out`; true when every scenario matched.
pub async fn demo(out: &mut impl Write) -> anyhow::Result<bool> {
    let (testbed_addr, _testbed, testbed_handle) = Testbed::spawn_local()
        .await
        .context("cannot start the testbed")?;
    let upstream = Upstream::parse(&format!("http://{testbed_addr}"))
        .context("the testbed's address is not a valid upstream")?;
    let mut config = Config::default_with_upstream(upstream);
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.admin = SocketAddr::from(([127, 0, 0, 1], 0));
    // A resumable stream that closes early is STREAM_INCOMPLETE at once instead of after the
    // default 30 s window (the demo does not resume it).
    config.timeouts.resume_window = Duration::ZERO;
    config.timeouts.drain = Duration::from_secs(1);
    let running = app::start(&config).await.context("cannot start strata")?;

    writeln!(
        out,
        "strata demo: agent → strata http://{}/mcp → testbed http://{testbed_addr}/mcp; \
         metrics on http://{}/metrics\n",
        running.listen, running.admin
    )?;

    let rows = calls(&running).await;
    let matched = print_table(out, &rows)?;
    print_metrics(out, &running).await?;
    writeln!(
        out,
        "\n{matched}/{} scenarios classified as expected{}",
        rows.len(),
        if matched == rows.len() {
            ""
        } else {
            " — MISMATCH"
        }
    )?;

    running.stop().await;
    if let Err(err) = testbed_handle.shutdown().await {
        tracing::warn!(error = %err, "the testbed did not stop cleanly");
    }
    Ok(matched == rows.len())
}

/// One call per scenario, in catalogue order.
async fn calls(running: &Running) -> Vec<Row> {
    let modern = McpClient::modern(running.listen);
    let mut legacy = McpClient::legacy(running.listen);
    let legacy_ready = legacy.initialize(LEGACY_VERSION).await;

    let mut rows = Vec::with_capacity(SCENARIOS.len());
    for scenario in SCENARIOS {
        let (client, era) = if scenario.legacy_only {
            (&legacy, LEGACY_VERSION)
        } else {
            (&modern, MODERN_VERSION)
        };
        if let (true, Err(err)) = (scenario.legacy_only, &legacy_ready) {
            rows.push(Row {
                scenario,
                era,
                status: "-".into(),
                outcome: None,
                note: Some(format!("no legacy session: {err}")),
            });
            continue;
        }
        let before = calls_total(&running.metrics.render());
        let reply = client.call_tool(scenario.tool, json!({})).await;
        let outcome = settled(running, &before, scenario.tool).await;
        let (status, note) = match reply {
            Ok(reply) => (reply.status.as_u16().to_string(), body_note(&reply)),
            Err(err) => ("-".into(), Some(err.to_string())),
        };
        rows.push(Row {
            scenario,
            era,
            status,
            outcome,
            note,
        });
    }
    rows
}

/// What the agent saw besides the status, when it is worth a word.
fn body_note(reply: &Reply) -> Option<String> {
    reply
        .broken
        .as_ref()
        .map(|_| "body broke mid-stream".to_owned())
}

/// The tools/call series of `tool` that went up since `before`, once one has.
async fn settled(
    running: &Running,
    before: &BTreeMap<CallKey, u64>,
    tool: &str,
) -> Option<CallKey> {
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        let after = calls_total(&running.metrics.render());
        let mut grown = delta(before, &after)
            .into_iter()
            .filter(|(k, _)| k.method == "tools/call" && k.tool == tool);
        if let Some((key, _)) = grown.next() {
            return Some(key);
        }
        if Instant::now() >= deadline {
            return None;
        }
        sleep(SETTLE_POLL).await;
    }
}

fn print_table(out: &mut impl Write, rows: &[Row]) -> std::io::Result<usize> {
    let mut table = Table::new(&[
        "scenario", "era", "HTTP", "outcome", "layer", "expected", "",
    ]);
    for r in rows {
        let (outcome, layer) = r
            .outcome
            .as_ref()
            .map_or(("(none)".into(), "-".into()), |k| {
                (k.outcome.clone(), k.layer.clone())
            });
        let cells = vec![
            r.scenario.tool.to_owned(),
            r.era.to_owned(),
            r.status.clone(),
            outcome,
            layer,
            r.scenario.expected_outcome.to_owned(),
            if is_match(r) { "✓" } else { "✗" }.to_owned(),
        ];
        table.row(cells, r.note.clone());
    }
    table.write(out)?;
    Ok(rows.iter().filter(|r| is_match(r)).count())
}

fn is_match(row: &Row) -> bool {
    let expected = Outcome::from_label(row.scenario.expected_outcome);
    match (&row.outcome, expected) {
        (Some(key), Some(expected)) => {
            key.outcome == expected.as_str() && key.layer == expected.layer().as_str()
        }
        _ => false,
    }
}

/// The `strata_calls_total` lines of the admin endpoint's `/metrics` (strata's own render if
/// the scrape fails).
async fn print_metrics(out: &mut impl Write, running: &Running) -> anyhow::Result<()> {
    let url = format!("http://{}/metrics", running.admin);
    let text = match scrape(running.admin).await {
        Ok(text) => {
            writeln!(out, "\nGET {url} ({CALLS_TOTAL}):")?;
            text
        }
        Err(err) => {
            writeln!(
                out,
                "\n{CALLS_TOTAL} (scraping {url} failed: {err:#}; strata's own render):"
            )?;
            running.metrics.render()
        }
    };
    for line in text.lines().filter(|l| l.starts_with(CALLS_TOTAL)) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

async fn scrape(admin: SocketAddr) -> anyhow::Result<String> {
    let client = McpClient::modern(admin);
    let req = Request::get(format!("http://{admin}/metrics")).body(Full::new(Bytes::new()))?;
    let resp = client.send(req).await?;
    let reply = client::collect(Value::Null, resp, client::DEFAULT_TIMEOUT).await?;
    anyhow::ensure!(
        reply.status == StatusCode::OK,
        "/metrics answered {}",
        reply.status
    );
    Ok(String::from_utf8_lossy(&reply.body).into_owned())
}

/// Every `strata_calls_total` series in a Prometheus text exposition, with its value.
pub fn calls_total(text: &str) -> BTreeMap<CallKey, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(CALLS_TOTAL) else {
            continue;
        };
        let Some((labels, value)) = rest.strip_prefix('{').and_then(|r| r.rsplit_once('}')) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let labels = parse_labels(labels);
        let get = |name: &str| labels.get(name).cloned().unwrap_or_default();
        let key = CallKey {
            method: get("method"),
            tool: get("tool"),
            layer: get("layer"),
            outcome: get("outcome"),
        };
        // Counters are integral; the text format writes them as floats.
        out.insert(key, value as u64);
    }
    out
}

/// Series that went up between two [`calls_total`] readings, with how much.
pub fn delta(
    before: &BTreeMap<CallKey, u64>,
    after: &BTreeMap<CallKey, u64>,
) -> BTreeMap<CallKey, u64> {
    after
        .iter()
        .filter_map(|(k, &v)| {
            let grown = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            (grown > 0).then(|| (k.clone(), grown))
        })
        .collect()
}

/// `a="x",b="y\"z"` → {a: x, b: y"z} (Prometheus text format 0.0.4 label escapes).
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let name: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if name.is_empty() || chars.next() != Some('=') || chars.next() != Some('"') {
            return out;
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                None => return out,
                Some('"') => break,
                Some('\\') => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => return out,
                },
                Some(c) => value.push(c),
            }
        }
        out.insert(name.trim().to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_total_series() {
        let text = "# HELP strata_calls_total x\n# TYPE strata_calls_total counter\n\
            strata_calls_total{layer=\"application\",method=\"tools/call\",outcome=\"TOOL_SUCCESS\",tool=\"a\\\"b\"} 3\n\
            strata_calls_total{layer=\"protocol\",method=\"initialize\",outcome=\"SUCCESS\",tool=\"\"} 1\n\
            strata_call_duration_seconds_count{method=\"x\"} 9\n";
        let calls = calls_total(text);
        assert_eq!(calls.len(), 2);
        let key = CallKey {
            method: "tools/call".into(),
            tool: "a\"b".into(),
            layer: "application".into(),
            outcome: "TOOL_SUCCESS".into(),
        };
        assert_eq!(calls.get(&key), Some(&3));
        let mut after = calls.clone();
        after.insert(key.clone(), 4);
        assert_eq!(
            delta(&calls, &after).into_iter().collect::<Vec<_>>(),
            [(key, 1)]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_scenario_matches_through_strata() {
        let mut out = Vec::new();
        let ok = timeout(DEMO_LIMIT, demo(&mut out)).await;
        let text = String::from_utf8_lossy(&out);
        assert!(matches!(ok, Ok(Ok(true))), "{ok:?}\n{text}");
        for s in SCENARIOS {
            assert!(text.contains(s.tool), "{text}");
        }
        assert!(text.contains("strata_calls_total{"), "{text}");
    }
}
