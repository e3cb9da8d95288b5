//! A remembered answer decides only a body equal to it, and deciding by it gives what a
//! scan gives.
use super::*;
use crate::classify::Outcome;
use crate::classify::exchange::{BodyEnd, ContentKind, Exchange, Resolution};
use crate::classify::request::RequestInspector;

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
const CALL: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}"#;

/// A tools/list answer of `tools` entries with input schemas and hints.
fn list_answer(tools: usize) -> String {
    let entries: Vec<String> = (0..tools)
        .map(|n| {
            format!(
                r#"{{"name":"tool_{n}","description":"Reads part of file {n}.","inputSchema":{{"type":"object","properties":{{"path":{{"type":"string"}},"limit":{{"type":"integer","minimum":1,"maximum":1000}}}},"required":["path"]}},"annotations":{{"readOnlyHint":{},"idempotentHint":true}}}}"#,
                n % 2 == 0
            )
        })
        .collect();
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{}],"nextCursor":null}}}}"#,
        entries.join(",")
    )
}

fn forget() {
    LAST.with(|last| *last.borrow_mut() = None);
    Misses::end_streak();
}

/// The first block of the remembered answer's bytes.
fn remembered_first_block() -> Option<Arc<Vec<u8>>> {
    LAST.with(|last| {
        let last = last.borrow();
        last.as_ref()
            .and_then(|known| known.body.blocks.first().cloned())
    })
}

/// `bytes` in blocks, as a recording keeps them.
fn body_of(bytes: &[u8]) -> Body {
    let mut body = Body::default();
    body.push(bytes);
    body.sealed()
}

fn remembered_body() -> Option<Vec<u8>> {
    LAST.with(|last| {
        let last = last.borrow();
        let body = &last.as_ref()?.body;
        Some(body.range(0, body.len()).flatten().copied().collect())
    })
}

/// `answer` as an SSE stream: a progress notification, then the answer.
fn sse(answer: &str) -> String {
    let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
    format!("event: message\ndata: {progress}\n\nevent: message\ndata: {answer}\n\n")
}

/// Everything an exchange says of `body` (`kind`, in chunks of `step`) as the answer to
/// `request`: its resolutions, its SSE events and, with `learn`, the tool hints.
fn classify_as(
    kind: ContentKind,
    request: &str,
    body: &[u8],
    step: usize,
    end: BodyEnd,
    learn: bool,
) -> String {
    let mut inspector = RequestInspector::new();
    inspector.feed(request.as_bytes(), usize::MAX);
    let found = inspector.finish();
    let mut ex = Exchange::new(found.requests, found.batch);
    if learn {
        ex.learn_tools();
    }
    ex.response_head(200, kind);
    for chunk in body.chunks(step) {
        ex.data(chunk);
    }
    let resolutions = ex.end(end).into_vec();
    let hints: Vec<String> = ex
        .take_tool_hints()
        .iter()
        .map(|h| format!("{}:{}:{}", h.name, h.read_only, h.idempotent))
        .collect();
    format!("{resolutions:?} {} {hints:?}", ex.sse_events())
}

/// Reads `answer` whole as the answer to a tools/list: the thread remembers it.
fn remember(kind: ContentKind, answer: &str, learn: bool) {
    classify_as(
        kind,
        LIST,
        answer.as_bytes(),
        4096,
        BodyEnd::Complete,
        learn,
    );
}

fn classify(request: &str, body: &[u8], step: usize, end: BodyEnd, learn: bool) -> String {
    classify_as(ContentKind::Json, request, body, step, end, learn)
}

fn outcome(request: &str, body: &[u8]) -> Outcome {
    let mut inspector = RequestInspector::new();
    inspector.feed(request.as_bytes(), usize::MAX);
    let found = inspector.finish();
    let mut ex = Exchange::new(found.requests, found.batch);
    ex.response_head(200, ContentKind::Json);
    ex.data(body);
    match ex.end(BodyEnd::Complete).into_vec().as_slice() {
        [(_, _, Resolution::Final(verdict))] => verdict.outcome,
        other => panic!("one final resolution expected, got {other:?}"),
    }
}

/// Remembers `body` as a malformed document: a verdict no scan of it gives, so an answer
/// judged malformed was judged by the memory.
fn remember_as_malformed(body: &[u8], follow_tool_entries: bool) {
    keep(Remembered {
        body: body_of(body),
        follow_tool_entries,
        events: Box::new([]),
        checkpoints: Box::new([]),
        end: End::Json(Err(Malformed::Syntax)),
    });
}

