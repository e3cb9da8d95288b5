//! `strata classify` against real traffic. The official Python MCP SDK client
//! (`tests/sdk/python_client.py`: every testbed scenario, both protocol eras) talks to
//! `mitmdump` as a reverse proxy recording a HAR, in front of strata, in front of the testbed.
//! strata classifies each call live (its call log lines); `strata classify --json` then reads
//! mitmdump's HAR, and each call — matched by protocol version, method, tool and JSON-RPC id
//! — must have the outcome strata gave it live.
//!
//! mitmdump comes from `bash tests/capture/setup.sh` (or `PATH`); without it, or without the
//! Python SDK (`bash tests/sdk/setup.sh`), the test is skipped with a note, unless
//! `STRATA_REQUIRE_MITMPROXY=1`: then it fails. Its files stay in
//! `target/tmp/classify_capture/`.
//!
//! The exit status (`--fail-on`, a broken file) is checked on small HAR files written here.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::children::Children;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Children must be listening within this (mitmdump takes a second or two to start).
const START_LIMIT: Duration = Duration::from_secs(30);
/// The SDK client's whole run, both eras.
const CLIENT_LIMIT: Duration = Duration::from_secs(90);
/// mitmdump writes the HAR as it stops; strata's log catches up with its counters.
const SETTLE_LIMIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);

/// Calls by (protocol version, method, tool, JSON-RPC id): their outcomes, sorted.
type Outcomes = BTreeMap<(String, String, String, String), Vec<String>>;

