//! The last list answer a thread classified, kept so that the same bytes, when they come
//! again, are classified by comparing them rather than scanning them.
//!
//! A list request's answer (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`) is the same for every agent of a server until the server's
//! list changes, and every new session asks for it. On a large server it is megabytes of
//! input schemas: tokens every few bytes, the costliest body strata classifies per byte.
//!
//! What the JSON scanner and the SSE framer make of a body depends on its bytes alone, whatever
//! the chunks (the classifier's tests cut every body at every offset), and on one setting:
//! whether they follow tool entries. They hand their sink messages, tool entries and (SSE)
//! events, and end in a state (a JSON document's verdict; the framer's event count and last
//! event id). So a body equal byte for byte to one read before, with the same setting, is
//! classified by handing the sink what it was handed then, each call once the body has come
//! as far as it had when the call was made, and by ending in the same state. Every byte is
//! still read: compared with the byte at the same offset of a body the classifier validated.
//! A body that differs anywhere, or ends early, is read as if nothing were remembered, the
//! calls already handed on not handed again. It is read from the last checkpoint within the
//! bytes that matched: the remembered read kept a copy of its reader every
//! [`CHECKPOINT_EVERY`] bytes, with the count of calls made by then, and what a reader makes
//! of the bytes after an offset depends only on where it stood there. So a list that changes
//! near its end (a cursor, a tool added last) costs the compare and a short read, not a read
//! of the whole body. For the same reason a body read on is compared again from the first
//! checkpoint where its reader stands exactly as the remembered one stood ([`Rejoining`]): a
//! value changed in place that the reader does not keep (a count or a time of the same width
//! first in the result, a tool's description) costs a read up to that checkpoint.
//!
//! One answer per thread (strata's workers each run one), at most [`MAX_BYTES`] of it; a
//! list answer that differs from the remembered one replaces it once read whole. A thread
//! copies one answer at a time to remember it: many list answers in flight at once (many
//! sessions starting) hold one copy, not one each, and the others are read as if nothing
//! were remembered. The copy is kept in blocks of [`CHECKPOINT_EVERY`] bytes, and an answer
//! read on from a checkpoint shares the remembered one's blocks before it: a list that
//! changes near its end is copied from the checkpoint on, not whole. Answers that keep
//! differing before the first checkpoint (a count or a time first in the result) are copied
//! ever less often: one in [`BACK_OFF_MAX`] once the streak is long ([`Misses`]).

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use super::capture::{Captured, Envelope, ToolEntry};
use super::exchange::ContentKind;
use super::json::{Document, Malformed, MessageSink};
use super::scan::Scan;
use super::sse::{EventData, MAX_EVENT_ID, SseFramer, SseSink};

/// Smaller answers are read every time: reading them costs about what keeping them would.
pub(super) const MIN_BYTES: usize = 16 * 1024;
/// Larger answers are not kept (a thread holds at most this much).
pub(super) const MAX_BYTES: usize = 8 << 20;
/// Answers whose classifier made more than this many calls on its sink are not kept (each
/// is held as a copy, up to a few hundred bytes).
const MAX_EVENTS: usize = 16 * 1024;
/// Bytes between two checkpoints of a recorded answer: a copy of the reader (about 1 KiB for
/// JSON, 2 for SSE) per 64 KiB. Tests take one every 4 KiB, so that their bodies of tens of
/// KiB are resumed from many offsets.
const CHECKPOINT_EVERY: usize = if cfg!(test) { 4 * 1024 } else { 64 * 1024 };

thread_local! {
    static LAST: RefCell<Option<Arc<Remembered>>> = const { RefCell::new(None) };
    /// A [`Recording`] of this thread's is open.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
    static MISSES: Misses = const { Misses(Cell::new(0)) };
}

/// Past this many answers in a row that differed from the remembered one before its first
/// checkpoint, one in this many is recorded.
const BACK_OFF_MAX: u32 = 64;

