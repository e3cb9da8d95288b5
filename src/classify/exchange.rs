//! One HTTP exchange (a POST and its response) seen by the classifier: the requests the POST
//! carried, the response head, the body as it streams, and how the body ended. Gives every
//! request exactly one [`Resolution`].
//!
//! Correlation rules (README.md "Outcomes"; protocol facts from JSON-RPC 2.0 §5 and §6 and
//! MCP 2025-11-25 transports §Sending Messages):
//! - A response message is matched to a request by id. An error with a null or absent id
//!   answers every request still open (the server could not read the ids).
//! - On SSE, messages with `method` are server notifications or (≤2025-11-25) server→client
//!   requests, never the response; they are skipped. On a JSON body they are invalid.
//! - A message that matches nothing (wrong id, not an object, no `result`/`error`) is charged
//!   to the open request when exactly one is open (INVALID_ENVELOPE), and otherwise ignored.
//! - Messages count only once their document is known valid: a JSON body at its end, an SSE
//!   event at its dispatch. A malformed document makes every open request MALFORMED_JSON.
//! - A batch response to a single request is INVALID_ENVELOPE (JSON-RPC 2.0 §6: an array
//!   answers only a batch).
//! - The first verdict for a request is final; later duplicates are ignored.

use super::capture::{Captured, Envelope, Kind, MAX_NAME_BYTES, MAX_SHORT_BYTES, ToolEntry};
use super::envelope::{self, Request, ids_equal};
use super::json::{Document, Malformed, MessageSink};
use super::outcome::Outcome;
use super::remembered::{self, End, Matching, Recording, Rejoining};
use super::scan::Scan;
use super::spare;
use super::sse::{EventData, MAX_EVENT_ID, SseSink};
use super::tool_hints::{ToolHint, ToolHints};

/// How the response body ended, as the proxy saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEnd {
    /// The upstream ended the body cleanly.
    Complete,
    /// The upstream connection broke mid-body (reset, bad framing, idle timeout).
    UpstreamError,
    /// The agent went away (the response body was dropped) before the end.
    AgentGone,
}

/// The response body's media type, as it decides the scanner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    Json,
    Sse,
    /// Any other media type, or none.
    Other,
}

/// The verdict for one request, with what the call log wants to know of the response.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub outcome: Outcome,
    pub error_code: Option<i64>,
    /// Length of `error.message` (its text is never kept by default).
    pub error_message_len: Option<usize>,
    /// The first bytes of `error.message`, logged only when the operator asks for it. Boxed:
    /// only error responses carry one, and a verdict is moved a few times per call (inline,
    /// its 150 bytes were copied with every success too).
    pub error_message: Option<Box<Captured<MAX_NAME_BYTES>>>,
    pub result_type: Option<Captured<MAX_SHORT_BYTES>>,
}

/// Where a request stands when the exchange is over.
#[derive(Clone, Debug)]
// `Final` is the one handed out on every call; boxing it to match `Pending` would add an
// allocation per call where the rare variant is boxed instead.
#[allow(clippy::large_enum_variant)]
pub enum Resolution {
    Final(Verdict),
    /// A resumable SSE stream (its events carried ids) closed before the response: a GET with
    /// `Last-Event-ID` may still bring it (2025-03-26 … 2025-11-25 transports §Resumability).
    /// (Boxed: rare, and ~280 bytes that every `Final` resolution would otherwise be moved
    /// with.)
    Pending {
        last_event_id: Box<Captured<MAX_EVENT_ID>>,
    },
}

/// Where one request stands. Kept apart from its [`Request`], so that the caller's
/// `Vec<Request>` is kept as it is (no ~1.4 KiB-per-call copy past malloc's small-size cache)
/// and a verdict is made final in place rather than moved.
struct CallState {
    /// The first verdict reached; while `tentative`, its document may still prove invalid.
    verdict: Option<Verdict>,
    tentative: bool,
    reported: bool,
}

/// One [`CallState`] per request, the first inline: almost every POST carries one request,
/// and its exchange then allocates nothing here (a `Vec` was a malloc and a free per call).
struct Calls {
    first: CallState,
    rest: Vec<CallState>,
    len: usize,
}

