//! strata's own HTTP/1.1 agent path against hyper's (`proxy/differential.rs`): for any
//! request bytes, what strata's own connection sends the upstream and what it sends when
//! hyper read the request are the same message — one request, framed by the body that
//! follows it (no length that leaves a second request behind), the same end-to-end fields.
//! A request only strata's own path forwards is a failure too: hyper is the reference.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::proxy::differential::{forward_both_ways, same_message};

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, wire)) = data.split_first() else {
        return;
    };
    let forwarded = forward_both_ways(wire, knobs & 1 != 0);
    if let Err(why) = same_message(&forwarded) {
        panic!("{why}\nrequest: {:?}", String::from_utf8_lossy(wire));
    }
});
