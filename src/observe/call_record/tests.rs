use super::*;
use crate::log::capture_json;
use crate::observe::recent::CallEntry;

const RAW_SESSION: &str = "3f2a9c1e-raw-session-id-7b";

fn tool_call() -> CallRecord<'static> {
    let mut r = CallRecord::new(
        "http://127.0.0.1:8000/mcp",
        "tools/call",
        "7",
        Outcome::ToolSuccess,
        Duration::from_micros(12_500),
    );
    r.session = Some(SessionHash::new(RAW_SESSION));
    r.client = Some("claude-code@1.2.3".into());
    r.protocol_version = Some("2025-11-25".into());
    r.tool = Some("echo".into());
    r.http_statuses = vec![503, 200].into();
    r.attempts = 2;
    r.retry_origin = RetryOrigin::Proxy;
    r.content_type = Some("text/event-stream".into());
    r.sse_events = 3;
    r
}

#[test]
fn emit_writes_one_json_line_with_every_field() {
    let (guard, logs) = capture_json();
    tool_call().emit();
    drop(guard);

    assert_eq!(logs.text().lines().count(), 1, "{}", logs.text());
    let lines = logs.json_lines_for(CALL_TARGET);
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line["message"], "call");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["outcome"], "TOOL_SUCCESS");
    assert_eq!(line["layer"], "application");
    assert_eq!(line["session"], hash_session(RAW_SESSION));
    assert_eq!(line["client"], "claude-code@1.2.3");
    assert_eq!(line["protocol_version"], "2025-11-25");
    assert_eq!(line["method"], "tools/call");
    assert_eq!(line["tool"], "echo");
    assert_eq!(line["jsonrpc_id"], "7");
    assert_eq!(line["attempts"], 2);
    assert_eq!(line["http_statuses"], "503,200");
    assert_eq!(line["content_type"], "text/event-stream");
    assert_eq!(line["sse_events"], 3);
    assert_eq!(line["retry_origin"], "proxy");
    assert_eq!(line["duration_ms"], 12.5);
    assert_eq!(line["upstream"], "http://127.0.0.1:8000/mcp");
    assert!(line.get("timestamp").is_some());
    // Absent options are left out rather than logged as null.
    for absent in [
        "error_code",
        "error_message",
        "error_message_len",
        "result_type",
    ] {
        assert!(line.get(absent).is_none(), "{absent} in {line}");
    }
    assert!(!logs.text().contains(RAW_SESSION), "raw session id leaked");
}

#[test]
fn error_message_is_logged_only_when_configured() {
    let message = "bad input: secret-token-123";
    let mut quiet = tool_call();
    quiet.outcome = Outcome::JsonRpcError;
    quiet.set_error(-32602, message, false);
    let mut loud = quiet.clone();
    loud.set_error(-32602, message, true);

    let (guard, logs) = capture_json();
    quiet.emit();
    let quiet_text = logs.text();
    loud.emit();
    drop(guard);

    let lines = logs.json_lines_for(CALL_TARGET);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["error_code"], -32602);
    assert_eq!(lines[0]["error_message_len"], message.len());
    assert_eq!(lines[0]["layer"], "protocol");
    assert!(lines[0].get("error_message").is_none());
    assert!(!quiet_text.contains("secret-token"), "{quiet_text}");
    assert_eq!(lines[1]["error_message"], message);
}