/// The resolutions [`Exchange::end`] hands out: the index of each request not yet reported,
/// the request, and where it stands ([`Resolutions::next_resolution`]).
pub struct Resolutions {
    requests: Vec<Request>,
    calls: Calls,
    /// The next index to look at.
    next: usize,
    last_event_id: Option<Box<Captured<MAX_EVENT_ID>>>,
}

/// Matches response messages to the calls; the scanners' sink.
struct Correlator {
    requests: Vec<Request>,
    /// One state per request, in the same order.
    calls: Calls,
    request_batch: bool,
    sse: bool,
    /// Tool hints seen, when asked for ([`Exchange::learn_tools`]).
    /// Boxed: only a tools/list exchange that collects them has any, and an exchange lives
    /// in every open stream's call tracker.
    tools: Option<Box<ToolHints>>,
}

/// A list answer compared with the thread's remembered one, read where it stopped matching
/// until it rejoins it, or recorded to be remembered (`remembered.rs`). Boxed: only a list
/// call's exchange has one.
enum Memory {
    None,
    Matching(Box<Matching>),
    Rejoining(Box<Rejoining>),
    Recording(Box<Recording>),
}

/// The classifier state of one HTTP exchange. Fixed-size apart from one entry per request.
pub struct Exchange {
    correlator: Correlator,
    scan: Scan,
    memory: Memory,
    status: u16,
    content: ContentKind,
    body_bytes: u64,
    ended: bool,
}

// === impl ContentKind ===

impl ContentKind {
    /// From a `Content-Type` value: `application/json` (or a `+json` type) and
    /// `text/event-stream`, parameters and case ignored.
    pub fn from_header(value: Option<&[u8]>) -> ContentKind {
        let Some(value) = value else {
            return ContentKind::Other;
        };
        let essence = value.split(|&b| b == b';').next().unwrap_or_default();
        let essence = essence.trim_ascii();
        if essence.eq_ignore_ascii_case(b"application/json")
            || (essence.len() > 5 && essence[essence.len() - 5..].eq_ignore_ascii_case(b"+json"))
        {
            ContentKind::Json
        } else if essence.eq_ignore_ascii_case(b"text/event-stream") {
            ContentKind::Sse
        } else {
            ContentKind::Other
        }
    }
}

// === impl Verdict ===

impl Verdict {
    pub fn of(outcome: Outcome) -> Verdict {
        Verdict {
            outcome,
            error_code: None,
            error_message_len: None,
            error_message: None,
            result_type: None,
        }
    }

    fn from_message(outcome: Outcome, env: &Envelope) -> Verdict {
        Verdict {
            outcome,
            error_code: envelope::error_code(env),
            error_message_len: (env.error_message.kind == Kind::String)
                .then(|| env.error_message.total_len()),
            error_message: (env.error_message.kind == Kind::String)
                .then(|| Box::new(env.error_message.clone())),
            result_type: (env.result_type.kind == Kind::String).then(|| env.result_type.clone()),
        }
    }
}

// === impl Calls ===

