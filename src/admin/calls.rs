//! The inspector's whole answers: its page, the recent calls, the calls in flight, and the
//! counts since start.

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use serde_json::json;

use super::{AdminBody, whole};
use crate::classify::{Layer, Outcome};
use crate::metrics::Metrics;
use crate::observe::call_record::SessionHash;
use crate::observe::recent::{Filter, Inspector};

/// Only the page's own inline script and style run; it fetches only from this listener and
/// may not be framed.
const PAGE_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-inline'; \
                        style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; \
                        base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the inspector's page.
pub(super) fn page() -> Response<AdminBody> {
    let mut response = whole("text/html; charset=utf-8", super::page::INDEX_HTML);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `GET /calls`: the kept records the query selects, newest first, as a JSON array.
pub(super) fn list(inspector: &Inspector, query: Option<&str>) -> Response<AdminBody> {
    let filter = match Filter::from_query(query) {
        Ok(filter) => filter,
        Err(message) => return bad_request(&message),
    };
    let capacity = inspector.capacity();
    let limit = filter.limit.unwrap_or(capacity).min(capacity);
    let entries = inspector.recent(&filter, limit);
    let mut body =
        String::with_capacity(2 + entries.iter().map(|e| e.json_len() + 1).sum::<usize>());
    body.push('[');
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        entry.write_json(&mut body);
    }
    body.push(']');
    json_response(body)
}

/// `GET /calls/inflight`: calls without an outcome yet, oldest first.
pub(super) fn inflight(inspector: &Inspector) -> Response<AdminBody> {
    let now = tokio::time::Instant::now();
    let calls: Vec<serde_json::Value> = inspector
        .inflight()
        .snapshot()
        .into_iter()
        .map(|call| {
            json!({
                "method": call.method(),
                "tool": call.tool(),
                "jsonrpc_id": call.jsonrpc_id(),
                "client": call.client(),
                "session": call.session_hash().as_ref().map(SessionHash::as_str),
                "age_ms": now.saturating_duration_since(call.started).as_millis() as u64,
                "state": call.state.as_str(),
            })
        })
        .collect();
    json_response(serde_json::Value::from(calls).to_string())
}

/// `GET /calls/counts`: calls counted since start (`strata_calls_total`), by outcome and by
/// layer, every outcome and layer listed; and when the process started.
pub(super) fn counts(inspector: &Inspector, metrics: &Metrics) -> Response<AdminBody> {
    let mut outcomes: serde_json::Map<String, serde_json::Value> = Outcome::ALL
        .iter()
        .map(|o| (o.as_str().to_owned(), 0.into()))
        .collect();
    let mut layers: serde_json::Map<String, serde_json::Value> = Layer::ALL
        .iter()
        .map(|l| (l.as_str().to_owned(), 0.into()))
        .collect();
    let mut total = 0;
    for (layer, outcome, n) in metrics.calls_by_outcome() {
        total += n;
        add(&mut outcomes, outcome, n);
        add(&mut layers, layer, n);
    }
    let mut started = String::new();
    // Into a `String`: cannot fail.
    let _ = crate::log::write_timestamp_millis(&mut started, inspector.started());
    let body = json!({
        "started": started,
        "total": total,
        "outcomes": outcomes,
        "layers": layers,
    });
    json_response(body.to_string())
}

fn add(counts: &mut serde_json::Map<String, serde_json::Value>, key: String, n: u64) {
    let now = counts
        .get(&key)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    counts.insert(key, (now + n).into());
}

fn json_response(body: String) -> Response<AdminBody> {
    let mut response = whole("application/json", body);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// 400 with `{"error": "..."}` on one line.
pub(super) fn bad_request(message: &str) -> Response<AdminBody> {
    let mut body = json!({ "error": message }).to_string();
    body.push('\n');
    let mut response = json_response(body);
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
}
