//! The request inspector, fuzzed at the edge where an agent's body comes in: any bytes,
//! any cuts, any inspect cap — never a panic, never a loop, and what it finds is consistent
//! with a whole-buffer read when the cap does not cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::classify::request::RequestInspector;

fuzz_target!(|data: &[u8]| {
    let Some((&head, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(head % 17) + 1;
    let cap = if head & 0x80 != 0 {
        body.len() / 2 + 1
    } else {
        usize::MAX
    };
    let mut split = RequestInspector::new();
    for chunk in body.chunks(step) {
        split.feed(chunk, cap);
    }
    let split = split.finish();
    if cap == usize::MAX {
        let mut whole = RequestInspector::new();
        whole.feed(body, cap);
        let whole = whole.finish();
        assert_eq!(split.requests.len(), whole.requests.len());
        assert_eq!(split.batch, whole.batch);
        assert_eq!(split.valid, whole.valid);
        for (a, b) in split.requests.iter().zip(&whole.requests) {
            assert!(a.id.same_bytes(&b.id));
            assert!(a.method.same_bytes(&b.method));
            assert!(a.tool.same_bytes(&b.tool));
        }
    }
});
