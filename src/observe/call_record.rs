//! One structured log record per finished call (README.md, "The per-call log").
//!
//! What is deliberately not here: `Authorization`, cookies, any other request header, tool
//! arguments, and result content. Error messages are carried only when the operator asked for
//! them ([`CallRecord::set_error`]); otherwise only their length is logged, because upstream
//! error text routinely echoes user input.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::fmt::{self, Write as _};
use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::time::Duration;

use tracing::Level;

use crate::classify::envelope::Request;
use crate::classify::{Kind, Layer, Outcome};
use crate::log::{self, Fields, Name};
use crate::policy::limits::refusal::RefusedBy;

/// The `tracing` target of call records, so they can be routed or silenced on their own
/// (e.g. `RUST_LOG=info,strata::call=off`).
pub const CALL_TARGET: &str = "strata::call";

/// Everything worth knowing about one finished JSON-RPC call, written by [`CallRecord::emit`].
/// Texts are borrowed where the call still holds them: a record is built and written at once.
#[derive(Clone, Debug)]
pub struct CallRecord<'a> {
    /// The upstream's configured name or address (borrowed from the call's context: a
    /// clone of its `Arc` was two atomic operations a call).
    pub upstream: Cow<'a, str>,
    /// The `Mcp-Session-Id`, hashed; `None` before a session exists (initialize).
    pub session: Option<SessionHash>,
    /// `clientInfo` as `name@version`, from this session's initialize, when strata saw it.
    pub client: Option<Cow<'a, str>>,
    /// The negotiated (or `MCP-Protocol-Version` header's) protocol revision.
    pub protocol_version: Option<Cow<'a, str>>,
    pub method: Cow<'a, str>,
    /// `params.name` for tools/call.
    pub tool: Option<Cow<'a, str>>,
    /// The request id as its JSON text: `7` or `"abc"` (quotes included), so the two never
    /// look alike.
    pub jsonrpc_id: Cow<'a, str>,
    /// Upstream attempts made by strata (1 when there was no retry).
    pub attempts: u32,
    /// Final HTTP status of each attempt, in order (borrowed for the usual single attempt).
    pub http_statuses: Cow<'a, [u16]>,
    /// The final response's `Content-Type`.
    pub content_type: Option<Cow<'a, str>>,
    /// SSE events seen on the response stream (0 for a JSON response).
    pub sse_events: u32,
    /// The JSON-RPC `error.code`, when the response was an error.
    pub error_code: Option<i64>,
    /// Length in bytes of the JSON-RPC `error.message`.
    pub error_message_len: Option<usize>,
    /// The JSON-RPC `error.message` itself; set only through [`CallRecord::set_error`] with
    /// logging of messages enabled.
    pub error_message: Option<Cow<'a, str>>,
    /// The result's `resultType` (2026-07-28), when present.
    pub result_type: Option<Cow<'a, str>>,
    /// The outcome; the logged `layer` is derived from it, so the two cannot disagree.
    pub outcome: Outcome,
    pub retry_origin: RetryOrigin,
    /// The limit that refused the call, when strata answered it without the upstream
    /// (`limits.calls`, `circuit`).
    pub refused_by: Option<RefusedBy>,
    /// From the request's arrival to its outcome.
    pub duration: Duration,
}

/// Who caused this call to be a re-send, if anyone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RetryOrigin {
    /// A first attempt.
    #[default]
    None,
    /// strata's retry policy re-sent it.
    Proxy,
    /// The agent re-sent a request strata had already seen (same session and id).
    Client,
}

/// A session id that is safe to log: 16 hex digits of a keyed 64-bit hash.
///
/// The key is random per process, so a hash links one session's calls within a run but cannot
/// be looked up or reversed from logs; after a restart the same session hashes differently.
/// There is no way to build one from a raw id except by hashing it.
///
/// Held as its 16 lowercase hex digits, inline: a 2025-era call makes one for its record, and
/// an allocation costs more than reading the digits back as text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SessionHash([u8; 16]);

/// The loggable form of a raw `Mcp-Session-Id` (see [`SessionHash`]).
pub fn hash_session(id: &str) -> String {
    SessionHash::new(id).as_str().to_owned()
}

// === impl CallRecord ===

impl<'a> CallRecord<'a> {
    /// A record with the facts every call has; the optional ones start empty (`attempts` 1).
    pub fn new(
        upstream: impl Into<Cow<'a, str>>,
        method: impl Into<Cow<'a, str>>,
        jsonrpc_id: impl Into<Cow<'a, str>>,
        outcome: Outcome,
        duration: Duration,
    ) -> Self {
        CallRecord {
            upstream: upstream.into(),
            session: None,
            client: None,
            protocol_version: None,
            method: method.into(),
            tool: None,
            jsonrpc_id: jsonrpc_id.into(),
            attempts: 1,
            http_statuses: Cow::Borrowed(&[]),
            content_type: None,
            sse_events: 0,
            error_code: None,
            error_message_len: None,
            error_message: None,
            result_type: None,
            outcome,
            retry_origin: RetryOrigin::None,
            refused_by: None,
            duration,
        }
    }

