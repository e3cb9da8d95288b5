//! The outcome rules for one response message against the request it answers, and how ids
//! compare. Pure functions over [`Envelope`] captures.
//!
//! Decisions (documented in README "Outcomes"):
//! - Ids compare as JSON values: strings by decoded content; numbers by numeric value, as the
//!   TypeScript and Python SDK clients do (`1`, `1.0`, `1e0` and `10e-1` are one id; `-0`
//!   equals `0`). Two integers compare exactly; otherwise both are read as f64. A string never
//!   equals a number (`1` ≠ `"1"`: 2025-03-26 … 2026-07-28 basic §Responses, "the same ID").
//! - An absent `resultType` is "complete" (2026-07-28 basic §ResultType: "clients MUST treat an
//!   absent resultType as complete").
//! - `resultType: "task"` (Tasks extension for 2026-07-28), or a 2025-11-25 `CreateTaskResult`
//!   (`{task: {…}}`), is valid only when the request asked for a task (`params.task`) or
//!   declared the Tasks extension in `params._meta[…clientCapabilities].extensions`; it is then
//!   SUCCESS — the request created a task; the tool's own outcome comes with a later call.
//!   Without that declaration it is an unknown kind: INVALID_TOOL_RESULT.
//! - `input_required` must carry `inputRequests` or `requestState` (2026-07-28 MRTR: "Servers
//!   MUST include at least one"), and only tools/call, prompts/get and resources/read may
//!   return it; otherwise INVALID_TOOL_RESULT.

use super::capture::{
    Captured, Envelope, Kind, MAX_ID_BYTES, MAX_NAME_BYTES, MAX_SHORT_BYTES, RequestFields,
};
use super::outcome::Outcome;

/// The request side of a call: what the request inspector read from the POST body.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: Captured<MAX_ID_BYTES>,
    pub method: Captured<MAX_NAME_BYTES>,
    /// `params.name` of a tools/call (Absent otherwise).
    pub tool: Captured<MAX_NAME_BYTES>,
    /// The request asked for a task or declared the Tasks extension.
    pub tasks: bool,
    /// `name@version` of the client, when the request names it (initialize, or 2026-07-28
    /// `_meta`); Absent otherwise.
    pub client: Captured<MAX_NAME_BYTES>,
    /// The protocol version the request states (initialize's `protocolVersion`, or 2026-07-28
    /// `_meta`); Absent otherwise.
    pub protocol_version: Captured<MAX_SHORT_BYTES>,
    /// What only a trace reads, when the request carries any of it (boxed: most carry none).
    pub context: Option<Box<RequestContext>>,
}

/// The request's texts a trace reads: its trace context (`params._meta.traceparent` and
/// `tracestate`, SEP-414), the prompt of a prompts/get, the resource URI of a resource method.
/// A value cut by its capture limit is left out rather than kept wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestContext {
    pub traceparent: Option<Box<str>>,
    pub tracestate: Option<Box<str>>,
    pub prompt: Option<Box<str>>,
    pub resource_uri: Option<Box<str>>,
}

// === impl Request ===

impl Request {
    /// The request in a client message, if it is one: `method` and a string or number `id`.
    /// Notifications (no id) and the client's responses to server requests are not calls.
    /// Only a request scanner's envelope (`JsonScanner::new`) holds a request's texts.
    pub fn from_envelope(env: &Envelope) -> Option<Request> {
        Request::fields_of(env).map(|fields| Request::of(env, fields))
    }

    /// The request texts of a client message that is a request ([`from_envelope`]).
    ///
    /// [`from_envelope`]: Request::from_envelope
    pub(crate) fn fields_of(env: &Envelope) -> Option<&RequestFields> {
        if env.shape != Kind::Object || env.method != Kind::String {
            return None;
        }
        if !matches!(env.id.kind, Kind::String | Kind::Number) {
            return None;
        }
        env.request_only.as_deref()
    }

