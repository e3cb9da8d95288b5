//! A captured [`Entry`] as a HAR 1.2 entry, and the document around the entries. A body is
//! `text` when it is UTF-8 (a cut that splits a character drops the character's first
//! bytes), else `text` in base64 with `encoding: base64`. A body cut at `capture.max_body`
//! says so in its `comment`; the response's `content.size` and each side's `bodySize` are
//! the whole body's size.

use base64::Engine as _;
use serde_json::{Value, json};

use super::entry::{AGENT_GONE, UPSTREAM_BROKE};
use super::entry::{Answer, BodyCopy, End, Entry, Fields};
use super::time::iso8601;
use crate::observe::call_record::millis;

/// The document up to its first entry.
pub(super) fn head() -> String {
    let creator = json!({"name": "strata", "version": env!("CARGO_PKG_VERSION")});
    format!(r#"{{"log":{{"version":"1.2","creator":{creator},"entries":["#)
}

/// What closes the document after its last entry.
pub(super) const TAIL: &[u8] = b"]}}\n";

/// `entry` as HAR JSON.
pub(super) fn entry(entry: &Entry) -> Vec<u8> {
    let mime = |fields: &Fields| {
        fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.clone())
    };
    let request_mime = mime(&entry.headers).unwrap_or_default();
    let mut post = body(&entry.body);
    post["mimeType"] = json!(request_mime);
    let mut request = json!({
        "method": entry.method,
        "url": entry.url,
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": headers(&entry.headers),
        "queryString": [],
        "headersSize": -1,
        "bodySize": entry.body.size,
    });
    if entry.body.size > 0 {
        request["postData"] = post;
    }
    let ms = millis(entry.time);
    serde_json::to_vec(&json!({
        "startedDateTime": iso8601(entry.started),
        "time": ms,
        "request": request,
        "response": response(entry.response.as_ref(), entry.end),
        "cache": {},
        "timings": {"send": 0, "wait": ms, "receive": 0},
    }))
    .unwrap_or_default()
}

fn response(answer: Option<&Answer>, end: End) -> Value {
    let error = match end {
        End::Complete => None,
        End::UpstreamBroke => Some(UPSTREAM_BROKE),
        End::AgentGone => Some(AGENT_GONE),
    };
    let Some(answer) = answer else {
        // No response: HAR's status 0.
        return json!({
            "status": 0, "statusText": "", "httpVersion": "", "cookies": [], "headers": [],
            "content": {"size": 0, "mimeType": ""}, "redirectURL": "", "headersSize": -1,
            "bodySize": -1, "_error": error.unwrap_or(UPSTREAM_BROKE),
        });
    };
    let mut content = body(&answer.body);
    content["size"] = json!(answer.body.size);
    content["mimeType"] = json!(answer.content_type.as_deref().unwrap_or_default());
    let mut response = json!({
        "status": answer.status,
        "statusText": "",
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": headers(answer.headers.as_deref().unwrap_or_default()),
        "content": content,
        "redirectURL": "",
        "headersSize": -1,
        "bodySize": answer.body.size,
    });
    if let Some(error) = error {
        response["_error"] = json!(error);
    }
    response
}

fn headers(fields: &[(String, String)]) -> Value {
    fields
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

/// `text` (and `encoding`, `comment`) for a body.
fn body(copy: &BodyCopy) -> Value {
    let mut body = match std::str::from_utf8(&copy.bytes) {
        Ok(text) => json!({"text": text}),
        // Cut inside a character: the whole characters before it.
        Err(e) if e.error_len().is_none() => {
            json!({"text": String::from_utf8_lossy(&copy.bytes[..e.valid_up_to()])})
        }
        Err(_) => json!({
            "text": base64::engine::general_purpose::STANDARD.encode(&copy.bytes),
            "encoding": "base64",
        }),
    };
    if copy.is_cut() {
        body["comment"] = json!(format!(
            "strata kept the first {} of {} bytes (capture.max_body)",
            copy.bytes.len(),
            copy.size
        ));
    }
    body
}
