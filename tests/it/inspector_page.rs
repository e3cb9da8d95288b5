//! The inspector's page in a real browser: strata with the inspector on, the testbed's
//! scenarios called through it (as `strata demo` calls them), one call whose tool name is
//! markup, one call left in flight; then `tests/browser/page.test.mjs` opens the admin port's
//! page in Debian's headless Chromium and checks it against `/metrics` and the `/calls`
//! endpoints (see that file for what it asserts).
//!
//! Needs `node`, `chromium` and `tests/browser/node_modules` (`bash tests/browser/setup.sh`).
//! Without them the test is skipped with a note, unless `STRATA_REQUIRE_BROWSER=1`: then it
//! fails. The screenshot goes to `STRATA_SCREENSHOT` (default `target/artifacts/inspector.png`
//! under the repository).

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use strata::config::{Config, Overrides};
use strata::testbed::client::{self, McpClient, Transport};
use support::{LIMIT, Stack};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

use crate::support;

/// A tool name that is markup: the page must show it as text and run nothing.
const HOSTILE_TOOL: &str = "<img src=x onerror=alert(1)>";
/// The call left in flight for the Stuck view: an SSE response that drips one progress event
/// every [`DRIP_GAP_MS`] for [`STUCK_FOR`], far longer than the test runs.
const STUCK_TOOL: &str = "sse_drip";
const DRIP_GAP_MS: u64 = 3_000;
const STUCK_FOR: Duration = Duration::from_secs(300);
/// The browser test's whole run, Chromium's start included.
const BROWSER_LIMIT: Duration = Duration::from_secs(180);
const PAGE_TEST: &str = "tests/browser/page.test.mjs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_every_call_in_a_browser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if !browser_ready(root) {
        return;
    }
    let stack = Stack::start(inspector_on).await;
    let tools = scenario_calls(&stack).await;
    let stuck = leave_in_flight(&stack);
    wait_in_flight(stack.strata.admin, STUCK_TOOL).await;

    let (status, output) = run_page_test(root, &stack, &tools).await;
    stuck.abort();
    println!("{output}");
    let status =
        status.unwrap_or_else(|| panic!("{PAGE_TEST} ran past {BROWSER_LIMIT:?}:\n{output}"));
    assert!(status.success(), "{PAGE_TEST} failed ({status}):\n{output}");
}

/// Replaces the defaults with a config file's worth of settings, `inspector` among them, for
/// the same upstream.
fn inspector_on(config: &mut Config) {
    let yaml = format!(
        "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nupstream: {}\n\
         timeouts:\n  resume_window: 0s\n  drain: 500ms\ninspector:\n  enabled: true\n",
        config.upstream
    );
    *config = Config::parse(&yaml, "inspector_page.yaml", &Overrides::default())
        .unwrap_or_else(|e| panic!("the inspector config does not parse: {e}"));
}

/// One tools/call per scenario (legacy-only ones in a 2025-11-25 session, the rest as
/// stateless 2026-07-28 calls), then the hostile one; returns the tools called once every call
/// is counted.
async fn scenario_calls(stack: &Stack) -> Vec<String> {
    let modern = stack.modern(Transport::Http1);
    let legacy = stack.legacy(Transport::Http1).await;
    let before = stack.counts();
    // The outcome is strata's business, and the page's to show: any reply will do.
    let called = Stack::call_every_scenario(&modern, &legacy).await;
    let mut tools: Vec<String> = called.into_iter().map(str::to_owned).collect();
    let _ = modern.call_tool(HOSTILE_TOOL, json!({})).await;
    tools.push(HOSTILE_TOOL.to_owned());

    let calls = tools.len() as u64;
    let counted: u64 = stack.delta_after(&before, calls).await.values().sum();
    assert_eq!(
        counted, calls,
        "strata counted every call before the page opens"
    );
    tools
}