    /// The request of `env`, whose texts [`fields_of`](Request::fields_of) gave.
    pub(crate) fn of(env: &Envelope, fields: &RequestFields) -> Request {
        let is_tool_call = fields.method.is_string("tools/call");
        let mut tool = Captured::new();
        if is_tool_call && fields.tool_name.kind == Kind::String {
            tool = fields.tool_name.clone();
        }
        let mut client = Captured::new();
        if fields.client_name.kind == Kind::String {
            client.start(Kind::String);
            client.push(fields.client_name.bytes());
            if fields.client_version.kind == Kind::String {
                client.push(b"@");
                client.push(fields.client_version.bytes());
            }
        }
        let mut protocol_version = Captured::new();
        if fields.protocol_version.kind == Kind::String {
            protocol_version = fields.protocol_version.clone();
        }
        Request {
            id: env.id.clone(),
            method: fields.method.clone(),
            tool,
            tasks: env.params_task == Kind::Object || env.tasks_extension != Kind::Absent,
            client,
            protocol_version,
            context: RequestContext::of(fields),
        }
    }

    pub fn is_tool_call(&self) -> bool {
        self.method.is_string("tools/call")
    }

    /// A list request (`tools/list`, `prompts/list`, `resources/list`,
    /// `resources/templates/list`): its answer is the same for every caller until the server's
    /// list changes (2025-11-25 server/tools §Listing Tools, and its siblings for prompts and
    /// resources).
    pub fn is_list(&self) -> bool {
        [
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
        ]
        .iter()
        .any(|m| self.method.is_string(m))
    }

    fn may_need_input(&self) -> bool {
        ["tools/call", "prompts/get", "resources/read"]
            .iter()
            .any(|m| self.method.is_string(m))
    }
}

// === impl RequestContext ===

impl RequestContext {
    fn of(fields: &RequestFields) -> Option<Box<RequestContext>> {
        let context = RequestContext {
            traceparent: whole(&fields.traceparent),
            tracestate: whole(&fields.tracestate),
            prompt: whole(&fields.tool_name).filter(|_| fields.method.is_string("prompts/get")),
            resource_uri: whole(&fields.resource_uri),
        };
        (context != RequestContext::default()).then(|| Box::new(context))
    }
}

/// A captured string, when it was kept whole.
fn whole<const N: usize>(captured: &Captured<N>) -> Option<Box<str>> {
    (captured.kind == Kind::String && !captured.truncated())
        .then(|| Box::from(&*captured.text_lossy()))
}

/// Whether two ids are the same JSON-RPC id (see the module notes).
pub fn ids_equal<const A: usize, const B: usize>(a: &Captured<A>, b: &Captured<B>) -> bool {
    match (a.kind, b.kind) {
        (Kind::String, Kind::String) => a.same_bytes(b),
        (Kind::Number, Kind::Number) => {
            // The same token is the same number (the usual case: the response echoes the
            // request's id); only different spellings need reading as numbers. Compared once:
            // this runs twice per response message.
            let same = a.same_bytes(b);
            if same || a.truncated() || b.truncated() {
                return same;
            }
            match (number(a.bytes()), number(b.bytes())) {
                (Some(Number::Int(x)), Some(Number::Int(y))) => x == y,
                (Some(x), Some(y)) => x.as_f64() == y.as_f64(),
                _ => false,
            }
        }
        _ => false,
    }
}

#[derive(Clone, Copy)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// A number token as serde_json reads it: an integer when it has no fraction or exponent and
/// fits i64 or u64; otherwise a float.
fn number(token: &[u8]) -> Option<Number> {
    let text = std::str::from_utf8(token).ok()?;
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
        && let Ok(i) = text.parse::<i128>()
        && i >= i128::from(i64::MIN)
        && i <= i128::from(u64::MAX)
    {
        return Some(Number::Int(i));
    }
    text.parse::<f64>().ok().map(Number::Float)
}

