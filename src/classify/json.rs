//! A push-fed, validating JSON scanner (RFC 8259) that keeps only an [`Envelope`] per message.
//!
//! Chunks may split the input anywhere: inside a string, an escape, a number, a literal or a
//! multi-byte UTF-8 character. The scanner validates the whole document, so MALFORMED_JSON is
//! exact, and it never holds the body: its state is a fixed-size struct.
//!
//! Validity is serde_json's (the oracle in `tests/`): strict RFC 8259 grammar, UTF-8 text,
//! no raw control characters in strings, no lone UTF-16 surrogates in `\u` escapes (I-JSON,
//! RFC 7493 §2.1), no byte-order mark, and at most [`MAX_DEPTH`] nested containers.
//!
//! Limits and what happens on overflow:
//! - [`MAX_DEPTH`] open containers: one more is [`Malformed::DepthLimit`] — serde_json (and so
//!   every Rust client on it) rejects such a document too.
//! - Captures are capped (see `capture.rs`); past the cap a capture is truncated, never an error.
//!
//! A top-level array is a batch (2025-03-26): each element is one message.

use super::capture::{self, Envelope, Kind, MAX_KEY_BYTES, Slot, TRACKED_LEVELS, ToolEntry};
use strings::Wide;

/// Turns of the general scan loop inside an untracked container before `json/quiet.rs`
/// takes it. With none, the 1 KiB result lost ~7 % (its two small untracked containers paid
/// the quiet loop's entry and exit); 4 and 8 both kept tools/list's gain, 4 did best on SSE.
/// (With quiet integers taken whole, 8 runs slightly fewer instructions on SSE but makes
/// tools/list slower in time: the same instructions, more of them mispredicted.)
const QUIET_LOOP_AFTER: u8 = 4;

/// Most containers open at once (serde_json's recursion limit: 127 open, the 128th fails).
pub const MAX_DEPTH: usize = 127;

/// Why a document is not valid JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// A byte the grammar does not allow here.
    Syntax,
    /// A string's content is not valid UTF-8. (A byte above ASCII anywhere else — between
    /// tokens, after a backslash — is [`Malformed::Syntax`]: the grammar allows none there.)
    Utf8,
    /// A raw control character (U+0000–U+001F) inside a string.
    ControlCharacter,
    /// A `\u` escape of a lone UTF-16 surrogate.
    LoneSurrogate,
    /// More than [`MAX_DEPTH`] nested containers.
    DepthLimit,
    /// Something other than whitespace after the top-level value.
    TrailingData,
    /// The input ended inside the value.
    Truncated,
    /// No value at all (empty or only whitespace).
    Empty,
}

/// Receives each message as its closing byte is scanned. The document may still turn out
/// malformed afterwards (see [`JsonScanner::finish`]); the caller treats messages as tentative
/// until then.
pub trait MessageSink {
    fn message(&mut self, envelope: &Envelope);

    /// One entry of a `tools/list` result's `tools` array, as it closes (tentative, like
    /// messages). Most sinks ignore it.
    fn tool_entry(&mut self, _entry: &ToolEntry) {}
}

impl<F: FnMut(&Envelope)> MessageSink for F {
    fn message(&mut self, envelope: &Envelope) {
        self(envelope)
    }
}

/// What a finished, valid document was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Document {
    /// The top level was an array (a JSON-RPC batch).
    pub batch: bool,
    /// Messages delivered to the sink (batch elements, or 1).
    pub messages: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Num {
    /// A number may end in this state (RFC 8259 §6: not after `-`, `.`, `e` or its sign).
    fn may_end(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Expecting a value; `close` allows `]` (just after `[`).
    Value {
        close: bool,
    },
    /// Expecting a key; `close` allows `}` (just after `{`).
    Key {
        close: bool,
    },
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    AfterValue,
    /// The top-level value is complete: only whitespace may follow.
    End,
    Str,
    Escape,
    Hex {
        n: u8,
        cp: u32,
    },
    /// After a high surrogate escape: expecting `\`, then `u`, then four hex digits.
    LowBackslash {
        hi: u32,
    },
    LowU {
        hi: u32,
    },
    LowHex {
        hi: u32,
        n: u8,
        cp: u32,
    },
    Number(Num),
    Literal {
        word: Word,
        pos: u8,
    },
    Failed(Malformed),
}

/// The three literals, by name (keeps [`State`] small: no slice in it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Word {
    True,
    False,
    Null,
}

impl Word {
    fn bytes(self) -> &'static [u8] {
        match self {
            Word::True => b"true",
            Word::False => b"false",
            Word::Null => b"null",
        }
    }
}

/// Where the bytes of the current string or number go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    None,
    Key,
    Slot(Slot),
}

/// The scanner. Under 1 KiB inline (a response scanner allocates nothing; a request
/// scanner, one box of request fields when made); no allocation while scanning.
#[derive(Clone)]
pub struct JsonScanner {
    state: State,
    /// Bit i set: the container at depth i+1 is an object.
    stack: [u64; 2],
    depth: usize,
    /// The innermost open container is an object: `stack`'s top bit, kept apart because
    /// every `,` and closing bracket asks (a shift and mask through memory otherwise).
    in_object: bool,
    started: bool,
    batch: bool,
    /// Depth of an envelope's members (1 for a single message, 2 inside a batch).
    env_level: usize,
    messages: u32,
    envelope: Envelope,
    /// The slot of the followed container open at each level below the envelope (`None` at
    /// level 0: the envelope itself). Every container open outside an untracked one is
    /// followed: one that is not becomes the untracked one (`quiet`).
    parents: [Option<Slot>; TRACKED_LEVELS],
    /// The slot of the value after the key just read in a followed object (`capture::child`).
    next_slot: Option<Slot>,
    dest: Dest,
    /// Scanning a response: `params` (what a request carries) is not followed.
    responses: bool,
    /// Scanning SSE events: a message whose `method` was read is not the response, whatever
    /// else it holds, so the rest of its envelope is only validated (see `begin_tracked`).
    events: bool,
    /// `result.tools` entries are followed and handed to [`MessageSink::tool_entry`]; off
    /// (the default), the array is an untracked container: only validated, without a key
    /// matched or a capture kept per entry.
    tool_entries: bool,
    /// The depth from which nothing is followed (`usize::MAX`: none): the values inside an
    /// untracked container are only validated, without path or capture bookkeeping.
    quiet: usize,
    /// Turns of the scan loop inside the current untracked container before the quiet loop
    /// takes over (see `scan`).
    quiet_tokens: u8,
    /// The string being scanned is an object key.
    in_key: bool,
    key: [u8; MAX_KEY_BYTES],
    key_len: usize,
    key_overflow: bool,
    /// An unfinished UTF-8 sequence at a chunk's end.
    utf8: [u8; 4],
    utf8_len: usize,
    /// How string content that is only validated is scanned on this CPU.
    wide: Wide,
}

