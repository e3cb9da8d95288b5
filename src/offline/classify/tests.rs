use serde_json::{Value, json};

use super::*;
use crate::offline::parse;

fn entry(method: &str, headers: Value, body: &str, response: Value) -> Value {
    json!({
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 20,
        "request": {
            "method": method,
            "url": "http://127.0.0.1:7000/mcp",
            "headers": headers,
            "postData": { "mimeType": "application/json", "text": body },
        },
        "response": response,
    })
}

fn answer(status: u16, content_type: &str, body: &str) -> Value {
    json!({
        "status": status,
        "headers": [{ "name": "Content-Type", "value": content_type }],
        "content": { "mimeType": content_type, "text": body },
    })
}

/// (method, tool, id, outcome) of each call classified from `entries`.
fn outcomes(entries: Value) -> Vec<(String, String, String, &'static str)> {
    let text = serde_json::to_vec(&json!({ "log": { "entries": entries } })).unwrap();
    Recording::classify(&parse(&text).unwrap())
        .into_iter()
        .map(|c| {
            let r = c.record;
            let tool = r.tool.as_deref().unwrap_or("").to_owned();
            (
                r.method.into_owned(),
                tool,
                r.jsonrpc_id.into_owned(),
                r.outcome.as_str(),
            )
        })
        .collect()
}

fn call(
    method: &str,
    tool: &str,
    id: &str,
    outcome: &'static str,
) -> (String, String, String, &'static str) {
    (method.into(), tool.into(), id.into(), outcome)
}

const TOOL_CALL: &str =
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#;

