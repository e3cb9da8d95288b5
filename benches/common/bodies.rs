//! The bodies both scan benchmarks measure, and the path each is classified on.
#![allow(dead_code)]

use strata::classify::Outcome;
use strata::classify::envelope::Request;
use strata::classify::exchange::{BodyEnd, ContentKind, Exchange, Resolution};
use strata::classify::request::RequestInspector;

pub(crate) const CHUNK: usize = 16 * 1024;
const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

const CALL: &[u8] =
    br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/srv/a.txt"}}}"#;
const LIST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

/// Tool output as it usually looks: lines of prose and code joined by `\n` escapes, a quote
/// or a tab now and then, some non-ASCII.
fn text(len: usize) -> String {
    const LINES: [&str; 6] = [
        "The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs.",
        r#"    let value = map.get(\"key\").copied().unwrap_or_default(); // fallback"#,
        "Résumé: naïve café owners in Zürich prefer crème brûlée to apfelstrudel.",
        "2026-11-29T14:12:07Z INFO request handled in 12.5 ms status=200 bytes=5120",
        r#"\tfn main() { println!(\"hello, world\"); }"#,
        "東京都の天気は晴れ、最高気温は二十度の予報です。",
    ];
    let mut s = String::with_capacity(len + 128);
    let mut k = 0;
    while s.len() < len {
        s.push_str(LINES[k % LINES.len()]);
        s.push_str("\\n");
        k += 1;
    }
    s
}

fn tool_result(content: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{content}],"isError":false}}}}"#)
        .into_bytes()
}

fn text_item(text: &str) -> String {
    format!(r#"{{"type":"text","text":"{text}"}}"#)
}

/// About `size` bytes: one text item and a little structured content.
fn small_result(size: usize) -> Vec<u8> {
    let shell = tool_result(&text_item("")).len() + 80;
    let t = text(size.saturating_sub(shell));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{}],"structuredContent":{{"temperature":22.5,"humidity":65}},"isError":false}}}}"#,
        text_item(&t)
    );
    body.into_bytes()
}

/// `size` bytes of text content in items of about 16 KiB.
fn string_heavy(size: usize) -> Vec<u8> {
    let item = text_item(&text(16 * KIB));
    let mut items = String::with_capacity(size + item.len());
    while items.len() < size {
        if !items.is_empty() {
            items.push(',');
        }
        items.push_str(&item);
    }
    tool_result(&items)
}

/// A tools/list result of `size` bytes: tool definitions with input schemas.
fn tools_list(size: usize) -> Vec<u8> {
    let mut tools = String::with_capacity(size + 2 * KIB);
    let mut k = 0;
    while tools.len() < size {
        if k > 0 {
            tools.push(',');
        }
        tools.push_str(&format!(
            r#"{{"name":"tool_{k}","title":"Tool {k}","description":"Reads part of a file.","inputSchema":{{"type":"object","properties":{{"path":{{"type":"string","description":"Where"}},"offset":{{"type":"integer","minimum":0}},"limit":{{"type":"integer","minimum":1,"maximum":1000,"default":100}},"recursive":{{"type":"boolean","default":false}},"tags":{{"type":"array","items":{{"type":"string"}},"maxItems":8}},"ratio":{{"type":"number","default":0.25}}}},"required":["path"],"additionalProperties":false}},"annotations":{{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}},"_meta":{{"version":[1,2,3],"weight":-1.5e-3,"owner":null}}}}"#
        ));
        k += 1;
    }
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{tools}],"nextCursor":null}}}}"#)
        .into_bytes()
}

/// About `size` bytes of SSE: progress notifications, then the final result. Returns the
/// stream and each event's data.
fn sse_stream(size: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let result = small_result(2 * KIB);
    let mut out = Vec::with_capacity(size + 4 * KIB);
    let mut datas = Vec::new();
    out.extend_from_slice(b"id: 0\ndata:\n\n");
    let mut k = 1;
    while out.len() + result.len() + 32 < size {
        let data = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"tok-1","progress":{k},"total":1000,"message":"step {k} of 1000"}}}}"#
        )
        .into_bytes();
        out.extend_from_slice(format!("id: {k}\nevent: message\ndata: ").as_bytes());
        out.extend_from_slice(&data);
        out.extend_from_slice(b"\n\n");
        datas.push(data);
        k += 1;
    }
    out.extend_from_slice(format!("id: {k}\ndata: ").as_bytes());
    out.extend_from_slice(&result);
    out.extend_from_slice(b"\n\n");
    datas.push(result);
    (out, datas)
}

