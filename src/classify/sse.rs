//! A push-fed Server-Sent Events framer (WHATWG HTML §9.2.6 "Interpreting an event stream")
//! whose `data` values stream straight into a per-event [`JsonScanner`]: an event is never
//! assembled in memory.
//!
//! Handles LF, CR and CRLF line ends (a CR at a chunk's end waits for the next chunk), a
//! leading UTF-8 BOM, comment lines (`:`; 2026-07-28 keep-alives are `:\r\n`), `event`, `data`
//! (several lines joined by LF — fed to the scanner as an LF between lines, which is JSON
//! whitespace, so the scanner sees exactly the spec's event data), `id`, `retry`; other
//! fields are ignored, and a blank line dispatches.
//!
//! Limits (nothing here grows with the input; overflow never fails the forward):
//! - Lines are never held, so there is no line-length limit: a `data` line of any size
//!   streams through the JSON scanner.
//! - [`MAX_FIELD_NAME`]: a longer field name is an unknown field (ignored).
//! - The `event` value is never kept: only whether it is "message" (or empty) counts.
//! - [`MAX_EVENT_ID`]: a longer `id` keeps its first bytes and is marked truncated.

#[cfg(test)]
use super::capture::Envelope;
use super::capture::{Captured, Kind};
use super::json::{Document, JsonScanner, Malformed, MessageSink, line_break};

/// Longest field name kept ("retry" is the longest known one).
pub const MAX_FIELD_NAME: usize = 8;
/// Longest event id kept.
pub const MAX_EVENT_ID: usize = 256;

/// The event type JSON-RPC comes in (an empty type is WHATWG's default, "message", too).
const MESSAGE: &[u8] = b"message";
/// [`SseFramer::event_type`] once the value is not a prefix of [`MESSAGE`].
const OTHER_TYPE: u8 = u8::MAX;

/// What one dispatched event carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventData {
    /// No data, or empty data: a priming event or a keep-alive (2025-11-25 §SSE). Skipped, as
    /// both SDK clients do.
    Empty,
    /// An event type other than `message`: not JSON-RPC, ignored as clients ignore it.
    Ignored,
    /// JSON-RPC data: its verdict (messages were delivered before, as tentative).
    Json(Result<Document, Malformed>),
}

/// Receives messages (tentative) and then each event's verdict. A message with a `method`
/// (a notification or a server→client request: never the response) is captured up to its
/// method only; what follows is validated, not kept (`JsonScanner::begin_tracked`).
pub trait SseSink: MessageSink {
    fn event(&mut self, data: EventData, last_event_id: Option<&Captured<MAX_EVENT_ID>>);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Data,
    Event,
    Id,
    Retry,
    Unknown,
}