    /// The record with every text its own, to keep after the call is gone (the recent calls,
    /// the export thread).
    pub fn into_owned(self) -> CallRecord<'static> {
        fn own(text: Cow<'_, str>) -> Cow<'static, str> {
            Cow::Owned(text.into_owned())
        }
        CallRecord {
            upstream: own(self.upstream),
            session: self.session,
            client: self.client.map(own),
            protocol_version: self.protocol_version.map(own),
            method: own(self.method),
            tool: self.tool.map(own),
            jsonrpc_id: own(self.jsonrpc_id),
            attempts: self.attempts,
            http_statuses: Cow::Owned(self.http_statuses.into_owned()),
            content_type: self.content_type.map(own),
            sse_events: self.sse_events,
            error_code: self.error_code,
            error_message_len: self.error_message_len,
            error_message: self.error_message.map(own),
            result_type: self.result_type.map(own),
            outcome: self.outcome,
            retry_origin: self.retry_origin,
            refused_by: self.refused_by,
            duration: self.duration,
        }
    }

    pub fn layer(&self) -> Layer {
        self.outcome.layer()
    }

    /// Records a JSON-RPC error. The message text is kept only when `log_messages` is set
    /// (an operator's choice); its length always is.
    pub fn set_error(&mut self, code: i64, message: &str, log_messages: bool) {
        self.error_code = Some(code);
        self.error_message_len = Some(message.len());
        self.error_message = log_messages.then(|| Cow::Owned(message.to_owned()));
    }

    /// Writes the record as one `tracing` event: target [`CALL_TARGET`], level INFO, message
    /// "call", one field per record field (absent options are left out). The JSON format
    /// renders it as one line with the fields at the top level — written straight to the log
    /// when strata's JSON subscriber is the one in force ([`log::write_direct`]), the
    /// same line without the event's machinery.
    pub fn emit(&self) {
        if !tracing::enabled!(target: CALL_TARGET, Level::INFO) {
            return;
        }
        if !log::write_direct(&Level::INFO, CALL_TARGET, |fields| self.record(fields)) {
            self.emit_event();
        }
    }

    /// The record as one JSON object: the fields of its log line, without the line's
    /// timestamp, level and target (`strata classify --json`).
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        let head = |w: &mut String| w.write_str("\"message\":\"call\"");
        // Into a `String`: cannot fail.
        let _ = log::write_fields_object(&mut out, head, |fields| self.fields(fields));
        out
    }

    /// The record's own fields as JSON members, `,"upstream":…` to `,"duration_ms":…`: the
    /// text its log line ([`emit_fields`](Self::emit_fields)) and the recent calls share,
    /// rendered once.
    pub fn fields_text(&self) -> String {
        let mut out = String::with_capacity(384);
        // Into a `String`: cannot fail.
        let _ = log::write_fields(&mut out, |fields| self.fields(fields));
        out
    }

    /// [`emit`](Self::emit), with the fields [`fields_text`](Self::fields_text) rendered.
    pub fn emit_fields(&self, text: &str) {
        if !tracing::enabled!(target: CALL_TARGET, Level::INFO) {
            return;
        }
        let record = |fields: &mut Fields<'_, String>| {
            fields.unescaped(Name::Key(",\"message\":"), |w| w.write_str("call"));
            fields.written(text);
        };
        if !log::write_direct(&Level::INFO, CALL_TARGET, record) {
            self.emit_event();
        }
    }

    /// The record's fields in the event's order (`emit_event`'s, `message` first, as
    /// tracing's macros put it).
    fn record(&self, fields: &mut Fields<'_, String>) {
        fields.unescaped(Name::Key(",\"message\":"), |w| w.write_str("call"));
        self.fields(fields);
    }

    /// The record's own fields, after `message`.
    fn fields(&self, fields: &mut Fields<'_, String>) {
        // Each name written ahead: `,"name":`.
        macro_rules! key {
            ($name:literal) => {
                Name::Key(concat!(",\"", $name, "\":"))
            };
        }
        let optional = |fields: &mut Fields<'_, String>, name, value: Option<&str>| {
            if let Some(value) = value {
                fields.str(name, value);
            }
        };
        let known = |fields: &mut Fields<'_, String>, name, value: &'static str| {
            fields.unescaped(name, |w| fmt::Write::write_str(w, value));
        };
        fields.str(key!("upstream"), &self.upstream);
        let session = self.session.as_ref().map(SessionHash::as_str);
        optional(fields, key!("session"), session);
        optional(fields, key!("client"), self.client.as_deref());
        optional(
            fields,
            key!("protocol_version"),
            self.protocol_version.as_deref(),
        );
        fields.str(key!("method"), &self.method);
        optional(fields, key!("tool"), self.tool.as_deref());
        fields.str(key!("jsonrpc_id"), &self.jsonrpc_id);
        fields.u64(key!("attempts"), u64::from(self.attempts));
        fields.unescaped(key!("http_statuses"), |w| {
            Statuses(&self.http_statuses).write(w)
        });
        optional(fields, key!("content_type"), self.content_type.as_deref());
        fields.u64(key!("sse_events"), u64::from(self.sse_events));
        if let Some(code) = self.error_code {
            fields.i64(key!("error_code"), code);
        }
        if let Some(len) = self.error_message_len {
            fields.u64(key!("error_message_len"), len as u64);
        }
        optional(fields, key!("error_message"), self.error_message.as_deref());
        optional(fields, key!("result_type"), self.result_type.as_deref());
        known(fields, key!("outcome"), self.outcome.as_str());
        known(fields, key!("layer"), self.outcome.layer().as_str());
        known(fields, key!("retry_origin"), self.retry_origin.as_str());
        if let Some(by) = self.refused_by {
            known(fields, key!("refused_by"), by.as_str());
        }
        fields.f64(key!("duration_ms"), millis(self.duration));
    }

    /// The record as a `tracing` event, for any other subscriber.
    fn emit_event(&self) {
        tracing::info!(
            target: CALL_TARGET,
            upstream = &*self.upstream,
            session = self.session.as_ref().map(SessionHash::as_str),
            client = self.client.as_deref(),
            protocol_version = self.protocol_version.as_deref(),
            method = &*self.method,
            tool = self.tool.as_deref(),
            jsonrpc_id = &*self.jsonrpc_id,
            attempts = self.attempts,
            http_statuses = %Statuses(&self.http_statuses),
            content_type = self.content_type.as_deref(),
            sse_events = self.sse_events,
            error_code = self.error_code,
            error_message_len = self.error_message_len,
            error_message = self.error_message.as_deref(),
            result_type = self.result_type.as_deref(),
            outcome = self.outcome.as_str(),
            layer = self.outcome.layer().as_str(),
            retry_origin = self.retry_origin.as_str(),
            refused_by = self.refused_by.map(RefusedBy::as_str),
            duration_ms = millis(self.duration),
            "call"
        );
    }
}