#[test]
fn only_an_answer_equal_to_the_remembered_one_is_judged_by_it() {
    let answer = list_answer(200);
    let body = answer.as_bytes();
    assert!(body.len() > MIN_BYTES);
    remember_as_malformed(body, false);
    assert_eq!(outcome(LIST, body), Outcome::MalformedJson, "equal");
    remember_as_malformed(body, false);
    let near_the_end = answer.replacen("tool_199", "tool_abc", 1);
    assert_eq!(
        outcome(LIST, near_the_end.as_bytes()),
        Outcome::Success,
        "a byte near the end changed"
    );
    let longer = format!("{answer}\n");
    remember_as_malformed(body, false);
    assert_eq!(outcome(LIST, longer.as_bytes()), Outcome::Success, "longer");
    remember_as_malformed(longer.as_bytes(), false);
    assert_eq!(outcome(LIST, body), Outcome::Success, "a prefix of it");
    remember_as_malformed(body, false);
    let other_id = answer.replacen(r#""id":1"#, r#""id":2"#, 1);
    assert_eq!(
        outcome(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            other_id.as_bytes()
        ),
        Outcome::Success,
        "another id"
    );
    remember_as_malformed(body, false);
    assert_ne!(
        outcome(CALL, body),
        Outcome::MalformedJson,
        "not a list call"
    );
    remember_as_malformed(body, false);
    assert!(
        classify(LIST, body, body.len(), BodyEnd::Complete, true).contains("Success"),
        "remembered without following tool entries, asked to follow them"
    );
    remember_as_malformed(body, false);
    let mut inspector = RequestInspector::new();
    inspector.feed(LIST.as_bytes(), usize::MAX);
    let mut ex = Exchange::new(inspector.finish().requests, false);
    ex.response_head(200, ContentKind::Json);
    ex.learn_tools();
    ex.data(body);
    assert!(
        matches!(ex.end(BodyEnd::Complete).into_vec().as_slice(),
            [(_, _, Resolution::Final(v))] if v.outcome == Outcome::Success),
        "asked to follow tool entries after the head"
    );
    forget();
}

/// The answers compared with a remembered one: itself, and itself cut, lengthened, with a
/// byte changed at six places, another id, an error, a tool's name or description changed in
/// place (once, or again later), a byte added early.
fn candidates(answer: &str) -> Vec<Vec<u8>> {
    let body = answer.as_bytes();
    let len = body.len();
    let mut bodies: Vec<Vec<u8>> = vec![
        body.to_vec(),
        format!("{answer} ").into_bytes(),
        format!("{answer}x").into_bytes(),
        body[..len / 2].to_vec(),
        body[..len - 1].to_vec(),
        answer.replacen(r#""id":1"#, r#""id":7"#, 1).into_bytes(),
        answer
            .replacen(
                r#""result":"#,
                r#""error":{"code":-1,"message":"m"},"x":"#,
                1,
            )
            .into_bytes(),
        answer.replacen("file 20.", "file X0.", 1).into_bytes(),
        answer.replacen("tool_20", "tool_X0", 1).into_bytes(),
        answer
            .replacen("file 20.", "file X0.", 1)
            .replacen("tool_140", "tool_X40", 1)
            .into_bytes(),
        answer.replacen("file 20.", "file 200.", 1).into_bytes(),
    ];
    for at in [0, 25, len / 3, len / 2, len - 2, len - 1] {
        for to in [b'x', b'"', b'}', b'\\', b'\n', 0x80] {
            let mut changed = body.to_vec();
            changed[at] = to;
            bodies.push(changed);
        }
    }
    bodies
}

#[test]
fn remembered_or_not_every_body_gets_what_a_scan_gives() {
    let answer = list_answer(150);
    let stream = sse(&answer);
    let kinds = [
        (ContentKind::Json, answer.as_str()),
        (ContentKind::Sse, stream.as_str()),
    ];
    for (kind, primer) in kinds {
        for (k, candidate) in candidates(primer).iter().enumerate() {
            for end in [
                BodyEnd::Complete,
                BodyEnd::UpstreamError,
                BodyEnd::AgentGone,
            ] {
                for learn in [false, true] {
                    for step in [997, 4096, primer.len() + 1] {
                        forget();
                        let scanned = classify_as(kind, LIST, candidate, step, end, learn);
                        remember(kind, primer, learn);
                        assert_eq!(remembered_body().as_deref(), Some(primer.as_bytes()));
                        let judged = classify_as(kind, LIST, candidate, step, end, learn);
                        let case =
                            format!("{kind:?} body {k}, {end:?}, learn {learn}, step {step}");
                        assert_eq!(judged, scanned, "{case}");
                        if end != BodyEnd::Complete {
                            continue;
                        }
                        // Remembered in place of the primer (what the primer's read made
                        // up to the checkpoint taken over), it decides the same again.
                        assert_eq!(remembered_body().as_deref(), Some(&candidate[..]), "{case}");
                        let again = classify_as(kind, LIST, candidate, step, end, learn);
                        assert_eq!(again, scanned, "{case}, again");
                    }
                }
            }
        }
    }
    // Remembered as one kind, the same bytes as the other are read.
    for (kind, primer) in kinds {
        let other = match kind {
            ContentKind::Json => ContentKind::Sse,
            _ => ContentKind::Json,
        };
        let read = || {
            classify_as(
                other,
                LIST,
                primer.as_bytes(),
                4096,
                BodyEnd::Complete,
                false,
            )
        };
        forget();
        let scanned = read();
        remember(kind, primer, false);
        assert_eq!(read(), scanned, "remembered as {kind:?}");
    }
    forget();
}

/// On SSE the answer's verdict is handed on as the stream reaches it, not at the stream's
/// end (a server may hold the stream open after it).
#[test]
fn a_remembered_stream_settles_its_call_as_it_arrives() {
    forget();
    let stream = sse(&list_answer(150));
    classify_as(
        ContentKind::Sse,
        LIST,
        stream.as_bytes(),
        4096,
        BodyEnd::Complete,
        false,
    );
    assert_eq!(remembered_body().as_deref(), Some(stream.as_bytes()));
    let mut inspector = RequestInspector::new();
    inspector.feed(LIST.as_bytes(), usize::MAX);
    let mut ex = Exchange::new(inspector.finish().requests, false);
    ex.response_head(200, ContentKind::Sse);
    let (most, last) = stream.as_bytes().split_at(stream.len() - 100);
    ex.data(most);
    assert!(!ex.all_settled(), "before the answer's end");
    ex.data(last);
    assert!(
        ex.all_settled(),
        "at the answer's end, the stream still open"
    );
    forget();
}

#[test]
fn a_changed_list_replaces_the_remembered_one() {
    forget();
    let first = list_answer(150);
    let second = list_answer(160);
    classify(LIST, first.as_bytes(), 4096, BodyEnd::Complete, false);
    assert_eq!(remembered_body().as_deref(), Some(first.as_bytes()));
    let first_block = remembered_first_block().expect("remembered");
    classify(LIST, second.as_bytes(), 4096, BodyEnd::Complete, false);
    assert_eq!(remembered_body().as_deref(), Some(second.as_bytes()));
    // The two differ near the first one's end: the second shares its first blocks.
    let shared = remembered_first_block().expect("remembered");
    assert!(Arc::ptr_eq(&first_block, &shared), "blocks shared");
    // Cut short: not remembered, the whole one stays.
    classify(
        LIST,
        &first.as_bytes()[..20_000],
        4096,
        BodyEnd::UpstreamError,
        false,
    );
    assert_eq!(remembered_body().as_deref(), Some(second.as_bytes()));
    forget();
}

#[test]
fn small_batched_and_other_answers_are_not_remembered() {
    forget();
    let small = list_answer(3);
    assert!(small.len() < MIN_BYTES);
    classify(LIST, small.as_bytes(), 4096, BodyEnd::Complete, false);
    assert_eq!(remembered_body(), None, "small");
    let big = list_answer(150);
    classify(CALL, big.as_bytes(), 4096, BodyEnd::Complete, false);
    assert_eq!(remembered_body(), None, "a tools/call answer");
    let batch = format!("[{LIST}]");
    classify(
        &batch,
        format!("[{big}]").as_bytes(),
        4096,
        BodyEnd::Complete,
        false,
    );
    assert_eq!(remembered_body(), None, "a batch");
    let mut recording = Recording::start(false).expect("no recording open");
    for _ in 0..=MAX_BYTES / (1 << 20) {
        recording.push(&[b' '; 1 << 20]);
    }
    let document = Ok(Document {
        batch: false,
        messages: 1,
    });
    recording.finish(End::Json(document));
    assert_eq!(remembered_body(), None, "past the bound");
}

/// A thread copies one answer at a time: an answer arriving while another is recorded is
/// read as if nothing were remembered, and the thread records again once that one is done.
#[test]
fn one_answer_at_a_time_is_recorded() {
    forget();
    let first = list_answer(150);
    let second = list_answer(160);
    let exchange = || {
        let mut inspector = RequestInspector::new();
        inspector.feed(LIST.as_bytes(), usize::MAX);
        let mut ex = Exchange::new(inspector.finish().requests, false);
        ex.response_head(200, ContentKind::Json);
        ex
    };
    let (mut a, mut b) = (exchange(), exchange());
    a.data(first.as_bytes());
    b.data(second.as_bytes());
    for ex in [&mut a, &mut b] {
        let ended = ex.end(BodyEnd::Complete).into_vec();
        assert!(matches!(ended.as_slice(),
            [(_, _, Resolution::Final(v))] if v.outcome == Outcome::Success));
    }
    assert_eq!(
        remembered_body().as_deref(),
        Some(first.as_bytes()),
        "the first"
    );
    drop((a, b));
    // Left mid-body: its recording is dropped, and the next answer is recorded.
    let mut left = exchange();
    left.data(&second.as_bytes()[..1000]);
    drop(left);
    classify(LIST, second.as_bytes(), 4096, BodyEnd::Complete, false);
    assert_eq!(
        remembered_body().as_deref(),
        Some(second.as_bytes()),
        "the next"
    );
    forget();
}

/// A body that stops matching is read on from the last checkpoint within what matched, not
/// from its first byte: with a byte before the first checkpoint of the remembered body made
/// unreadable (what the remembered read made of the bytes kept), a body equal to it up to
/// one more byte at the end is judged by what follows the last checkpoint.
#[test]
fn a_body_that_stops_matching_is_read_on_from_the_last_checkpoint() {
    forget();
    let answer = list_answer(150);
    let mut unreadable = answer.clone().into_bytes();
    unreadable[100] = 0x01;
    let longer = [&unreadable[..], b" "].concat();
    assert_eq!(outcome(LIST, &longer), Outcome::MalformedJson, "read whole");
    remember(ContentKind::Json, &answer, false);
    LAST.with(|last| {
        let known = last.borrow_mut().take().expect("remembered");
        let mut known = Arc::try_unwrap(known).ok().expect("held once");
        assert!(known.checkpoints.len() > 2 && known.checkpoints[0].at > 100);
        known.body = body_of(&unreadable);
        *last.borrow_mut() = Some(Arc::new(known));
    });
    assert_eq!(outcome(LIST, &longer), Outcome::Success, "read on");
    forget();
}

/// `list_answer(150)` with a count first in its result: answers with another count differ
/// before the first checkpoint.
fn counted_answer(count: usize) -> String {
    list_answer(150).replacen(r#""result":{"#, &format!(r#""result":{{"n":{count},"#), 1)
}

/// Answers that differ at their start, call after call, are recorded ever less often: the
/// 1st, 2nd, 4th, 8th … of the streak, then one in [`BACK_OFF_MAX`]. Skipped or not, each is
/// judged as a scan judges it. A repeat, or a match up to a checkpoint, ends the streak.
#[test]
fn answers_that_keep_differing_at_their_start_are_recorded_ever_less_often() {
    let step = 4096;
    let read = |body: &str| classify(LIST, body.as_bytes(), step, BodyEnd::Complete, false);
    forget();
    let scanned = read(&counted_answer(0));
    // The first answer has nothing to differ from; the next ones are misses 1, 2, …
    let recorded = [0, 1, 2, 4, 8, 16, 32, 64, 128, 192];
    let mut remembered = 0;
    for count in 0..200 {
        let answer = counted_answer(count);
        assert_eq!(read(&answer), scanned, "answer {count}");
        if recorded.contains(&count) {
            remembered = count;
        }
        let expected = counted_answer(remembered);
        assert_eq!(
            remembered_body().as_deref(),
            Some(expected.as_bytes()),
            "after {count}"
        );
    }
    // The remembered answer again: the streak ends, and the next change is recorded at once.
    read(&counted_answer(192));
    read(&counted_answer(500));
    assert_eq!(
        remembered_body().as_deref(),
        Some(counted_answer(500).as_bytes())
    );
    // A streak of five (the 3rd and 5th not recorded), then an answer that differs near its
    // end: the streak ends, and the next change is recorded at once.
    for count in 501..505 {
        read(&counted_answer(count));
    }
    assert_eq!(
        remembered_body().as_deref(),
        Some(counted_answer(503).as_bytes())
    );
    let near_end = counted_answer(503).replacen("tool_149", "tool_X49", 1);
    read(&near_end);
    assert_eq!(remembered_body().as_deref(), Some(near_end.as_bytes()));
    read(&counted_answer(505));
    let after = counted_answer(505);
    assert_eq!(
        remembered_body().as_deref(),
        Some(after.as_bytes()),
        "after the streak"
    );
    forget();
}

/// Takes the thread's remembered answer, changed by `change`, as the remembered one.
fn change_remembered(change: impl FnOnce(&mut Remembered)) {
    LAST.with(|last| {
        let known = last.borrow_mut().take().expect("remembered");
        let mut known = Arc::try_unwrap(known).ok().expect("held once");
        change(&mut known);
        *last.borrow_mut() = Some(Arc::new(known));
    });
}

/// A body that differs from the remembered one only by a value changed in place, one the
/// reader does not keep, is compared again from the next checkpoint after it: with the
/// remembered verdict made one no scan gives, such a body is judged by it. A change the reader
/// keeps (the id), or one that moves every byte after it, is read to the end.
#[test]
fn a_value_changed_in_place_is_compared_again_from_the_next_checkpoint() {
    forget();
    let answer = list_answer(150);
    remember(ContentKind::Json, &answer, false);
    change_remembered(|known| known.end = End::Json(Err(Malformed::Syntax)));
    let in_place = answer.replacen("file 3.", "file X.", 1);
    assert_eq!(
        outcome(LIST, in_place.as_bytes()),
        Outcome::MalformedJson,
        "in place"
    );
    let kept = answer.replacen(r#""id":1"#, r#""id":7"#, 1);
    let kept_request = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;
    assert_eq!(
        outcome(kept_request, kept.as_bytes()),
        Outcome::Success,
        "the id"
    );
    let moved = answer.replacen("file 3.", "file 33.", 1);
    assert_eq!(outcome(LIST, moved.as_bytes()), Outcome::Success, "moved");
    forget();
}

/// A recorded answer that rejoined the remembered read is remembered in its place, the
/// remembered blocks after the checkpoint where it rejoined shared, not copied.
#[test]
fn an_answer_that_rejoined_is_remembered_with_the_blocks_after_it_shared() {
    forget();
    let answer = list_answer(150);
    remember(ContentKind::Json, &answer, false);
    let last_block = || LAST.with(|last| last.borrow().as_ref()?.body.blocks.last().cloned());
    let before = last_block().expect("remembered");
    let in_place = answer.replacen("file 3.", "file X.", 1);
    classify(LIST, in_place.as_bytes(), 4096, BodyEnd::Complete, false);
    assert_eq!(remembered_body().as_deref(), Some(in_place.as_bytes()));
    let after = last_block().expect("remembered");
    assert!(Arc::ptr_eq(&before, &after), "the last block shared");
    forget();
}

mod changed_anywhere {
    use super::*;
    use proptest::prelude::*;

    /// `primer` with a byte put at each of `changes` (a fraction of its length), in place of
    /// the byte there or, with `insert`, before it.
    fn changed(primer: &str, changes: &[(f64, u8)], insert: bool) -> Vec<u8> {
        let mut body = primer.as_bytes().to_vec();
        for &(at, byte) in changes {
            let at = ((body.len() as f64 * at) as usize).min(body.len() - 1);
            match insert {
                true => body.insert(at, byte),
                false => body[at] = byte,
            }
        }
        body
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Bytes changed in place (the body may rejoin the remembered read, and stop matching
        /// again) or added (it never does): judged as a scan judges it, remembered or not.
        #[test]
        fn a_body_changed_anywhere_gets_what_a_scan_gives(
            changes in prop::collection::vec(
                (0.0f64..1.0, prop::sample::select(b"x1 \"\\},\n".to_vec())),
                1..4,
            ),
            insert: bool,
            sse_stream: bool,
            learn: bool,
            step in prop::sample::select(vec![997usize, 4096, 1 << 16]),
        ) {
            let answer = list_answer(150);
            let (kind, primer) = match sse_stream {
                true => (ContentKind::Sse, sse(&answer)),
                false => (ContentKind::Json, answer),
            };
            let body = changed(&primer, &changes, insert);
            let read = || classify_as(kind, LIST, &body, step, BodyEnd::Complete, learn);
            forget();
            let scanned = read();
            remember(kind, &primer, learn);
            prop_assert_eq!(read(), scanned.clone(), "against the primer");
            prop_assert_eq!(remembered_body(), Some(body.clone()));
            prop_assert_eq!(read(), scanned, "against itself");
            forget();
        }
    }
}