// === impl JsonScanner ===

/// Equal when the two scanners read what follows alike: the same state, open containers,
/// captures and settings. A scanner's reading of the next bytes depends on these alone (and
/// on the string level, the same for every scanner of the process). The key and UTF-8
/// buffers are compared whole, past their live part, and the open-container bits past
/// `depth` too: leftovers they tell apart never make two scanners equal, only some equal
/// ones unequal (a rejoin missed, never a wrong one).
impl PartialEq for JsonScanner {
    fn eq(&self, other: &Self) -> bool {
        let JsonScanner {
            state,
            stack,
            depth,
            in_object,
            started,
            batch,
            env_level,
            messages,
            envelope,
            parents,
            next_slot,
            dest,
            responses,
            events,
            tool_entries,
            quiet,
            quiet_tokens,
            in_key,
            key,
            key_len,
            key_overflow,
            utf8,
            utf8_len,
            wide: _,
        } = self;
        *state == other.state
            && *stack == other.stack
            && *depth == other.depth
            && *in_object == other.in_object
            && *started == other.started
            && *batch == other.batch
            && *env_level == other.env_level
            && *messages == other.messages
            && *parents == other.parents
            && *next_slot == other.next_slot
            && *dest == other.dest
            && *responses == other.responses
            && *events == other.events
            && *tool_entries == other.tool_entries
            && *quiet == other.quiet
            && *quiet_tokens == other.quiet_tokens
            && *in_key == other.in_key
            && *key == other.key
            && *key_len == other.key_len
            && *key_overflow == other.key_overflow
            && *utf8 == other.utf8
            && *utf8_len == other.utf8_len
            && *envelope == other.envelope
    }
}

impl Default for JsonScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonScanner {
    /// A fresh scanner, all but the run-time [`Wide`] level: a constant, so that a boxed
    /// scanner is one copy from read-only memory rather than ~1 KiB built field by field
    /// and then moved (per exchange, that was a tenth of a 1 KiB body's cost).
    const FRESH: JsonScanner = Self::fresh(false, false);

    /// [`Self::FRESH`] for responses (see [`Self::for_responses`]).
    pub(super) const FRESH_RESPONSES: JsonScanner = Self::fresh(true, false);

    /// [`Self::FRESH`] for the events of an SSE response (the framer's scanner).
    pub(super) const FRESH_EVENTS: JsonScanner = Self::fresh(true, true);

    /// The constants' value. (Not `..FRESH`: a constant with a `Box` inside cannot be
    /// taken apart at compile time.)
    const fn fresh(responses: bool, events: bool) -> JsonScanner {
        JsonScanner {
            state: State::Value { close: false },
            stack: [0; 2],
            depth: 0,
            in_object: false,
            started: false,
            batch: false,
            env_level: 1,
            messages: 0,
            envelope: Envelope::new(),
            parents: [None; TRACKED_LEVELS],
            next_slot: None,
            dest: Dest::None,
            responses,
            events,
            tool_entries: false,
            quiet: usize::MAX,
            quiet_tokens: 0,
            in_key: false,
            key: [0; MAX_KEY_BYTES],
            key_len: 0,
            key_overflow: false,
            utf8: [0; 4],
            utf8_len: 0,
            wide: Wide::Narrow,
        }
    }

    /// A scanner for request bodies: it keeps the texts only requests carry
    /// ([`capture::RequestFields`], one small allocation).
    pub fn new() -> Self {
        let mut scanner = Self::FRESH;
        scanner.wide = Wide::detect();
        scanner.envelope.request_only = Some(Box::default());
        scanner
    }

    /// A scanner for response bodies. The outcome rules read nothing under `params` (a
    /// response has none; a server-to-client request's are not judged), so that subtree is
    /// only validated — on a stream of progress notifications, most of each event.
    pub fn for_responses() -> Self {
        let mut scanner = Self::FRESH_RESPONSES;
        scanner.wide = Wide::detect();
        scanner
    }

    /// [`Self::new`], boxed: built in place on the heap.
    pub fn boxed_for_requests() -> Box<Self> {
        let mut scanner = Box::new(Self::FRESH);
        scanner.wide = Wide::detect();
        scanner.envelope.request_only = Some(Box::default());
        scanner
    }

    /// [`Self::for_responses`], boxed: built in place on the heap.
    pub fn boxed_for_responses() -> Box<Self> {
        let mut scanner = Box::new(Self::FRESH_RESPONSES);
        scanner.wide = Wide::detect();
        scanner
    }

    /// Sets the run-time string level (a scanner copied from [`Self::FRESH_RESPONSES`]).
    pub(super) fn detect_wide(&mut self) {
        self.wide = Wide::detect();
    }

    /// Follows each entry of a `tools/list` result's `tools` array for
    /// [`MessageSink::tool_entry`] (`on`), or only validates the array. Kept across
    /// [`Self::reset`]: it is the exchange's choice, not the document's.
    pub fn follow_tool_entries(&mut self, on: bool) {
        self.tool_entries = on;
    }