impl Field {
    /// The field a name stands for (a name longer than any known one is unknown).
    fn named(name: &[u8]) -> Field {
        match name {
            b"data" => Field::Data,
            b"event" => Field::Event,
            b"id" => Field::Id,
            b"retry" => Field::Retry,
            _ => Field::Unknown,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Line {
    /// Nothing of the current line seen yet.
    Start,
    /// Inside the field name.
    Name,
    /// Just after the colon: one space is dropped.
    ValueStart(Field),
    Value(Field),
    Comment,
}

/// The framer. Fixed size; the JSON scanner inside is reused for every event.
#[derive(Clone, PartialEq)]
pub struct SseFramer {
    /// Bytes of the BOM matched at the stream's start; 3 (or a mismatch) ends the check.
    bom: u8,
    bom_done: bool,
    pending_cr: bool,
    line: Line,
    name: [u8; MAX_FIELD_NAME],
    name_len: usize,
    name_overflow: bool,
    // The event being built.
    data_lines: u32,
    data_bytes: u64,
    /// Bytes of [`MESSAGE`] the event type has matched so far, or [`OTHER_TYPE`]: the type
    /// matters only as "message" or not, so it is matched as it streams rather than kept.
    event_type: u8,
    // Stream-wide state (WHATWG: the last event ID persists across events). WHATWG keeps a
    // "last event ID buffer" (set by an `id` field without NUL) and a "last event ID string"
    // a client resumes with (set from the buffer at each dispatch); an `id` value is read
    // before it is known to have no NUL. Those three live in `ids`, and "set from" moves an
    // index rather than copying up to `MAX_EVENT_ID` bytes (twice per event, as most events
    // carry an id).
    ids: [Captured<MAX_EVENT_ID>; 3],
    /// The slot of the last event ID string.
    last_id: u8,
    /// The slot of the last event ID buffer (often the same as `last_id`).
    buffer_id: u8,
    /// The slot the `id` value being read goes to: neither of the two above.
    line_id: u8,
    /// The `id` value being read contains NUL (anywhere, also past the capture's cap).
    id_nul: bool,
    retry_ms: Option<u64>,
    retry_digits: Option<u64>,
    events: u32,
    scanner: JsonScanner,
}

// === impl SseFramer ===

impl Default for SseFramer {
    fn default() -> Self {
        Self::new()
    }
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Where the value of a whole-line field starts: after the `name_len` bytes of its name and
/// colon, and one space (WHATWG drops one). A line cut right after the colon gives an empty
/// value with no line end, so it is never taken for whole.
#[inline]
fn value_at(line: &[u8], name_len: usize) -> usize {
    name_len + usize::from(line.get(name_len) == Some(&b' '))
}

/// Where the line at the start of `bytes` ends (LF or CR). SSE lines are often short (`id: 7`,
/// `event: message`), so the first 16 bytes are looked at directly before `memchr2` and its
/// setup are worth it.
#[inline]
fn line_end(bytes: &[u8]) -> Option<usize> {
    const HEAD: usize = 16;
    let Some(head) = bytes.get(..HEAD) else {
        return bytes.iter().position(|&b| b == b'\n' || b == b'\r');
    };
    // Two words of SWAR arithmetic rather than a byte loop (a branch per byte).
    for (k, word) in head.chunks_exact(8).enumerate() {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        let ends = line_end_bits(u64::from_le_bytes(le));
        if ends != 0 {
            return Some(8 * k + (ends.trailing_zeros() / 8) as usize);
        }
    }
    line_break(&bytes[HEAD..]).map(|p| HEAD + p)
}

/// The high bit of each byte of `w` (little-endian) that is LF or CR. Only the lowest set
/// byte is exact: a borrow can flag bytes above a true hit, never below one.
#[inline(always)]
fn line_end_bits(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let lf = w ^ (ONES * u64::from(b'\n'));
    let cr = w ^ (ONES * u64::from(b'\r'));
    ((lf.wrapping_sub(ONES) & !lf) | (cr.wrapping_sub(ONES) & !cr)) & HIGHS
}

impl SseFramer {
    /// A fresh framer but for its scanner's run-time string level: a constant, for the same
    /// reason as `JsonScanner::FRESH` (a boxed framer is one copy from read-only memory).
    const FRESH: SseFramer = SseFramer {
        bom: 0,
        bom_done: false,
        pending_cr: false,
        line: Line::Start,
        name: [0; MAX_FIELD_NAME],
        name_len: 0,
        name_overflow: false,
        data_lines: 0,
        data_bytes: 0,
        event_type: 0,
        ids: [Captured::new(), Captured::new(), Captured::new()],
        last_id: 0,
        buffer_id: 0,
        line_id: 1,
        id_nul: false,
        retry_ms: None,
        retry_digits: None,
        events: 0,
        scanner: JsonScanner::FRESH_EVENTS,
    };

    pub fn new() -> Self {
        let mut framer = Self::FRESH;
        framer.scanner.detect_wide();
        framer
    }

    /// [`Self::new`], boxed: built in place on the heap.
    pub fn boxed() -> Box<Self> {
        let mut framer = Box::new(Self::FRESH);
        framer.scanner.detect_wide();
        framer
    }

    /// See [`JsonScanner::follow_tool_entries`]: every event's scanner does the same.
    pub fn follow_tool_entries(&mut self, on: bool) {
        self.scanner.follow_tool_entries(on);
    }

    /// Events dispatched so far (with data; priming events included).
    pub fn events(&self) -> u32 {
        self.events
    }

    /// The stream's last event ID string, when it is not empty: the stream is resumable with
    /// `Last-Event-ID` (2025-03-26 … 2025-11-25 transports §Resumability). WHATWG sets it from
    /// the last `id` field at each dispatch (a blank line), so an id in an event the stream
    /// never finished does not count; and an empty id resets it — a client then reconnects
    /// without `Last-Event-ID`, so the stream cannot be resumed.
    pub fn last_event_id(&self) -> Option<&Captured<MAX_EVENT_ID>> {
        let last = &self.ids[usize::from(self.last_id)];
        (last.kind == Kind::String && last.total_len() > 0).then_some(last)
    }

    /// The last valid `retry` field, in milliseconds.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// True when the stream stopped in the middle of an event (data seen, no blank line).
    pub fn mid_event(&self) -> bool {
        self.data_lines > 0 || self.line != Line::Start
    }

    pub fn feed<S: SseSink + ?Sized>(&mut self, mut chunk: &[u8], sink: &mut S) {
        if !self.bom_done {
            chunk = self.skip_bom(chunk);
            let partial = usize::from(self.bom);
            if self.bom_done && partial < BOM.len() {
                // Part of a BOM, then something else: those bytes were content after all
                // (a WHATWG client decodes them to U+FFFD in the first line).
                self.feed_lines(&BOM[..partial], sink);
            }
            if chunk.is_empty() {
                return;
            }
        }
        self.feed_lines(chunk, sink);
    }

    fn feed_lines<S: SseSink + ?Sized>(&mut self, mut chunk: &[u8], sink: &mut S) {
        // A `\r` at the last chunk's end waits for the next byte: an empty chunk has none.
        if chunk.is_empty() {
            return;
        }
        if self.pending_cr {
            self.pending_cr = false;
            if chunk.first() == Some(&b'\n') {
                chunk = &chunk[1..];
            }
        }
        while !chunk.is_empty() {
            let end = if self.line == Line::Start {
                self.line_from_start(chunk, sink)
            } else {
                self.line_rest(chunk, sink)
            };
            // The line ran past the chunk (and was fed as far as it goes).
            let Some(p) = end else { return };
            let mut next = p + 1;
            if chunk[p] == b'\r' {
                match chunk.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            chunk = &chunk[next..];
        }
    }

    /// The stream ended. WHATWG: an event not followed by a blank line is discarded, so it
    /// is never dispatched.
    pub fn finish(&mut self) {
        self.begin_event();
        self.line = Line::Start;
    }

    fn skip_bom<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        let mut i = 0;
        while (self.bom as usize) < BOM.len() && i < chunk.len() {
            if chunk[i] != BOM[self.bom as usize] {
                // Not a BOM: the bytes matched so far were content (`feed` hands them on).
                // Only a whole BOM is skipped.
                self.bom_done = true;
                return &chunk[i..];
            }
            self.bom += 1;
            i += 1;
        }
        if self.bom as usize == BOM.len() {
            self.bom_done = true;
        }
        &chunk[i..]
    }

    /// A line from its start, at the start of `chunk`: where its terminator is, or `None`
    /// when the line runs past the chunk. The lines every event carries — `data:`, `id:`,
    /// `event: message`, the blank line — are told by their first bytes and read straight
    /// from the chunk, each with the cheapest search for its end. Anything else (comments,
    /// no colon, unknown fields, `retry`, other spellings, a line the chunk cuts) goes
    /// through [`Self::line_rest`], as the rest of a cut line does.
    #[inline]
    fn line_from_start<S: SseSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        sink: &mut S,
    ) -> Option<usize> {
        const EVENT_MESSAGE: &[u8] = b"event: message";
        match chunk.first() {
            // WHATWG: a blank line dispatches the event.
            Some(b'\n' | b'\r') => {
                self.dispatch(sink);
                Some(0)
            }
            Some(b'd') if chunk.starts_with(b"data:") => self.data_line(chunk, sink),
            Some(b'i') if chunk.starts_with(b"id:") => self.id_line(chunk, sink),
            Some(b'e')
                if chunk.starts_with(EVENT_MESSAGE)
                    && matches!(chunk.get(EVENT_MESSAGE.len()), Some(b'\n' | b'\r')) =>
            {
                self.event_type = MESSAGE.len() as u8;
                Some(EVENT_MESSAGE.len())
            }
            _ => self.line_rest(chunk, sink),
        }
    }

    /// A `data:` line from its start. A `data` value is long (a JSON-RPC message), so its end
    /// is searched 16 bytes at a time at once.
    #[inline]
    fn data_line<S: SseSink + ?Sized>(&mut self, chunk: &[u8], sink: &mut S) -> Option<usize> {
        let at = value_at(chunk, b"data:".len());
        let Some(len) = line_break(&chunk[at..]) else {
            return self.line_rest(chunk, sink);
        };
        self.begin_value(Field::Data, sink);
        if len > 0 {
            self.value_bytes(Field::Data, &chunk[at..at + len], sink);
        }
        Some(at + len)
    }

    /// An `id:` line from its start (ids are short: [`line_end`] looks at 16 bytes first).
    #[inline]
    fn id_line<S: SseSink + ?Sized>(&mut self, chunk: &[u8], sink: &mut S) -> Option<usize> {
        let at = value_at(chunk, b"id:".len());
        let Some(len) = line_end(&chunk[at..]) else {
            return self.line_rest(chunk, sink);
        };
        // WHATWG: an id containing NUL is ignored. The value is whole, so that is known
        // before anything is kept.
        if !chunk[at..at + len].contains(&0) {
            let slot = self.free_id_slot();
            self.ids[usize::from(slot)].set_prefix(Kind::String, &chunk[at..], len);
            self.buffer_id = slot;
        }
        Some(at + len)
    }

    /// The rest of a line, at the start of `chunk`, through the `Line` states: where its
    /// terminator is, or `None` when the line runs past the chunk.
    #[inline]
    fn line_rest<S: SseSink + ?Sized>(&mut self, chunk: &[u8], sink: &mut S) -> Option<usize> {
        let Some(p) = line_end(chunk) else {
            self.line_bytes(chunk, sink);
            return None;
        };
        self.line_bytes(&chunk[..p], sink);
        self.end_line(sink);
        Some(p)
    }

    /// Bytes of the current line (no line terminator inside).
    fn line_bytes<S: SseSink + ?Sized>(&mut self, mut bytes: &[u8], sink: &mut S) {
        while !bytes.is_empty() {
            match self.line {
                Line::Start => {
                    if bytes[0] == b':' {
                        self.line = Line::Comment;
                        return;
                    }
                    self.name_len = 0;
                    self.name_overflow = false;
                    self.line = Line::Name;
                }
                Line::Name => match memchr::memchr(b':', bytes) {
                    Some(p) => {
                        self.push_name(&bytes[..p]);
                        self.line = Line::ValueStart(self.field());
                        bytes = &bytes[p + 1..];
                    }
                    None => {
                        self.push_name(bytes);
                        return;
                    }
                },
                Line::ValueStart(field) => {
                    if bytes[0] == b' ' {
                        bytes = &bytes[1..];
                    }
                    self.begin_value(field, sink);
                    self.line = Line::Value(field);
                }
                Line::Value(field) => {
                    self.value_bytes(field, bytes, sink);
                    return;
                }
                Line::Comment => return,
            }
        }
    }

    fn end_line<S: SseSink + ?Sized>(&mut self, sink: &mut S) {
        match self.line {
            Line::Start => self.dispatch(sink),
            // A line with no colon: the whole line is the field name, the value is empty.
            Line::Name => {
                let field = self.field();
                self.begin_value(field, sink);
                self.end_value(field);
            }
            Line::ValueStart(field) => {
                self.begin_value(field, sink);
                self.end_value(field);
            }
            Line::Value(field) => self.end_value(field),
            Line::Comment => {}
        }
        self.line = Line::Start;
    }

    fn push_name(&mut self, bytes: &[u8]) {
        let room = MAX_FIELD_NAME - self.name_len;
        if bytes.len() > room {
            self.name_overflow = true;
        } else {
            self.name[self.name_len..self.name_len + bytes.len()].copy_from_slice(bytes);
            self.name_len += bytes.len();
        }
    }

    fn field(&self) -> Field {
        if self.name_overflow {
            return Field::Unknown;
        }
        Field::named(&self.name[..self.name_len])
    }

    /// An id slot that is neither the last event ID string's nor the buffer's.
    #[inline]
    fn free_id_slot(&self) -> u8 {
        // Slots are 0, 1, 2: the third one, or the next one when both are the same.
        if self.last_id == self.buffer_id {
            (self.last_id + 1) % 3
        } else {
            3 - self.last_id - self.buffer_id
        }
    }

    fn begin_value<S: SseSink + ?Sized>(&mut self, field: Field, sink: &mut S) {
        match field {
            Field::Data => {
                if self.data_lines > 0 {
                    // WHATWG joins data lines with LF; LF is JSON whitespace.
                    self.scanner.feed(b"\n", sink);
                }
                self.data_lines += 1;
            }
            Field::Event => self.event_type = 0,
            Field::Id => {
                self.line_id = self.free_id_slot();
                self.ids[usize::from(self.line_id)].start(Kind::String);
                self.id_nul = false;
            }
            Field::Retry => self.retry_digits = Some(0),
            Field::Unknown => {}
        }
    }

    fn value_bytes<S: SseSink + ?Sized>(&mut self, field: Field, bytes: &[u8], sink: &mut S) {
        match field {
            Field::Data => {
                self.data_bytes += bytes.len() as u64;
                self.scanner.feed(bytes, sink);
            }
            Field::Event => {
                let at = usize::from(self.event_type);
                self.event_type = match MESSAGE.get(at..) {
                    // At most `MESSAGE.len()`.
                    Some(rest) if rest.starts_with(bytes) => (at + bytes.len()) as u8,
                    _ => OTHER_TYPE,
                };
            }
            Field::Id => {
                // Ids are short: a byte loop beats memchr's setup.
                self.id_nul |= if bytes.len() < 32 {
                    bytes.contains(&0)
                } else {
                    memchr::memchr(0, bytes).is_some()
                };
                self.ids[usize::from(self.line_id)].push(bytes);
            }
            Field::Retry => {
                self.retry_digits = self.retry_digits.and_then(|mut v| {
                    for &b in bytes {
                        if !b.is_ascii_digit() {
                            return None;
                        }
                        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
                    }
                    Some(v)
                });
            }
            Field::Unknown => {}
        }
    }

    fn end_value(&mut self, field: Field) {
        match field {
            // WHATWG: an id containing NUL is ignored.
            Field::Id if !self.id_nul => self.buffer_id = self.line_id,
            // WHATWG: a retry value of ASCII digits only (at least one) sets the delay.
            Field::Retry => {
                if self.retry_digits.is_some() && self.line != Line::ValueStart(Field::Retry) {
                    self.retry_ms = self.retry_digits;
                }
                self.retry_digits = None;
            }
            _ => {}
        }
    }

    fn dispatch<S: SseSink + ?Sized>(&mut self, sink: &mut S) {
        // WHATWG: the last event ID string is set first, even when nothing is dispatched.
        self.last_id = self.buffer_id;
        if self.data_lines == 0 {
            // WHATWG: no data — reset the event type, dispatch nothing.
            self.event_type = 0;
            return;
        }
        self.events += 1;
        // WHATWG: an empty (or absent) type is "message".
        let is_message = self.event_type == 0 || usize::from(self.event_type) == MESSAGE.len();
        let data = if self.data_bytes == 0 {
            EventData::Empty
        } else if !is_message {
            EventData::Ignored
        } else {
            EventData::Json(self.scanner.finish(sink))
        };
        sink.event(data, self.last_event_id());
        self.begin_event();
    }

    fn begin_event(&mut self) {
        self.data_lines = 0;
        self.data_bytes = 0;
        self.event_type = 0;
        self.scanner.reset();
    }
}

#[cfg(test)]
mod tests;
