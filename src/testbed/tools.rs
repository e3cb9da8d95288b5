//! `tools/call`: each scenario's wire behaviour.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};
use tokio::time::{Duration, sleep};

use super::body::{self, Body, Chunk};
use super::reply;
use super::rpc::{self, Era};
use super::scenarios::scenario;
use super::session::{Counters, Session};
use super::sse::{self, Step};
use super::{ResponseMode, Testbed};

/// `sse_drip`'s largest `count`, so one call cannot stream forever.
pub(crate) const MAX_DRIP_EVENTS: u64 = 10_000;
/// `sse_drip`'s largest `interval_ms`.
pub(crate) const MAX_DRIP_INTERVAL_MS: u64 = 60_000;
/// `slow`'s largest `ms`.
pub(crate) const MAX_SLOW_MS: u64 = 600_000;
/// `large_result`'s largest `bytes` (the body streams, so this bounds time, not memory).
pub(crate) const MAX_LARGE_BYTES: u64 = 1 << 30;
/// Pause before a deliberate abort, so hyper flushes what came before it and the client sees
/// the status line and the first bytes rather than a connection that died before headers.
const PAUSE_BEFORE_ABORT: Duration = Duration::from_millis(20);
const PROGRESS_GAP: Duration = Duration::from_millis(20);

/// One `tools/call` request, with what the scenarios need to see of it.
pub(crate) struct Call<'a> {
    pub(crate) testbed: &'a Arc<Testbed>,
    pub(crate) era: Era,
    /// Always present in the legacy era (the session is required there); `None` when stateless.
    pub(crate) session: Option<&'a Arc<Session>>,
    pub(crate) id: &'a Value,
    pub(crate) params: &'a Value,
    pub(crate) headers: &'a HeaderMap,
}

impl Call<'_> {
    fn counters(&self) -> &Counters {
        self.session
            .map_or(&self.testbed.stateless_counters, |s| s.counters())
    }

    fn arg_u64(&self, name: &str, default: u64, max: u64) -> u64 {
        let args = self.params.get("arguments");
        args.and_then(|a| a.get(name))
            .and_then(Value::as_u64)
            .unwrap_or(default)
            .min(max)
    }

    fn ok(&self) -> Value {
        rpc::result(self.id, rpc::tool_result(self.era, "ok", false))
    }

    /// A plain answer, in the testbed's response mode or the one this call asked for.
    fn answer(&self, msg: &Value) -> Response<Body> {
        reply::message(self.response_mode(), msg)
    }

    /// `arguments.response_mode` (`"json"` or `"sse"`) when present, so one testbed can answer
    /// both ways side by side (a soak mixes them); otherwise the testbed's option.
    fn response_mode(&self) -> ResponseMode {
        let asked = self
            .params
            .get("arguments")
            .and_then(|a| a.get("response_mode"));
        match asked.and_then(Value::as_str) {
            Some("json") => ResponseMode::Json,
            Some("sse") => ResponseMode::Sse,
            _ => self.testbed.options.response_mode,
        }
    }

    fn error(&self, code: i64, message: &str) -> Response<Body> {
        reply::json(StatusCode::OK, &rpc::error(self.id, code, message))
    }

    fn play<I>(&self, steps: I) -> Response<Body>
    where
        I: IntoIterator<Item = Step>,
        I::IntoIter: Send + 'static,
    {
        sse::response(sse::play(steps, self.testbed.shutdown_signal()))
    }
}

pub(crate) async fn call(c: Call<'_>) -> Response<Body> {
    let Some(name) = c.params.get("name").and_then(Value::as_str) else {
        return c.error(
            rpc::INVALID_PARAMS,
            "Invalid params: tools/call needs params.name",
        );
    };
    c.testbed.count_call(name);
    let _in_flight = c.testbed.call_in_flight();
    let Some(sc) = scenario(name) else {
        // Unknown tool is a protocol error, in-band on 200 (2026-07-28 server/tools §Error
        // Handling; handler errors keep HTTP 200 in the SDK servers).
        return c.error(rpc::INVALID_PARAMS, &format!("Unknown tool: {name}"));
    };
    if sc.legacy_only && c.era == Era::Modern {
        return c.error(
            rpc::INVALID_PARAMS,
            &format!("{name} needs a legacy-era session: 2026-07-28 removed its mechanism"),
        );
    }
    if sc.tool == "slow" {
        sleep(Duration::from_millis(c.arg_u64("ms", 1000, MAX_SLOW_MS))).await;
        return c.answer(&c.ok());
    }
    let token = rpc::progress_token(c.params, c.id);
    // The catalogue and these matches are kept in step by the `every_scenario_is_served` test.
    status_scenario(&c, sc.tool)
        .or_else(|| result_scenario(&c, sc.tool))
        .or_else(|| stream_scenario(&c, sc.tool, &token))
        .unwrap_or_else(|| {
            c.error(
                rpc::INTERNAL_ERROR,
                &format!("scenario {} is not implemented", sc.tool),
            )
        })
}

