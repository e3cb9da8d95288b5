//! The reference classifier (the oracle) for `strata::classify`, used only by tests and fuzz
//! targets.
//!
//! It sees whole buffers — the request body, the response head, the whole response body and
//! how it ended — parses JSON with serde_json into `serde_json::Value`, frames SSE with a
//! whole-string WHATWG parser written here, and applies README.md's outcome table
//! ("Outcomes") and the decisions documented in `envelope.rs`, `exchange.rs` and `sse.rs`,
//! written afresh over `Value`. It never calls the scanner, the framer or the correlator; it
//! shares with them only the vocabulary (`Outcome`, `BodyEnd`) and the named limits.
//!
//! Where serde_json's `Value` and the classifier's documented rules differ, the documented
//! rule is encoded here:
//! - Numbers outside f64's range (`1e400`): serde_json's `Value` rejects them ("number out of
//!   range"); RFC 8259's grammar, and so the scanner, accepts them. [`parse`] replaces such a
//!   token by ±f64::MAX and parses again (an id of `1e400` then equals `2e400`, as two infinite
//!   f64 do).
//! - Ids compare as JSON values: strings by content, two integers exactly, otherwise as f64
//!   (`1` = `1.0` = `1e0`, `-0` = `0`, `1` ≠ `"1"`). A number token longer than
//!   [`MAX_ID_BYTES`] compares by its text (the capture keeps a prefix and a hash).
//! - Depth: at most 127 open containers. Lone surrogates: invalid. Duplicate keys: the last
//!   wins. serde_json already does all three; the property tests pin them.
//! - SSE is framed on bytes, as the framer does: UTF-8 is not decoded first, so invalid UTF-8
//!   in `data` is invalid JSON (a WHATWG client would see U+FFFD). An event whose data lines
//!   are all empty is "empty" and skipped (`EventData::Empty`), like a priming event.
//! - A stream is resumable when the client would resume it: its last event ID string (set at
//!   each dispatch, WHATWG §9.2.6) is not empty.
#![allow(dead_code)]

use serde_json::Value;
use strata::classify::Outcome;
use strata::classify::capture::{MAX_ID_BYTES, MAX_NAME_BYTES, MAX_SHORT_BYTES};
use strata::classify::exchange::BodyEnd;
use strata::classify::request::MAX_BATCH_REQUESTS;
use strata::classify::sse::MAX_EVENT_ID;

/// What the oracle says of one request: its verdict with the details the call log keeps, or
/// pending on a resumable stream. Captured strings are (first bytes up to the cap, full length).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Res {
    Final {
        outcome: Outcome,
        error_code: Option<i64>,
        error_message: Option<(Vec<u8>, usize)>,
        result_type: Option<(Vec<u8>, usize)>,
    },
    Pending {
        last_event_id: (Vec<u8>, usize),
    },
}

impl Res {
    pub(crate) fn of(outcome: Outcome) -> Res {
        Res::Final {
            outcome,
            error_code: None,
            error_message: None,
            result_type: None,
        }
    }

    pub(crate) fn outcome(&self) -> Option<Outcome> {
        match self {
            Res::Final { outcome, .. } => Some(*outcome),
            Res::Pending { .. } => None,
        }
    }
}

/// `(first cap bytes, total length)`, as a capture keeps a string.
pub(crate) fn capped(bytes: &[u8], cap: usize) -> (Vec<u8>, usize) {
    (bytes[..bytes.len().min(cap)].to_vec(), bytes.len())
}

// ---------------------------------------------------------------------------------------------
// JSON

/// Parses one JSON document as the classifier's rules define validity (see the module notes).
pub(crate) fn parse(bytes: &[u8]) -> Option<Value> {
    let mut fixed: Option<Vec<u8>> = None;
    // Each round replaces one out-of-range number, so this ends within len rounds.
    for _ in 0..=bytes.len() {
        let cur = fixed.as_deref().unwrap_or(bytes);
        match serde_json::from_slice::<Value>(cur) {
            Ok(v) => return Some(v),
            Err(e) if e.to_string().starts_with("number out of range") => {
                let last = offset_of(cur, e.line(), e.column())?;
                let (start, end) = number_span(cur, last)?;
                let max = if cur[start] == b'-' {
                    &b"-1.7976931348623157e308"[..]
                } else {
                    &b"1.7976931348623157e308"[..]
                };
                let mut next = cur[..start].to_vec();
                next.extend_from_slice(max);
                next.extend_from_slice(&cur[end..]);
                fixed = Some(next);
            }
            Err(_) => return None,
        }
    }
    None
}