/// The thread's answers in a row that differed from the remembered one before its first
/// checkpoint: read whole and, had they been recorded, copied whole, for nothing when the next
/// one differs again (a count or a time first in the result, lists of two servers taking
/// turns). The 1st, 2nd, 4th, 8th … of a streak are recorded, then one in [`BACK_OFF_MAX`]; an
/// answer that matches the remembered one, whole or up to a checkpoint, ends the streak, so a
/// list that changes once is remembered at once.
struct Misses(Cell<u32>);

impl Misses {
    /// One more answer of the streak: whether to record it.
    fn record_next() -> bool {
        let n = MISSES
            .try_with(|misses| {
                let n = misses.0.get().saturating_add(1);
                misses.0.set(n);
                n
            })
            .unwrap_or(1);
        n.is_power_of_two() || n.is_multiple_of(BACK_OFF_MAX)
    }

    /// Whether to record an answer that matched the remembered one from its start, then
    /// stopped: one that matched up to a checkpoint ends the streak and is recorded; one that
    /// differed before the first is one more of it.
    fn record(matched_a_checkpoint: bool) -> bool {
        if matched_a_checkpoint {
            Misses::end_streak();
        }
        matched_a_checkpoint || Misses::record_next()
    }

    /// An answer matched: the streak ends.
    fn end_streak() {
        let _ = MISSES.try_with(|misses| misses.0.set(0));
    }
}

/// A body read whole, and what its classifier handed its sink.
pub(super) struct Remembered {
    body: Body,
    follow_tool_entries: bool,
    /// Each call on the sink, with the body's length when it was made: never more than the
    /// bytes its classifier needs to make it, so never early in a body that matches.
    events: Box<[(usize, Event)]>,
    /// In the order of their offsets.
    checkpoints: Box<[Checkpoint]>,
    end: End,
}

/// The reader as it stood at a body offset, and the calls it had made by then.
#[derive(Clone)]
struct Checkpoint {
    at: usize,
    events: usize,
    scan: Scan,
}

/// How the classifier stood at the body's end.
#[derive(Clone)]
pub(super) enum End {
    /// The JSON document's verdict.
    Json(Result<Document, Malformed>),
    /// The SSE framer as the body's last byte left it (its event count, its last event id).
    Sse(Box<SseFramer>),
}

/// One call the classifier made on its sink.
#[derive(Clone)]
enum Event {
    Message(Box<Envelope>),
    ToolEntry(ToolEntry),
    Sse(EventData, Option<Box<Captured<MAX_EVENT_ID>>>),
}

/// The thread's remembered answer, when it was read as `kind` with the same setting.
pub(super) fn last(kind: ContentKind, follow_tool_entries: bool) -> Option<Arc<Remembered>> {
    LAST.try_with(|last| last.borrow().clone())
        .ok()
        .flatten()
        .filter(|known| known.follow_tool_entries == follow_tool_entries)
        .filter(|known| match known.end {
            End::Json(_) => kind == ContentKind::Json,
            End::Sse(_) => kind == ContentKind::Sse,
        })
}

fn keep(known: Remembered) {
    let _ = LAST.try_with(|last| *last.borrow_mut() = Some(Arc::new(known)));
}

/// A body compared with a remembered one as it arrives.
pub(super) struct Matching {
    known: Arc<Remembered>,
    /// The body's bytes so far: equal to the remembered body's from `since` on.
    len: usize,
    /// The remembered calls handed on, or (before `since`) made by this body's own read.
    replayed: usize,
    /// Where the body matches from: its start, or the remembered checkpoint its read
    /// rejoined ([`Rejoining`]), after bytes of its own.
    since: usize,
    /// The body's own bytes before `since`, recorded (when they were).
    recording: Option<Box<Recording>>,
}

impl Matching {
    pub(super) fn new(known: Arc<Remembered>) -> Matching {
        Matching {
            known,
            len: 0,
            replayed: 0,
            since: 0,
            recording: None,
        }
    }

    /// Compares the next chunk: how many of its first bytes equal the remembered body's at
    /// this offset (all of them while the body matches).
    #[inline]
    pub(super) fn compare(&mut self, chunk: &[u8]) -> usize {
        let mut equal = 0;
        while equal < chunk.len() {
            let known = self.known.body.rest_of_block(self.len + equal);
            if known.is_empty() {
                break;
            }
            let n = known.len().min(chunk.len() - equal);
            let (new, old) = (&chunk[equal..equal + n], &known[..n]);
            if new != old {
                equal += common_prefix(new, old);
                break;
            }
            equal += n;
        }
        self.len += equal;
        equal
    }