    /// Makes the scanner ready for a new document (SSE: the next event).
    pub fn reset(&mut self) {
        self.state = State::Value { close: false };
        self.depth = 0;
        self.in_object = false;
        self.started = false;
        self.batch = false;
        self.env_level = 1;
        self.messages = 0;
        self.dest = Dest::None;
        self.next_slot = None;
        self.quiet = usize::MAX;
        self.in_key = false;
        self.utf8_len = 0;
    }

    /// True once the input can no longer be valid JSON.
    pub fn failed(&self) -> Option<Malformed> {
        match self.state {
            State::Failed(why) => Some(why),
            _ => None,
        }
    }

    /// True when the bytes so far are a whole, valid document: the top-level value is
    /// complete and no byte is held back (an unfinished UTF-8 sequence after the value is
    /// not whitespace, so it can only end the document as malformed — but only once it is
    /// known; an agent that left before then cancelled a call whose answer was not yet known).
    pub fn is_complete(&self) -> bool {
        self.state == State::End && self.utf8_len == 0
    }

    /// The message being scanned, as far as it got (for a request cut by the inspect cap).
    pub fn current(&self) -> &Envelope {
        &self.envelope
    }

    /// The top-level value is an array (a batch), as far as the scan got.
    pub fn is_batch(&self) -> bool {
        self.batch
    }

    /// True once any non-whitespace byte was seen.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Scans one chunk. After a failure the rest of the input is ignored.
    pub fn feed<S: MessageSink + ?Sized>(&mut self, chunk: &[u8], sink: &mut S) {
        if self.failed().is_some() {
            return;
        }
        if let Err(why) = self.validated(chunk, sink) {
            self.state = State::Failed(why);
        }
    }

    /// Scans a chunk as whole UTF-8 characters: an incomplete sequence at its end (at most 3
    /// bytes) is held back and scanned once the next chunk completes it, so that no
    /// character is split between two scans (`utf8.rs` validates characters where string
    /// content is read). The first bad byte decides the reason, however the input was cut.
    fn validated<S: MessageSink + ?Sized>(
        &mut self,
        mut chunk: &[u8],
        sink: &mut S,
    ) -> Result<(), Malformed> {
        if self.utf8_len != 0 {
            let need = utf8::width(self.utf8[0]);
            let take = need.saturating_sub(self.utf8_len).min(chunk.len());
            self.utf8[self.utf8_len..self.utf8_len + take].copy_from_slice(&chunk[..take]);
            self.utf8_len += take;
            chunk = &chunk[take..];
            if self.utf8_len < need {
                // The chunk was shorter than the rest of the character.
                return Ok(());
            }
            let (held, n) = (self.utf8, self.utf8_len);
            self.utf8_len = 0;
            self.scan(&held[..n], sink)?;
        }
        let (whole, cut) = chunk.split_at(utf8::whole_characters(chunk));
        self.scan(whole, sink)?;
        if !cut.is_empty() {
            // (Guarded: a copy of a length unknown at compile time is a `memcpy` call, and
            // almost no chunk (no SSE event) ends inside a character.)
            self.utf8[..cut.len()].copy_from_slice(cut);
        }
        self.utf8_len = cut.len();
        Ok(())
    }

    /// The input ended: the document's verdict.
    pub fn finish<S: MessageSink + ?Sized>(&mut self, sink: &mut S) -> Result<Document, Malformed> {
        if self.utf8_len != 0 && self.failed().is_none() {
            // The input ended inside a UTF-8 sequence: scan its bytes as they are (inside a
            // string the string is then unterminated; elsewhere they are not JSON).
            let (held, n) = (self.utf8, self.utf8_len);
            self.utf8_len = 0;
            if let Err(why) = self.scan(&held[..n], sink) {
                self.state = State::Failed(why);
            }
        }
        if let State::Number(num) = self.state {
            // A top-level number ends at end of input.
            if let Err(why) = self.end_number(num, sink) {
                self.state = State::Failed(why);
            }
        }
        match self.state {
            State::End => Ok(Document {
                batch: self.batch,
                messages: self.messages,
            }),
            State::Failed(why) => Err(why),
            State::Value { .. } if !self.started => Err(Malformed::Empty),
            _ => Err(Malformed::Truncated),
        }
    }