/// Whether `bytes` is one valid JSON document (by the rules of [`parse`]).
pub(crate) fn valid(bytes: &[u8]) -> bool {
    parse(bytes).is_some()
}

/// The byte offset of serde_json's (1-based line, 1-based column) position.
fn offset_of(bytes: &[u8], line: usize, column: usize) -> Option<usize> {
    let mut start = 0;
    for _ in 1..line {
        start += memchr::memchr(b'\n', &bytes[start..])? + 1;
    }
    let at = (start + column).checked_sub(1)?;
    (at < bytes.len()).then_some(at)
}

/// The number token that contains byte `at`, by RFC 8259's number grammar.
fn number_span(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut start = at;
    while start > 0
        && matches!(
            bytes[start - 1],
            b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
        )
    {
        start -= 1;
    }
    let digits = |i: &mut usize| {
        let from = *i;
        while *i < bytes.len() && bytes[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > from
    };
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    if bytes.get(i) == Some(&b'0') {
        i += 1;
    } else if !digits(&mut i) {
        return None;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return None;
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return None;
        }
    }
    (i > at).then_some((start, i))
}

/// A document as the oracle reads it: the value, and for each message the raw text of its
/// `id` when that is a number (for the long-id rule).
pub(crate) struct Doc {
    pub(crate) value: Value,
    raw_ids: Vec<Option<Vec<u8>>>,
}

pub(crate) fn parse_doc(bytes: &[u8]) -> Option<Doc> {
    let value = parse(bytes)?;
    let raw_ids = raw::message_ids(bytes);
    Some(Doc { value, raw_ids })
}

/// A tiny span walker over JSON already known valid: finds the raw token of each message's
/// numeric `id`. (Whole documents only; nothing here validates.)
mod raw {
    fn ws(b: &[u8], mut i: usize) -> usize {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        i
    }

    fn string_end(b: &[u8], mut i: usize) -> usize {
        i += 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return i + 1,
                _ => i += 1,
            }
        }
        b.len()
    }

    /// The end of the value starting at `i` (after whitespace).
    fn value_end(b: &[u8], i: usize) -> usize {
        match b.get(i) {
            Some(b'"') => string_end(b, i),
            Some(b'{') | Some(b'[') => {
                let close = if b[i] == b'{' { b'}' } else { b']' };
                let mut j = ws(b, i + 1);
                if b.get(j) == Some(&close) {
                    return j + 1;
                }
                loop {
                    if close == b'}' {
                        j = string_end(b, j);
                        j = ws(b, j) + 1; // the colon
                        j = ws(b, j);
                    }
                    j = ws(b, value_end(b, j));
                    match b.get(j) {
                        Some(b',') => j = ws(b, j + 1),
                        _ => return j + 1,
                    }
                }
            }
            Some(_) => {
                let mut j = i;
                while j < b.len()
                    && !matches!(b[j], b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                {
                    j += 1;
                }
                j
            }
            None => i,
        }
    }

    /// The raw numeric id of the message at `i`, if it is an object with a number `id`.
    fn message_id(b: &[u8], i: usize) -> Option<Vec<u8>> {
        if b.get(i) != Some(&b'{') {
            return None;
        }
        let mut found = None;
        let mut j = ws(b, i + 1);
        if b.get(j) == Some(&b'}') {
            return None;
        }
        loop {
            let key_end = string_end(b, j);
            let key: String = serde_json::from_slice(&b[j..key_end]).ok()?;
            j = ws(b, ws(b, key_end) + 1);
            let end = value_end(b, j);
            if key == "id" {
                // Last key wins.
                found = matches!(b[j], b'-' | b'0'..=b'9').then(|| b[j..end].to_vec());
            }
            j = ws(b, end);
            match b.get(j) {
                Some(b',') => j = ws(b, j + 1),
                _ => return found,
            }
        }
    }

    pub(super) fn message_ids(b: &[u8]) -> Vec<Option<Vec<u8>>> {
        let i = ws(b, 0);
        if b.get(i) != Some(&b'[') {
            return vec![message_id(b, i)];
        }
        let mut out = Vec::new();
        let mut j = ws(b, i + 1);
        if b.get(j) == Some(&b']') {
            return out;
        }
        loop {
            out.push(message_id(b, j));
            j = ws(b, value_end(b, j));
            match b.get(j) {
                Some(b',') => j = ws(b, j + 1),
                _ => return out,
            }
        }
    }
}