/// Scenarios whose HTTP status or framing is the point.
fn status_scenario(c: &Call<'_>, tool: &'static str) -> Option<Response<Body>> {
    match tool {
        "http_503_then_200" => Some({
            if c.counters().bump(tool) % 2 == 1 {
                reply::status_only(StatusCode::SERVICE_UNAVAILABLE)
            } else {
                c.answer(&c.ok())
            }
        }),
        "read_flaky" | "write_flaky" => Some({
            if c.counters().bump(tool) <= c.testbed.options.fail_first_n {
                reply::status_only(StatusCode::SERVICE_UNAVAILABLE)
            } else {
                c.answer(&c.ok())
            }
        }),
        "read_rate_limited" => Some({
            if c.counters().bump(tool) <= c.testbed.options.fail_first_n {
                let secs = c.arg_u64("retry_after", 1, 3600);
                let mut resp = reply::status_only(StatusCode::TOO_MANY_REQUESTS);
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                resp
            } else {
                c.answer(&c.ok())
            }
        }),
        "http_429" => Some({
            let mut resp = reply::status_only(StatusCode::TOO_MANY_REQUESTS);
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            resp
        }),
        "http_500_success_body" => Some(reply::json(StatusCode::INTERNAL_SERVER_ERROR, &c.ok())),
        "json_reset" => Some(json_reset(c)),
        "empty_202" => Some(reply::status_only(StatusCode::ACCEPTED)),
        "wrong_content_type" => Some(reply::with(
            StatusCode::OK,
            Some(HeaderValue::from_static("text/plain")),
            body::full("hello"),
        )),
        _ => None,
    }
}

/// Scenarios answered with one JSON-RPC message (or what should have been one).
fn result_scenario(c: &Call<'_>, tool: &str) -> Option<Response<Body>> {
    match tool {
        "ok" => Some(c.answer(&c.ok())),
        "tool_error" => Some(c.answer(&rpc::result(
            c.id,
            rpc::tool_result(c.era, "tool failed", true),
        ))),
        "jsonrpc_error" => Some(c.answer(&rpc::error(c.id, rpc::INVALID_PARAMS, "Invalid params"))),
        "input_required" => Some(input_required(c)),
        "legacy_result" => Some(c.answer(&rpc::result(
            c.id,
            json!({"content": [{"type": "text", "text": "ok"}], "isError": false}),
        ))),
        "content_not_array" => Some({
            let mut m = serde_json::Map::new();
            m.insert("content".into(), json!("not-an-array"));
            m.insert("isError".into(), json!(false));
            c.answer(&rpc::result(c.id, rpc::complete(c.era, m)))
        }),
        "wrong_id" => Some({
            let wrong = if *c.id == json!(99999) {
                json!("wrong")
            } else {
                json!(99999)
            };
            c.answer(&rpc::result(&wrong, rpc::tool_result(c.era, "ok", false)))
        }),
        "result_and_error" => Some({
            let mut msg = c.ok();
            if let Some(obj) = msg.as_object_mut() {
                obj.insert(
                    "error".into(),
                    json!({"code": rpc::INTERNAL_ERROR, "message": "Internal error"}),
                );
            }
            c.answer(&msg)
        }),
        "bad_jsonrpc_version" => Some({
            let mut msg = c.ok();
            if let Some(obj) = msg.as_object_mut() {
                obj.insert("jsonrpc".into(), json!("1.0"));
            }
            c.answer(&msg)
        }),
        "malformed_json" => Some(reply::json_bytes(StatusCode::OK, "{ not valid json")),
        "large_result" => Some(large_result(c)),
        "echo_headers" => Some({
            let text = echo_headers(c.headers).to_string();
            c.answer(&rpc::result(c.id, rpc::tool_result(c.era, &text, false)))
        }),
        _ => None,
    }
}

