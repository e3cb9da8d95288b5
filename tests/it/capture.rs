//! Traffic capture (`capture`): strata in front of the testbed writes every exchange to a
//! HAR file; `strata classify --json` on that file gives every call the outcome strata gave
//! it live (`strata_calls_total`). The file holds no credential, cookie, idempotency key,
//! configured secret header or raw session id; it rotates at `max_file`; and a path that
//! cannot be written loses entries (counted) while the calls still succeed.
//!
//! Files stay in `target/tmp/capture/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};
use strata::app::Running;
use strata::config::{CaptureConfig, Config};
use strata::testbed::SCENARIOS;
use strata::testbed::client::McpClient;
use tokio::time::{Instant, sleep};

use crate::support::post::series;
use crate::support::{LIMIT, Stack, counts, delta_after};

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
/// Secrets the agent sends; none may reach the file.
const SECRETS: [&str; 4] = [
    "secret-token",
    "cookie-secret",
    "key-secret-7",
    "tenant-secret",
];

/// This test's own directory under `target/tmp/capture/`, emptied.
fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("capture")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn capture_to(path: PathBuf, tweak: impl FnOnce(&mut CaptureConfig)) -> impl FnOnce(&mut Config) {
    move |config: &mut Config| {
        let mut capture = CaptureConfig::at(path);
        capture.redact = vec!["x-tenant-key".to_owned()];
        tweak(&mut capture);
        config.capture = Some(capture);
        // A parked resumable call is STREAM_INCOMPLETE soon, as the recording ends it.
        config.timeouts.resume_window = Duration::from_millis(200);
    }
}

/// `strata_capture_entries_total{result}` now.
fn entries(running: &Running, result: &str) -> u64 {
    let text = running.metrics.render();
    series(&text, "strata_capture_entries_total", &[("result", result)]) as u64
}

/// A tools/call of `ok` on `client`'s session carrying every kind of secret header.
async fn call_with_secrets(client: &McpClient) -> u16 {
    let id = client.next_id();
    let body = client.tool_call_body(&id, "ok", json!({}));
    let request = client
        .post_builder("tools/call", Some("ok"))
        .header("authorization", "Bearer secret-token")
        .header("cookie", "sid=cookie-secret")
        .header("idempotency-key", "key-secret-7")
        .header("x-tenant-key", "tenant-secret")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    client.exchange(id, request).await.unwrap().status.as_u16()
}

/// One call per scenario (each in the era it belongs to), a call with secrets, a
/// notification and the session's end. Returns the raw session id.
async fn drive(stack: &Stack) -> String {
    let modern = stack.modern(Default::default());
    let legacy = stack.legacy(Default::default()).await;
    // A call that breaks is still a call: its outcome is what is compared.
    Stack::call_every_scenario(&modern, &legacy).await;
    assert_eq!(call_with_secrets(&legacy).await, 200);
    agent_leaves_while_waiting(stack).await;
    let _ = legacy.notify("notifications/progress", json!({})).await;
    let session = legacy.session().unwrap().to_owned();
    let _ = legacy.delete_session().await;
    session
}

/// A call whose agent leaves while the upstream works on it (CLIENT_CANCELLED live).
async fn agent_leaves_while_waiting(stack: &Stack) {
    let client = std::sync::Arc::new(stack.modern(Default::default()));
    let calling = client.clone();
    let slow_before = stack.testbed.calls_of("slow");
    let call = tokio::spawn(async move { calling.call_tool("slow", json!({"ms": 60_000})).await });
    let deadline = Instant::now() + LIMIT;
    while stack.testbed.calls_of("slow") == slow_before && Instant::now() < deadline {
        sleep(Duration::from_millis(5)).await;
    }
    call.abort();
    drop(client);
}

/// `strata classify --json` of `file`: each call's (method, tool, outcome), counted.
fn classified(file: &Path) -> BTreeMap<(String, String, String), u64> {
    let out = std::process::Command::new(STRATA)
        .args(["classify", "--json"])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c < 2), "{stderr}");
    let mut calls = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let text = |key: &str| record[key].as_str().unwrap_or_default().to_owned();
        *calls
            .entry((text("method"), text("tool"), text("outcome")))
            .or_insert(0) += 1;
    }
    calls
}

/// The calls `drive` makes: one per scenario, the legacy session's initialize, the call
/// with secrets and the one its agent leaves.
fn calls_driven() -> u64 {
    SCENARIOS.len() as u64 + 3
}

