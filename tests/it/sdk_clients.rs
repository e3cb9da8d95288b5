//! Real MCP SDK clients through strata: what each official SDK surfaces for the testbed's
//! scenarios must be the same through the proxy as direct.
//!
//! Per client (tests/sdk/run.sh: the Python SDK `mcp`, the TypeScript SDK v1
//! `@modelcontextprotocol/sdk` and v2 `@modelcontextprotocol/client`), this starts, as child
//! processes of the built `strata` binary, two testbeds and one proxy in front of the second, on
//! free loopback ports. It runs the client against the first testbed directly and against the
//! proxy at the same time, then checks:
//! - the two JSON documents the client printed are equal, except their `volatile` part;
//! - `echo_headers` through strata shows `Via` and `X-Forwarded-For` added, and the server saw
//!   the same `Authorization`, `MCP-Protocol-Version` and `Mcp-Session-Id` as direct;
//! - strata's `/metrics` counted every `tools/call` under the expected outcome, and every other
//!   request as SUCCESS.
//!
//! The Python client runs once more with OpenTelemetry export on (`telemetry` in strata's config
//! file, to an OTLP receiver in the test): the same checks, and one SERVER span per call counted.
//!
//! A client that is not installed is skipped with a note, unless `CI` or
//! `STRATA_SDK_REQUIRED=1` is set: then it fails. Install them with `bash tests/sdk/setup.sh`.
//! Each run leaves its documents and logs in `target/tmp/sdk_clients/<client>/`.

// This file is all test code; clippy's allow-*-in-tests only covers `#[test]` bodies, not the
// helpers an integration test crate shares between them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::support::children::Children;
use crate::support::otlp::{Attr, OtlpReceiver, ReceivedSpan};

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
const SDK_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk");
/// What the clients send as `Authorization` (python_client.py, ts_client.mjs).
const AUTHORIZATION: &str = "Bearer strata-sdk-test-token";
/// A whole client run (both eras, every scenario) must finish within this.
const CLIENT_LIMIT: Duration = Duration::from_secs(50);
/// Child processes must be listening within this.
const START_LIMIT: Duration = Duration::from_secs(10);