    /// Scans whole characters. The common tokens — whole keys, strings, numbers, literals and
    /// the punctuation between them — are taken whole here, without a round trip through
    /// `self.state` per byte; whatever a chunk boundary cuts goes through [`Self::structural`]
    /// one byte at a time.
    fn scan<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        sink: &mut S,
    ) -> Result<(), Malformed> {
        let len = chunk.len();
        let mut i = 0;
        while i < len {
            if self.depth >= self.quiet {
                // A small untracked container (a tool result's one text item, a few numbers)
                // is cheaper through this loop than through the quiet loop's entry and exit;
                // a large one (an input schema) is taken there after its first tokens.
                if self.quiet_tokens < QUIET_LOOP_AFTER {
                    self.quiet_tokens += 1;
                } else if let Some(next) = self.quiet_run(chunk, i, sink)? {
                    i = next;
                    continue;
                }
            }
            let b = chunk[i];
            match self.state {
                State::Str => i = self.string(chunk, i, sink)?,
                State::Number(num) => i = self.number(chunk, i, num, sink)?,
                State::Value { close } => i = self.value(chunk, i, close, sink)?,
                State::Key { close } => {
                    i += 1;
                    match b {
                        b'"' => i = self.key(chunk, i, sink)?,
                        b' ' | b'\t' | b'\n' | b'\r' => {}
                        b'}' if close => self.close(sink)?,
                        _ => return Err(Malformed::Syntax),
                    }
                }
                State::AfterValue => {
                    i += 1;
                    match b {
                        b',' => {
                            if self.top_is_object() {
                                self.state = State::Key { close: false };
                                // The usual case: the next key's quote follows at once.
                                if chunk.get(i) == Some(&b'"') {
                                    i = self.key(chunk, i + 1, sink)?;
                                }
                            } else {
                                self.state = State::Value { close: false };
                                if i < len {
                                    i = self.value(chunk, i, false, sink)?;
                                }
                            }
                        }
                        b' ' | b'\t' | b'\n' | b'\r' => {}
                        b'}' if self.top_is_object() => self.close(sink)?,
                        b']' if !self.top_is_object() => self.close(sink)?,
                        _ => return Err(Malformed::Syntax),
                    }
                }
                _ => {
                    i += 1;
                    self.structural(b, sink)?;
                }
            }
        }
        Ok(())
    }

    /// Expecting a value at `i` (`close`: or the `]` of an empty array): its first byte, and
    /// for strings, numbers and literals the rest of the token as far as the chunk goes.
    #[inline(always)]
    fn value<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        mut i: usize,
        close: bool,
        sink: &mut S,
    ) -> Result<usize, Malformed> {
        let b = chunk[i];
        i += 1;
        match b {
            b'"' => match quiet::short_string(chunk, i) {
                // A short string of no interest (an enum value, a title, a progress token):
                // whole, without the string states.
                Some(next) if self.untracked_value() => {
                    self.dest = Dest::None;
                    self.state = State::AfterValue;
                    i = next;
                }
                // A longer one (a tool's description): validated only, begun without the
                // call through `begin_value`.
                None if self.untracked_value() => {
                    self.begin_quiet(b)?;
                    i = self.string(chunk, i, sink)?;
                }
                _ => {
                    self.begin_value(b)?;
                    i = self.string(chunk, i, sink)?;
                }
            },
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b']' if close => self.close(sink)?,
            b'1'..=b'9' if self.untracked_value() => {
                // An integer inside an untracked container (a progress count, a schema's
                // bound): its digits and the byte that ends it, without the number states.
                // (The quiet loop's `quiet_number` does this for every number; calling it
                // here is slower on the 1 KiB result, as measured by `scan_ratios`.)
                let run = chunk[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                match chunk.get(i + run) {
                    Some(b'.' | b'e' | b'E') | None => {
                        self.begin_quiet(b)?;
                        i = self.number(chunk, i, Num::Int, sink)?;
                    }
                    Some(_) => {
                        // Not a message's own value: no message ends here (see `untracked_value`).
                        self.dest = Dest::None;
                        self.state = State::AfterValue;
                        i += run;
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                self.begin_value(b)?;
                if let State::Number(num) = self.state {
                    i = self.number(chunk, i, num, sink)?;
                }
            }
            b't' | b'f' | b'n' if self.untracked_value() => {
                // A literal of no interest (a hint nobody asked for): compared whole when
                // the chunk holds it. It cannot end a message (see `untracked_value`).
                self.begin_quiet(b)?;
                i = self.literal_rest(chunk, i, sink)?;
            }
            b't' | b'f' | b'n' => {
                self.begin_value(b)?;
                i = self.literal_rest(chunk, i, sink)?;
            }
            _ => self.begin_value(b)?,
        }
        Ok(i)
    }

    /// Whether the value about to begin is one nothing is kept of, and that cannot end a
    /// message: inside an untracked container, or a member of a followed object whose key
    /// leads nowhere (`next_slot`; every object open outside an untracked one is followed,
    /// below the envelope's level). Such a scalar needs only its grammar.
    #[inline(always)]
    fn untracked_value(&self) -> bool {
        self.depth >= self.quiet || (self.in_object && self.next_slot.is_none())
    }

    /// A key's opening quote was just scanned; `i` is the byte after it. A key whole in this
    /// chunk, without escapes, is matched in place and its colon taken too; any other goes
    /// through the string states.
    #[inline(always)]
    fn key<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        i: usize,
        sink: &mut S,
    ) -> Result<usize, Malformed> {
        let rest = &chunk[i..];
        let p = key_run(rest);
        if rest.get(p) != Some(&b'"') {
            return self.key_in_parts(chunk, i, sink);
        }
        if self.depth < self.quiet {
            self.key_named(&rest[..p]);
        }
        let j = i + p + 1;
        if chunk.get(j) != Some(&b':') {
            self.state = State::Colon;
            return Ok(j);
        }
        self.state = State::Value { close: false };
        // The usual case: the value follows the colon at once.
        if j + 1 < chunk.len() {
            return self.value(chunk, j + 1, false, sink);
        }
        Ok(j + 1)
    }

    /// A whole key outside untracked containers: the slot of the value it names.
    #[inline(never)]
    fn key_named(&mut self, key: &[u8]) {
        self.next_slot = capture::child(self.parent_here(), key);
    }

    /// The slot of the followed object open at the current depth (`None`: the envelope, or
    /// none at all).
    #[inline(always)]
    fn parent_here(&self) -> Option<Slot> {
        self.parent_at(self.depth)
    }

    /// The slot of the followed container open at `depth` (`None`: the envelope, or none).
    #[inline(always)]
    fn parent_at(&self, depth: usize) -> Option<Slot> {
        let rel = depth.wrapping_sub(self.env_level);
        self.parents.get(rel).copied().flatten()
    }

    /// A key cut by the chunk's end or holding escapes: through the string states.
    #[inline(never)]
    fn key_in_parts<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        i: usize,
        sink: &mut S,
    ) -> Result<usize, Malformed> {
        self.key_len = 0;
        self.key_overflow = false;
        self.in_key = true;
        // Outside untracked containers every open object is followed: its keys matter.
        self.dest = if self.depth < self.quiet {
            Dest::Key
        } else {
            Dest::None
        };
        self.state = State::Str;
        self.string(chunk, i, sink)
    }

    /// Inside a string from `i`: plain runs, short escapes and the closing quote, until the
    /// string ends or the chunk does. Returns where scanning goes on.
    #[inline]
    fn string<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        mut i: usize,
        sink: &mut S,
    ) -> Result<usize, Malformed> {
        let len = chunk.len();
        loop {
            let rest = &chunk[i..];
            let p = if self.dest == Dest::None {
                // Only validated: whole blocks at a time, short escapes and UTF-8 included.
                self.wide.skip(rest)?
            } else {
                let p = string_run(rest);
                self.capture(rest, p);
                p
            };
            let Some(&stop) = rest.get(p) else {
                return Ok(len);
            };
            if stop == b'"' {
                self.end_string(sink)?;
                return Ok(i + p + 1);
            }
            if stop < 0x20 {
                return Err(Malformed::ControlCharacter);
            }
            if stop >= 0x80 {
                let n = utf8::run(&rest[p..])?;
                if self.dest != Dest::None {
                    self.capture(&rest[p..], n);
                }
                i += p + n;
                continue;
            }
            // A backslash. A short escape whose second byte is here is taken at once; `\u`
            // (and a chunk ending after the backslash) go through the escape states.
            match rest.get(p + 1) {
                Some(&e) if e != b'u' => {
                    if self.dest == Dest::None {
                        if SHORT_ESCAPES[usize::from(e)] == 0 {
                            return Err(Malformed::Syntax);
                        }
                    } else {
                        self.escape(e)?;
                    }
                    i += p + 2;
                }
                _ => {
                    self.state = State::Escape;
                    return Ok(i + p + 1);
                }
            }
        }
    }

    /// A number's first byte was scanned (state `Number(num)`); `i` is the byte after it.
    #[inline]
    fn number<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        mut i: usize,
        mut num: Num,
        sink: &mut S,
    ) -> Result<usize, Malformed> {
        let start = i;
        let len = chunk.len();
        (i, num) = number_run(chunk, i, num);
        if let Dest::Slot(slot) = self.dest {
            self.envelope.push(slot, &chunk[start..], i - start);
        }
        if i < len {
            // The byte at `i` ends the number; it is scanned again in the next state.
            self.end_number(num, sink)?;
        } else {
            self.state = State::Number(num);
        }
        Ok(i)
    }

    /// A literal's first byte was scanned; its rest, when whole in this chunk, is compared at
    /// once.
    #[inline]
    fn literal_rest<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        i: usize,
        sink: &mut S,
    ) -> Result<usize, Malformed> {
        let State::Literal { word, .. } = self.state else {
            return Ok(i);
        };
        // Fixed-size compares: a slice compare here was a `memcmp` call per literal.
        let whole = match word {
            Word::True => tail_matches(chunk, i, b"rue"),
            Word::False => tail_matches(chunk, i, b"alse"),
            Word::Null => tail_matches(chunk, i, b"ull"),
        };
        match whole {
            Some(true) => {
                self.end_value(sink);
                Ok(i + word.bytes().len() - 1)
            }
            Some(false) => Err(Malformed::Syntax),
            None => Ok(i),
        }
    }

    /// One byte of what `scan` leaves to the byte-at-a-time states: a colon apart from its
    /// key, trailing whitespace, escapes, and literals cut by a chunk's end.
    fn structural<S: MessageSink + ?Sized>(
        &mut self,
        b: u8,
        sink: &mut S,
    ) -> Result<(), Malformed> {
        match self.state {
            State::Colon => match b {
                b' ' | b'\t' | b'\n' | b'\r' => Ok(()),
                b':' => {
                    self.state = State::Value { close: false };
                    Ok(())
                }
                _ => Err(Malformed::Syntax),
            },
            State::End => match b {
                b' ' | b'\t' | b'\n' | b'\r' => Ok(()),
                _ => Err(Malformed::TrailingData),
            },
            State::Escape => self.escape(b),
            State::Hex { n, cp } => {
                let cp = (cp << 4) | hex(b)?;
                if n < 3 {
                    self.state = State::Hex { n: n + 1, cp };
                    return Ok(());
                }
                match cp {
                    0xD800..=0xDBFF => {
                        self.state = State::LowBackslash { hi: cp };
                        Ok(())
                    }
                    0xDC00..=0xDFFF => Err(Malformed::LoneSurrogate),
                    _ => self.push_char(cp),
                }
            }
            State::LowBackslash { hi } => match b {
                b'\\' => {
                    self.state = State::LowU { hi };
                    Ok(())
                }
                _ => Err(Malformed::LoneSurrogate),
            },
            State::LowU { hi } => match b {
                b'u' => {
                    self.state = State::LowHex { hi, n: 0, cp: 0 };
                    Ok(())
                }
                _ => Err(Malformed::LoneSurrogate),
            },
            State::LowHex { hi, n, cp } => {
                let cp = (cp << 4) | hex(b)?;
                if n < 3 {
                    self.state = State::LowHex { hi, n: n + 1, cp };
                    return Ok(());
                }
                if !(0xDC00..=0xDFFF).contains(&cp) {
                    return Err(Malformed::LoneSurrogate);
                }
                self.push_char(0x10000 + ((hi - 0xD800) << 10) + (cp - 0xDC00))
            }
            State::Literal { word, pos } => {
                let pos = usize::from(pos);
                let word_bytes = word.bytes();
                if word_bytes.get(pos) != Some(&b) {
                    return Err(Malformed::Syntax);
                }
                if pos + 1 == word_bytes.len() {
                    self.end_value(sink);
                } else {
                    self.state = State::Literal {
                        word,
                        pos: (pos + 1) as u8,
                    };
                }
                Ok(())
            }
            // Handled in `scan`; a failed scanner is never fed.
            State::Value { .. }
            | State::Key { .. }
            | State::AfterValue
            | State::Str
            | State::Number(_)
            | State::Failed(_) => Err(Malformed::Syntax),
        }
    }

    #[inline(always)]
    fn begin_value(&mut self, b: u8) -> Result<(), Malformed> {
        if self.depth >= self.quiet {
            return self.begin_quiet(b);
        }
        self.begin_tracked(b)
    }

    /// [`Self::begin_value`] outside untracked containers: the value's slot, decided when
    /// its key was read (an element's, by its array).
    #[inline(never)]
    fn begin_tracked(&mut self, b: u8) -> Result<(), Malformed> {
        if self.depth < self.env_level {
            return self.begin_message_value(b);
        }
        let slot = if self.in_object {
            self.next_slot
        } else {
            // Outside untracked containers, an array below the envelope is a followed one.
            self.parent_here().and_then(capture::element)
        };
        let Some(slot) = slot else {
            // A value of no interest in a followed object: grammar only, and a container is
            // validated without bookkeeping.
            self.begin_quiet(b)?;
            if matches!(b, b'{' | b'[') {
                self.untrack_from(self.depth);
                // A tool's input schema, its `_meta`: the quiet loop from the first token.
                // Most are large, and thousands of entries each paid the general loop's
                // first turns.
                if self.parent_at(self.depth - 1) == Some(Slot::ToolEntry) {
                    self.quiet_tokens = QUIET_LOOP_AFTER;
                }
            }
            return Ok(());
        };
        let kind = kind_of(b)?;
        self.envelope.begin(slot, kind);
        if self.events && slot == Slot::Method {
            // 2025-03-26 … 2026-07-28 transports §SSE: on a response stream, a message with a
            // `method` is a notification or a server→client request, never the response to
            // the agent's call (`Correlator::message` stops at its method's kind, which no
            // later member can make absent again). The rest of the envelope, this value
            // included, is validated only: the envelope becomes the untracked container.
            self.begin_quiet(b)?;
            self.untrack_from(self.env_level);
            return Ok(());
        }
        match b {
            b'{' | b'[' => {
                self.dest = Dest::None;
                let object = b == b'{';
                self.state = self.push(object)?;
                let followed = if object {
                    self.keys_matter(slot)
                } else {
                    self.elements_matter(slot)
                };
                self.follow(followed.then_some(Some(slot)));
            }
            _ => {
                self.state = scalar_state(b);
                if self.envelope.keeps(slot) {
                    self.dest = Dest::Slot(slot);
                    if kind == Kind::Number {
                        self.envelope.push(slot, &[b], 1);
                    }
                } else {
                    self.dest = Dest::None;
                }
            }
        }
        Ok(())
    }

    /// The document's value, or a batch's element: a message begins.
    #[cold]
    fn begin_message_value(&mut self, b: u8) -> Result<(), Malformed> {
        let kind = kind_of(b)?;
        self.started = true;
        if self.depth == 0 {
            self.batch = kind == Kind::Array;
            self.env_level = if self.batch { 2 } else { 1 };
        }
        if !(self.depth == 0 && self.batch) {
            self.envelope.reset();
            self.envelope.shape = kind;
        }
        self.dest = Dest::None;
        match b {
            b'{' | b'[' => {
                let object = b == b'{';
                self.state = self.push(object)?;
                if self.depth == self.env_level {
                    // The message's own container: an object's members are the envelope.
                    self.follow(object.then_some(None));
                }
            }
            _ => self.state = scalar_state(b),
        }
        Ok(())
    }

    /// The container just opened at the current depth is followed, with this slot
    /// (`Some(None)`: the envelope), or (`None`) not: then it is the untracked one, and
    /// nothing inside is followed.
    #[inline(always)]
    fn follow(&mut self, slot: Option<Option<Slot>>) {
        let rel = self.depth - self.env_level;
        match (slot, self.parents.get_mut(rel)) {
            (Some(slot), Some(parent)) => *parent = slot,
            // Not followed, or deeper than any followed path.
            _ => self.untrack_from(self.depth),
        }
    }

    /// The container open at `depth` becomes the untracked one: from there down, values
    /// are validated only (`quiet`), its first tokens in the general loop (`scan`).
    #[inline(always)]
    fn untrack_from(&mut self, depth: usize) {
        self.quiet = depth;
        self.quiet_tokens = 0;
    }

    /// Whether the keys of an object in this slot are followed.
    fn keys_matter(&self, slot: Slot) -> bool {
        capture::keys_matter(slot) && !(self.responses && slot == Slot::Params)
    }

    /// Whether the elements of an array in this slot are followed.
    fn elements_matter(&self, slot: Slot) -> bool {
        capture::element(slot).is_some_and(|e| e != Slot::ToolEntry || self.tool_entries)
    }

    /// [`Self::begin_value`] inside an untracked container: grammar only.
    #[inline(always)]
    fn begin_quiet(&mut self, b: u8) -> Result<(), Malformed> {
        self.dest = Dest::None;
        self.state = match b {
            b'{' | b'[' => self.push(b == b'{')?,
            b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => scalar_state(b),
            _ => return Err(Malformed::Syntax),
        };
        Ok(())
    }

    /// Opens a container one level deeper (`object`: `{`, else `[`); returns the state after
    /// its bracket.
    #[inline(always)]
    fn push(&mut self, object: bool) -> Result<State, Malformed> {
        if self.depth == MAX_DEPTH {
            return Err(Malformed::DepthLimit);
        }
        let (word, bit) = (self.depth / 64, self.depth % 64);
        if object {
            self.stack[word] |= 1 << bit;
        } else {
            self.stack[word] &= !(1 << bit);
        }
        self.depth += 1;
        self.in_object = object;
        Ok(if object {
            State::Key { close: true }
        } else {
            State::Value { close: true }
        })
    }

    fn close<S: MessageSink + ?Sized>(&mut self, sink: &mut S) -> Result<(), Malformed> {
        if self.depth > self.quiet {
            // Still inside an untracked container.
            self.depth -= 1;
            self.in_object = self.stack_says_object();
            self.state = State::AfterValue;
            return Ok(());
        }
        if self.depth < self.quiet && self.parent_here() == Some(Slot::ToolEntry) {
            // A followed `tools` element closed: one tool entry is complete.
            sink.tool_entry(&self.envelope.tool_entry);
        }
        self.depth -= 1;
        self.in_object = self.stack_says_object();
        self.quiet = usize::MAX;
        self.end_value(sink);
        Ok(())
    }

    /// A value just ended at the current depth.
    fn end_value<S: MessageSink + ?Sized>(&mut self, sink: &mut S) {
        self.dest = Dest::None;
        let message_ended = if self.batch {
            self.depth == 1
        } else {
            self.depth == 0
        };
        if message_ended {
            self.messages += 1;
            sink.message(&self.envelope);
        }
        self.state = if self.depth == 0 {
            State::End
        } else {
            State::AfterValue
        };
    }

    fn end_number<S: MessageSink + ?Sized>(
        &mut self,
        num: Num,
        sink: &mut S,
    ) -> Result<(), Malformed> {
        if num.may_end() {
            self.end_value(sink);
            Ok(())
        } else {
            Err(Malformed::Syntax)
        }
    }

    fn end_string<S: MessageSink + ?Sized>(&mut self, sink: &mut S) -> Result<(), Malformed> {
        if !self.in_key {
            self.end_value(sink);
            return Ok(());
        }
        self.in_key = false;
        if self.dest == Dest::Key {
            self.next_slot = if self.key_overflow {
                None
            } else {
                capture::child(self.parent_here(), &self.key[..self.key_len])
            };
        }
        self.dest = Dest::None;
        self.state = State::Colon;
        Ok(())
    }

    #[inline(always)]
    fn top_is_object(&self) -> bool {
        self.in_object
    }

    /// Whether the container open at the current depth is an object, from the stack.
    #[inline(always)]
    fn stack_says_object(&self) -> bool {
        let d = self.depth.wrapping_sub(1);
        self.depth > 0 && self.stack[d / 64] & (1 << (d % 64)) != 0
    }

    #[inline]
    fn escape(&mut self, b: u8) -> Result<(), Malformed> {
        if b == b'u' {
            self.state = State::Hex { n: 0, cp: 0 };
            return Ok(());
        }
        let decoded = SHORT_ESCAPES[usize::from(b)];
        if decoded == 0 {
            return Err(Malformed::Syntax);
        }
        self.capture(&[decoded], 1);
        self.state = State::Str;
        Ok(())
    }

    fn push_char(&mut self, cp: u32) -> Result<(), Malformed> {
        let c = char::from_u32(cp).ok_or(Malformed::LoneSurrogate)?;
        let mut buf = [0; 4];
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        self.capture(bytes, bytes.len());
        self.state = State::Str;
        Ok(())
    }

    /// Keeps `bytes[..len]` where the current string goes (the bytes after `len` let a short
    /// value be copied as one block: `Captured::push_prefix`).
    #[inline]
    fn capture(&mut self, bytes: &[u8], len: usize) {
        match self.dest {
            Dest::None => {}
            Dest::Key => {
                let bytes = &bytes[..len];
                let room = MAX_KEY_BYTES - self.key_len;
                if bytes.len() > room {
                    self.key_overflow = true;
                } else {
                    self.key[self.key_len..self.key_len + bytes.len()].copy_from_slice(bytes);
                    self.key_len += bytes.len();
                }
            }
            Dest::Slot(slot) => self.envelope.push(slot, bytes, len),
        }
    }
}