#[test]
fn classify_gives_recorded_sdk_traffic_the_outcomes_strata_gave_it_live() {
    let Some(mitmdump) = mitmdump() else { return };
    if !python_sdk_installed() {
        return;
    }
    let dir = out_dir();
    let mut children = Children::default();
    let testbed = loopback(free_port());
    children.spawn(
        "testbed",
        Command::new(STRATA)
            .args(["testbed", "--listen", &testbed.to_string()])
            .stdout(log(&dir, "testbed.log"))
            .stderr(log(&dir, "testbed.stderr")),
    );
    wait_listening(&mut children, "testbed", testbed);
    let (listen, admin) = (loopback(free_port()), loopback(free_port()));
    children.spawn(
        "strata",
        Command::new(STRATA)
            .args([
                "--listen",
                &listen.to_string(),
                "--admin",
                &admin.to_string(),
            ])
            .args([
                "--upstream",
                &format!("http://{testbed}"),
                "--log-format",
                "json",
            ])
            .env_remove("STRATA_CONFIG")
            .env_remove("RUST_LOG")
            .stdout(log(&dir, "strata.log"))
            .stderr(log(&dir, "strata.stderr")),
    );
    wait_listening(&mut children, "strata", listen);
    let recorder = loopback(free_port());
    let har = dir.join("capture.har");
    children.spawn(
        "mitmdump",
        Command::new(&mitmdump)
            .arg("--mode")
            .arg(format!("reverse:http://{listen}"))
            .args(["--listen-host", "127.0.0.1", "--listen-port"])
            .arg(recorder.port().to_string())
            .arg("--set")
            .arg(format!("hardump={}", har.display()))
            .arg("--set")
            .arg(format!("confdir={}", dir.join("mitmproxy").display()))
            .stdout(log(&dir, "mitmdump.log"))
            .stderr(log(&dir, "mitmdump.stderr")),
    );
    wait_listening(&mut children, "mitmdump", recorder);

    children.spawn(
        "client",
        Command::new("bash")
            .arg(format!("{ROOT}/tests/sdk/run.sh"))
            .arg("python")
            .arg(format!("http://{recorder}/mcp"))
            .stdout(log(&dir, "client.json"))
            .stderr(log(&dir, "client.stderr")),
    );
    let status = children.wait("client", Instant::now() + CLIENT_LIMIT);
    assert!(
        status.success(),
        "the SDK client failed ({status}); see {}",
        dir.display()
    );

    children.terminate("mitmdump", Instant::now() + SETTLE_LIMIT);
    assert!(har.is_file(), "mitmdump wrote no HAR at {}", har.display());
    let live = live_outcomes(&mut children, admin, &dir.join("strata.log"));

    let output = classify(&["--json"], &[&har]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines = String::from_utf8(output.stdout).unwrap();
    fs::write(dir.join("classified.jsonl"), &lines).unwrap();
    let offline = outcomes(lines.lines().map(|l| serde_json::from_str(l).unwrap()));

    assert_eq!(
        mismatches(&live, &offline),
        Vec::<String>::new(),
        "strata classify disagrees with strata live (files in {})",
        dir.display()
    );
    let versions: Vec<&str> = live.keys().map(|k| k.0.as_str()).collect();
    for era in ["2025-11-25", "2026-07-28"] {
        assert!(
            versions.contains(&era),
            "no call of the {era} era: {versions:?}"
        );
    }
    let kinds: std::collections::BTreeSet<&String> = live.values().flatten().collect();
    assert!(
        kinds.len() >= 8,
        "too few outcomes to tell anything: {kinds:?}"
    );
}

#[test]
fn fail_on_gates_by_layer_and_a_broken_file_exits_2() {
    let dir = out_dir_named("classify_exit");
    let tool_error = har(
        &dir,
        "tool_error.har",
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#,
    );
    let fine = har(
        &dir,
        "fine.har",
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
    );
    let code = |args: &[&str], file: &Path| classify(args, &[file]).status.code();
    assert_eq!(code(&[], &tool_error), Some(0), "no --fail-on: never 1");
    assert_eq!(code(&["--fail-on", "application"], &tool_error), Some(1));
    assert_eq!(
        code(&["--fail-on", "transport,protocol"], &tool_error),
        Some(0)
    );
    assert_eq!(
        code(
            &["--fail-on", "transport,protocol,interaction,application"],
            &fine
        ),
        Some(0)
    );

    let table = classify(
        &["--fail-on", "protocol,application"],
        &[&fine, &tool_error],
    );
    assert_eq!(table.status.code(), Some(1));
    let text = String::from_utf8_lossy(&table.stdout);
    for word in ["TOOL_SUCCESS", "TOOL_ERROR", "application", "tools/call"] {
        assert!(text.contains(word), "{word} not in the table:\n{text}");
    }

    let broken = dir.join("broken.har");
    fs::write(&broken, "{\"log\": {\"entries\": [").unwrap();
    let out = classify(&["--fail-on", "application"], &[&broken, &tool_error]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a broken file wins over --fail-on"
    );
    let err = stderr(&out);
    assert!(
        err.contains("broken.har") && err.contains("not a HAR file"),
        "{err}"
    );
    let missing = dir.join("missing.har");
    let out = classify(&[], &[&missing]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("missing.har: cannot read"),
        "{}",
        stderr(&out)
    );
}

/// A HAR file of one tools/call answered with `answer` (JSON).
fn har(dir: &Path, name: &str, answer: &str) -> PathBuf {
    let doc = json!({ "log": { "version": "1.2", "entries": [{
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 3,
        "request": {
            "method": "POST",
            "url": "http://127.0.0.1:7000/mcp",
            "headers": [{ "name": "Content-Type", "value": "application/json" }],
            "postData": {
                "mimeType": "application/json",
                "text": r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            },
        },
        "response": {
            "status": 200,
            "headers": [{ "name": "Content-Type", "value": "application/json" }],
            "content": { "mimeType": "application/json", "text": answer },
        },
    }] } });
    let path = dir.join(name);
    fs::write(&path, doc.to_string()).unwrap();
    path
}

fn classify(args: &[&str], files: &[&Path]) -> Output {
    Command::new(STRATA)
        .arg("classify")
        .args(args)
        .args(files)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// strata's call log lines once they are as many as its counters say (each call is counted,
/// then logged, once), by call.
fn live_outcomes(children: &mut Children, admin: SocketAddr, log: &Path) -> Outcomes {
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        children.assert_running("strata");
        let counted = counted_calls(admin);
        let text = fs::read_to_string(log).unwrap_or_default();
        let records: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["target"] == "strata::call")
            .collect();
        if counted.is_some_and(|n| n > 0 && n == records.len() as u64) {
            return outcomes(records.into_iter());
        }
        assert!(
            Instant::now() < deadline,
            "strata logged {} calls, its counters say {counted:?}",
            records.len()
        );
        sleep(POLL);
    }
}

