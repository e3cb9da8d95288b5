//! strata's own HTTP/1.1 upstream response reader (`proxy/h1_conns`: the head parser in
//! `wire.rs`, the Content-Length / chunked / close-delimited body decoder in `framing.rs`):
//! any bytes from an upstream, cut anywhere, end in an answer (status, body, trailer count)
//! or an error — never a panic, never a loop — and the cuts do not change which: the same
//! answer, or the same error, as one whole read.
#![no_main]

use http::Method;
use libfuzzer_sys::fuzz_target;
use strata::proxy::h1_conns::read_response;

fuzz_target!(|data: &[u8]| {
    let Some((&head, wire)) = data.split_first() else {
        return;
    };
    // The first byte: the read size (1–31 bytes) and the request's method (a response to
    // HEAD has no body whatever its head says).
    let step = usize::from(head % 31) + 1;
    let method = if head & 0x80 != 0 {
        Method::HEAD
    } else {
        Method::POST
    };
    let split = read_response(wire, step, &method);
    let whole = read_response(wire, wire.len().max(1), &method);
    assert_eq!(split.is_ok(), whole.is_ok(), "split {split:?}, whole {whole:?}");
    assert_eq!(split, whole, "read {step} bytes at a time, and whole");
    if let Ok(response) = &whole {
        assert!((200..1000).contains(&response.status), "{}", response.status);
        if method == Method::HEAD {
            assert!(response.body.is_empty());
        }
        assert!(response.body.len() <= wire.len());
    }
});
