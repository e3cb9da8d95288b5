//! The classifier allocates nothing in proportion to a body: a counting global allocator
//! measures what scanning a 64 MiB body in 16 KiB chunks allocates, after setup.
//!
//! The count is per thread (a const thread-local flag), so tests running in parallel and the
//! harness's own threads do not disturb it. Every allocation counts its full size (a realloc
//! counts the new size), so the figures are upper bounds.
#![allow(unsafe_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use strata::classify::Outcome;
use strata::classify::exchange::{BodyEnd, ContentKind, Exchange, Resolution};
use strata::classify::json::JsonScanner;
use strata::classify::request::RequestInspector;

struct Counting;

#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    bytes: u64,
    count: u64,
}

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static TALLY: Cell<Tally> = const { Cell::new(Tally { bytes: 0, count: 0 }) };
}

fn note(size: usize) {
    // `try_with`: never panic inside the allocator, even while a thread is torn down.
    if ON.try_with(Cell::get).unwrap_or(false) {
        let _ = TALLY.try_with(|t| {
            let mut v = t.get();
            v.bytes += size as u64;
            v.count += 1;
            t.set(v);
        });
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`, counting what this thread allocates meanwhile.
fn counted<R>(f: impl FnOnce() -> R) -> (R, Tally) {
    TALLY.with(|t| t.set(Tally::default()));
    ON.with(|on| on.set(true));
    let r = f();
    ON.with(|on| on.set(false));
    (r, TALLY.with(Cell::get))
}

const MIB: usize = 1 << 20;
const BODY: usize = 64 * MIB;
const CHUNK: usize = 16 * 1024;
const LIMIT: u64 = 64 * 1024;

const CALL: &[u8] =
    br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}"#;

/// Text of `len` bytes with escapes, multi-byte UTF-8 and a surrogate pair now and then.
fn text(len: usize) -> String {
    let unit = r#"lorem ipsum dolor sit amet, \"quoted\" \\ back\/slash \n é 中文 \ud83d\ude00 "#;
    let mut s = String::with_capacity(len + unit.len());
    while s.len() < len {
        s.push_str(unit);
    }
    s
}

/// Structure: objects in arrays, numbers of every form, short strings, nesting.
fn structure(len: usize) -> String {
    let unit = r#"{"id":12345,"score":-0.5e-3,"ok":true,"none":null,"tags":["a","b\u00e9"],"nested":{"deep":[[1,2],[3,{"x":"y"}]]}}"#;
    let mut s = String::with_capacity(len + unit.len() + 2);
    s.push('[');
    while s.len() < len {
        if s.len() > 1 {
            s.push_str(",\n");
        }
        s.push_str(unit);
    }
    s.push(']');
    s
}

/// A 64 MiB tools/call result: large text content plus large structured content.
fn big_result(id: &str, size: usize) -> Vec<u8> {
    let text = text(size / 2);
    let structure = structure(size / 2);
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{text}"}},{{"type":"text","text":"short"}}],"structuredContent":{{"rows":{structure}}},"isError":false}}}}"#
    )
    .into_bytes()
}

/// Setup: the request read, the exchange made (the response head is part of the count).
fn exchange_for(request: &[u8]) -> Exchange {
    let mut inspector = RequestInspector::new();
    inspector.feed(request, usize::MAX);
    let found = inspector.finish();
    Exchange::new(found.requests, found.batch)
}

fn outcome(resolutions: &[(usize, strata::classify::envelope::Request, Resolution)]) -> Outcome {
    match resolutions {
        [(_, _, Resolution::Final(v))] => v.outcome,
        other => panic!("expected one final verdict, got {}", other.len()),
    }
}

#[test]
fn json_body_through_exchange() {
    let body = big_result("1", BODY);
    assert!(body.len() >= BODY);
    let mut ex = exchange_for(CALL);
    let (resolutions, tally) = counted(|| {
        ex.response_head(200, ContentKind::Json);
        for chunk in body.chunks(CHUNK) {
            ex.data(chunk);
        }
        ex.end(BodyEnd::Complete).into_vec()
    });
    eprintln!(
        "exchange, JSON {} MiB in 16 KiB chunks: {} bytes in {} allocations",
        body.len() / MIB,
        tally.bytes,
        tally.count
    );
    assert_eq!(outcome(&resolutions), Outcome::ToolSuccess);
    assert!(tally.bytes < LIMIT, "allocated {tally:?}");
}

#[test]
fn json_body_through_the_bare_scanner() {
    let body = big_result("\"x\"", BODY);
    let mut scanner = JsonScanner::new();
    let mut messages = 0;
    let (verdict, tally) = counted(|| {
        let mut sink = |_: &strata::classify::Envelope| messages += 1;
        for chunk in body.chunks(CHUNK) {
            scanner.feed(chunk, &mut sink);
        }
        scanner.finish(&mut sink)
    });
    eprintln!(
        "bare scanner, JSON {} MiB in 16 KiB chunks: {} bytes in {} allocations",
        body.len() / MIB,
        tally.bytes,
        tally.count
    );
    assert!(verdict.is_ok(), "{verdict:?}");
    assert_eq!(messages, 1);
    assert!(tally.bytes < LIMIT, "allocated {tally:?}");
}

/// A 64 MiB SSE stream: progress notifications, then the result as one event whose data is
/// spread over many `data:` lines.
fn big_stream(size: usize) -> Vec<u8> {
    let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"working \u2026"}}"#;
    let mut out = Vec::with_capacity(size + MIB);
    let mut k = 0u64;
    while out.len() < size / 2 {
        out.extend_from_slice(format!("id: {k}\r\n").as_bytes());
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(progress);
        out.extend_from_slice(b"\r\n\r\n");
        if k.is_multiple_of(64) {
            out.extend_from_slice(b": keep-alive\r\n\r\n");
        }
        k += 1;
    }
    let result = big_result("1", size / 2);
    out.extend_from_slice(b"event: message\ndata: ");
    for &b in &result {
        out.push(b);
        if b == b'\n' {
            out.extend_from_slice(b"data: ");
        }
    }
    out.extend_from_slice(b"\n\n");
    out
}

#[test]
fn sse_stream_through_exchange() {
    let body = big_stream(BODY);
    assert!(body.len() >= BODY);
    let mut ex = exchange_for(CALL);
    let (resolutions, tally) = counted(|| {
        ex.response_head(200, ContentKind::Sse);
        for chunk in body.chunks(CHUNK) {
            ex.data(chunk);
        }
        let events = ex.sse_events();
        (ex.end(BodyEnd::Complete).into_vec(), events)
    });
    let (resolutions, events) = resolutions;
    eprintln!(
        "exchange, SSE {} MiB ({events} events) in 16 KiB chunks: {} bytes in {} allocations",
        body.len() / MIB,
        tally.bytes,
        tally.count
    );
    assert!(events > 100_000, "{events} events");
    assert_eq!(outcome(&resolutions), Outcome::ToolSuccess);
    assert!(tally.bytes < LIMIT, "allocated {tally:?}");
}

/// The counter itself counts: a 64 KiB vector is seen.
#[test]
fn the_counter_counts() {
    let (v, tally) = counted(|| vec![0u8; 64 * 1024]);
    assert_eq!(v.len(), 64 * 1024);
    assert!(tally.bytes >= 64 * 1024, "{tally:?}");
    assert!(tally.count >= 1);
}