/// The sum of `strata_calls_total` on the admin listener's `/metrics`.
fn counted_calls(admin: SocketAddr) -> Option<u64> {
    use std::io::{Read, Write};
    let mut stream = TcpStream::connect_timeout(&admin, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let total = text
        .lines()
        .filter(|l| l.starts_with("strata_calls_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>();
    Some(total as u64)
}

fn outcomes(records: impl Iterator<Item = Value>) -> Outcomes {
    let mut by_call = Outcomes::new();
    for r in records {
        let text = |k: &str| r[k].as_str().unwrap_or("").to_owned();
        let key = (
            text("protocol_version"),
            text("method"),
            text("tool"),
            text("jsonrpc_id"),
        );
        by_call.entry(key).or_default().push(text("outcome"));
    }
    by_call.values_mut().for_each(|v| v.sort());
    by_call
}

fn mismatches(live: &Outcomes, offline: &Outcomes) -> Vec<String> {
    let keys: std::collections::BTreeSet<_> = live.keys().chain(offline.keys()).collect();
    keys.into_iter()
        .filter(|k| live.get(*k) != offline.get(*k))
        .map(|k| {
            format!(
                "{k:?}: live {:?}, classify {:?}",
                live.get(k),
                offline.get(k)
            )
        })
        .collect()
}

fn required() -> bool {
    std::env::var("STRATA_REQUIRE_MITMPROXY").is_ok_and(|v| v == "1")
}

/// Skips (with a note) or, when required, fails.
fn missing(what: &str) {
    assert!(
        !required(),
        "{what}, and STRATA_REQUIRE_MITMPROXY=1 requires it"
    );
    eprintln!("note: {what}: classify_capture skipped");
}

/// tests/capture/.venv's mitmdump, else one on `PATH`.
fn mitmdump() -> Option<PathBuf> {
    let venv = Path::new(ROOT).join("tests/capture/.venv/bin/mitmdump");
    let on_path = || {
        let found = Command::new("mitmdump").arg("--version").output();
        found
            .is_ok_and(|o| o.status.success())
            .then(|| PathBuf::from("mitmdump"))
    };
    let found = if venv.is_file() {
        Some(venv)
    } else {
        on_path()
    };
    if found.is_none() {
        missing("mitmdump is not installed (bash tests/capture/setup.sh)");
    }
    found
}

fn python_sdk_installed() -> bool {
    let status = Command::new("bash")
        .arg(format!("{ROOT}/tests/sdk/run.sh"))
        .args(["--check", "python"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let installed = status.is_ok_and(|s| s.success());
    if !installed {
        missing("the Python MCP SDK is not installed (bash tests/sdk/setup.sh)");
    }
    installed
}

fn out_dir() -> PathBuf {
    out_dir_named("classify_capture")
}

fn out_dir_named(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn log(dir: &Path, name: &str) -> File {
    File::create(dir.join(name)).unwrap()
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

fn wait_listening(children: &mut Children, name: &str, addr: SocketAddr) {
    let deadline = Instant::now() + START_LIMIT;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        children.assert_running(name);
        assert!(
            Instant::now() < deadline,
            "{name} is not listening on {addr}"
        );
        sleep(POLL);
    }
}