/// Statuses as `502,503,200`: a log field cannot be a JSON array, and this splits easily.
struct Statuses<'a>(&'a [u16]);

impl Statuses<'_> {
    fn write(&self, w: &mut impl fmt::Write) -> fmt::Result {
        for (i, &status) in self.0.iter().enumerate() {
            if i > 0 {
                w.write_char(',')?;
            }
            log::write_u64(w, u64::from(status))?;
        }
        Ok(())
    }
}

impl fmt::Display for Statuses<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f)
    }
}

// === impl RetryOrigin ===

impl RetryOrigin {
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryOrigin::None => "none",
            RetryOrigin::Proxy => "proxy",
            RetryOrigin::Client => "client",
        }
    }
}

impl fmt::Display for RetryOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A duration in milliseconds, as the log and captures write it: `0.364246`, the number of
/// nanoseconds divided by 10^6, so the double is the one nearest that decimal and prints as
/// it (seconds times 10^3 rounds twice and prints `0.36424599999999996`).
pub fn millis(duration: Duration) -> f64 {
    // Exact below 2^53 ns (104 days); a call's duration is far below. Through `u64`: the
    // CPU converts that itself, a `u128` takes a library routine.
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX) as f64 / 1e6
}

// === impl SessionHash ===

impl SessionHash {
    pub fn new(raw: &str) -> Self {
        // std's RandomState is SipHash-1-3 keyed from OS randomness; one key per process.
        static KEY: OnceLock<RandomState> = OnceLock::new();
        let hash = KEY.get_or_init(RandomState::new).hash_one(raw);
        // `{hash:016x}`, without the formatting machinery.
        let mut digits = [0u8; 16];
        for (k, digit) in digits.iter_mut().enumerate() {
            let nibble = (hash >> (60 - 4 * k)) & 0xf;
            *digit = b"0123456789abcdef"[nibble as usize];
        }
        SessionHash(digits)
    }

    pub fn as_str(&self) -> &str {
        // Hex digits only: always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for SessionHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SessionHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionHash({})", self.as_str())
    }
}

#[cfg(test)]
mod tests;

/// The request id as JSON text: `7`, or `"abc"` with its quotes.
pub(crate) fn id_text(request: &Request) -> Cow<'_, str> {
    let text = request.id.text_lossy();
    match request.id.kind {
        Kind::String => {
            let mut quoted = String::with_capacity(text.len() + 2);
            // Into a `String`: cannot fail.
            let _ = log::write_string(&mut quoted, &text);
            Cow::Owned(quoted)
        }
        _ => text,
    }
}