    /// The body stopped matching, or ended before the remembered one did: `scan` stands
    /// where the remembered read stood at its last checkpoint within the bytes that matched
    /// (or at the start) and reads the rest of those bytes, the calls handed on already not
    /// handed again. What it reads is recorded, the remembered read from `since` up to the
    /// checkpoint taken over: by the recording of the body's own bytes before `since`, or
    /// (from the start) by a new one, unless the thread has a recording open or the answer
    /// is one of a streak not recorded ([`Misses`]). The body is read on from there, and may
    /// rejoin the remembered read.
    pub(super) fn resume<S: SseSink + ?Sized>(self, scan: &mut Scan, sink: &mut S) -> Rejoining {
        let Matching {
            known,
            len,
            replayed,
            since,
            recording,
        } = self;
        let checkpoint =
            known.checkpoints[..known.checkpoints.partition_point(|c| c.at <= len)].last();
        let (from, made) = match checkpoint {
            Some(checkpoint) => {
                scan.restore(&checkpoint.scan);
                (checkpoint.at, checkpoint.events)
            }
            None => (0, 0),
        };
        let mut skipping = Skipping::new(replayed.saturating_sub(made), sink);
        let mut recording = match since {
            0 => Misses::record(checkpoint.is_some())
                .then(|| Recording::start(known.follow_tool_entries).map(Box::new))
                .flatten(),
            _ => recording,
        };
        if let Some(recording) = &mut recording {
            recording.take_over(&known, from, made);
        }
        for rest in known.body.range(from, len) {
            match &mut recording {
                Some(recording) => recording.feed(scan, rest, &mut skipping),
                None => scan.feed(rest, &mut skipping),
            }
        }
        Rejoining::new(known, len, recording)
    }

    /// The whole remembered body has arrived, and nothing else.
    pub(super) fn is_whole(&self) -> bool {
        self.len == self.known.body.len()
    }

    /// Hands `sink` the calls the classifier had made by this far into the body.
    pub(super) fn replay<S: SseSink + ?Sized>(&mut self, sink: &mut S) {
        for (at, event) in &self.known.events[self.replayed..] {
            if *at > self.len {
                break;
            }
            self.replayed += 1;
            match event {
                Event::Message(envelope) => sink.message(envelope),
                Event::ToolEntry(entry) => sink.tool_entry(entry),
                Event::Sse(data, id) => sink.event(*data, id.as_deref()),
            }
        }
    }

    /// The body ended equal to the remembered one (from `since`): how the classifier stood
    /// at its end. A repeat ends a streak of answers that differed ([`Misses`]); a body with
    /// bytes of its own before `since`, recorded, is remembered, the rest of the remembered
    /// read taken over.
    pub(super) fn ended_whole(&mut self) -> &End {
        if self.since == 0 {
            Misses::end_streak();
        }
        if let Some(mut recording) = self.recording.take() {
            let known = &self.known;
            recording.take_over(known, known.body.len(), known.events.len());
            recording.finish(known.end.clone());
        }
        &self.known.end
    }
}

/// A body that stopped matching the remembered one, read by the classifier, watched for the
/// remembered read's checkpoints: where the reader stands as the remembered one stood at a
/// checkpoint, it reads what follows as that one did, so the body is compared again from
/// there. A value changed in place (a count or a time first in the result, of the same
/// width) costs the read up to the next checkpoint, not of the rest of the body.
pub(super) struct Rejoining {
    known: Arc<Remembered>,
    /// The body's bytes read so far.
    at: usize,
    /// The first remembered checkpoint past `at`.
    next: usize,
    recording: Option<Box<Recording>>,
}

impl Rejoining {
    fn new(known: Arc<Remembered>, at: usize, recording: Option<Box<Recording>>) -> Rejoining {
        let next = known.checkpoints.partition_point(|c| c.at <= at);
        Rejoining {
            known,
            at,
            next,
            recording,
        }
    }