/// A call the testbed keeps streaming for [`STUCK_FOR`]; aborting the task cancels it.
fn leave_in_flight(stack: &Stack) -> JoinHandle<()> {
    let client = stack.modern(Transport::Http1).with_timeout(STUCK_FOR);
    let count = STUCK_FOR.as_millis() as u64 / DRIP_GAP_MS;
    let args = json!({"count": count, "interval_ms": DRIP_GAP_MS});
    tokio::spawn(async move {
        let _ = client.call_tool(STUCK_TOOL, args).await;
    })
}

/// Waits until `GET /calls/inflight` lists a call of `tool`.
async fn wait_in_flight(admin: SocketAddr, tool: &str) {
    let deadline = Instant::now() + LIMIT;
    let mut last = String::new();
    while Instant::now() < deadline {
        let (status, body) = admin_get(admin, "/calls/inflight").await;
        assert_eq!(status, StatusCode::OK, "GET /calls/inflight: {body}");
        let calls: Vec<Value> = serde_json::from_str(&body).unwrap();
        if calls.iter().any(|c| c["tool"] == tool) {
            return;
        }
        last = body;
        sleep(Duration::from_millis(20)).await;
    }
    panic!("{tool} never showed in /calls/inflight; last: {last}");
}

async fn admin_get(admin: SocketAddr, path: &str) -> (StatusCode, String) {
    let client = McpClient::modern(admin).with_timeout(LIMIT);
    let req = Request::get(format!("http://{admin}{path}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let reply = client::collect(Value::Null, resp, LIMIT).await.unwrap();
    (
        reply.status,
        String::from_utf8_lossy(&reply.body).into_owned(),
    )
}

/// `true` when node, Chromium and puppeteer-core are there; otherwise says why the test is
/// skipped, or fails when `STRATA_REQUIRE_BROWSER=1`.
fn browser_ready(root: &Path) -> bool {
    let Err(missing) = browser_parts(root) else {
        return true;
    };
    let required = std::env::var("STRATA_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{missing}, and STRATA_REQUIRE_BROWSER=1 requires it (bash tests/browser/setup.sh)"
    );
    eprintln!("note: {missing}: the browser test is skipped (bash tests/browser/setup.sh)");
    false
}

fn browser_parts(root: &Path) -> Result<(), String> {
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !node.is_ok_and(|s| s.success()) {
        return Err("node is not installed".into());
    }
    let chromium = chromium();
    if !chromium.is_file() {
        return Err(format!("{} is not installed", chromium.display()));
    }
    let puppeteer = root.join("tests/browser/node_modules/puppeteer-core/package.json");
    if !puppeteer.is_file() {
        return Err("tests/browser/node_modules has no puppeteer-core".into());
    }
    Ok(())
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

/// Runs the page test against `stack`; its exit status (`None`: killed at [`BROWSER_LIMIT`])
/// and everything it printed.
async fn run_page_test(
    root: &Path,
    stack: &Stack,
    tools: &[String],
) -> (Option<ExitStatus>, String) {
    let log =
        std::env::temp_dir().join(format!("strata-inspector-page-{}.log", std::process::id()));
    let out = File::create(&log).unwrap();
    let mut cmd = Command::new("node");
    cmd.arg(PAGE_TEST)
        .current_dir(root)
        .env("STRATA_ADMIN", stack.strata.admin.to_string())
        .env("STRATA_LISTEN", stack.strata.listen.to_string())
        .env("STRATA_EXPECT_TOOLS", serde_json::to_string(tools).unwrap())
        .env("STRATA_EXPECT_STUCK", STUCK_TOOL)
        .env("STRATA_XSS_TOOL", HOSTILE_TOOL)
        .env("CHROMIUM", chromium())
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    let child = cmd.spawn().expect("cannot start node");
    let status = wait_bounded(child, BROWSER_LIMIT).await;
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (status, output)
}

/// Waits for `child` to exit; past `limit` kills it and returns `None`. (The page test bounds
/// its own run below this and closes its browser then; this is the backstop.)
async fn wait_bounded(mut child: Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        sleep(Duration::from_millis(50)).await;
    }
}