/// Whether the `N` bytes at `i` are `want`; `None` when the chunk ends first.
#[inline(always)]
fn tail_matches<const N: usize>(chunk: &[u8], i: usize, want: &[u8; N]) -> Option<bool> {
    let got = chunk.get(i..i + N)?;
    Some(<[u8; N]>::try_from(got).is_ok_and(|got| got == *want))
}

fn literal(word: Word) -> State {
    State::Literal { word, pos: 1 }
}

/// The JSON type of the value whose first byte is `b`.
#[inline(always)]
fn kind_of(b: u8) -> Result<Kind, Malformed> {
    Ok(match b {
        b'{' => Kind::Object,
        b'[' => Kind::Array,
        b'"' => Kind::String,
        b'-' | b'0'..=b'9' => Kind::Number,
        b't' => Kind::True,
        b'f' => Kind::False,
        b'n' => Kind::Null,
        _ => return Err(Malformed::Syntax),
    })
}

/// The state after the first byte of a string, number or literal (a byte the caller
/// already knows starts one).
#[inline(always)]
fn scalar_state(b: u8) -> State {
    match b {
        b'"' => State::Str,
        b'-' => State::Number(Num::Minus),
        b'0' => State::Number(Num::Zero),
        b'1'..=b'9' => State::Number(Num::Int),
        b't' => literal(Word::True),
        b'f' => literal(Word::False),
        _ => literal(Word::Null),
    }
}