    /// Reads the next chunk up to the first remembered checkpoint where `scan` stands as the
    /// remembered reader stood: how many of its bytes were read, when it got there.
    pub(super) fn feed<S: SseSink + ?Sized>(
        &mut self,
        scan: &mut Scan,
        chunk: &[u8],
        sink: &mut S,
    ) -> Option<usize> {
        let mut read = 0;
        while read < chunk.len() {
            let stop = self.known.checkpoints.get(self.next);
            let room = stop.map_or(usize::MAX, |c| c.at.saturating_sub(self.at));
            let piece = &chunk[read..read + room.min(chunk.len() - read)];
            match &mut self.recording {
                Some(recording) => recording.feed(scan, piece, sink),
                None => scan.feed(piece, sink),
            }
            read += piece.len();
            self.at += piece.len();
            if let Some(checkpoint) = stop
                && checkpoint.at == self.at
            {
                self.next += 1;
                if checkpoint.scan == *scan {
                    return Some(read);
                }
            }
        }
        None
    }

    /// The body from the checkpoint just reached, compared with the remembered one: the
    /// remembered calls made by then are those this body's own read made.
    pub(super) fn rejoin(self) -> Matching {
        let made = self
            .next
            .checked_sub(1)
            .and_then(|i| self.known.checkpoints.get(i));
        let made = made.map_or(0, |c| c.events);
        Matching {
            len: self.at,
            replayed: made,
            since: self.at,
            recording: self.recording,
            known: self.known,
        }
    }

    /// The recording of the body's bytes, when they are recorded.
    pub(super) fn into_recording(self) -> Option<Box<Recording>> {
        self.recording
    }
}

/// The length of the bytes `a` and `b` begin with alike: a block compare to the first block
/// that differs, then a byte loop in it.
#[cold]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let mut equal = 0;
    for (a, b) in a.chunks(BLOCK).zip(b.chunks(BLOCK)) {
        if a != b {
            return equal + a.iter().zip(b).take_while(|(a, b)| a == b).count();
        }
        equal += a.len();
    }
    equal
}

/// A list answer being read, kept with what its classifier hands the sink, to be remembered
/// once it ends whole.
pub(super) struct Recording {
    body: Body,
    events: Vec<(usize, Event)>,
    checkpoints: Vec<Checkpoint>,
    follow_tool_entries: bool,
    /// Past [`MAX_BYTES`] or [`MAX_EVENTS`]: not to be kept.
    over: bool,
}

impl Recording {
    /// A recording, unless this thread has one open.
    pub(super) fn start(follow_tool_entries: bool) -> Option<Recording> {
        let free = RECORDING
            .try_with(|open| !open.replace(true))
            .unwrap_or(false);
        free.then(|| Recording {
            body: Body::default(),
            events: Vec::new(),
            checkpoints: Vec::new(),
            follow_tool_entries,
            over: false,
        })
    }

    /// Goes on with `known`'s bytes from this recording's end (its start, or a checkpoint of
    /// the remembered read) up to `to`, and the calls the remembered read made on them, up to
    /// its `made`th: the bytes are this body's too (whole blocks shared), and the reader
    /// stands at `to` as the remembered one stood there.
    fn take_over(&mut self, known: &Remembered, to: usize, made: usize) {
        let from = self.body.len();
        let first = known.checkpoints.partition_point(|c| c.at <= from);
        let calls = match from {
            0 => Some(0),
            _ => first
                .checked_sub(1)
                .and_then(|i| known.checkpoints.get(i))
                .filter(|c| c.at == from)
                .map(|c| c.events),
        };
        let Some(calls) = calls.filter(|_| !self.over) else {
            self.give_up();
            return;
        };
        let last = known.checkpoints.partition_point(|c| c.at <= to);
        self.body.share(&known.body, to);
        let events = known.events.get(calls..made).unwrap_or_default();
        self.events.extend_from_slice(events);
        let checkpoints = known.checkpoints.get(first..last).unwrap_or_default();
        self.checkpoints.extend_from_slice(checkpoints);
    }