/// Whether the message's `jsonrpc`, `result`/`error` and error object are well formed.
/// (The id is checked by the caller, which matched it.) A message with `method` is a request
/// or notification, never a response (SSE skips them before they get here; on a JSON body
/// they are invalid, exchange.rs).
fn envelope_valid(env: &Envelope) -> bool {
    if env.shape != Kind::Object || !env.jsonrpc.is_string("2.0") {
        return false;
    }
    if env.method != Kind::Absent {
        return false;
    }
    match (env.result != Kind::Absent, env.error != Kind::Absent) {
        (true, true) | (false, false) => false,
        (false, true) => {
            env.error == Kind::Object
                && env.error_code.as_i64().is_some()
                && env.error_message.kind == Kind::String
        }
        (true, false) => true,
    }
}

/// The outcome of `request` given the response message `env` that answers it.
pub fn outcome_of(request: &Request, env: &Envelope) -> Outcome {
    if !envelope_valid(env) {
        return Outcome::InvalidEnvelope;
    }
    match env.id.kind {
        Kind::String | Kind::Number if ids_equal(&env.id, &request.id) => {}
        // A null or absent id is allowed on errors only: the server could not read the id
        // (2025-11-25 basic §Error responses; JSON-RPC 2.0 §5).
        Kind::Null | Kind::Absent if env.error != Kind::Absent => {}
        _ => return Outcome::InvalidEnvelope,
    }
    if env.error != Kind::Absent {
        return Outcome::JsonRpcError;
    }
    if env.result != Kind::Object {
        return Outcome::InvalidToolResult;
    }
    let kind = &env.result_type;
    let complete = match kind.kind {
        Kind::Absent => {
            // 2025-11-25 tasks: a task-augmented request may get a CreateTaskResult instead.
            if env.result_task == Kind::Object && request.tasks {
                return Outcome::Success;
            }
            true
        }
        Kind::String => {
            if kind.is_string("complete") {
                true
            } else if kind.is_string("input_required") {
                let carries =
                    env.input_requests == Kind::Object || env.request_state == Kind::String;
                return if carries && request.may_need_input() {
                    Outcome::InputRequired
                } else {
                    Outcome::InvalidToolResult
                };
            } else if kind.is_string("task") && request.tasks {
                return Outcome::Success;
            } else {
                return Outcome::InvalidToolResult;
            }
        }
        _ => return Outcome::InvalidToolResult,
    };
    debug_assert!(complete);
    if !request.is_tool_call() {
        return Outcome::Success;
    }
    if env.content != Kind::Array {
        return Outcome::InvalidToolResult;
    }
    match env.is_error {
        Kind::True => Outcome::ToolError,
        Kind::False | Kind::Absent => Outcome::ToolSuccess,
        _ => Outcome::InvalidToolResult,
    }
}

/// The error code of a message, for the call log.
pub fn error_code(env: &Envelope) -> Option<i64> {
    (env.error == Kind::Object)
        .then(|| env.error_code.as_i64())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Captured<MAX_ID_BYTES> {
        let mut c = Captured::new();
        if let Some(s) = text.strip_prefix('"') {
            c.start(Kind::String);
            c.push(s.trim_end_matches('"').as_bytes());
        } else {
            c.start(Kind::Number);
            c.push(text.as_bytes());
        }
        c
    }

    #[test]
    fn ids_compare_as_json_values() {
        let same = [
            ("1", "1"),
            ("1", "1.0"),
            ("1", "1e0"),
            ("100", "1e2"),
            ("0", "-0"),
            ("1", "10e-1"),
            ("\"a\"", "\"a\""),
        ];
        for (a, b) in same {
            assert!(ids_equal(&id(a), &id(b)), "{a} = {b}");
        }
        let differ = [
            ("1", "2"),
            ("1", "\"1\""),
            ("\"a\"", "\"b\""),
            ("18446744073709551615", "18446744073709551614"),
        ];
        for (a, b) in differ {
            assert!(!ids_equal(&id(a), &id(b)), "{a} != {b}");
        }
    }
}
