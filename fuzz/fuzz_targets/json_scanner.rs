//! The JSON scanner, differential against serde_json (through the oracle in tests/oracle):
//! the valid/invalid verdict and the batch shape must agree at every cut, and the whole
//! exchange for a JSON body must give the oracle's outcomes. Never panics, never loops.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::classify::exchange::BodyEnd;
use strata::classify::json::JsonScanner;

#[path = "../../tests/oracle/mod.rs"]
mod oracle;
mod common;

fuzz_target!(|data: &[u8]| {
    let (cuts, input, pick) = common::cuts_and_payload(data);
    let want = oracle::parse(input);

    let mut verdicts = Vec::new();
    for cuts in [&cuts[..], &[][..]] {
        let mut scanner = JsonScanner::new();
        let mut seen = 0usize;
        let mut sink = |_: &strata::classify::Envelope| seen += 1;
        for chunk in oracle::pieces(input, cuts) {
            scanner.feed(chunk, &mut sink);
        }
        let verdict = scanner.finish(&mut sink);
        assert_eq!(verdict.is_ok(), want.is_some(), "verdict {verdict:?}");
        if let (Ok(doc), Some(v)) = (verdict, &want) {
            let messages = v.as_array().map_or(1, Vec::len);
            assert_eq!(doc.batch, v.is_array());
            assert_eq!(doc.messages as usize, messages);
            assert_eq!(seen, messages);
        }
        verdicts.push(verdict);
    }
    assert_eq!(verdicts[0], verdicts[1], "the verdict depends on the cuts");

    let request = common::REQUESTS[usize::from(pick) % common::REQUESTS.len()];
    let end = [BodyEnd::Complete, BodyEnd::Complete, BodyEnd::UpstreamError, BodyEnd::AgentGone]
        [usize::from(pick >> 4) % 4];
    let ct = Some(&b"application/json"[..]);
    let want = oracle::classify(request, 200, ct, input, end);
    let got = oracle::streaming(request, &[], 200, ct, input, &cuts, end);
    assert_eq!(got, want);
});