/// A JSON-RPC id: its value, and its raw text when it is a number.
#[derive(Clone, Debug)]
pub(crate) struct Id {
    value: Value,
    raw: Option<Vec<u8>>,
}

/// Whether two ids are the same JSON-RPC id (envelope.rs "Decisions").
pub(crate) fn ids_equal(a: &Id, b: &Id) -> bool {
    match (&a.value, &b.value) {
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => {
            let long = |id: &Id| id.raw.as_ref().is_some_and(|r| r.len() > MAX_ID_BYTES);
            if long(a) || long(b) {
                return a.raw == b.raw;
            }
            let int = |n: &serde_json::Number| {
                n.as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from))
            };
            match (int(x), int(y)) {
                (Some(p), Some(q)) => p == q,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

/// A request as the oracle reads it from the POST body.
#[derive(Clone, Debug)]
pub(crate) struct Req {
    pub(crate) id: Id,
    pub(crate) method: String,
    pub(crate) tasks: bool,
}

impl Req {
    fn is(&self, method: &str) -> bool {
        self.method == method
    }
}

fn member<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|o| o.get(key))
}

/// The requests of a POST body, and whether it was a batch. A body that is not valid JSON
/// carries none (the upstream cannot answer it by id).
pub(crate) fn requests(body: &[u8]) -> (Vec<Req>, bool) {
    let Some(doc) = parse_doc(body) else {
        return (Vec::new(), false);
    };
    let batch = doc.value.is_array();
    let messages: Vec<&Value> = match &doc.value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for (m, raw) in messages.into_iter().zip(doc.raw_ids.iter()) {
        let Some(obj) = m.as_object() else { continue };
        let Some(Value::String(method)) = obj.get("method") else {
            continue;
        };
        let Some(id) = obj.get("id").filter(|id| id.is_string() || id.is_number()) else {
            continue;
        };
        let params = obj.get("params");
        let task = params
            .and_then(|p| member(p, "task"))
            .is_some_and(Value::is_object);
        let extension = params
            .and_then(|p| member(p, "_meta"))
            .and_then(|m| member(m, "io.modelcontextprotocol/clientCapabilities"))
            .and_then(|c| member(c, "extensions"))
            .and_then(|e| member(e, "io.modelcontextprotocol/tasks"))
            .is_some();
        if out.len() < MAX_BATCH_REQUESTS {
            out.push(Req {
                id: Id {
                    value: id.clone(),
                    raw: raw.clone(),
                },
                method: method.clone(),
                tasks: task || extension,
            });
        }
    }
    (out, batch)
}

// ---------------------------------------------------------------------------------------------
// Outcome rules (README.md "Outcomes"; envelope.rs)