fn hex(b: u8) -> Result<u32, Malformed> {
    match b {
        b'0'..=b'9' => Ok(u32::from(b - b'0')),
        b'a'..=b'f' => Ok(u32::from(b - b'a' + 10)),
        b'A'..=b'F' => Ok(u32::from(b - b'A' + 10)),
        _ => Err(Malformed::Syntax),
    }
}

/// Scans a number on from `i` in state `num`: returns where it stopped (a byte that does not
/// continue it, or the chunk's end) and the state there.
#[inline(always)]
fn number_run(chunk: &[u8], mut i: usize, mut num: Num) -> (usize, Num) {
    let len = chunk.len();
    while i < len {
        // Runs of digits keep an integer, fraction or exponent in its state: skipped without
        // the state table.
        if matches!(num, Num::Int | Num::Frac | Num::ExpDigits) {
            i += chunk[i..].iter().take_while(|b| b.is_ascii_digit()).count();
            if i == len {
                break;
            }
        }
        match next_num(num, chunk[i]) {
            Some(next) => {
                num = next;
                i += 1;
            }
            None => break,
        }
    }
    (i, num)
}

/// The next number state, or `None` when `b` does not continue the number.
#[inline]
fn next_num(num: Num, b: u8) -> Option<Num> {
    Some(match (num, b) {
        (Num::Minus, b'0') => Num::Zero,
        (Num::Minus, b'1'..=b'9') => Num::Int,
        (Num::Int, b'0'..=b'9') => Num::Int,
        (Num::Zero | Num::Int, b'.') => Num::Dot,
        (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::Exp,
        (Num::Dot | Num::Frac, b'0'..=b'9') => Num::Frac,
        (Num::Exp, b'+' | b'-') => Num::ExpSign,
        (Num::Exp | Num::ExpSign | Num::ExpDigits, b'0'..=b'9') => Num::ExpDigits,
        // A digit after a leading zero, or a sign or dot out of place: not a continuation,
        // so the byte is scanned as the next token and fails there.
        _ => return None,
    })
}

/// What each byte after a backslash decodes to (RFC 8259 §7), 0 where it is not a short
/// escape (`u` included: it starts `\uXXXX`; no short escape decodes to 0). A table, because
/// a `match` on them compiles to a jump table whose indirect branch mispredicts.
static SHORT_ESCAPES: [u8; 256] = {
    let mut table = [0; 256];
    let pairs = [
        (b'"', b'"'),
        (b'\\', b'\\'),
        (b'/', b'/'),
        (b'b', 0x08),
        (b'f', 0x0C),
        (b'n', b'\n'),
        (b'r', b'\r'),
        (b't', b'\t'),
    ];
    let mut k = 0;
    while k < pairs.len() {
        table[pairs[k].0 as usize] = pairs[k].1;
        k += 1;
    }
    table
};

/// Bytes that end a run of plain string content: the closing quote, a backslash, a raw
/// control character (an error), or a byte above ASCII (its character is checked by
/// `utf8::run`).
#[inline(always)]
fn stops_string(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | !(0x20..0x80).contains(&b)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// SWAR over eight bytes (little-endian): the high bit of each byte that [`stops_string`] is
/// set. Only the lowest set byte is exact — a borrow can flag bytes above a true hit, never
/// below one — which is all [`string_run`] needs.
#[inline(always)]
fn stop_bits(w: u64) -> u64 {
    let quote = w ^ (ONES * u64::from(b'"'));
    let backslash = w ^ (ONES * u64::from(b'\\'));
    let zero_quote = quote.wrapping_sub(ONES) & !quote;
    let zero_backslash = backslash.wrapping_sub(ONES) & !backslash;
    // Below 0x20 borrows into the high bit; above ASCII has it already.
    let control_or_high = w.wrapping_sub(ONES * 0x20) | w;
    (zero_quote | zero_backslash | control_or_high) & HIGHS
}

/// Bytes per block of [`string_run`]'s wide pass.
const BLOCK: usize = 32;

/// The length of the plain ASCII run at the start of `seg`: up to the first byte that
/// [`stops_string`], or all of it.
///
/// On x86-64, SSE2 compares 16 bytes at a time (`json/sse2.rs`). Elsewhere, the first 16
/// bytes go word by word with SWAR arithmetic — short strings (keys, names, enum values) are
/// the common case and stop within a word or two — and past them a wide pass takes 32 bytes
/// at a time, asking only "does any byte stop?", a fold the compiler vectorises on its own;
/// the block that stops is then located with the SWAR words.
///
/// The log formatter (`log/json.rs`) uses it too: a JSON string's escapes are among the
/// same bytes on the way out.
#[inline]
pub(crate) fn string_run(seg: &[u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        sse2::string_run(seg)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        portable_string_run(seg)
    }
}

/// Where the first LF or CR in `seg` is: the end of an SSE line (`sse.rs`), searched with
/// the same 16-byte compares as [`string_run`]. A `data` line is a whole JSON-RPC message of
/// a few hundred bytes: a `memchr2` call spends more on its dispatch and set-up than on the
/// search.
#[inline]
pub(crate) fn line_break(seg: &[u8]) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        sse2::line_break(seg)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        memchr::memchr2(b'\n', b'\r', seg)
    }
}