/// What strata must count for each scenario's calls in one session, in call order, per era
/// (legacy, 2026-07-28). The clients make the calls listed in their scenario tables; where an
/// SDK reacts (MRTR auto-fulfilment, SSE resumption) the extra outcome is part of the entry.
const EXPECTED: &[(&str, &[&str], &[&str])] = &[
    ("ok", &["TOOL_SUCCESS"], &["TOOL_SUCCESS"]),
    ("tool_error", &["TOOL_ERROR"], &["TOOL_ERROR"]),
    ("jsonrpc_error", &["JSONRPC_ERROR"], &["JSONRPC_ERROR"]),
    // 503 on odd calls: per session in legacy, per testbed when stateless (fresh testbeds).
    (
        "http_503_then_200",
        &["HTTP_ERROR", "TOOL_SUCCESS"],
        &["HTTP_ERROR", "TOOL_SUCCESS"],
    ),
    (
        "read_flaky",
        &["HTTP_ERROR", "TOOL_SUCCESS"],
        &["HTTP_ERROR", "TOOL_SUCCESS"],
    ),
    (
        "write_flaky",
        &["HTTP_ERROR", "TOOL_SUCCESS"],
        &["HTTP_ERROR", "TOOL_SUCCESS"],
    ),
    ("http_429", &["HTTP_ERROR"], &["HTTP_ERROR"]),
    ("http_500_success_body", &["HTTP_ERROR"], &["HTTP_ERROR"]),
    // 2026-07-28: the SDK runs the elicitation handler and retries with inputResponses.
    (
        "input_required",
        &["INPUT_REQUIRED"],
        &["INPUT_REQUIRED", "TOOL_SUCCESS"],
    ),
    ("legacy_result", &["TOOL_SUCCESS"], &["TOOL_SUCCESS"]),
    (
        "content_not_array",
        &["INVALID_TOOL_RESULT"],
        &["INVALID_TOOL_RESULT"],
    ),
    ("wrong_id", &["INVALID_ENVELOPE"], &["INVALID_ENVELOPE"]),
    (
        "result_and_error",
        &["INVALID_ENVELOPE"],
        &["INVALID_ENVELOPE"],
    ),
    (
        "bad_jsonrpc_version",
        &["INVALID_ENVELOPE"],
        &["INVALID_ENVELOPE"],
    ),
    ("malformed_json", &["MALFORMED_JSON"], &["MALFORMED_JSON"]),
    ("sse_progress", &["TOOL_SUCCESS"], &["TOOL_SUCCESS"]),
    (
        "sse_closed_early",
        &["STREAM_INCOMPLETE"],
        &["STREAM_INCOMPLETE"],
    ),
    ("sse_final_error", &["JSONRPC_ERROR"], &["JSONRPC_ERROR"]),
    ("sse_server_request", &["TOOL_SUCCESS"], &[]),
    ("sse_drip", &["TOOL_SUCCESS"], &["TOOL_SUCCESS"]),
    // Both SDKs resume with GET + Last-Event-ID, and the replayed result completes the call.
    ("sse_resumable", &["TOOL_SUCCESS"], &[]),
    ("sse_reset", &["STREAM_INCOMPLETE"], &["STREAM_INCOMPLETE"]),
    ("json_reset", &["STREAM_INCOMPLETE"], &["STREAM_INCOMPLETE"]),
    ("large_result", &["TOOL_SUCCESS"], &["TOOL_SUCCESS"]),
    ("slow", &["TOOL_SUCCESS"], &["TOOL_SUCCESS"]),
    ("empty_202", &["STREAM_INCOMPLETE"], &["STREAM_INCOMPLETE"]),
    (
        "wrong_content_type",
        &["MALFORMED_JSON"],
        &["MALFORMED_JSON"],
    ),
    ("echo_headers", &["TOOL_SUCCESS"], &["TOOL_SUCCESS"]),
];

#[test]
fn python_sdk_sees_the_same_through_strata() {
    check_client("python");
}

/// The same run with OpenTelemetry export on (the `telemetry` section of strata's config file,
/// to a receiver in this test): the client surfaces exactly what it does direct — tracing
/// changes nothing an agent sees — and every call strata counted is one SERVER span.
#[test]
fn python_sdk_sees_the_same_through_strata_with_tracing_on() {
    let client = "python";
    if !installed(client) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // Served by the runtime's worker while this thread waits for the children.
    let rx = runtime.block_on(OtlpReceiver::http());
    let telemetry = format!(
        "telemetry:\n  otlp: {{ endpoint: \"{}\" }}\n  resource: {{ service.name: strata-sdk }}\n",
        rx.endpoint()
    );
    check_client_with(
        client,
        "python-traced",
        Some(&telemetry),
        |proxied, admin, dir| {
            one_server_span_per_call(client, &rx, proxied, admin, dir);
        },
    );
}

#[test]
fn typescript_sdk_v1_sees_the_same_through_strata() {
    check_client("ts-sdk");
}

#[test]
fn typescript_client_v2_sees_the_same_through_strata() {
    check_client("ts-client");
}

fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
        || std::env::var("STRATA_SDK_REQUIRED").is_ok_and(|v| v == "1")
}

/// `true` if `client` is installed; otherwise prints why it is skipped (or panics when the
/// SDK clients are required).
fn installed(client: &str) -> bool {
    let status = Command::new("bash")
        .arg(format!("{SDK_DIR}/run.sh"))
        .args(["--check", client])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if matches!(status, Ok(s) if s.success()) {
        return true;
    }
    let missing = format!("SDK client {client} is not installed (bash tests/sdk/setup.sh)");
    assert!(
        !required(),
        "{missing}, and CI or STRATA_SDK_REQUIRED=1 require it"
    );
    eprintln!("note: {missing}: skipped");
    false
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A minimal HTTP/1.1 GET: (status, body).
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // The admin listener may answer chunked: good enough for line-oriented metrics.
    Ok((status, body.to_owned()))
}