#[test]
fn a_json_answer_is_classified_with_its_record() {
    let text = serde_json::to_vec(&json!({ "log": { "entries": [entry(
        "POST",
        json!([{ "name": "MCP-Protocol-Version", "value": "2025-11-25" }]),
        TOOL_CALL,
        answer(200, "application/json", r#"{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":true}}"#),
    )] } }))
    .unwrap();
    let calls = Recording::classify(&parse(&text).unwrap());
    let [only] = calls.as_slice() else {
        panic!("one call")
    };
    let r = &only.record;
    assert_eq!(r.outcome, Outcome::ToolError);
    assert_eq!(
        (r.method.as_ref(), r.tool.as_deref()),
        ("tools/call", Some("echo"))
    );
    assert_eq!(r.jsonrpc_id, "7");
    assert_eq!(&*r.http_statuses, &[200]);
    assert_eq!(r.protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(r.duration, Duration::from_millis(20));
    let line: Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(line["outcome"], "TOOL_ERROR");
    assert_eq!(line["layer"], "application");
    assert_eq!(line["upstream"], "http://127.0.0.1:7000");
}

#[test]
fn an_sse_answer_settles_its_call_and_a_cut_one_is_incomplete() {
    let done = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
                event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n";
    let cut =
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
    let got = outcomes(json!([
        entry(
            "POST",
            json!([]),
            TOOL_CALL,
            answer(200, "text/event-stream", done)
        ),
        entry(
            "POST",
            json!([]),
            TOOL_CALL,
            answer(200, "text/event-stream", cut)
        ),
    ]));
    assert_eq!(
        got,
        [
            call("tools/call", "echo", "7", "TOOL_SUCCESS"),
            call("tools/call", "echo", "7", "STREAM_INCOMPLETE"),
        ]
    );
}

#[test]
fn a_batch_is_one_call_per_request_and_notifications_are_none() {
    let batch = r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},
        {"jsonrpc":"2.0","method":"notifications/initialized"},
        {"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#;
    let answers = r#"[{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}},
        {"jsonrpc":"2.0","id":"a","result":{}}]"#;
    let got = outcomes(json!([
        entry(
            "POST",
            json!([]),
            batch,
            answer(200, "application/json", answers)
        ),
        entry(
            "POST",
            json!([]),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            answer(202, "text/plain", "")
        ),
    ]));
    assert_eq!(
        got,
        [
            call("ping", "", "\"a\"", "SUCCESS"),
            call("tools/list", "", "2", "JSONRPC_ERROR"),
        ]
    );
}

#[test]
fn missing_bodies_and_responses_are_classified_as_recorded() {
    let no_response = json!({ "status": 0, "headers": [], "content": {} });
    let got = outcomes(json!([
        entry(
            "POST",
            json!([]),
            TOOL_CALL,
            answer(200, "application/json", "")
        ),
        entry(
            "POST",
            json!([]),
            TOOL_CALL,
            answer(200, "application/json", r#"{"jsonrpc":"2.0","id":7,"res"#)
        ),
        entry(
            "POST",
            json!([]),
            TOOL_CALL,
            answer(503, "text/plain", "busy")
        ),
        entry("POST", json!([]), TOOL_CALL, no_response),
    ]));
    let outcomes: Vec<&str> = got.iter().map(|c| c.3).collect();
    assert_eq!(
        outcomes,
        [
            "STREAM_INCOMPLETE",
            "MALFORMED_JSON",
            "HTTP_ERROR",
            "STREAM_INCOMPLETE"
        ]
    );
}

#[test]
fn a_resumed_stream_settles_the_parked_call_on_its_session() {
    let session = json!([{ "name": "Mcp-Session-Id", "value": "s-1" }]);
    let first = "id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
    let resumed = "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n";
    let get = |last: &str| {
        json!({
            "startedDateTime": "2026-01-01T00:00:01.000Z",
            "time": 5,
            "request": {
                "method": "GET",
                "url": "http://127.0.0.1:7000/mcp",
                "headers": [{ "name": "Mcp-Session-Id", "value": "s-1" }, { "name": "Last-Event-ID", "value": last }],
            },
            "response": answer(200, "text/event-stream", resumed),
        })
    };
    let post = entry(
        "POST",
        session.clone(),
        TOOL_CALL,
        answer(200, "text/event-stream", first),
    );
    let text = serde_json::to_vec(&json!({ "log": { "entries": [post, get("e1")] } })).unwrap();
    let calls = Recording::classify(&parse(&text).unwrap());
    let [only] = calls.as_slice() else {
        panic!("one call")
    };
    assert_eq!(only.record.outcome, Outcome::ToolSuccess);
    assert_eq!(&*only.record.http_statuses, &[200, 200]);
    assert_eq!(only.record.sse_events, 2);
    // From the POST's start to the resumed stream's end.
    assert_eq!(only.record.duration, Duration::from_millis(1005));

    // Never resumed: STREAM_INCOMPLETE when the recording ends.
    let post = entry(
        "POST",
        session,
        TOOL_CALL,
        answer(200, "text/event-stream", first),
    );
    let got = outcomes(json!([post]));
    assert_eq!(got, [call("tools/call", "echo", "7", "STREAM_INCOMPLETE")]);
}

#[test]
fn a_session_carries_the_client_its_initialize_named() {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agent","version":"1.2"}}}"#;
    let mut assigned = answer(
        200,
        "application/json",
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#,
    );
    assigned["headers"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "mcp-session-id", "value": "s-9" }));
    let later = entry(
        "POST",
        json!([{ "name": "mcp-session-id", "value": "s-9" }]),
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        answer(
            200,
            "application/json",
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
        ),
    );
    let text = serde_json::to_vec(
        &json!({ "log": { "entries": [entry("POST", json!([]), init, assigned), later] } }),
    )
    .unwrap();
    let calls = Recording::classify(&parse(&text).unwrap());
    let clients: Vec<Option<&str>> = calls.iter().map(|c| c.record.client.as_deref()).collect();
    assert_eq!(clients, [Some("agent@1.2"), Some("agent@1.2")]);
    let sessions: Vec<_> = calls.iter().map(|c| c.record.session.clone()).collect();
    assert!(
        sessions[0].is_some() && sessions[0] == sessions[1],
        "{sessions:?}"
    );
}