impl Calls {
    fn new(len: usize) -> Calls {
        Calls {
            first: CallState::OPEN,
            rest: (1..len).map(|_| CallState::OPEN).collect(),
            len,
        }
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut CallState> {
        match i {
            _ if i >= self.len => None,
            0 => Some(&mut self.first),
            _ => self.rest.get_mut(i - 1),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &CallState> {
        std::iter::once(&self.first)
            .chain(&self.rest)
            .take(self.len)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut CallState> {
        std::iter::once(&mut self.first)
            .chain(&mut self.rest)
            .take(self.len)
    }
}

// === impl CallState ===

impl CallState {
    const OPEN: CallState = CallState {
        verdict: None,
        tentative: false,
        reported: false,
    };

    fn final_verdict(&self) -> Option<&Verdict> {
        self.verdict.as_ref().filter(|_| !self.tentative)
    }

    /// Drops a verdict whose document was not JSON-RPC after all (or is overruled).
    fn discard_tentative(&mut self) {
        if self.tentative {
            self.verdict = None;
            self.tentative = false;
        }
    }
}

// === impl Resolutions ===

impl Resolutions {
    /// The next request not yet reported: its index (its order in the POST body), the
    /// request, and where it stands. The request is lent, not moved: an `Iterator` would
    /// hand out each ~800-byte `Request` by value, a copy per request per call that only
    /// a parked request (rare) needs.
    pub fn next_resolution(&mut self) -> Option<(usize, &Request, Resolution)> {
        while let Some(call) = self.calls.get_mut(self.next) {
            let i = self.next;
            self.next += 1;
            if call.reported {
                continue;
            }
            let resolution = match (call.verdict.take(), &self.last_event_id) {
                (Some(v), _) if !call.tentative => Resolution::Final(v),
                (_, Some(id)) => Resolution::Pending {
                    last_event_id: id.clone(),
                },
                (_, None) => Resolution::Final(Verdict::of(Outcome::StreamIncomplete)),
            };
            return self.requests.get(i).map(|request| (i, request, resolution));
        }
        None
    }

    /// All that are left at once, each request copied (tests and the oracle compare them).
    pub fn into_vec(mut self) -> Vec<(usize, Request, Resolution)> {
        let mut all = Vec::new();
        while let Some((i, request, resolution)) = self.next_resolution() {
            all.push((i, request.clone(), resolution));
        }
        all
    }
}

// === impl Correlator ===

impl Correlator {
    fn open(&self) -> impl Iterator<Item = usize> + '_ {
        self.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.verdict.is_none())
            .map(|(i, _)| i)
    }

    fn judge(&mut self, i: usize, env: &Envelope) {
        let (Some(request), Some(call)) = (self.requests.get(i), self.calls.get_mut(i)) else {
            return;
        };
        let outcome = envelope::outcome_of(request, env);
        call.verdict = Some(Verdict::from_message(outcome, env));
        call.tentative = true;
    }

    /// A message that answers no request by id.
    fn unmatched(&mut self, env: &Envelope) {
        let (first, second) = {
            let mut open = self.open();
            (open.next(), open.next())
        };
        if let (Some(only), None) = (first, second) {
            self.judge(only, env);
        }
    }

    fn document_end(&mut self, verdict: Result<Document, Malformed>) {
        match verdict {
            Ok(doc) if doc.batch && !self.request_batch => {
                self.settle_open(Outcome::InvalidEnvelope);
            }
            Ok(_) => {
                for call in self.calls.iter_mut() {
                    call.tentative = false;
                }
            }
            Err(_) => self.settle_open(Outcome::MalformedJson),
        }
    }

    /// Drops what the current document said (it was not JSON-RPC after all).
    fn discard_tentative(&mut self) {
        for call in self.calls.iter_mut() {
            call.discard_tentative();
        }
    }

    /// Gives every request without a final verdict this outcome.
    fn settle_open(&mut self, outcome: Outcome) {
        for call in self.calls.iter_mut() {
            call.discard_tentative();
            if call.verdict.is_none() {
                call.verdict = Some(Verdict::of(outcome));
            }
        }
    }
}

impl MessageSink for Correlator {
    fn tool_entry(&mut self, entry: &ToolEntry) {
        if let Some(tools) = &mut self.tools
            && entry.name.kind == Kind::String
            && let Some(name) = entry.name.text()
        {
            tools.push(ToolHint {
                name,
                read_only: entry.read_only == Kind::True,
                idempotent: entry.idempotent == Kind::True,
            });
        }
    }

    fn message(&mut self, env: &Envelope) {
        if env.shape == Kind::Object && env.method != Kind::Absent && self.sse {
            return; // a notification or server→client request on the stream
        }
        if env.shape != Kind::Object || env.method != Kind::Absent {
            return self.unmatched(env);
        }
        match env.id.kind {
            Kind::String | Kind::Number => {
                let open = self.open().find(|&i| {
                    self.requests
                        .get(i)
                        .is_some_and(|r| ids_equal(&r.id, &env.id))
                });
                match open {
                    Some(i) => self.judge(i, env),
                    None => {
                        let answered = self.requests.iter().any(|r| ids_equal(&r.id, &env.id));
                        if !answered {
                            self.unmatched(env);
                        }
                    }
                }
            }
            Kind::Null | Kind::Absent if env.error != Kind::Absent => {
                let open: Vec<usize> = self.open().collect();
                for i in open {
                    self.judge(i, env);
                }
            }
            _ => self.unmatched(env),
        }
    }
}

impl SseSink for Correlator {
    fn event(&mut self, data: EventData, _last_event_id: Option<&Captured<MAX_EVENT_ID>>) {
        match data {
            EventData::Json(verdict) => self.document_end(verdict),
            EventData::Empty | EventData::Ignored => self.discard_tentative(),
        }
    }
}

// === impl Exchange ===

impl Exchange {
    /// An exchange for the requests of one POST body. `batch`: the body was an array.
    pub fn new(requests: Vec<Request>, batch: bool) -> Exchange {
        let calls = Calls::new(requests.len());
        Exchange {
            correlator: Correlator {
                requests,
                calls,
                request_batch: batch,
                sse: false,
                tools: None,
            },
            scan: Scan::None,
            memory: Memory::None,
            status: 0,
            content: ContentKind::Other,
            body_bytes: 0,
            ended: false,
        }
    }

    /// Collect the tool hints of a `tools/list` result in this exchange.
    pub fn learn_tools(&mut self) {
        self.correlator.tools = Some(Box::default());
        self.memory_before_setting();
        self.follow_tool_entries();
    }

    /// The scanner is about to follow tool entries: a remembered answer scanned without
    /// following them no longer answers. Before the body, the memory is chosen again; in it,
    /// the scanner reads what matched so far, and nothing more is compared or recorded.
    fn memory_before_setting(&mut self) {
        if self.body_bytes == 0 {
            // The old recording, if any, frees the thread's slot for the new one first.
            self.memory = Memory::None;
            self.memory = self.memory_for_answer(self.content);
        } else {
            self.memory.catch_up(&mut self.scan, &mut self.correlator);
            self.memory = Memory::None;
        }
    }

    /// The tool hints seen (once; empty unless [`Exchange::learn_tools`] was called). Trust
    /// them only when the tools/list call's verdict was SUCCESS.
    pub fn take_tool_hints(&mut self) -> ToolHints {
        self.correlator
            .tools
            .take()
            .map(|hints| *hints)
            .unwrap_or_default()
    }

    pub fn requests(&self) -> impl Iterator<Item = &Request> {
        self.correlator.requests.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.correlator.requests.is_empty()
    }

    /// The client an initialize in this exchange names (`clientInfo`), if any.
    pub fn initialize_client(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.requests()
            .find(|r| r.method.is_string("initialize") && r.client.kind == Kind::String)
            .map(|request| request.client.text_lossy())
    }

    /// The response head arrived.
    pub fn response_head(&mut self, status: u16, content: ContentKind) {
        self.status = status;
        self.content = content;
        if !(200..300).contains(&status) {
            // Transport precedence: a non-2xx status decides, whatever the body says.
            self.correlator.settle_open(Outcome::HttpError);
            return;
        }
        self.scan = match content {
            ContentKind::Json => Scan::Json(spare::json_scanner()),
            ContentKind::Sse => {
                self.correlator.sse = true;
                Scan::Sse(spare::sse_framer())
            }
            ContentKind::Other => Scan::None,
        };
        self.memory = self.memory_for_answer(content);
        self.follow_tool_entries();
    }

    /// The scanner follows a tools/list result's entries only when their hints are collected
    /// (a spare scanner keeps the last exchange's choice until told).
    fn follow_tool_entries(&mut self) {
        let on = self.correlator.tools.is_some();
        match &mut self.scan {
            Scan::Json(scanner) => scanner.follow_tool_entries(on),
            Scan::Sse(framer) => framer.follow_tool_entries(on),
            Scan::None => {}
        }
    }

    /// A single list request's answer, JSON or SSE, is compared with the thread's remembered
    /// one, or recorded to be remembered (`remembered.rs`).
    fn memory_for_answer(&self, content: ContentKind) -> Memory {
        let c = &self.correlator;
        let [request] = c.requests.as_slice() else {
            return Memory::None;
        };
        let answered = (200..300).contains(&self.status) && content != ContentKind::Other;
        if !answered || c.request_batch || !request.is_list() {
            return Memory::None;
        }
        let follow = c.tools.is_some();
        match remembered::last(content, follow) {
            Some(known) => Memory::Matching(Box::new(Matching::new(known))),
            None => Memory::recording(follow),
        }
    }

    /// No response head: strata answers 502/504 itself.
    pub fn no_response(&mut self) {
        self.correlator.settle_open(Outcome::HttpError);
        self.ended = true;
    }

    /// A chunk of the response body, as it goes to the agent.
    #[inline]
    pub fn data(&mut self, chunk: &[u8]) {
        self.body_bytes += chunk.len() as u64;
        match &mut self.memory {
            Memory::None => self.scan.feed(chunk, &mut self.correlator),
            memory => memory.feed(&mut self.scan, chunk, &mut self.correlator),
        }
    }

    /// True once every request has its verdict (nothing more to learn from the body).
    pub fn all_settled(&self) -> bool {
        self.correlator
            .calls
            .iter()
            .all(|c| c.final_verdict().is_some())
    }

    /// Hands out verdicts reached since the last call (SSE: as final events arrive).
    /// `f` gets the request's index (its order in the POST body), the request and its verdict.
    pub fn drain_settled(&mut self, mut f: impl FnMut(usize, &Request, &Verdict)) {
        let c = &mut self.correlator;
        for (i, (request, call)) in c.requests.iter().zip(c.calls.iter_mut()).enumerate() {
            if call.reported {
                continue;
            }
            if let Some(verdict) = call.final_verdict() {
                f(i, request, verdict);
                call.reported = true;
            }
        }
    }

    /// SSE events seen so far.
    pub fn sse_events(&self) -> u32 {
        match &self.scan {
            Scan::Sse(framer) => framer.events(),
            _ => 0,
        }
    }

    pub fn content(&self) -> ContentKind {
        self.content
    }

    /// The body ended: every request not yet handed out by [`Exchange::drain_settled`] gets
    /// its resolution, with its index. Handed out one at a time (no `Vec` of ~1.1 KiB entries
    /// to build, allocate and free per exchange).
    pub fn end(&mut self, how: BodyEnd) -> Resolutions {
        if !self.ended {
            self.ended = true;
            self.settle_at_end(how);
        }
        let mut last_event_id = None;
        if let Scan::Sse(framer) = &self.scan {
            last_event_id = framer.last_event_id().map(|id| Box::new(id.clone()));
        }
        let requests = std::mem::take(&mut self.correlator.requests);
        let calls = std::mem::replace(&mut self.correlator.calls, Calls::new(0));
        Resolutions {
            requests,
            calls,
            next: 0,
            last_event_id,
        }
    }

    fn settle_at_end(&mut self, how: BodyEnd) {
        let c = &mut self.correlator;
        match &mut self.memory {
            Memory::Matching(known) if how == BodyEnd::Complete && known.is_whole() => {
                known.replay(c);
                match (known.ended_whole(), &mut self.scan) {
                    (End::Json(verdict), Scan::Json(_)) => c.document_end(*verdict),
                    (End::Sse(at_end), Scan::Sse(framer)) => {
                        framer.clone_from(at_end);
                        framer.finish();
                    }
                    _ => {}
                }
            }
            memory => {
                memory.catch_up(&mut self.scan, c);
                self.memory_end(how);
            }
        }
        let c = &mut self.correlator;
        match how {
            BodyEnd::AgentGone => c.settle_open(Outcome::ClientCancelled),
            BodyEnd::Complete | BodyEnd::UpstreamError => {
                c.discard_tentative();
                if !matches!(self.scan, Scan::Sse(_)) {
                    c.settle_open(Outcome::StreamIncomplete);
                }
            }
        }
    }

    /// The body's end as the scanner or the framer reads it (a recorded body that ended
    /// whole is remembered).
    fn memory_end(&mut self, how: BodyEnd) {
        let c = &mut self.correlator;
        let recording = std::mem::replace(&mut self.memory, Memory::None).into_recording();
        match &mut self.scan {
            Scan::Json(scanner) => {
                // A document already complete reached hyper whole: count it even if the
                // agent left before the body's end was polled.
                let ended = how == BodyEnd::Complete && self.body_bytes > 0;
                if ended || (how == BodyEnd::AgentGone && scanner.is_complete()) {
                    let verdict = match recording {
                        Some(mut recording) => {
                            let verdict = scanner.finish(&mut recording.sink(c));
                            if ended {
                                recording.finish(End::Json(verdict));
                            }
                            verdict
                        }
                        None => scanner.finish(c),
                    };
                    c.document_end(verdict);
                }
            }
            Scan::Sse(framer) => {
                if let Some(recording) = recording
                    && how == BodyEnd::Complete
                {
                    recording.finish(End::Sse(framer.clone()));
                }
                framer.finish();
            }
            Scan::None => {
                if how == BodyEnd::Complete
                    && self.body_bytes > 0
                    && (200..300).contains(&self.status)
                {
                    // A 2xx body that is neither JSON nor SSE.
                    c.settle_open(Outcome::MalformedJson);
                }
            }
        }
    }
}

// === impl Memory ===

impl Memory {
    /// A chunk of a list answer: compared while the body matches the remembered one (what
    /// was read by now handed on); read (and recorded) from the byte where it stops
    /// matching, and compared again from where its read rejoins the remembered one.
    fn feed(&mut self, scan: &mut Scan, mut chunk: &[u8], sink: &mut Correlator) {
        loop {
            match self {
                Memory::Matching(known) => {
                    let equal = known.compare(chunk);
                    known.replay(sink);
                    if equal == chunk.len() {
                        return;
                    }
                    self.catch_up(scan, sink);
                    chunk = &chunk[equal..];
                }
                Memory::Rejoining(rejoining) => match rejoining.feed(scan, chunk, sink) {
                    Some(read) => {
                        self.rejoin();
                        chunk = &chunk[read..];
                    }
                    None => return,
                },
                Memory::Recording(recording) => return recording.feed(scan, chunk, sink),
                Memory::None => return scan.feed(chunk, sink),
            }
        }
    }

    /// A body that no longer matches, or ended before the remembered one did: the classifier
    /// reads what matched so far (the body's own bytes) from the last point of the
    /// remembered read within them, recorded, and goes on from there
    /// ([`Matching::resume`]).
    fn catch_up(&mut self, scan: &mut Scan, sink: &mut Correlator) {
        match std::mem::replace(self, Memory::None) {
            Memory::Matching(known) => {
                *self = Memory::Rejoining(Box::new(known.resume(scan, sink)));
            }
            other => *self = other,
        }
    }

    /// The body's read stands where the remembered read stood at a checkpoint: compared
    /// again from there.
    fn rejoin(&mut self) {
        if let Memory::Rejoining(rejoining) = std::mem::replace(self, Memory::None) {
            *self = Memory::Matching(Box::new(rejoining.rejoin()));
        }
    }

    /// The recording of the body's bytes, when they are recorded.
    fn into_recording(self) -> Option<Box<Recording>> {
        match self {
            Memory::Recording(recording) => Some(recording),
            Memory::Rejoining(rejoining) => rejoining.into_recording(),
            Memory::Matching(_) | Memory::None => None,
        }
    }

    /// A recording, unless the thread has one open (then nothing is remembered of this body).
    fn recording(follow_tool_entries: bool) -> Memory {
        match Recording::start(follow_tool_entries) {
            Some(recording) => Memory::Recording(Box::new(recording)),
            None => Memory::None,
        }
    }
}

/// The scanner's box goes back to the thread's spare (see `spare.rs`).
impl Drop for Exchange {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.scan, Scan::None) {
            Scan::Json(scanner) => spare::keep_json(scanner),
            Scan::Sse(framer) => spare::keep_sse(framer),
            Scan::None => {}
        }
    }
}

#[cfg(test)]
mod tests;