/// The outcome of `req` given the response message `msg` (an element or the whole document).
fn outcome_of(req: &Req, msg: &Value, msg_id: &Id) -> Outcome {
    let Some(obj) = msg.as_object() else {
        return Outcome::InvalidEnvelope;
    };
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Outcome::InvalidEnvelope;
    }
    // A message with `method` is a request or notification, never a response.
    if obj.contains_key("method") {
        return Outcome::InvalidEnvelope;
    }
    let result = obj.get("result");
    let error = obj.get("error");
    match (result, error) {
        (Some(_), Some(_)) | (None, None) => return Outcome::InvalidEnvelope,
        (None, Some(e)) => {
            let code_ok = member(e, "code").is_some_and(|c| c.as_i64().is_some());
            let message_ok = member(e, "message").is_some_and(Value::is_string);
            if !(e.is_object() && code_ok && message_ok) {
                return Outcome::InvalidEnvelope;
            }
        }
        (Some(_), None) => {}
    }
    match obj.get("id") {
        Some(Value::String(_) | Value::Number(_)) if ids_equal(msg_id, &req.id) => {}
        None | Some(Value::Null) if error.is_some() => {}
        _ => return Outcome::InvalidEnvelope,
    }
    if error.is_some() {
        return Outcome::JsonRpcError;
    }
    let Some(Value::Object(result)) = result else {
        return Outcome::InvalidToolResult;
    };
    match result.get("resultType") {
        None => {
            if result.get("task").is_some_and(Value::is_object) && req.tasks {
                return Outcome::Success;
            }
        }
        Some(Value::String(t)) if t == "complete" => {}
        Some(Value::String(t)) if t == "input_required" => {
            let carries = result.get("inputRequests").is_some_and(Value::is_object)
                || result.get("requestState").is_some_and(Value::is_string);
            let may = req.is("tools/call") || req.is("prompts/get") || req.is("resources/read");
            return if carries && may {
                Outcome::InputRequired
            } else {
                Outcome::InvalidToolResult
            };
        }
        Some(Value::String(t)) if t == "task" && req.tasks => return Outcome::Success,
        Some(_) => return Outcome::InvalidToolResult,
    }
    if !req.is("tools/call") {
        return Outcome::Success;
    }
    if !result.get("content").is_some_and(Value::is_array) {
        return Outcome::InvalidToolResult;
    }
    match result.get("isError") {
        None | Some(Value::Bool(false)) => Outcome::ToolSuccess,
        Some(Value::Bool(true)) => Outcome::ToolError,
        Some(_) => Outcome::InvalidToolResult,
    }
}

fn verdict(req: &Req, msg: &Value, msg_id: &Id) -> Res {
    let outcome = outcome_of(req, msg, msg_id);
    let error = member(msg, "error").filter(|e| e.is_object());
    let result = member(msg, "result").filter(|r| r.is_object());
    Res::Final {
        outcome,
        error_code: error
            .and_then(|e| member(e, "code"))
            .and_then(Value::as_i64),
        error_message: error
            .and_then(|e| member(e, "message"))
            .and_then(Value::as_str)
            .map(|s| capped(s.as_bytes(), MAX_NAME_BYTES)),
        result_type: result
            .and_then(|r| member(r, "resultType"))
            .and_then(Value::as_str)
            .map(|s| capped(s.as_bytes(), MAX_SHORT_BYTES)),
    }
}

// ---------------------------------------------------------------------------------------------
// Correlation (exchange.rs)

struct Calls<'a> {
    reqs: &'a [Req],
    request_batch: bool,
    res: Vec<Option<Res>>,
}

impl Calls<'_> {
    /// One whole document (the JSON body, or one SSE event's data).
    fn document(&mut self, bytes: &[u8], sse: bool) {
        let Some(doc) = parse_doc(bytes) else {
            return self.settle(Outcome::MalformedJson);
        };
        if doc.value.is_array() && !self.request_batch {
            // A batch response to a single request (JSON-RPC 2.0 §6: an array answers only a
            // batch).
            return self.settle(Outcome::InvalidEnvelope);
        }
        let messages: Vec<&Value> = match &doc.value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        // Verdicts of this document: a request answered here is no longer open.
        let mut here: Vec<Option<Res>> = vec![None; self.reqs.len()];
        for (msg, raw) in messages.into_iter().zip(doc.raw_ids) {
            let open: Vec<usize> = (0..self.reqs.len())
                .filter(|&i| self.res[i].is_none() && here[i].is_none())
                .collect();
            let id = Id {
                value: member(msg, "id").cloned().unwrap_or(Value::Null),
                raw,
            };
            let obj = msg.as_object();
            let has_method = obj.is_some_and(|o| o.contains_key("method"));
            if sse && has_method {
                continue; // a notification or server→client request on the stream
            }
            let unmatched = |here: &mut Vec<Option<Res>>| {
                if let [only] = open[..] {
                    here[only] = Some(verdict(&self.reqs[only], msg, &id));
                }
            };
            let Some(obj) = obj.filter(|_| !has_method) else {
                unmatched(&mut here);
                continue;
            };
            match obj.get("id") {
                Some(Value::String(_) | Value::Number(_)) => {
                    let eq = |i: &usize| ids_equal(&self.reqs[*i].id, &id);
                    if let Some(i) = open.iter().copied().find(eq) {
                        here[i] = Some(verdict(&self.reqs[i], msg, &id));
                    } else if !(0..self.reqs.len()).any(|i| eq(&i)) {
                        unmatched(&mut here);
                    }
                }
                None | Some(Value::Null) if obj.contains_key("error") => {
                    for &i in &open {
                        here[i] = Some(verdict(&self.reqs[i], msg, &id));
                    }
                }
                _ => unmatched(&mut here),
            }
        }
        for (slot, v) in self.res.iter_mut().zip(here) {
            if slot.is_none() {
                *slot = v;
            }
        }
    }

    fn settle(&mut self, outcome: Outcome) {
        for r in &mut self.res {
            if r.is_none() {
                *r = Some(Res::of(outcome));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SSE (WHATWG HTML §9.2.6, on bytes)

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) event_type: Vec<u8>,
    /// Data lines, joined by LF (the trailing LF removed).
    pub(crate) data: Vec<u8>,
    /// All data lines were empty.
    pub(crate) empty: bool,
}

/// The whole stream parsed: its events, and the last event ID string at the end.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    pub(crate) events: Vec<Event>,
    pub(crate) last_event_id: Vec<u8>,
}

