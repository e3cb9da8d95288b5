//! One spare box per thread for each scanner an exchange makes: the request's and the
//! response's JSON scanners (944 bytes; the request's with ~470 bytes of request-only fields
//! in a box of their own) and the SSE framer (~1.9 KiB). A fresh box for every exchange with a
//! 2xx body, freed at its end, would be a malloc and a free of that size per exchange, a large
//! share of a small tool result's cost, and the framer is past glibc's per-thread cache.
//! A box handed back when its exchange ends is reset and reused by the next exchange on the
//! same thread (strata's workers each run one thread).

use std::cell::Cell;
use std::thread::LocalKey;

use super::json::JsonScanner;
use super::sse::SseFramer;

thread_local! {
    static JSON: Cell<Option<Box<JsonScanner>>> = const { Cell::new(None) };
    static REQUEST: Cell<Option<Box<JsonScanner>>> = const { Cell::new(None) };
    static SSE: Cell<Option<Box<SseFramer>>> = const { Cell::new(None) };
}

/// A response scanner, fresh: the thread's spare box reset, or a new one.
pub(super) fn json_scanner() -> Box<JsonScanner> {
    // Reset in place, as for each SSE event: copying a fresh 944-byte scanner over it was ~5 %
    // of a 1 KiB tool result's time.
    take(&JSON, JsonScanner::reset, JsonScanner::boxed_for_responses)
}

/// A request scanner, fresh: the thread's spare box reset, or a new one. (The envelope,
/// request-only fields included, is reset as each message begins.)
pub(super) fn request_scanner() -> Box<JsonScanner> {
    take(
        &REQUEST,
        JsonScanner::reset,
        JsonScanner::boxed_for_requests,
    )
}

/// An SSE framer, fresh: the thread's spare box reset, or a new one.
pub(super) fn sse_framer() -> Box<SseFramer> {
    take(&SSE, |framer| *framer = SseFramer::new(), SseFramer::boxed)
}

/// Keeps `scanner` as the thread's spare response scanner.
pub(super) fn keep_json(scanner: Box<JsonScanner>) {
    keep(&JSON, scanner);
}

/// Keeps `scanner` as the thread's spare request scanner.
pub(super) fn keep_request(scanner: Box<JsonScanner>) {
    keep(&REQUEST, scanner);
}

/// Keeps `framer` as the thread's spare.
pub(super) fn keep_sse(framer: Box<SseFramer>) {
    keep(&SSE, framer);
}

/// One thread's spare box of a kind.
type Spare<T> = LocalKey<Cell<Option<Box<T>>>>;

/// The thread's spare in `slot`, made fresh by `reset`, or `new` when there is none.
fn take<T>(
    slot: &'static Spare<T>,
    reset: impl FnOnce(&mut T),
    new: impl FnOnce() -> Box<T>,
) -> Box<T> {
    match slot.try_with(Cell::take).ok().flatten() {
        Some(mut spare) => {
            reset(&mut spare);
            spare
        }
        None => new(),
    }
}

/// Keeps `spare` in `slot` (during thread exit, it is freed instead: `try_with` hands the box
/// back in `Err` only by dropping it).
fn keep<T>(slot: &'static Spare<T>, spare: Box<T>) {
    let _ = slot.try_with(|cell| cell.set(Some(spare)));
}
