use serde_json::{Value, json};

use super::*;

fn har(entries: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({ "log": { "version": "1.2", "entries": entries } })).unwrap()
}

fn post(started: &str, body: Value, response: Value) -> Value {
    json!({
        "startedDateTime": started,
        "time": 12.5,
        "request": {
            "method": "POST",
            "url": "http://127.0.0.1:7000/mcp?x=1",
            "headers": [{ "name": "Mcp-Session-Id", "value": "s-1" }],
            "postData": body,
        },
        "response": response,
    })
}

fn plain_json(text: &str) -> Value {
    json!({ "mimeType": "application/json", "text": text })
}

#[test]
fn reads_request_and_response_as_recorded() {
    let response = json!({
        "status": 200,
        "headers": [{ "name": "content-type", "value": "application/json" }],
        "content": plain_json(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
    });
    let entries = parse(&har(json!([post(
        "2026-01-01T00:00:00.000Z",
        plain_json(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        response
    )])))
    .unwrap();
    let [entry] = entries.as_slice() else {
        panic!("{entries:?}")
    };
    assert_eq!((entry.method.as_str(), entry.time_ms), ("POST", 12.5));
    assert_eq!(entry.origin(), "http://127.0.0.1:7000");
    assert_eq!(entry.header("mcp-session-id"), Some("s-1"));
    assert_eq!(entry.body, br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    let response = entry.response.as_ref().unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.content_type(), Some("application/json"));
    assert_eq!(response.body, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert!(!response.broken);
}

#[test]
fn decodes_base64_bodies() {
    // `{"id":1}` and an SSE event, base64 as mitmproxy writes a body it finds binary.
    let request = json!({ "text": "eyJpZCI6MX0=", "encoding": "base64" });
    let response = json!({
        "status": 200,
        "headers": [{ "name": "Content-Type", "value": "text/event-stream" }],
        "content": { "text": "ZGF0YTogMQoK", "encoding": "base64", "mimeType": "text/event-stream" },
    });
    let entries = parse(&har(json!([post(
        "2026-01-01T00:00:00Z",
        request,
        response
    )])))
    .unwrap();
    assert_eq!(entries[0].body, br#"{"id":1}"#);
    let response = entries[0].response.as_ref().unwrap();
    assert_eq!(response.body, b"data: 1\n\n");
    assert_eq!(response.content_type(), Some("text/event-stream"));
}

#[test]
fn a_missing_body_or_response_is_what_was_recorded() {
    let no_text = json!({ "status": 200, "headers": [], "content": { "size": 0, "mimeType": "application/json" } });
    let no_response =
        json!({ "status": 0, "headers": [], "content": {}, "_error": "connection refused" });
    let broken = json!({ "status": 200, "headers": [{ "name": "content-type", "value": "text/event-stream" }], "_error": "reset" });
    let entries = parse(&har(json!([
        post("2026-01-01T00:00:01Z", json!({}), no_text),
        post("2026-01-01T00:00:02Z", plain_json("{}"), no_response),
        post("2026-01-01T00:00:03Z", plain_json("{}"), broken),
    ])))
    .unwrap();
    assert!(entries[0].body.is_empty());
    let recorded = entries[0].response.as_ref().unwrap();
    assert!(recorded.body.is_empty());
    // Recorded without headers: the content's media type stands in.
    assert_eq!(recorded.content_type(), Some("application/json"));
    assert!(entries[1].response.is_none());
    let broken = entries[2].response.as_ref().unwrap();
    assert!(broken.broken && broken.body.is_empty());
}

#[test]
fn entries_come_in_the_order_they_started() {
    let ok = json!({ "status": 200, "headers": [] });
    let entries = parse(&har(json!([
        post("2026-01-01T00:00:02+00:00", plain_json("{}"), ok.clone()),
        post("2026-01-01T01:00:01+01:00", plain_json("{}"), ok),
    ])))
    .unwrap();
    let order: Vec<usize> = entries.iter().map(|e| e.index).collect();
    assert_eq!(order, [1, 0]);
}

#[test]
fn says_what_is_wrong() {
    let cases: [(&[u8], &str); 5] = [
        (b"{", "not a HAR file: EOF"),
        (br#"{"log":{}}"#, "missing field `entries`"),
        (
            &har(json!([post(
                "yesterday",
                json!({}),
                json!({"status": 200})
            )])),
            "log.entries[0].startedDateTime: \"yesterday\"",
        ),
        (
            &har(json!([post(
                "2026-01-01T00:00:00Z",
                json!({ "text": "*", "encoding": "base64" }),
                json!({"status": 200})
            )])),
            "log.entries[0].request.postData: text is not valid base64",
        ),
        (
            &har(json!([post(
                "2026-01-01T00:00:00Z",
                json!({}),
                json!({"status": 200, "content": { "text": "x", "encoding": "rot13" }})
            )])),
            "log.entries[0].response.content: unknown encoding \"rot13\"",
        ),
    ];
    for (text, expected) in cases {
        let err = parse(text).unwrap_err();
        assert!(err.contains(expected), "{err:?} lacks {expected:?}");
    }
}