/// [`string_run`] for a key: keys are short, so when the first 16 bytes hold the stop, one
/// inline compare finds it (no call, no loop set up).
#[inline(always)]
fn key_run(rest: &[u8]) -> usize {
    if let Some(head) = rest.first_chunk::<16>() {
        let p = head_run(head);
        if p < 16 {
            return p;
        }
    }
    string_run(rest)
}

/// [`string_run`] over exactly 16 bytes (16 when none stops): one compare on x86-64.
#[inline(always)]
fn head_run(head: &[u8; 16]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        sse2::head_run(head)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        word_run(head)
    }
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline]
fn portable_string_run(seg: &[u8]) -> usize {
    const HEAD: usize = 16;
    let Some(tail) = seg.get(HEAD..) else {
        return word_run(seg);
    };
    let head = word_run(&seg[..HEAD]);
    if head < HEAD {
        return head;
    }
    let mut base = HEAD;
    let mut blocks = tail.chunks_exact(BLOCK);
    for block in &mut blocks {
        if block.iter().fold(false, |any, &b| any | stops_string(b)) {
            return base + word_run(block);
        }
        base += BLOCK;
    }
    base + word_run(blocks.remainder())
}

/// [`string_run`] for a short segment: eight bytes at a time with word arithmetic, then byte
/// by byte.
#[inline]
fn word_run(seg: &[u8]) -> usize {
    let mut base = 0;
    let mut words = seg.chunks_exact(8);
    for word in &mut words {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        let stops = stop_bits(u64::from_le_bytes(le));
        if stops != 0 {
            return base + (stops.trailing_zeros() / 8) as usize;
        }
        base += 8;
    }
    for (k, &b) in words.remainder().iter().enumerate() {
        if stops_string(b) {
            return base + k;
        }
    }
    seg.len()
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod quiet;
mod strings;
mod utf8;

#[cfg(test)]
mod tests;