#[test]
fn session_hash_is_stable_short_hex_and_not_the_id() {
    let a = hash_session(RAW_SESSION);
    assert_eq!(a, hash_session(RAW_SESSION));
    assert_ne!(a, hash_session("another-session"));
    assert_eq!(a.len(), 16);
    assert!(
        a.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // The digits are a u64's, most significant first, zero-padded: as `{:016x}` writes it.
    for id in ["a", "b", "session-1", "session-2", RAW_SESSION] {
        let text = hash_session(id);
        let value = u64::from_str_radix(&text, 16).unwrap();
        assert_eq!(format!("{value:016x}"), text);
    }
    assert_eq!(
        format!("{:?}", SessionHash::new(RAW_SESSION)),
        format!("SessionHash({a})")
    );
}

#[test]
fn string_ids_keep_their_quotes() {
    let (guard, logs) = capture_json();
    CallRecord::new("u", "ping", "\"abc\"", Outcome::Success, Duration::ZERO).emit();
    drop(guard);
    let lines = logs.json_lines_for(CALL_TARGET);
    assert_eq!(lines[0]["jsonrpc_id"], "\"abc\"");
    assert_eq!(lines[0]["retry_origin"], "none");
    assert_eq!(lines[0]["http_statuses"], "");
}

/// The line written straight to the log is the very line the `tracing` event gives, byte for
/// byte but the timestamp, for records with every field, with none of the optional ones, and
/// with text that needs escaping.
#[test]
fn the_direct_line_is_the_events_line() {
    let mut bare = CallRecord::new(
        "http://u",
        "ping",
        "\"a\\\"b\"",
        Outcome::Success,
        Duration::ZERO,
    );
    bare.attempts = 1;
    let mut failed = tool_call();
    failed.set_error(-32_602, "bad \"args\"\n\tline two\u{1}", true);
    failed.result_type = Some("input_required".into());
    failed.http_statuses = Cow::Borrowed(&[]);
    for record in [tool_call(), bare, failed] {
        let (guard, logs) = capture_json();
        record.emit();
        record.emit_event();
        drop(guard);
        let text = logs.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        // `{"timestamp":"2026-…Z",` — the same length on both lines.
        let untimed = |line: &str| line.get(40..).map(str::to_owned);
        assert_eq!(lines[0].get(..14), Some("{\"timestamp\":\""));
        assert_eq!(untimed(lines[0]), untimed(lines[1]), "{text}");
    }
}

/// The object the recent calls keep is the log line's fields (after `message`), with `seq`
/// and `time` first and without the line's timestamp, level, message and target.
#[test]
fn the_object_is_the_lines_fields() {
    let mut failed = tool_call();
    failed.set_error(-32_602, "bad \"args\"", true);
    for record in [tool_call(), failed] {
        let (guard, logs) = capture_json();
        let fields = record.fields_text();
        record.emit_fields(&fields);
        record.emit();
        drop(guard);
        let mut lines = logs.json_lines_for(CALL_TARGET);
        assert_eq!(lines.len(), 2);
        for line in &mut lines {
            line.as_object_mut().unwrap().remove("timestamp");
        }
        let mut line = lines.remove(0);
        assert_eq!(line, lines[0], "emit_fields writes what emit writes");
        let mut object = String::new();
        let at = std::time::UNIX_EPOCH + Duration::from_millis(1_798_561_380_123);
        CallEntry::new(&record, fields, 42, at).write_json(&mut object);
        let mut object: serde_json::Value = serde_json::from_str(&object).unwrap();
        assert_eq!(object["seq"], 42);
        assert_eq!(object["time"], "2026-12-29T16:23:00.123Z");
        let fields = line.as_object_mut().unwrap();
        for gone in ["timestamp", "level", "message", "target"] {
            fields.remove(gone);
        }
        let own = object.as_object_mut().unwrap();
        own.remove("seq");
        own.remove("time");
        assert_eq!(object, line);
    }
}

/// A duration prints as its decimal milliseconds: seconds times 10^3 would print
/// `0.36424599999999996` for 364,246 ns.
#[test]
fn a_duration_logs_as_its_decimal_milliseconds() {
    let mut record = tool_call();
    record.duration = Duration::from_nanos(364_246);
    let (guard, logs) = capture_json();
    record.emit();
    drop(guard);
    assert!(
        logs.text().contains(r#""duration_ms":0.364246"#),
        "{}",
        logs.text()
    );
    for nanos in [1, 999, 1_000_001, 12_345_678_901, 86_400_000_000_123] {
        let text = millis(Duration::from_nanos(nanos)).to_string();
        let (whole, fraction) = (nanos / 1_000_000, nanos % 1_000_000);
        let expected = format!("{whole}.{fraction:06}");
        assert_eq!(text, expected.trim_end_matches('0').trim_end_matches('.'));
    }
}