/// The live counters' delta once it holds `total` calls (or after [`LIMIT`]: then the
/// comparison shows what is missing). A resumable call that is never resumed is counted
/// when `timeouts.resume_window` passes.
async fn settled(
    running: &Running,
    before: &BTreeMap<strata::demo::CallKey, u64>,
    total: u64,
) -> BTreeMap<(String, String, String), u64> {
    let d = delta_after(running, before, total).await;
    d.into_iter()
        .map(|(k, n)| ((k.method, k.tool, k.outcome), n))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classify_gives_the_capture_the_outcomes_strata_gave_live_and_no_secret() {
    let dir = out_dir("live");
    let file = dir.join("strata.har");
    // Room for `large_result`'s 1 MiB: a body cut at `max_body` is classified as far as
    // it was kept.
    let stack = Stack::start(capture_to(file.clone(), |c| c.max_body = 2 << 20)).await;
    let before = counts(&stack.strata);
    let session = drive(&stack).await;
    let live = settled(&stack.strata, &before, calls_driven()).await;
    assert_eq!(live.values().sum::<u64>(), calls_driven(), "{live:?}");
    let cancelled = (
        "tools/call".into(),
        "slow".into(),
        "CLIENT_CANCELLED".into(),
    );
    assert_eq!(live.get(&cancelled), Some(&1), "{live:?}");

    let metrics = stack.strata.metrics.clone();
    let Stack { strata, .. } = stack;
    strata.stop().await;
    let text = metrics.render();
    let written = series(
        &text,
        "strata_capture_entries_total",
        &[("result", "written")],
    );
    let dropped = series(
        &text,
        "strata_capture_entries_total",
        &[("result", "dropped")],
    );
    assert_eq!(dropped, 0.0);
    assert!(written >= live.values().sum::<u64>() as f64, "{written}");

    assert_eq!(classified(&file), live, "offline (left) and live (right)");
    let capture = std::fs::read_to_string(&file).unwrap();
    for secret in SECRETS.iter().chain([&session.as_str()]) {
        assert!(
            !capture.contains(secret),
            "{secret} is in {}",
            file.display()
        );
    }
    let har: Value = serde_json::from_str(&capture).unwrap();
    let methods: Vec<&str> = har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["request"]["method"].as_str())
        .collect();
    assert!(methods.contains(&"DELETE"), "{methods:?}");
    assert_eq!(
        methods.len() as f64,
        written,
        "every entry counted written is in the file"
    );
    let hashed = strata::observe::call_record::hash_session(&session);
    assert!(
        capture.contains(&hashed),
        "the session, hashed as the log hashes it"
    );
}

#[tokio::test]
async fn a_small_max_file_rotates_to_file_1() {
    let dir = out_dir("rotate");
    let file = dir.join("strata.har");
    let capture = capture_to(file.clone(), |c| c.max_file = 4 << 10);
    let stack = Stack::start(|config| {
        capture(config);
        // No retries: the request body streams upstream, copied on its way.
        config.policy.retry.max_attempts = 1;
    })
    .await;
    let client = stack.modern(Default::default());
    let big = "x".repeat(1500);
    let deadline = Instant::now() + LIMIT;
    let rotated = PathBuf::from(format!("{}.1", file.display()));
    let mut calls = 0;
    while !rotated.exists() && Instant::now() < deadline && calls < 50 {
        let reply = client.call_tool("ok", json!({"pad": big})).await.unwrap();
        assert_eq!(reply.status.as_u16(), 200);
        calls += 1;
        let want = calls;
        let wait = Instant::now() + LIMIT;
        while entries(&stack.strata, "written") < want && Instant::now() < wait {
            sleep(Duration::from_millis(10)).await;
        }
    }
    assert!(
        rotated.exists(),
        "no {} after {calls} calls",
        rotated.display()
    );
    for path in [&file, &rotated] {
        let text = std::fs::read(path).unwrap();
        assert!(
            text.len() <= 4 << 10,
            "{}: {} bytes",
            path.display(),
            text.len()
        );
        let har = strata::offline::parse(&text).unwrap();
        assert!(!har.is_empty(), "{}", path.display());
        for entry in &har {
            let body = String::from_utf8_lossy(&entry.body);
            assert!(body.contains(&big), "{}: {body}", path.display());
        }
    }
}

#[tokio::test]
async fn an_unwritable_path_drops_entries_and_the_calls_still_succeed() {
    let dir = out_dir("unwritable");
    let file = dir.join("no-such-dir").join("strata.har");
    let stack = Stack::start(capture_to(file.clone(), |_| {})).await;
    let client = stack.modern(Default::default());
    for _ in 0..3 {
        let reply = client.call_tool("ok", json!({})).await.unwrap();
        assert_eq!(reply.status.as_u16(), 200);
    }
    let deadline = Instant::now() + LIMIT;
    while entries(&stack.strata, "dropped") < 3 && Instant::now() < deadline {
        sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(entries(&stack.strata, "dropped"), 3);
    assert_eq!(entries(&stack.strata, "written"), 0);
    assert!(!file.exists());
}

#[test]
fn check_config_validates_the_capture_section() {
    let dir = out_dir("config");
    let good = dir.join("good.yaml");
    std::fs::write(
        &good,
        "upstream: http://127.0.0.1:8000\ncapture:\n  path: c.har\n  max_body: 1KiB\n  max_file: 1MiB\n  redact: [x-api-key]\n",
    )
    .unwrap();
    let config = Config::load(&good).unwrap();
    let capture = config.capture.unwrap();
    assert_eq!((capture.max_body, capture.max_file), (1 << 10, 1 << 20));
    assert_eq!(capture.path, dir.join("c.har"));
    assert_eq!(capture.redact, ["x-api-key"]);
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "upstream: http://127.0.0.1:8000\ncapture:\n  path: c.har\n  max_file: 1\n  redact: [\"bad name\"]\n",
    )
    .unwrap();
    let out = std::process::Command::new(STRATA)
        .arg("check-config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml:4:13: capture.max_file"),
        "{stderr}"
    );
    assert!(
        stderr.contains("bad.yaml:5:12: capture.redact[0]"),
        "{stderr}"
    );
    let none = Config::parse(
        "upstream: http://127.0.0.1:8000\n",
        "n.yaml",
        &Default::default(),
    );
    assert_eq!(none.unwrap().capture, None, "off by default");
}