fn wait_listening(children: &mut Children, name: &str, addr: SocketAddr) {
    let deadline = Instant::now() + START_LIMIT;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        children.assert_running(name);
        assert!(
            Instant::now() < deadline,
            "{name} is not listening on {addr} after {START_LIMIT:?}"
        );
        sleep(Duration::from_millis(20));
    }
}

fn wait_ready(children: &mut Children, name: &str, admin: SocketAddr) {
    let deadline = Instant::now() + START_LIMIT;
    loop {
        if matches!(http_get(admin, "/readyz"), Ok((200, _))) {
            return;
        }
        children.assert_running(name);
        assert!(
            Instant::now() < deadline,
            "{name} is not ready on {admin} after {START_LIMIT:?}"
        );
        sleep(Duration::from_millis(20));
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

fn out_dir(client: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("sdk_clients")
        .join(client);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn log_file(dir: &Path, name: &str) -> File {
    File::create(dir.join(name)).unwrap()
}

fn start_testbed(children: &mut Children, dir: &Path, name: &str) -> SocketAddr {
    let addr = loopback(free_port());
    children.spawn(
        name,
        Command::new(STRATA)
            .args(["testbed", "--listen", &addr.to_string()])
            .stdout(log_file(dir, &format!("{name}.log")))
            .stderr(log_file(dir, &format!("{name}.stderr"))),
    );
    wait_listening(children, name, addr);
    addr
}

fn check_client(client: &str) {
    check_client_with(client, client, None, |_, _, _| {});
}

/// Runs `client` direct and through strata and compares, its documents and logs in
/// `target/tmp/sdk_clients/<label>/`. `config`: a config file for strata (YAML, besides the
/// flags), e.g. to turn telemetry on; `then` checks more while everything still runs, given
/// the document of the run through strata, strata's admin address and the run's folder.
fn check_client_with(
    client: &str,
    label: &str,
    config: Option<&str>,
    then: impl FnOnce(&Value, SocketAddr, &Path),
) {
    if !installed(client) {
        return;
    }
    let dir = out_dir(label);
    let mut children = Children::default();

    let direct = start_testbed(&mut children, &dir, "testbed-direct");
    let upstream = start_testbed(&mut children, &dir, "testbed-upstream");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let mut strata = Command::new(STRATA);
    strata
        .arg("--listen")
        .arg(listen.to_string())
        .arg("--upstream")
        .arg(format!("http://{upstream}"))
        .arg("--admin")
        .arg(admin.to_string())
        .args(["--log-format", "json"])
        .env_remove("STRATA_CONFIG")
        .stdout(log_file(&dir, "strata.log"))
        .stderr(log_file(&dir, "strata.stderr"));
    if let Some(yaml) = config {
        let file = dir.join("strata.yaml");
        fs::write(&file, yaml).unwrap();
        // Spans go out 100 ms after a call rather than 5 s (the file has no key for it).
        strata
            .arg("--config")
            .arg(&file)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env_remove("OTEL_SDK_DISABLED");
    }
    children.spawn("strata", &mut strata);
    wait_ready(&mut children, "strata", admin);

    // Both runs at once: they use different testbeds, so neither sees the other's state.
    let runs = [("direct", direct), ("strata", listen)];
    for (name, addr) in runs {
        children.spawn(
            &format!("{client}-{name}"),
            Command::new("bash")
                .arg(format!("{SDK_DIR}/run.sh"))
                .arg(client)
                .arg(format!("http://{addr}/mcp"))
                .stdout(log_file(&dir, &format!("{name}.json")))
                .stderr(log_file(&dir, &format!("{name}.stderr"))),
        );
    }
    let deadline = Instant::now() + CLIENT_LIMIT;
    let mut docs = Vec::new();
    for (name, _) in runs {
        let status = children.wait(&format!("{client}-{name}"), deadline);
        let stderr = fs::read_to_string(dir.join(format!("{name}.stderr"))).unwrap_or_default();
        assert!(
            status.success(),
            "{client} against {name} failed ({status}); stderr:\n{stderr}"
        );
        let text = fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
        let doc: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{client} against {name} printed no JSON ({e}):\n{text}"));
        docs.push(doc);
    }
    children.assert_running("strata");
    let [direct_doc, proxied_doc] = <[Value; 2]>::try_from(docs).unwrap();
    eprintln!(
        "{client}: {} — {}",
        describe(&direct_doc),
        dir.join("{direct,strata}.json").display()
    );

    same_outside_volatile(client, &direct_doc, &proxied_doc, &dir);
    headers_forwarded(client, &direct_doc, &proxied_doc);
    metrics_counted(client, &proxied_doc, admin, &dir);
    then(&proxied_doc, admin, &dir);
    children.assert_running("strata");
}

/// Every call strata counted (`strata_calls_total`, every method) is one SERVER span at `rx`,
/// series by series, and both eras the client spoke show in the spans' protocol versions.
fn one_server_span_per_call(
    client: &str,
    rx: &OtlpReceiver,
    proxied: &Value,
    admin: SocketAddr,
    dir: &Path,
) {
    let (status, metrics) = http_get(admin, "/metrics").unwrap();
    assert_eq!(status, 200);
    let counted = calls_total(&metrics);
    let total: u64 = counted.values().sum();
    assert!(total > 0, "{client}: strata counted nothing");
    let servers = |spans: &[ReceivedSpan]| -> Vec<ReceivedSpan> {
        spans
            .iter()
            .filter(|s| s.kind_name() == "SERVER")
            .cloned()
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while (servers(&rx.spans()).len() as u64) < total && Instant::now() < deadline {
        sleep(Duration::from_millis(50));
    }
    // Anything more (a span too many) would come within a few schedule delays.
    sleep(Duration::from_millis(500));
    let spans = servers(&rx.spans());
    let mut got: BTreeMap<(String, String, String, String), u64> = BTreeMap::new();
    for span in &spans {
        let attr = |k: &str| span.str_attr(k).unwrap_or_default().to_owned();
        let key = (
            attr("mcp.method.name"),
            attr("gen_ai.tool.name"),
            attr("strata.outcome"),
            attr("strata.layer"),
        );
        *got.entry(key).or_insert(0) += 1;
    }
    let listing: Vec<String> = got.iter().map(|(k, n)| format!("{k:?} = {n}")).collect();
    fs::write(dir.join("spans.txt"), listing.join("\n")).unwrap();
    let mut diffs = Vec::new();
    for key in counted.keys().chain(got.keys()) {
        let (want, have) = (
            counted.get(key).copied().unwrap_or(0),
            got.get(key).copied().unwrap_or(0),
        );
        if want != have
            && !diffs
                .iter()
                .any(|d: &String| d.starts_with(&format!("{key:?}")))
        {
            diffs.push(format!(
                "{key:?}: strata counted {want}, SERVER spans {have}"
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{client}: SERVER spans differ from strata_calls_total ({} spans for {total} calls; \
         listing in {}):\n{}",
        spans.len(),
        dir.display(),
        diffs.join("\n")
    );
    for span in &spans {
        assert_eq!(
            span.resource.get("service.name"),
            Some(&Attr::Str("strata-sdk".into())),
            "{client}: the config file's resource: {span:?}"
        );
    }
    for (era, e) in proxied["eras"].as_object().unwrap() {
        let version = e["protocol_version"].as_str().unwrap();
        assert!(
            spans
                .iter()
                .any(|s| s.str_attr("mcp.protocol.version") == Some(version)),
            "{client} {era}: no SERVER span with mcp.protocol.version {version}"
        );
    }
}

fn describe(doc: &Value) -> String {
    let client = &doc["client"];
    let eras: Vec<String> = doc["eras"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(era, e)| {
                    format!(
                        "{era} {} ({} scenarios)",
                        e["protocol_version"].as_str().unwrap_or("?"),
                        e["scenarios"].as_array().map_or(0, Vec::len)
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{} {}, {}",
        client["package"].as_str().unwrap_or("?"),
        client["version"].as_str().unwrap_or("?"),
        eras.join(", ")
    )
}

fn without_volatile(doc: &Value) -> Value {
    let mut doc = doc.clone();
    if let Some(obj) = doc.as_object_mut() {
        obj.remove("volatile");
    }
    doc
}

/// Paths (and values) where `a` and `b` differ, at most `limit` of them.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>, limit: usize) {
    if out.len() >= limit || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                differences(&format!("{path}.{k}"), va, vb, out, limit);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                // Name scenario entries by their scenario, not their index.
                let label = va["scenario"]
                    .as_str()
                    .map_or_else(|| i.to_string(), str::to_owned);
                differences(&format!("{path}[{label}]"), va, vb, out, limit);
            }
        }
        _ => out.push(format!("{path}:\n    direct: {a}\n    strata: {b}")),
    }
}

fn same_outside_volatile(client: &str, direct: &Value, proxied: &Value, dir: &Path) {
    let (a, b) = (without_volatile(direct), without_volatile(proxied));
    let mut diffs = Vec::new();
    differences("$", &a, &b, &mut diffs, 20);
    assert!(
        diffs.is_empty(),
        "{client} surfaced something different through strata than direct \
         (documents in {}):\n{}",
        dir.display(),
        diffs.join("\n")
    );
}

/// The `echo_headers` scenario's first result, per era: (era, protocol version, headers).
fn echoed(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (era, e) in doc["eras"].as_object().unwrap() {
        let sc = e["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["scenario"] == "echo_headers")
            .unwrap_or_else(|| panic!("{era}: no echo_headers scenario"));
        let headers = sc["calls"][0]["result"]["content"][0]["text"].clone();
        assert!(
            headers.is_object(),
            "{era}: echo_headers surfaced no header object: {sc}"
        );
        let version = e["protocol_version"].as_str().unwrap().to_owned();
        out.push((era.clone(), version, headers));
    }
    out
}

fn headers_forwarded(client: &str, direct: &Value, proxied: &Value) {
    for (era, version, headers) in echoed(proxied) {
        let ctx = format!("{client} {era}: echo_headers through strata");
        assert_eq!(headers["authorization"], AUTHORIZATION, "{ctx}: {headers}");
        assert_eq!(
            headers["mcp-protocol-version"], version,
            "{ctx}: MCP-Protocol-Version: {headers}"
        );
        if era == "legacy" {
            assert_eq!(
                headers["mcp-session-id"], "<the client's session id>",
                "{ctx}: Mcp-Session-Id: {headers}"
            );
        } else {
            // 2026-07-28 clients mirror the method and tool name into headers (SEP-2243).
            assert_eq!(headers["mcp-method"], "tools/call", "{ctx}: {headers}");
            assert_eq!(headers["mcp-name"], "echo_headers", "{ctx}: {headers}");
        }
        let added = &proxied["volatile"][&era]["echo_headers"];
        let via = added["via"].as_str().unwrap_or_default();
        assert!(
            via.ends_with(" strata"),
            "{ctx}: Via {via:?} (proxy-added headers: {added})"
        );
        assert_eq!(
            added["x-forwarded-for"], "127.0.0.1",
            "{ctx}: X-Forwarded-For (proxy-added headers: {added})"
        );
        for hop in [
            "connection",
            "keep-alive",
            "te",
            "upgrade",
            "proxy-connection",
        ] {
            assert!(
                added.get(hop).is_none(),
                "{ctx}: hop-by-hop {hop} reached the server (headers: {added})"
            );
        }
        let plain = &direct["volatile"][&era]["echo_headers"];
        assert!(
            plain.get("via").is_none() && plain.get("x-forwarded-for").is_none(),
            "{client} {era}: direct, the testbed saw proxy headers: {plain}"
        );
    }
}

/// `strata_calls_total` series: (method, tool, outcome, layer) → count.
fn calls_total(metrics: &str) -> BTreeMap<(String, String, String, String), u64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("strata_calls_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let mut map = BTreeMap::new();
        for pair in labels.split("\",") {
            if let Some((k, v)) = pair.split_once("=\"") {
                map.insert(k.to_owned(), v.trim_end_matches('"').to_owned());
            }
        }
        let get = |k: &str| map.get(k).cloned().unwrap_or_default();
        let count = value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        out.insert(
            (get("method"), get("tool"), get("outcome"), get("layer")),
            count,
        );
    }
    out
}

fn layer_of(outcome: &str) -> &'static str {
    match outcome {
        "CLIENT_CANCELLED" | "HTTP_ERROR" | "STREAM_INCOMPLETE" => "transport",
        "MALFORMED_JSON" | "INVALID_ENVELOPE" | "JSONRPC_ERROR" | "INVALID_TOOL_RESULT" => {
            "protocol"
        }
        "INPUT_REQUIRED" => "interaction",
        _ => "application",
    }
}

/// The `tools/call` series strata must show after `doc`'s run: (tool, outcome, layer) → count.
fn expected_tool_calls(doc: &Value) -> BTreeMap<(String, String, String), u64> {
    let mut want = BTreeMap::new();
    for (era, e) in doc["eras"].as_object().unwrap() {
        for sc in e["scenarios"].as_array().unwrap() {
            let tool = sc["scenario"].as_str().unwrap();
            let (_, legacy, modern) = EXPECTED
                .iter()
                .find(|(t, _, _)| *t == tool)
                .unwrap_or_else(|| panic!("scenario {tool} has no entry in EXPECTED"));
            let outcomes = if era == "legacy" { legacy } else { modern };
            assert!(
                !outcomes.is_empty(),
                "{tool} was called in the {era} era, EXPECTED has nothing for it"
            );
            for outcome in *outcomes {
                let key = (
                    tool.to_owned(),
                    (*outcome).to_owned(),
                    layer_of(outcome).to_owned(),
                );
                *want.entry(key).or_insert(0) += 1;
            }
        }
    }
    want
}

fn metrics_counted(client: &str, proxied: &Value, admin: SocketAddr, dir: &Path) {
    let want = expected_tool_calls(proxied);
    let want_total: u64 = want.values().sum();
    // Calls are counted when strata sees their end; the client may exit a moment before.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (metrics, series) = loop {
        let (status, body) = http_get(admin, "/metrics").unwrap();
        assert_eq!(status, 200, "GET /metrics: {body}");
        let series = calls_total(&body);
        let tool_calls: u64 = series
            .iter()
            .filter(|((method, ..), _)| method == "tools/call")
            .map(|(_, n)| n)
            .sum();
        if tool_calls >= want_total || Instant::now() >= deadline {
            break (body, series);
        }
        sleep(Duration::from_millis(50));
    };
    fs::write(dir.join("metrics.txt"), &metrics).unwrap();

    let got: BTreeMap<(String, String, String), u64> = series
        .iter()
        .filter(|((method, ..), _)| method == "tools/call")
        .map(|((_, tool, outcome, layer), n)| ((tool.clone(), outcome.clone(), layer.clone()), *n))
        .collect();
    let mut diffs = Vec::new();
    for key in want.keys().chain(got.keys()) {
        let (w, g) = (
            want.get(key).copied().unwrap_or(0),
            got.get(key).copied().unwrap_or(0),
        );
        if w != g
            && !diffs
                .iter()
                .any(|d: &String| d.starts_with(&format!("{key:?}")))
        {
            diffs.push(format!("{key:?}: expected {w}, strata counted {g}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "{client}: strata_calls_total{{method=\"tools/call\"}} differs from the expected \
         outcomes (metrics in {}):\n{}",
        dir.display(),
        diffs.join("\n")
    );

    // Everything else the SDK sent (initialize, tools/list, ping, server/discover) succeeded.
    let others: Vec<String> = series
        .iter()
        .filter(|((method, _, outcome, _), _)| method != "tools/call" && outcome != "SUCCESS")
        .map(|(k, n)| format!("{k:?} = {n}"))
        .collect();
    assert!(
        others.is_empty(),
        "{client}: non-tools/call requests not counted as SUCCESS:\n{}",
        others.join("\n")
    );
    let methods: std::collections::BTreeSet<&str> = series
        .keys()
        .map(|(method, ..)| method.as_str())
        .filter(|m| *m != "tools/call")
        .collect();
    for era in proxied["eras"].as_object().unwrap().keys() {
        let handshake = if era == "legacy" {
            "initialize"
        } else {
            "server/discover"
        };
        assert!(
            methods.contains(handshake) && methods.contains("tools/list"),
            "{client} {era}: strata counted no {handshake} or tools/list: {methods:?}"
        );
    }
}

/// Issue "Retry and idempotency policy": an official SDK client calling an idempotent tool
/// behind a flaky upstream (503 once) fails direct — the SDK retries nothing — and succeeds
/// through strata, which re-sends the call because an operator rule marks it idempotent.
#[test]
fn python_sdk_flaky_idempotent_tool_succeeds_through_strata_where_it_fails_direct() {
    let client = "python";
    if !installed(client) {
        return;
    }
    let dir = out_dir("python-flaky");
    let mut children = Children::default();
    let direct = start_testbed(&mut children, &dir, "testbed-direct");
    let upstream = start_testbed(&mut children, &dir, "testbed-upstream");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let config = dir.join("strata.yaml");
    fs::write(
        &config,
        format!(
            "listen: {listen}\nupstream: http://{upstream}\nadmin: {admin}\n\
             retry: {{ initial_backoff: 10ms, max_backoff: 50ms }}\n\
             tools:\n  - match: \"read_*\"\n    idempotent: true\n"
        ),
    )
    .unwrap();
    children.spawn(
        "strata",
        Command::new(STRATA)
            .arg("--config")
            .arg(&config)
            .env_remove("STRATA_CONFIG")
            .stdout(log_file(&dir, "strata.log"))
            .stderr(log_file(&dir, "strata.stderr")),
    );
    wait_ready(&mut children, "strata", admin);
    let mut first_calls = Vec::new();
    for (name, addr) in [("direct", direct), ("strata", listen)] {
        children.spawn(
            &format!("{client}-{name}"),
            Command::new("bash")
                .arg(format!("{SDK_DIR}/run.sh"))
                .arg(client)
                .arg(format!("http://{addr}/mcp"))
                .args(["--scenarios", "read_flaky"])
                .stdout(log_file(&dir, &format!("{name}.json")))
                .stderr(log_file(&dir, &format!("{name}.stderr"))),
        );
        let status = children.wait(&format!("{client}-{name}"), Instant::now() + CLIENT_LIMIT);
        assert!(
            status.success(),
            "{client} against {name} failed ({status})"
        );
        let doc: Value =
            serde_json::from_str(&fs::read_to_string(dir.join(format!("{name}.json"))).unwrap())
                .unwrap();
        for era in ["legacy", "modern"] {
            let scenario = &doc["eras"][era]["scenarios"][0];
            assert_eq!(scenario["scenario"], "read_flaky", "{name} {era}");
            first_calls.push((name, era, scenario["calls"][0].clone()));
        }
    }
    for (name, era, call) in first_calls {
        match name {
            "direct" => assert_eq!(
                call["error"]["code"], -32603,
                "direct {era}: the SDK surfaces the 503: {call}"
            ),
            _ => assert_eq!(
                call["result"]["isError"], false,
                "through strata {era}: a success: {call}"
            ),
        }
    }
    let (_, metrics) = http_get(admin, "/metrics").unwrap();
    assert!(
        metrics.contains(
            "strata_retries_total{method=\"tools/call\",reason=\"http_503\",tool=\"read_flaky\"} 2"
        ),
        "one retry per era:\n{metrics}"
    );
}