/// Scenarios answered on an SSE stream.
fn stream_scenario(c: &Call<'_>, tool: &str, token: &Value) -> Option<Response<Body>> {
    let progress = |i: u64, total: u64| sse::message(&rpc::progress(token, i, total));
    match tool {
        "sse_progress" => Some({
            let mut steps = Vec::new();
            for i in 1..=3 {
                steps.extend([Step::Send(progress(i, 3)), Step::Pause(PROGRESS_GAP)]);
            }
            steps.push(Step::Send(sse::message(&c.ok())));
            c.play(steps)
        }),
        "sse_closed_early" => Some(c.play([Step::Send(progress(1, 2))])),
        "sse_final_error" => Some(c.play([
            Step::Send(progress(1, 2)),
            Step::Send(sse::message(&rpc::error(
                c.id,
                rpc::INTERNAL_ERROR,
                "Internal error",
            ))),
        ])),
        "sse_server_request" => Some(c.play([
            // Legacy transports let the server send requests on the POST stream; its ids live
            // in the server's id space, so id 0 deliberately collides with a client id.
            Step::Send(sse::message(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "roots/list"}),
            )),
            Step::Send(sse::message(&c.ok())),
        ])),
        "sse_drip" => Some({
            let count = c.arg_u64("count", 5, MAX_DRIP_EVENTS);
            let gap = Duration::from_millis(c.arg_u64("interval_ms", 100, MAX_DRIP_INTERVAL_MS));
            let token = token.clone();
            let events = (1..=count).flat_map(move |i| {
                let event = sse::message(&rpc::progress(&token, i, count));
                [Step::Send(event), Step::Pause(gap)]
            });
            c.play(events.chain([Step::Send(sse::message(&c.ok()))]))
        }),
        "sse_resumable" => Some(sse_resumable(c, token)),
        "sse_reset" => Some(c.play([
            Step::Send(progress(1, 2)),
            Step::Pause(PAUSE_BEFORE_ABORT),
            Step::Abort,
        ])),
        _ => None,
    }
}

/// 2026-07-28 MRTR (basic/patterns/mrtr): ask for one elicitation; a retry that carries
/// `inputResponses` completes.
fn input_required(c: &Call<'_>) -> Response<Body> {
    let answered = c.params.get("inputResponses").is_some_and(|v| !v.is_null());
    if answered {
        return c.answer(&c.ok());
    }
    c.answer(&rpc::result(
        c.id,
        json!({
            "resultType": "input_required",
            "inputRequests": {"approval": {"method": "elicitation/create", "params": {
                "mode": "form",
                "message": "approve?",
                "requestedSchema": {"type": "object", "properties": {}},
            }}},
            "requestState": "s1",
        }),
    ))
}

/// 2025-11-25 transports §Resumability: priming event, one progress event, a `retry` hint,
/// then the connection closes without the response. The response waits in the session for a
/// GET with `Last-Event-ID`.
fn sse_resumable(c: &Call<'_>, token: &Value) -> Response<Body> {
    let stream = format!("s{}", c.testbed.next_stream_id());
    if let Some(session) = c.session {
        let final_frame = sse::message_with_id(&sse::event_id(&stream, 2), &c.ok());
        session.stash_replay(stream.clone(), final_frame);
    }
    c.play([
        Step::Send(sse::priming(&sse::event_id(&stream, 0))),
        Step::Send(sse::message_with_id(
            &sse::event_id(&stream, 1),
            &rpc::progress(token, 1, 2),
        )),
        Step::Send(sse::retry(sse::RESUME_RETRY_MS)),
    ])
}

/// Promises the whole ok response in Content-Length, sends half, then aborts.
fn json_reset(c: &Call<'_>) -> Response<Body> {
    let full = Bytes::from(c.ok().to_string());
    let half = full.slice(..full.len() / 2);
    let (tx, body) = body::channel();
    tokio::spawn(async move {
        if tx.send(Chunk::Data(half)).await.is_ok() {
            sleep(PAUSE_BEFORE_ABORT).await;
            let _ = tx.send(Chunk::Abort).await;
        }
    });
    let mut resp = reply::with(StatusCode::OK, Some(reply::APPLICATION_JSON), body);
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(full.len()));
    resp
}

/// A tool result whose text is `bytes` filler bytes, streamed from a static buffer.
fn large_result(c: &Call<'_>) -> Response<Body> {
    let len = c.arg_u64("bytes", 1 << 20, MAX_LARGE_BYTES);
    let prefix = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":[{{"type":"text","text":""#,
        c.id
    );
    let tail = if c.era == Era::Modern {
        r#","resultType":"complete""#
    } else {
        ""
    };
    let suffix = format!(r#""}}],"isError":false{tail}}}}}"#);
    reply::with(
        StatusCode::OK,
        Some(reply::APPLICATION_JSON),
        body::fill(Bytes::from(prefix), len, Bytes::from(suffix)),
    )
}

/// The request headers as a JSON object; repeated headers are joined with ", " (RFC 9110
/// §5.3), values that are not UTF-8 are replaced lossily.
fn echo_headers(headers: &HeaderMap) -> Value {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        map.entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    json!(map)
}
