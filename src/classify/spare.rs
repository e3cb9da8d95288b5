//! One spare box per thread for each scanner an exchange makes: the request's and the
//! response's JSON scanners (944 bytes; the request's with ~470 bytes of request-only fields
//! in a box of their own) and the SSE framer (~1.9 KiB). Every exchange with a 2xx body boxed a fresh one
//! and freed it at its end; a malloc and a free of that size were ~600 of the ~6,700
//! instructions a 1 KiB tool result costs, and the framer is past glibc's per-thread cache.
//! A box handed back when its exchange ends is reset and reused by the next exchange on the
//! same thread (strata's workers each run one thread).

use std::cell::Cell;

use super::json::JsonScanner;
use super::sse::SseFramer;

thread_local! {
    static JSON: Cell<Option<Box<JsonScanner>>> = const { Cell::new(None) };
    static REQUEST: Cell<Option<Box<JsonScanner>>> = const { Cell::new(None) };
    static SSE: Cell<Option<Box<SseFramer>>> = const { Cell::new(None) };
}

/// A response scanner, fresh: the thread's spare box reset, or a new one.
pub(super) fn json_scanner() -> Box<JsonScanner> {
    match JSON.try_with(Cell::take).ok().flatten() {
        Some(mut scanner) => {
            // Reset in place, as for each SSE event: copying a fresh 944-byte scanner over
            // it was ~5 % of a 1 KiB tool result's time.
            scanner.reset();
            scanner
        }
        None => JsonScanner::boxed_for_responses(),
    }
}

/// A request scanner, fresh: the thread's spare box reset, or a new one.
pub(super) fn request_scanner() -> Box<JsonScanner> {
    match REQUEST.try_with(Cell::take).ok().flatten() {
        Some(mut scanner) => {
            // The envelope, request-only fields included, is reset as each message begins.
            scanner.reset();
            scanner
        }
        None => JsonScanner::boxed_for_requests(),
    }
}

/// Keeps `scanner` as the thread's spare request scanner.
pub(super) fn keep_request(scanner: Box<JsonScanner>) {
    let _ = REQUEST.try_with(|spare| spare.set(Some(scanner)));
}

/// An SSE framer, fresh: the thread's spare box reset, or a new one.
pub(super) fn sse_framer() -> Box<SseFramer> {
    match SSE.try_with(Cell::take).ok().flatten() {
        Some(mut framer) => {
            *framer = SseFramer::new();
            framer
        }
        None => SseFramer::boxed(),
    }
}

/// Keeps `scanner` as the thread's spare (during thread exit, it is freed instead).
pub(super) fn keep_json(scanner: Box<JsonScanner>) {
    // `try_with` hands the box back in `Err` only by dropping it: nothing else to do.
    let _ = JSON.try_with(|spare| spare.set(Some(scanner)));
}

/// Keeps `framer` as the thread's spare.
pub(super) fn keep_sse(framer: Box<SseFramer>) {
    let _ = SSE.try_with(|spare| spare.set(Some(framer)));
}