pub(crate) fn requests(body: &[u8]) -> Vec<Request> {
    let mut inspector = RequestInspector::new();
    inspector.feed(body, usize::MAX);
    inspector.finish().requests
}

/// The case's body classified as the answer to `requests`, as the call tracker feeds it.
pub(crate) fn classify(requests: &[Request], case: &Case) -> Outcome {
    let mut ex = Exchange::new(requests.to_vec(), false);
    if case.hints {
        ex.learn_tools();
    }
    ex.response_head(200, case.content);
    for chunk in std::hint::black_box(&case.body).chunks(CHUNK) {
        ex.data(chunk);
    }
    let mut ended = ex.end(BodyEnd::Complete);
    let outcome = match ended.next_resolution() {
        Some((_, _, Resolution::Final(v))) => v.outcome,
        _ => panic!("expected one verdict"),
    };
    assert!(ended.next_resolution().is_none(), "expected one verdict");
    outcome
}

/// Calls `parse` on each JSON document of `body` as a buffering classifier finds them: the
/// whole body for JSON; for SSE, each event's data, framed from the buffered stream.
///
/// The framing is the cheapest a buffering classifier could do on these streams, so that it
/// flatters the baseline rather than strata: one `memchr_iter` pass over LF (the streams here
/// use LF only; CR and CRLF are not looked for), `data:` lines taken by prefix, a blank line
/// ends the event, a single data line is parsed in place, several are joined into `scratch`
/// (reused). Comments, `id`, `event` and unknown fields are skipped unread.
pub(crate) fn for_each_document(case: &Case, scratch: &mut Vec<u8>, mut parse: impl FnMut(&[u8])) {
    if case.content != ContentKind::Sse {
        parse(&case.body);
        return;
    }
    let body = &case.body;
    // The event's data: one line's span in `body`, or joined lines in `scratch`.
    let mut data: Option<(usize, usize)> = None;
    let mut joined = false;
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', body) {
        let line = &body[start..end];
        if line.is_empty() {
            match (data.take(), joined) {
                (_, true) => parse(scratch),
                (Some((a, b)), false) if b > a => parse(&body[a..b]),
                _ => {}
            }
            joined = false;
        } else if let Some(value) = line.strip_prefix(b"data:") {
            let skip = usize::from(value.first() == Some(&b' '));
            let (a, b) = (end - value.len() + skip, end);
            match data {
                None => data = Some((a, b)),
                Some((a0, b0)) => {
                    if !joined {
                        scratch.clear();
                        scratch.extend_from_slice(&body[a0..b0]);
                        joined = true;
                    }
                    scratch.push(b'\n');
                    scratch.extend_from_slice(&body[a..b]);
                }
            }
        }
        start = end + 1;
    }
}

pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) request: &'static [u8],
    pub(crate) content: ContentKind,
    pub(crate) body: Vec<u8>,
    /// The exchange collects a tools/list result's tool hints, as the proxy does with
    /// `trust_annotations: true`.
    pub(crate) hints: bool,
    /// The JSON documents a buffering classifier parses (the body, or each event's data),
    /// cut out in advance: [`for_each_document`] frames them from the body instead.
    pub(crate) documents: Vec<Vec<u8>>,
    pub(crate) expect: Outcome,
}

pub(crate) fn cases() -> Vec<Case> {
    let json = |name, request, body: Vec<u8>, expect| Case {
        name,
        request,
        content: ContentKind::Json,
        documents: vec![body.clone()],
        body,
        hints: false,
        expect,
    };
    let (sse, datas) = sse_stream(32 * KIB);
    vec![
        json(
            "tool_result_1k",
            CALL,
            small_result(KIB),
            Outcome::ToolSuccess,
        ),
        json(
            "text_result_64k",
            CALL,
            small_result(64 * KIB),
            Outcome::ToolSuccess,
        ),
        json(
            "string_heavy_16m",
            CALL,
            string_heavy(16 * MIB),
            Outcome::ToolSuccess,
        ),
        json("tools_list_4m", LIST, tools_list(4 * MIB), Outcome::Success),
        Case {
            name: "tools_list_4m_hints",
            hints: true,
            ..json("", LIST, tools_list(4 * MIB), Outcome::Success)
        },
        Case {
            name: "sse_progress_32k",
            request: CALL,
            content: ContentKind::Sse,
            body: sse,
            hints: false,
            documents: datas,
            expect: Outcome::ToolSuccess,
        },
    ]
}