    /// The next bytes of the body, read by `scan` and recorded, with a checkpoint at every
    /// multiple of [`CHECKPOINT_EVERY`]. Past the bounds, read and not recorded.
    pub(super) fn feed<S: SseSink + ?Sized>(
        &mut self,
        scan: &mut Scan,
        mut chunk: &[u8],
        sink: &mut S,
    ) {
        while !self.over && !chunk.is_empty() {
            let room = CHECKPOINT_EVERY - self.body.len() % CHECKPOINT_EVERY;
            let (piece, rest) = chunk.split_at(room.min(chunk.len()));
            self.push(piece);
            scan.feed(piece, &mut self.sink(sink));
            if !self.over && self.body.len().is_multiple_of(CHECKPOINT_EVERY) {
                self.checkpoints.push(Checkpoint {
                    at: self.body.len(),
                    events: self.events.len(),
                    scan: scan.clone(),
                });
            }
            chunk = rest;
        }
        scan.feed(chunk, sink);
    }

    fn push(&mut self, chunk: &[u8]) {
        if self.body.len() + chunk.len() > MAX_BYTES {
            self.give_up();
            return;
        }
        self.body.push(chunk);
    }

    /// A sink that hands everything to `inner` and keeps a copy.
    pub(super) fn sink<'a, S: ?Sized>(&'a mut self, inner: &'a mut S) -> RecordingSink<'a, S> {
        RecordingSink {
            recording: self,
            inner,
        }
    }

    /// The body ended whole, its classifier standing at `end`: remembered, when within the
    /// bounds.
    pub(super) fn finish(mut self, end: End) {
        if self.over || self.body.len() < MIN_BYTES {
            return;
        }
        keep(Remembered {
            body: std::mem::take(&mut self.body).sealed(),
            follow_tool_entries: self.follow_tool_entries,
            events: std::mem::take(&mut self.events).into_boxed_slice(),
            checkpoints: std::mem::take(&mut self.checkpoints).into_boxed_slice(),
            end,
        });
    }

    fn record(&mut self, event: impl FnOnce() -> Event) {
        if self.over {
            return;
        }
        if self.events.len() == MAX_EVENTS {
            self.give_up();
            return;
        }
        self.events.push((self.body.len(), event()));
    }

    fn give_up(&mut self) {
        self.over = true;
        self.body = Body::default();
        self.events = Vec::new();
        self.checkpoints = Vec::new();
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = RECORDING.try_with(|open| open.set(false));
    }
}

/// [`Recording::sink`].
pub(super) struct RecordingSink<'a, S: ?Sized> {
    recording: &'a mut Recording,
    inner: &'a mut S,
}

impl<S: MessageSink + ?Sized> MessageSink for RecordingSink<'_, S> {
    fn message(&mut self, envelope: &Envelope) {
        self.recording
            .record(|| Event::Message(Box::new(envelope.clone())));
        self.inner.message(envelope);
    }

    fn tool_entry(&mut self, entry: &ToolEntry) {
        self.recording.record(|| Event::ToolEntry(entry.clone()));
        self.inner.tool_entry(entry);
    }
}

impl<S: SseSink + ?Sized> SseSink for RecordingSink<'_, S> {
    fn event(&mut self, data: EventData, last_event_id: Option<&Captured<MAX_EVENT_ID>>) {
        self.recording
            .record(|| Event::Sse(data, last_event_id.map(|id| Box::new(id.clone()))));
        self.inner.event(data, last_event_id);
    }
}

/// A body's bytes in blocks of [`CHECKPOINT_EVERY`] (the last one may be shorter), so that
/// a recording read on from a checkpoint shares the remembered body's blocks before it rather
/// than copying them. (`Arc<Vec<u8>>`, not `Arc<[u8]>`: a filled block moves in, uncopied.)
#[derive(Default)]
struct Body {
    blocks: Vec<Arc<Vec<u8>>>,
    /// The block being filled (empty once sealed).
    tail: Vec<u8>,
    len: usize,
}

