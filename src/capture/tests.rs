//! The HAR entry writer: what an entry holds, and a file that is valid HAR after every entry
//! and every rotation.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::entry::{BodyCopy, End, Entry, Recorder, Redactor};
use super::file::HarFile;
use super::har;
use crate::config::CaptureConfig;

/// A fresh directory of this test's own under the system's temporary one.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-capture-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn entry(body: &[u8], response: &[u8], max_body: usize) -> Entry {
    let mut config = CaptureConfig::at("c.har".into());
    config.redact = vec!["x-tenant-token".to_owned()];
    let redactor = Redactor::new(&config);
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer secret-token"),
        ("X-Tenant-Token", "tenant-secret"),
        ("Mcp-Session-Id", "raw-session"),
    ]
    .iter()
    .map(|(n, v)| redactor.field(n.as_bytes(), v.as_bytes()))
    .collect();
    let mut recorder = Recorder::new("POST", "http://127.0.0.1:1/mcp".into(), headers, max_body);
    recorder.request_body(body);
    let fields = vec![redactor.field(b"Set-Cookie", b"sid=cookie-secret")];
    recorder.response_head(200, Some("text/event-stream"), Some(fields));
    for chunk in response.chunks(7) {
        recorder.response_data(chunk);
    }
    recorder.finish(End::Complete)
}

fn har_json(entry: &Entry) -> serde_json::Value {
    serde_json::from_slice(&har::entry(entry)).unwrap()
}

#[test]
fn an_entry_holds_no_secret_and_says_where_its_body_was_cut() {
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
    let sse = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    let e = har_json(&entry(body, sse, 16));
    let text = e.to_string();
    for secret in [
        "secret-token",
        "tenant-secret",
        "raw-session",
        "cookie-secret",
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let request = &e["request"];
    assert_eq!(request["postData"]["text"], "{\"jsonrpc\":\"2.0\"");
    assert_eq!(request["bodySize"], body.len());
    assert!(
        request["postData"]["comment"]
            .as_str()
            .unwrap()
            .contains("16 of")
    );
    let content = &e["response"]["content"];
    assert_eq!(content["size"], sse.len(), "the real size");
    assert_eq!(content["text"].as_str().unwrap().len(), 16);
    assert_eq!(content["mimeType"], "text/event-stream");
    assert!(content["comment"].is_string());
    let whole = har_json(&entry(body, sse, 1 << 10));
    assert_eq!(
        whole["request"]["postData"]["text"],
        std::str::from_utf8(body).unwrap()
    );
    assert!(whole["request"]["postData"].get("comment").is_none());
    assert!(whole["response"]["content"].get("comment").is_none());
}

#[test]
fn bodies_that_are_not_text_are_base64_and_a_cut_character_is_left_out() {
    let mut copy = BodyCopy::new(2);
    copy.push("é!".as_bytes());
    let e = Entry {
        started: SystemTime::UNIX_EPOCH,
        time: Duration::from_millis(5),
        method: "POST".into(),
        url: "http://127.0.0.1:1/mcp".into(),
        headers: Vec::new(),
        body: copy,
        response: None,
        end: End::Complete,
    };
    let json = har_json(&e);
    assert_eq!(json["request"]["postData"]["text"], "é");
    assert_eq!(json["response"]["status"], 0);
    let mut binary = BodyCopy::new(8);
    binary.push(&[0xff, 0x00, 0xfe]);
    let e = Entry { body: binary, ..e };
    let json = har_json(&e);
    assert_eq!(json["request"]["postData"]["encoding"], "base64");
    assert_eq!(json["request"]["postData"]["text"], "/wD+");
}

fn entries(path: &Path) -> usize {
    let text = std::fs::read(path).unwrap();
    crate::offline::parse(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .len()
}

#[test]
fn the_file_is_valid_har_after_every_entry_and_rotation() {
    let dir = scratch("rotate");
    let path = dir.join("c.har");
    let one = har::entry(&entry(b"{}", b"data: x\n\n", 64));
    // Room for three entries, not four.
    let max = (har::head().len() + har::TAIL.len() + 3 * (one.len() + 1)) as u64;
    let mut file = HarFile::new(path.clone(), max);
    for n in 1..=3 {
        file.append(&one).unwrap();
        assert_eq!(entries(&path), n);
        assert!(!HarFile::rotated(&path).exists());
    }
    file.append(&one).unwrap();
    assert_eq!(entries(&path), 1);
    assert_eq!(entries(&HarFile::rotated(&path)), 3);
    // A restart begins a new file; the one before becomes FILE.1.
    let mut again = HarFile::new(path.clone(), max);
    again.append(&one).unwrap();
    assert_eq!(entries(&path), 1);
    assert_eq!(entries(&HarFile::rotated(&path)), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_entry_larger_than_the_file_limit_still_gets_a_file_of_its_own() {
    let dir = scratch("large");
    let path = dir.join("c.har");
    let one = har::entry(&entry(b"{}", &[b'x'; 512], 1 << 10));
    let mut file = HarFile::new(path.clone(), 64);
    file.append(&one).unwrap();
    file.append(&one).unwrap();
    assert_eq!(entries(&path), 1);
    assert_eq!(entries(&HarFile::rotated(&path)), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_path_that_cannot_be_written_loses_the_entry_with_an_error() {
    let dir = scratch("missing");
    let mut file = HarFile::new(dir.join("no-such-dir").join("c.har"), 1 << 20);
    let one = har::entry(&entry(b"{}", b"{}", 64));
    assert!(file.append(&one).is_err());
    assert!(file.append(&one).is_err(), "tried again, failing again");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tools/call of `ok`, id `id`, captured with `response` (status, body) and `end`.
fn call_entry(id: u32, response: Option<(u16, &[u8])>, end: End) -> Entry {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ok","arguments":{{}}}}}}"#
    );
    let fields = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    let mut recorder = Recorder::new("POST", "http://127.0.0.1:1/mcp".into(), fields, 1 << 10);
    recorder.request_body(body.as_bytes());
    if let Some((status, bytes)) = response {
        recorder.response_head(status, Some("application/json"), None);
        recorder.response_data(bytes);
    }
    recorder.finish(end)
}

#[test]
fn classify_reads_how_a_captured_exchange_ended() {
    let dir = scratch("ends");
    let path = dir.join("c.har");
    let result = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
    let mut file = HarFile::new(path.clone(), 1 << 20);
    for entry in [
        call_entry(1, Some((200, result)), End::Complete),
        call_entry(2, None, End::AgentGone),
        call_entry(3, Some((200, &result[..20])), End::AgentGone),
        call_entry(4, Some((200, &result[..20])), End::UpstreamBroke),
        call_entry(5, Some((503, b"")), End::Complete),
    ] {
        file.append(&har::entry(&entry)).unwrap();
    }
    let calls = crate::offline::read(&path).unwrap();
    let outcomes: Vec<&str> = calls.iter().map(|c| c.record.outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        [
            "TOOL_SUCCESS",
            "CLIENT_CANCELLED",
            "CLIENT_CANCELLED",
            "STREAM_INCOMPLETE",
            "HTTP_ERROR"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