pub(crate) fn parse_sse(stream: &[u8]) -> Stream {
    let mut s = stream;
    if s.starts_with(&[0xEF, 0xBB, 0xBF]) {
        s = &s[3..];
    }
    // Lines: split at CRLF, LF or CR; an unterminated last line is never processed.
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\n' => {
                lines.push(&s[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&s[start..i]);
                i += if s.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                start = i;
            }
            _ => i += 1,
        }
    }
    let mut out = Stream::default();
    let mut data: Vec<u8> = Vec::new();
    let mut has_data = false;
    let mut all_empty = true;
    let mut event_type: Vec<u8> = Vec::new();
    let mut id_buffer: Vec<u8> = Vec::new();
    for line in lines {
        if line.is_empty() {
            // Dispatch.
            out.last_event_id = id_buffer.clone();
            if has_data {
                data.pop(); // the trailing LF
                out.events.push(Event {
                    event_type: std::mem::take(&mut event_type),
                    data: std::mem::take(&mut data),
                    empty: all_empty,
                });
            }
            data.clear();
            event_type.clear();
            has_data = false;
            all_empty = true;
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"event" => event_type = value.to_vec(),
            b"data" => {
                data.extend_from_slice(value);
                data.push(b'\n');
                has_data = true;
                all_empty &= value.is_empty();
            }
            b"id" if !value.contains(&0) => id_buffer = value.to_vec(),
            _ => {} // retry (no effect on outcomes) and unknown fields
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The exchange

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Media {
    Json,
    Sse,
    Other,
}

/// The media type of a `Content-Type` value: `application/json` or any `…/…+json`
/// (RFC 6839), and `text/event-stream`; parameters and case ignored.
pub(crate) fn media(content_type: Option<&[u8]>) -> Media {
    let Some(ct) = content_type else {
        return Media::Other;
    };
    let text = String::from_utf8_lossy(ct).to_ascii_lowercase();
    let essence = text
        .split(';')
        .next()
        .unwrap_or("")
        .trim_matches(|c: char| c.is_ascii_whitespace());
    if essence == "application/json" {
        return Media::Json;
    }
    if essence == "text/event-stream" {
        return Media::Sse;
    }
    match essence.strip_suffix("+json") {
        Some(head) if !head.is_empty() => Media::Json,
        _ => Media::Other,
    }
}

/// The oracle: every request of `request_body` with its resolution, in request order.
pub(crate) fn classify(
    request_body: &[u8],
    status: u16,
    content_type: Option<&[u8]>,
    body: &[u8],
    end: BodyEnd,
) -> Vec<Res> {
    let (reqs, request_batch) = requests(request_body);
    let mut calls = Calls {
        res: vec![None; reqs.len()],
        reqs: &reqs,
        request_batch,
    };
    if !(200..300).contains(&status) {
        calls.settle(Outcome::HttpError);
    }
    let mut resumable = None;
    match media(content_type) {
        Media::Json => {
            let whole = end == BodyEnd::Complete && !body.is_empty();
            if whole || (end == BodyEnd::AgentGone && json_complete(body)) {
                calls.document(body, false);
            }
        }
        Media::Sse => {
            let stream = parse_sse(body);
            for event in &stream.events {
                let is_message = event.event_type.is_empty() || event.event_type == b"message";
                if !event.empty && is_message {
                    calls.document(&event.data, true);
                }
            }
            if !stream.last_event_id.is_empty() {
                resumable = Some(capped(&stream.last_event_id, MAX_EVENT_ID));
            }
        }
        Media::Other => {
            if end == BodyEnd::Complete && !body.is_empty() {
                calls.settle(Outcome::MalformedJson);
            }
        }
    }
    calls
        .res
        .into_iter()
        .map(|r| match (r, end, &resumable) {
            (Some(r), _, _) => r,
            (None, BodyEnd::AgentGone, _) => Res::of(Outcome::ClientCancelled),
            (None, _, Some(id)) => Res::Pending {
                last_event_id: id.clone(),
            },
            (None, _, None) => Res::of(Outcome::StreamIncomplete),
        })
        .collect()
}

/// Whether a JSON body that stopped here had already delivered its whole document: it is
/// valid, and does not end inside a top-level number (which more digits could extend).
fn json_complete(body: &[u8]) -> bool {
    match parse(body) {
        Some(Value::Number(_)) => body.last().is_some_and(|b| b.is_ascii_whitespace()),
        Some(_) => true,
        None => false,
    }
}

// ---------------------------------------------------------------------------------------------
// The system under test, driven the way the proxy drives it

/// Runs the streaming classifier: the request body through `RequestInspector` (cut at
/// `request_cuts`), then the response through `Exchange` (cut at `cuts`, byte offsets in
/// increasing order), handing out settled verdicts after every chunk, then `end`.
pub(crate) fn streaming(
    request_body: &[u8],
    request_cuts: &[usize],
    status: u16,
    content_type: Option<&[u8]>,
    body: &[u8],
    cuts: &[usize],
    end: BodyEnd,
) -> Vec<Res> {
    use strata::classify::exchange::{ContentKind, Exchange, Resolution, Verdict};
    use strata::classify::request::RequestInspector;

    let mut inspector = RequestInspector::new();
    for chunk in pieces(request_body, request_cuts) {
        inspector.feed(chunk, usize::MAX);
    }
    let found = inspector.finish();
    let n = found.requests.len();
    let mut ex = Exchange::new(found.requests, found.batch);
    ex.response_head(status, ContentKind::from_header(content_type));
    let mut out: Vec<Option<Res>> = vec![None; n];
    let of = |v: &Verdict| {
        assert_eq!(
            v.error_message_len,
            v.error_message.as_ref().map(|m| m.total_len()),
            "error_message_len disagrees with the capture"
        );
        Res::Final {
            outcome: v.outcome,
            error_code: v.error_code,
            error_message: v
                .error_message
                .as_ref()
                .map(|c| (c.bytes().to_vec(), c.total_len())),
            result_type: v
                .result_type
                .as_ref()
                .map(|c| (c.bytes().to_vec(), c.total_len())),
        }
    };
    for chunk in pieces(body, cuts) {
        ex.data(chunk);
        ex.drain_settled(|i, _, v| {
            assert!(out[i].is_none(), "request {i} handed out twice");
            out[i] = Some(of(v));
        });
    }
    let mut ended = ex.end(end);
    while let Some((i, _, resolution)) = ended.next_resolution() {
        assert!(out[i].is_none(), "request {i} handed out twice");
        out[i] = Some(match resolution {
            Resolution::Final(v) => of(&v),
            Resolution::Pending { last_event_id } => Res::Pending {
                last_event_id: (last_event_id.bytes().to_vec(), last_event_id.total_len()),
            },
        });
    }
    out.into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|| panic!("request {i} got no resolution")))
        .collect()
}

/// `bytes` cut at the given offsets (out-of-range and repeated offsets are harmless).
pub(crate) fn pieces<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for &c in cuts {
        let c = c.min(bytes.len());
        if c > at {
            out.push(&bytes[at..c]);
            at = c;
        }
    }
    out.push(&bytes[at..]);
    out
}