impl Body {
    fn len(&self) -> usize {
        self.len
    }

    /// Goes on with `known`'s bytes from this body's length up to `to`: its blocks shared
    /// while this body ends on a block's end (the last one too, when `to` is its end), the
    /// rest copied.
    fn share(&mut self, known: &Body, to: usize) {
        let whole = match to == known.len {
            true => known.blocks.len(),
            false => (to / CHECKPOINT_EVERY).min(known.blocks.len()),
        };
        let first = self.len / CHECKPOINT_EVERY;
        if self.tail.is_empty()
            && self.len.is_multiple_of(CHECKPOINT_EVERY)
            && let Some(blocks) = known.blocks.get(first..whole)
        {
            self.blocks.extend_from_slice(blocks);
            self.len += blocks.iter().map(|block| block.len()).sum::<usize>();
        }
        for rest in known.range(self.len, to) {
            self.push(rest);
        }
    }

    fn push(&mut self, mut chunk: &[u8]) {
        self.len += chunk.len();
        while !chunk.is_empty() {
            if self.tail.capacity() == 0 {
                self.tail.reserve_exact(CHECKPOINT_EVERY);
            }
            let room = CHECKPOINT_EVERY - self.tail.len();
            let (now, rest) = chunk.split_at(room.min(chunk.len()));
            self.tail.extend_from_slice(now);
            if self.tail.len() == CHECKPOINT_EVERY {
                self.blocks.push(Arc::new(std::mem::take(&mut self.tail)));
            }
            chunk = rest;
        }
    }

    /// The last block closed: nothing more is pushed.
    fn sealed(mut self) -> Body {
        if !self.tail.is_empty() {
            self.blocks.push(Arc::new(std::mem::take(&mut self.tail)));
        }
        self
    }

    /// The block holding offset `i * CHECKPOINT_EVERY`.
    fn block(&self, i: usize) -> Option<&[u8]> {
        match self.blocks.get(i) {
            Some(block) => Some(block),
            None => (i == self.blocks.len()).then_some(&self.tail[..]),
        }
    }

    /// The bytes from `at` to the end of the block holding it (none past the body's end).
    #[inline]
    fn rest_of_block(&self, at: usize) -> &[u8] {
        self.block(at / CHECKPOINT_EVERY)
            .and_then(|block| block.get(at % CHECKPOINT_EVERY..))
            .unwrap_or_default()
    }

    /// The bytes from `from` to `to`, a block at a time.
    fn range(&self, from: usize, to: usize) -> impl Iterator<Item = &[u8]> {
        (from / CHECKPOINT_EVERY..to.div_ceil(CHECKPOINT_EVERY)).filter_map(move |i| {
            let start = i * CHECKPOINT_EVERY;
            let block = self.block(i)?;
            block.get(from.saturating_sub(start)..(to - start).min(block.len()))
        })
    }
}

/// A sink that drops the first calls (those a [`Matching`] handed on already) and hands on
/// the rest.
pub(super) struct Skipping<'a, S: ?Sized> {
    left: usize,
    inner: &'a mut S,
}

impl<'a, S: ?Sized> Skipping<'a, S> {
    pub(super) fn new(skip: usize, inner: &'a mut S) -> Self {
        Skipping { left: skip, inner }
    }

    /// True when this call was handed on before.
    fn skips(&mut self) -> bool {
        let skip = self.left > 0;
        self.left = self.left.saturating_sub(1);
        skip
    }
}

impl<S: MessageSink + ?Sized> MessageSink for Skipping<'_, S> {
    fn message(&mut self, envelope: &Envelope) {
        if !self.skips() {
            self.inner.message(envelope);
        }
    }

    fn tool_entry(&mut self, entry: &ToolEntry) {
        if !self.skips() {
            self.inner.tool_entry(entry);
        }
    }
}

impl<S: SseSink + ?Sized> SseSink for Skipping<'_, S> {
    fn event(&mut self, data: EventData, last_event_id: Option<&Captured<MAX_EVENT_ID>>) {
        if !self.skips() {
            self.inner.event(data, last_event_id);
        }
    }
}

#[cfg(test)]
mod tests;
