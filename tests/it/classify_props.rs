//! Property tests: the streaming classifier equals the oracle (`tests/oracle`) for generated
//! envelopes — valid and broken in every way the outcome table names — under random chunkings
//! and every single split point of small bodies; the same for SSE streams; and the bare JSON
//! scanner's verdict equals serde_json's on arbitrary bytes.
//!
//! Cases per property: `PROPTEST_CASES` (default [`DEFAULT_CASES`], sized so `cargo test` stays
//! well under a minute on two cores in debug).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::oracle;

use oracle::Res;
use proptest::prelude::*;
use proptest::sample::Index;
use strata::classify::Outcome;
use strata::classify::exchange::BodyEnd;
use strata::classify::json::{Document, JsonScanner, Malformed};

const DEFAULT_CASES: u32 = 1024;
/// Bodies shorter than this are also checked at every single split point.
const EVERY_SPLIT_BELOW: usize = 300;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    ProptestConfig {
        cases,
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

/// Bytes that print as (lossy) text in failure reports.
#[derive(Clone)]
struct Bytes(Vec<u8>);

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

/// Runs `f` on a thread with a large stack: bodies nest past 127 levels, and serde_json,
/// the printer and the walker recurse per level (debug frames are big).
fn big_stack(f: impl FnOnce() + Send + 'static) {
    let worker = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .unwrap();
    if let Err(panic) = worker.join() {
        std::panic::resume_unwind(panic);
    }
}

// =============================================================================================
// A small JSON tree with its own printer, so bodies vary in whitespace, escapes, key order and
// duplicate keys — things a `Value` cannot express.

#[derive(Clone, Debug)]
enum J {
    Null,
    True,
    False,
    /// A number token, as written.
    Num(String),
    /// A string's content; the printer picks its escapes.
    Str(String),
    Arr(Vec<J>),
    /// Members in order; keys may repeat.
    Obj(Vec<(String, J)>),
}

fn s(v: &str) -> J {
    J::Str(v.to_string())
}

fn n(v: &str) -> J {
    J::Num(v.to_string())
}

fn obj(members: Vec<(&str, J)>) -> J {
    J::Obj(
        members
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// How to print: whitespace amount, escape eagerness, and a seed for the choices.
#[derive(Clone, Copy, Debug)]
struct Style {
    ws: u8,
    escapes: u8,
    /// Whitespace may include CR and LF (not inside SSE data lines).
    newlines: bool,
    seed: u64,
}

struct Printer {
    style: Style,
    state: u64,
    out: Vec<u8>,
}

impl Printer {
    fn new(style: Style) -> Printer {
        Printer {
            style,
            state: style.seed | 1,
            out: Vec::new(),
        }
    }

    fn next(&mut self) -> u64 {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn chance(&mut self, per_256: u64) -> bool {
        self.next() % 256 < per_256
    }

    fn ws(&mut self) {
        let per = [0, 40, 160][usize::from(self.style.ws.min(2))];
        while self.chance(per) {
            let set: &[u8] = if self.style.newlines {
                b" \t\n\r"
            } else {
                b" \t"
            };
            let b = set[(self.next() % set.len() as u64) as usize];
            self.out.push(b);
        }
    }

    fn string(&mut self, text: &str) {
        let per = [0, 24, 200][usize::from(self.style.escapes.min(2))];
        self.out.push(b'"');
        for c in text.chars() {
            let must = c == '"' || c == '\\' || (c as u32) < 0x20;
            if !must && !self.chance(per) {
                let mut buf = [0; 4];
                self.out
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                continue;
            }
            let short = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '/' => Some("\\/"),
                '\n' => Some("\\n"),
                '\r' => Some("\\r"),
                '\t' => Some("\\t"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                _ => None,
            };
            match short {
                Some(e) if self.chance(192) => self.out.extend_from_slice(e.as_bytes()),
                _ => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let hex = if self.chance(128) {
                            format!("\\u{u:04x}")
                        } else {
                            format!("\\u{u:04X}")
                        };
                        self.out.extend_from_slice(hex.as_bytes());
                    }
                }
            }
        }
        self.out.push(b'"');
    }

    fn value(&mut self, j: &J) {
        match j {
            J::Null => self.out.extend_from_slice(b"null"),
            J::True => self.out.extend_from_slice(b"true"),
            J::False => self.out.extend_from_slice(b"false"),
            J::Num(t) => self.out.extend_from_slice(t.as_bytes()),
            J::Str(t) => self.string(t),
            J::Arr(items) => {
                self.out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.ws();
                    self.value(item);
                    self.ws();
                }
                if items.is_empty() {
                    self.ws();
                }
                self.out.push(b']');
            }
            J::Obj(members) => {
                self.out.push(b'{');
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.ws();
                    self.string(k);
                    self.ws();
                    self.out.push(b':');
                    self.ws();
                    self.value(v);
                    self.ws();
                }
                if members.is_empty() {
                    self.ws();
                }
                self.out.push(b'}');
            }
        }
    }
}

fn print(j: &J, style: Style) -> Vec<u8> {
    let mut p = Printer::new(style);
    p.ws();
    p.value(j);
    p.ws();
    p.out
}

fn style(newlines: bool) -> impl Strategy<Value = Style> {
    (0u8..3, 0u8..3, any::<u64>()).prop_map(move |(ws, escapes, seed)| Style {
        ws,
        escapes,
        newlines,
        seed,
    })
}

// =============================================================================================
// Leaves

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", "2.0", "ok", "tools/call", "complete", "input_required", "task", "héllo wörld",
            "中文テキスト", "😀 emoji 𝄞", "quote \" backslash \\ slash /", "line\nbreak\ttab",
            "nul \u{0} unit \u{1f} del \u{7f}", "\u{2028}\u{2029}\u{feff}", "\u{ffff}\u{10ffff}",
        ])
        .prop_map(str::to_string),
        2 => "\\PC{0,12}",
        1 => "[a-z]{40,80}",
        // Tool-output-like text longer than the scanner's 64-byte blocks, with characters the
        // printer escapes (so escapes and backslash runs straddle block and chunk boundaries).
        1 => "[a-z \"\\\\/\n\t\u{1}é東]{50,300}",
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "0",
        "1",
        "-1",
        "7",
        "1.0",
        "1e0",
        "1E+0",
        "10e-1",
        "-0",
        "-0.0",
        "0e5",
        "2.5",
        "-32602",
        "-32700",
        "100",
        "1e2",
        "18446744073709551615",
        "18446744073709551616",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",
        "1e400",
        "-1e400",
        "1e-400",
        "123456789012345678901234567890",
        "0.1",
        "3.0000000000000004",
    ])
    .prop_map(str::to_string)
}

/// Any small JSON value (for extra fields, structured content and arbitrary messages).
fn any_json() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        Just(J::True),
        Just(J::False),
        number().prop_map(J::Num),
        text().prop_map(J::Str),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(J::Arr),
            prop::collection::vec(
                (
                    prop_oneof![
                        3 => "[a-z]{1,6}",
                        1 => prop::sample::select(vec![
                            "id", "result", "error", "content", "isError", "resultType", "code",
                            "message", "method", "jsonrpc", "task", "name", "params",
                        ])
                        .prop_map(str::to_string),
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(J::Obj),
        ]
    })
}

/// Deeply nested arrays/objects around a leaf: at, under and past the depth limit.
fn deep() -> impl Strategy<Value = J> {
    (120usize..132, any::<bool>()).prop_map(|(depth, objects)| {
        let mut j = n("1");
        for _ in 0..depth {
            j = if objects {
                J::Obj(vec![("d".into(), j)])
            } else {
                J::Arr(vec![j])
            };
        }
        j
    })
}

// =============================================================================================
// Requests

#[derive(Clone, Debug)]
struct Scenario {
    request: J,
    /// Ids a response may use: the requests' ids, also in other numeric spellings, and near
    /// misses (null, a string for a number, another number).
    ids: Ids,
}

#[derive(Clone, Debug)]
struct Ids {
    matching: Vec<J>,
    other: Vec<J>,
}

impl Ids {
    fn add(&mut self, id: &J) {
        let (matching, other) = id_variants(id);
        self.matching.extend(matching);
        self.other.extend(other);
    }

    fn strategy(&self) -> impl Strategy<Value = J> + use<> {
        prop_oneof![
            6 => prop::sample::select(self.matching.clone()),
            1 => prop::sample::select(self.other.clone()),
        ]
    }
}

fn request_id() -> impl Strategy<Value = J> {
    prop_oneof![
        4 => prop::sample::select(vec!["1", "0", "7", "42", "-3", "1.0", "-0", "9223372036854775808"])
            .prop_map(n),
        3 => prop::sample::select(vec!["1", "abc", "é", "", "a\"b"]).prop_map(s),
        1 => "[a-z0-9]{280,300}".prop_map(J::Str),
    ]
}

/// (spellings of the same id, ids that must not match it).
fn id_variants(id: &J) -> (Vec<J>, Vec<J>) {
    let mut same = vec![id.clone(), id.clone(), id.clone()];
    let mut other = vec![J::Null, n("99"), s("zzz")];
    match id {
        J::Num(t) => {
            other.push(J::Str(t.clone()));
            if let Ok(k) = t.parse::<i64>() {
                same.push(n(&format!("{k}.0")));
                same.push(n(&format!("{k}e0")));
                same.push(n(&format!("{k}0e-1")));
                other.push(n(&format!("{}", k + 1)));
                if k == 0 {
                    same.push(n("-0"));
                    same.push(n("0.0"));
                }
            } else {
                other.push(n("1"));
                other.push(n("0"));
            }
        }
        J::Str(t) => {
            if let Ok(k) = t.parse::<i64>() {
                other.push(n(&k.to_string()));
            }
            other.push(J::Str(format!("{t}x")));
        }
        _ => {}
    }
    (same, other)
}

fn one_request() -> impl Strategy<Value = (J, J)> {
    let method = prop::sample::select(vec![
        "tools/call",
        "tools/call",
        "tools/call",
        "tools/list",
        "prompts/get",
        "resources/read",
        "initialize",
    ]);
    // 0: plain, 1: params.task, 2: Tasks extension declared, 3: params not an object
    (request_id(), method, 0u8..4, any::<bool>()).prop_map(|(id, method, tasks, jsonrpc_first)| {
        let mut params = vec![
            ("name", s("echo")),
            ("arguments", obj(vec![("name", s("not the tool"))])),
        ];
        match tasks {
            1 => params.push(("task", obj(vec![("ttl", n("1000"))]))),
            2 => params.push((
                "_meta",
                obj(vec![
                    ("io.modelcontextprotocol/protocolVersion", s("2026-07-28")),
                    (
                        "io.modelcontextprotocol/clientCapabilities",
                        obj(vec![(
                            "extensions",
                            obj(vec![("io.modelcontextprotocol/tasks", obj(vec![]))]),
                        )]),
                    ),
                ]),
            )),
            _ => {}
        }
        let params = if tasks == 3 {
            J::Arr(vec![])
        } else {
            obj(params)
        };
        let mut members = vec![
            ("id", id.clone()),
            ("method", s(method)),
            ("params", params),
        ];
        if jsonrpc_first {
            members.insert(0, ("jsonrpc", s("2.0")));
        } else {
            members.push(("jsonrpc", s("2.0")));
        }
        (obj(members), id)
    })
}

fn scenario() -> impl Strategy<Value = Scenario> {
    prop_oneof![
        6 => one_request().prop_map(|(request, id)| {
            let mut ids = Ids { matching: vec![], other: vec![] };
            ids.add(&id);
            Scenario { ids, request }
        }),
        3 => (prop::collection::vec(one_request(), 1..4), any::<bool>()).prop_map(|(reqs, note)| {
            let mut items = Vec::new();
            let mut ids = Ids { matching: vec![], other: vec![] };
            for (r, id) in reqs {
                items.push(r);
                ids.add(&id);
            }
            if note {
                items.insert(1.min(items.len()), obj(vec![
                    ("jsonrpc", s("2.0")),
                    ("method", s("notifications/cancelled")),
                ]));
            }
            Scenario { request: J::Arr(items), ids }
        }),
        // No call at all: a notification, or a body that is not JSON-RPC.
        1 => prop_oneof![
            Just(obj(vec![("jsonrpc", s("2.0")), ("method", s("notifications/initialized"))])),
            Just(n("5")),
        ]
        .prop_map(|request| Scenario { request, ids: Ids { matching: vec![n("1")], other: vec![J::Null] } }),
    ]
}

// =============================================================================================
// Responses

fn content() -> impl Strategy<Value = Option<J>> {
    prop_oneof![
        6 => prop::collection::vec(text(), 0..3).prop_map(|texts| Some(J::Arr(
            texts.into_iter().map(|t| obj(vec![("type", s("text")), ("text", J::Str(t))])).collect()
        ))),
        1 => Just(None),
        1 => prop_oneof![text().prop_map(J::Str), Just(obj(vec![])), Just(J::Null)].prop_map(Some),
    ]
}

fn result_obj() -> impl Strategy<Value = J> {
    let result_type = prop_oneof![
        4 => Just(None),
        4 => Just(Some(s("complete"))),
        2 => Just(Some(s("input_required"))),
        1 => Just(Some(s("task"))),
        1 => prop_oneof![Just(s("weird")), Just(n("7")), Just(J::Null), Just(s("Complete"))].prop_map(Some),
    ];
    let is_error = prop_oneof![
        3 => Just(None),
        3 => Just(Some(J::False)),
        3 => Just(Some(J::True)),
        1 => prop_oneof![Just(s("yes")), Just(J::Null), Just(n("0"))].prop_map(Some),
    ];
    let mrtr = prop_oneof![
        3 => Just(vec![]),
        1 => Just(vec![("inputRequests", obj(vec![("q", obj(vec![("method", s("elicitation/create"))]))]))]),
        1 => Just(vec![("requestState", s("opaque"))]),
        1 => Just(vec![("inputRequests", J::Arr(vec![])), ("requestState", n("3"))]),
    ];
    let task = prop_oneof![
        4 => Just(None),
        1 => Just(Some(obj(vec![("taskId", s("t1")), ("status", s("working"))]))),
        1 => Just(Some(s("t1"))),
    ];
    let extra = prop::collection::vec(
        (
            prop::sample::select(vec!["structuredContent", "tools", "_meta", "nextCursor"]),
            prop_oneof![9 => any_json(), 1 => deep()],
        ),
        0..2,
    );
    (result_type, content(), is_error, mrtr, task, extra).prop_map(
        |(result_type, content, is_error, mrtr, task, extra)| {
            let mut m: Vec<(&str, J)> = Vec::new();
            if let Some(t) = result_type {
                m.push(("resultType", t));
            }
            if let Some(c) = content {
                m.push(("content", c));
            }
            if let Some(e) = is_error {
                m.push(("isError", e));
            }
            m.extend(mrtr);
            if let Some(t) = task {
                m.push(("task", t));
            }
            m.extend(extra);
            obj(m)
        },
    )
}

fn error_obj() -> impl Strategy<Value = J> {
    let code = prop_oneof![
        6 => prop::sample::select(vec!["-32602", "-32603", "-32700", "-32001", "1", "0"]).prop_map(|c| Some(n(c))),
        1 => Just(None),
        2 => prop_oneof![
            Just(n("1.5")), Just(n("-32602.0")), Just(n("1e3")), Just(n("-0")),
            Just(s("-32602")), Just(n("9223372036854775808")), Just(J::Null),
        ]
        .prop_map(Some),
    ];
    let message = prop_oneof![
        6 => text().prop_map(|t| Some(J::Str(t))),
        1 => "[a-z ]{130,200}".prop_map(|t| Some(J::Str(t))),
        1 => Just(None),
        1 => Just(Some(n("5"))),
    ];
    let shape = prop_oneof![8 => Just(true), 1 => Just(false)];
    (code, message, shape, any::<bool>()).prop_map(|(code, message, is_obj, data)| {
        if !is_obj {
            return s("boom");
        }
        let mut m = Vec::new();
        if let Some(c) = code {
            m.push(("code", c));
        }
        if let Some(t) = message {
            m.push(("message", t));
        }
        if data {
            m.push(("data", obj(vec![("detail", s("x"))])));
        }
        obj(m)
    })
}

/// A response message for the scenario, valid or broken in a way the table names.
fn message(ids: &Ids) -> impl Strategy<Value = J> + use<> {
    let jsonrpc = prop_oneof![
        24 => Just(Some(s("2.0"))),
        1 => prop_oneof![Just(s("1.0")), Just(n("2.0")), Just(J::Null), Just(s("2.0 "))].prop_map(Some),
        1 => Just(None),
    ];
    let id = prop_oneof![
        8 => ids.strategy().prop_map(Some),
        1 => Just(None),
        1 => prop_oneof![Just(J::True), Just(obj(vec![])), Just(J::Arr(vec![n("1")]))].prop_map(Some),
    ];
    // 0 result, 1 error, 2 both, 3 neither, 4 result with a method
    let body = prop_oneof![
        20 => Just(0u8),
        6 => Just(1u8),
        1 => Just(2u8),
        1 => Just(3u8),
        1 => Just(4u8),
    ];
    let result = prop_oneof![
        8 => result_obj(),
        1 => prop_oneof![Just(J::Arr(vec![])), Just(s("done")), Just(n("1")), Just(J::Null)],
    ];
    let extra = prop::collection::vec(("[a-z]{1,8}", any_json()), 0..2);
    let dup = prop::option::weighted(0.1, (0usize..6, any_json()));
    (
        jsonrpc,
        id,
        body,
        result,
        error_obj(),
        extra,
        dup,
        any::<Index>(),
    )
        .prop_map(|(jsonrpc, id, body, result, error, extra, dup, at)| {
            let mut m: Vec<(String, J)> = Vec::new();
            if let Some(v) = jsonrpc {
                m.push(("jsonrpc".into(), v));
            }
            if let Some(v) = id {
                m.push(("id".into(), v));
            }
            if matches!(body, 0 | 2 | 4) {
                m.push(("result".into(), result));
            }
            if matches!(body, 1 | 2) {
                m.push(("error".into(), error));
            }
            if body == 4 {
                m.push(("method".into(), s("tools/call")));
            }
            m.extend(extra);
            // Rotate the member order: key order must not matter.
            if !m.is_empty() {
                let k = at.index(m.len());
                m.rotate_left(k);
            }
            // A duplicate key: the last one wins.
            if let Some((which, value)) = dup
                && !m.is_empty()
            {
                let key = m[which % m.len()].0.clone();
                m.push((key, value));
            }
            J::Obj(m)
        })
}

/// A progress notification or a server→client request (never the response on SSE).
fn server_message(ids: &Ids) -> impl Strategy<Value = J> + use<> {
    prop_oneof![
        Just(obj(vec![
            ("jsonrpc", s("2.0")),
            ("method", s("notifications/progress")),
            (
                "params",
                obj(vec![("progressToken", n("1")), ("progress", n("0.5"))])
            ),
        ])),
        ids.strategy().prop_map(|id| obj(vec![
            ("jsonrpc", s("2.0")),
            ("id", id),
            ("method", s("roots/list")),
            ("result", obj(vec![])),
        ])),
    ]
}

/// A JSON document of the response: one message, a batch, or something else entirely.
fn document(ids: &Ids) -> impl Strategy<Value = J> + use<> {
    prop_oneof![
        14 => message(ids),
        4 => prop::collection::vec(message(ids), 0..4).prop_map(J::Arr),
        1 => server_message(ids),
        1 => prop_oneof![any_json(), deep()],
    ]
}

#[derive(Clone, Debug)]
enum Damage {
    None,
    Truncate(Index),
    Flip(Index, u8),
    Insert(Index, u8),
    Delete(Index),
    /// A second document after the first.
    Append,
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        30 => Just(Damage::None),
        2 => any::<Index>().prop_map(Damage::Truncate),
        2 => (any::<Index>(), prop_oneof![
            any::<u8>(),
            prop::sample::select(b"{}[]\",:\\ 0-.eE\x00\x1f\x80\xff\xc3".to_vec()),
        ]).prop_map(|(i, b)| Damage::Flip(i, b)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Damage::Insert(i, b)),
        1 => any::<Index>().prop_map(Damage::Delete),
        1 => Just(Damage::Append),
    ]
}

fn apply(mut bytes: Vec<u8>, damage: &Damage) -> Vec<u8> {
    match damage {
        Damage::None => {}
        Damage::Truncate(i) => {
            let at = i.index(bytes.len() + 1);
            bytes.truncate(at);
        }
        Damage::Flip(i, b) if !bytes.is_empty() => {
            let at = i.index(bytes.len());
            bytes[at] = *b;
        }
        Damage::Insert(i, b) => {
            let at = i.index(bytes.len() + 1);
            bytes.insert(at, *b);
        }
        Damage::Delete(i) if !bytes.is_empty() => {
            let at = i.index(bytes.len());
            bytes.remove(at);
        }
        Damage::Append => {
            let copy = bytes.clone();
            bytes.push(b'\n');
            bytes.extend_from_slice(&copy);
        }
        _ => {}
    }
    bytes
}

fn status() -> impl Strategy<Value = u16> {
    prop_oneof![
        16 => Just(200u16),
        1 => prop::sample::select(vec![201u16, 202, 204, 299]),
        2 => prop::sample::select(vec![100u16, 304, 400, 404, 500, 502, 503]),
    ]
}

fn body_end() -> impl Strategy<Value = BodyEnd> {
    prop_oneof![
        8 => Just(BodyEnd::Complete),
        1 => Just(BodyEnd::UpstreamError),
        1 => Just(BodyEnd::AgentGone),
    ]
}

fn json_content_type() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        12 => Just(Some("application/json")),
        1 => prop::sample::select(vec![
            Some("application/json; charset=utf-8"),
            Some("Application/JSON"),
            Some(" application/json ;q=1"),
            Some("application/vnd.api+json"),
            Some("application/json-seq"),
            Some("text/plain"),
            Some(""),
            None,
        ]),
    ]
}

/// Random cut points (sorted) for a body of unknown length: fractions in per-mille.
fn cuts() -> impl Strategy<Value = Vec<u16>> {
    prop::collection::vec(0u16..1000, 0..12).prop_map(|mut v| {
        v.sort_unstable();
        v
    })
}

fn scale(cuts: &[u16], len: usize) -> Vec<usize> {
    cuts.iter().map(|&c| usize::from(c) * len / 1000).collect()
}

// =============================================================================================
// The comparisons

struct Case<'a> {
    request: &'a [u8],
    status: u16,
    content_type: Option<&'a str>,
    body: &'a [u8],
    end: BodyEnd,
}

impl Case<'_> {
    fn oracle(&self) -> Vec<Res> {
        oracle::classify(
            self.request,
            self.status,
            self.content_type.map(str::as_bytes),
            self.body,
            self.end,
        )
    }

    fn streaming(&self, request_cuts: &[usize], cuts: &[usize]) -> Vec<Res> {
        oracle::streaming(
            self.request,
            request_cuts,
            self.status,
            self.content_type.map(str::as_bytes),
            self.body,
            cuts,
            self.end,
        )
    }

    /// Whole, at the given cuts, byte by byte for small bodies, and at every single split
    /// point of bodies shorter than [`EVERY_SPLIT_BELOW`].
    fn check(&self, request_cuts: &[usize], cuts: &[usize]) -> Result<(), TestCaseError> {
        let want = self.oracle();
        let show = || {
            format!(
                "request {:?}\nstatus {} content-type {:?} end {:?}\nbody {:?}",
                String::from_utf8_lossy(self.request),
                self.status,
                self.content_type,
                self.end,
                String::from_utf8_lossy(self.body)
            )
        };
        let whole = self.streaming(&[], &[]);
        prop_assert_eq!(&whole, &want, "whole body\n{}", show());
        let split = self.streaming(request_cuts, cuts);
        prop_assert_eq!(&split, &want, "cuts {:?}\n{}", cuts, show());
        if self.body.len() < EVERY_SPLIT_BELOW {
            for at in 1..self.body.len() {
                let got = self.streaming(&[], &[at]);
                prop_assert_eq!(&got, &want, "split at {}\n{}", at, show());
            }
            if self.body.len() < 100 {
                let every: Vec<usize> = (1..self.body.len()).collect();
                let got = self.streaming(&every, &every);
                prop_assert_eq!(&got, &want, "byte by byte\n{}", show());
            }
        }
        Ok(())
    }
}

fn json_case() -> impl Strategy<Value = (Bytes, Bytes)> {
    (scenario(), style(true), style(true)).prop_flat_map(|(sc, req_style, body_style)| {
        let request = print(&sc.request, req_style);
        (document(&sc.ids), damage()).prop_map(move |(doc, damage)| {
            (
                Bytes(request.clone()),
                Bytes(apply(print(&doc, body_style), &damage)),
            )
        })
    })
}

/// JSON bodies: the streaming outcome equals the oracle's, however the body is cut.
#[test]
fn json_exchange_matches_oracle() {
    big_stack(|| {
        proptest!(config(), |(
            (request, body) in json_case(),
            status in status(),
            content_type in json_content_type(),
            end in body_end(),
            request_cuts in cuts(),
            body_cuts in cuts(),
        )| {
            let (request, body) = (&request.0, &body.0);
            let case = Case { request, status, content_type, body, end };
            case.check(&scale(&request_cuts, request.len()), &scale(&body_cuts, body.len()))?;
        });
    });
}

// =============================================================================================
// SSE streams

#[derive(Clone, Debug)]
enum Ev {
    /// A JSON document sent as one or more data lines (split at these fractions).
    Doc(J, Damage, Vec<u16>),
    /// A priming event: an id and empty data.
    Priming,
    /// An event of another type (`event: ping`), with JSON or not.
    Other(J),
    /// Data that is not JSON.
    Junk(String),
    /// Comments or blank lines only.
    Quiet,
}

#[derive(Clone, Debug)]
struct Framing {
    /// Line ends: 0 LF, 1 CR, 2 CRLF, 3 mixed.
    eol: u8,
    /// 1: a BOM; 2, 3: only its first one or two bytes.
    bom: u8,
    /// Per event: an `id:` line (value index into a small set), a comment, a retry line,
    /// an unknown field, `data:` without the space.
    seed: u64,
    /// The last event is not terminated by a blank line.
    unterminated: bool,
    /// No `id:` lines at all (a stream that cannot be resumed).
    ids: u8,
}

fn event(ids: &Ids) -> impl Strategy<Value = Ev> + use<> {
    let lines = prop_oneof![
        6 => Just(vec![]),
        3 => prop::collection::vec(0u16..1000, 1..3),
        1 => prop::collection::vec(1000u16..2000, 1..3),
    ];
    prop_oneof![
        8 => (document(ids), prop_oneof![4 => Just(Damage::None), 1 => damage()], lines)
            .prop_map(|(j, d, splits)| Ev::Doc(j, d, splits)),
        4 => server_message(ids).prop_map(|j| Ev::Doc(j, Damage::None, vec![])),
        2 => Just(Ev::Priming),
        1 => any_json().prop_map(Ev::Other),
        1 => prop::sample::select(vec!["{oops", "  ", "[1,", "\u{0}", "\"\\ud800\""])
            .prop_map(|t| Ev::Junk(t.to_string())),
        1 => Just(Ev::Quiet),
    ]
}

fn framing() -> impl Strategy<Value = Framing> {
    let bom = prop_oneof![12 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
    (
        0u8..4,
        bom,
        any::<u64>(),
        prop::bool::weighted(0.15),
        0u8..3,
    )
        .prop_map(|(eol, bom, seed, unterminated, ids)| Framing {
            eol,
            bom,
            seed,
            unterminated,
            ids,
        })
}

fn render_sse(events: &[Ev], framing: &Framing, style: Style) -> Vec<u8> {
    let mut rng = Printer::new(Style {
        seed: framing.seed,
        ..style
    });
    let mut out = Vec::new();
    let bom: &[u8] = match framing.bom {
        1 => &[0xEF, 0xBB, 0xBF],
        2 => &[0xEF],
        3 => &[0xEF, 0xBB],
        _ => &[],
    };
    out.extend_from_slice(bom);
    let line = |out: &mut Vec<u8>, rng: &mut Printer, text: &[u8]| {
        out.extend_from_slice(text);
        let eol = if framing.eol == 3 {
            (rng.next() % 3) as u8
        } else {
            framing.eol
        };
        out.extend_from_slice(match eol {
            0 => b"\n",
            1 => b"\r",
            _ => b"\r\n",
        });
    };
    // Ids past the capture cap (MAX_EVENT_ID): one kept truncated, one with NUL beyond it.
    let long: Vec<u8> = [&[b'L'; 300][..], b"z"].concat();
    let long_nul: Vec<u8> = [&[b'N'; 300][..], b"\x00"].concat();
    let id_values: [&[u8]; 7] = [b"e1", b"", b"42", b"a\x00b", b"x", &long, &long_nul];
    for (k, ev) in events.iter().enumerate() {
        // Optional fields before the data, in a random mix.
        if framing.ids > 0 && rng.chance(if framing.ids == 2 { 200 } else { 60 }) {
            let v = id_values[(rng.next() % id_values.len() as u64) as usize];
            let mut l = b"id: ".to_vec();
            l.extend_from_slice(v);
            if rng.chance(20) {
                l = b"id".to_vec(); // no colon: an empty id
            }
            line(&mut out, &mut rng, &l);
        }
        if rng.chance(40) {
            line(&mut out, &mut rng, b": keep-alive");
        }
        if rng.chance(30) {
            line(&mut out, &mut rng, b"retry: 1500");
        }
        if rng.chance(20) {
            line(&mut out, &mut rng, b"foo: bar");
        }
        if rng.chance(15) {
            line(&mut out, &mut rng, b"event: message");
        }
        if rng.chance(8) {
            line(&mut out, &mut rng, b"event:");
        }
        let data_prefix: &[u8] = if rng.chance(40) { b"data:" } else { b"data: " };
        let data_lines = |out: &mut Vec<u8>, rng: &mut Printer, data: &[u8], splits: &[usize]| {
            let mut at = 0;
            for &c in splits {
                let c = c.clamp(at, data.len());
                let mut l = data_prefix.to_vec();
                l.extend_from_slice(&data[at..c]);
                line(out, rng, &l);
                at = c;
            }
            let mut l = data_prefix.to_vec();
            l.extend_from_slice(&data[at..]);
            line(out, rng, &l);
        };
        match ev {
            Ev::Doc(j, d, splits) => {
                let data = apply(print(j, style), d);
                // Fractions below 1000 split anywhere (inside a token: invalid JSON); from
                // 1000 they split after a structural byte, where the joining LF is whitespace.
                let mut offsets: Vec<usize> = splits
                    .iter()
                    .map(|&c| {
                        let c = usize::from(c);
                        let at = (c % 1000) * data.len() / 1000;
                        if c < 1000 {
                            return at;
                        }
                        (at.max(1)..data.len())
                            .find(|&i| matches!(data[i - 1], b',' | b':' | b'{' | b'['))
                            .unwrap_or(data.len())
                    })
                    .collect();
                offsets.sort_unstable();
                data_lines(&mut out, &mut rng, &data, &offsets);
            }
            Ev::Priming => {
                if rng.chance(128) {
                    line(&mut out, &mut rng, b"id: prime");
                }
                let empty: &[u8] = if rng.chance(128) { b"data:" } else { b"data" };
                line(&mut out, &mut rng, empty);
            }
            Ev::Other(j) => {
                line(&mut out, &mut rng, b"event: ping");
                data_lines(&mut out, &mut rng, &print(j, style), &[]);
            }
            Ev::Junk(t) => data_lines(&mut out, &mut rng, t.as_bytes(), &[]),
            Ev::Quiet => {
                line(&mut out, &mut rng, b":");
            }
        }
        let last = k + 1 == events.len();
        if !(last && framing.unterminated) {
            line(&mut out, &mut rng, b"");
            if rng.chance(20) {
                line(&mut out, &mut rng, b"");
            }
        }
    }
    out
}

fn sse_case() -> impl Strategy<Value = (Bytes, Bytes)> {
    (scenario(), style(true), style(false), framing()).prop_flat_map(
        |(sc, req_style, data_style, framing)| {
            let request = print(&sc.request, req_style);
            prop::collection::vec(event(&sc.ids), 0..5).prop_map(move |events| {
                (
                    Bytes(request.clone()),
                    Bytes(render_sse(&events, &framing, data_style)),
                )
            })
        },
    )
}

/// SSE streams: the streaming outcome equals the oracle's, however the stream is cut.
#[test]
fn sse_exchange_matches_oracle() {
    big_stack(|| {
        proptest!(config(), |(
            (request, body) in sse_case(),
            status in prop_oneof![12 => Just(200u16), 1 => Just(500u16)],
            content_type in prop::sample::select(vec![
                "text/event-stream", "text/event-stream", "text/event-stream; charset=utf-8",
                "Text/Event-Stream",
            ]),
            end in body_end(),
            request_cuts in cuts(),
            body_cuts in cuts(),
        )| {
            let (request, body) = (&request.0, &body.0);
            let case = Case { request, status, content_type: Some(content_type), body, end };
            case.check(&scale(&request_cuts, request.len()), &scale(&body_cuts, body.len()))?;
        });
    });
}

// =============================================================================================
// The bare scanner against serde_json

fn scan(bytes: &[u8], cuts: &[usize]) -> (Result<Document, Malformed>, u32) {
    let mut scanner = JsonScanner::new();
    let mut seen = 0u32;
    let mut sink = |_: &strata::classify::Envelope| seen += 1;
    for chunk in oracle::pieces(bytes, cuts) {
        scanner.feed(chunk, &mut sink);
    }
    let verdict = scanner.finish(&mut sink);
    (verdict, seen)
}

fn check_scanner(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    let want = oracle::parse(bytes);
    let show = || format!("{:?}", String::from_utf8_lossy(bytes));
    let mut splits = vec![cuts.to_vec(), vec![]];
    if bytes.len() < EVERY_SPLIT_BELOW {
        splits.extend((1..bytes.len()).map(|at| vec![at]));
    }
    let (whole, _) = scan(bytes, &[]);
    for cuts in splits {
        let (verdict, seen) = scan(bytes, &cuts);
        prop_assert_eq!(
            verdict.is_ok(),
            want.is_some(),
            "{:?} cuts {:?}: {}",
            verdict,
            cuts,
            show()
        );
        // The reason, too, must not depend on where the input was cut.
        prop_assert_eq!(verdict, whole, "cuts {:?}: {}", cuts, show());
        if let (Ok(doc), Some(v)) = (verdict, &want) {
            let messages = v.as_array().map_or(1, Vec::len);
            prop_assert_eq!(doc.batch, v.is_array(), "{}", show());
            prop_assert_eq!(doc.messages as usize, messages, "{}", show());
            prop_assert_eq!(seen as usize, messages, "{}", show());
        }
    }
    Ok(())
}

fn json_ish() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..64),
        2 => prop::collection::vec(
            prop::sample::select(b"{}[]\",:\\ \t\n0123-+.eEtrufalsn\"u\xc3\xa9\xed\xa0\x80".to_vec()),
            0..48,
        ),
        6 => (prop_oneof![any_json(), deep(), message(&Ids { matching: vec![n("1")], other: vec![s("a")] })], style(true), damage())
            .prop_map(|(j, st, d)| apply(print(&j, st), &d)),
    ]
    .prop_map(Bytes)
}

/// The scanner's valid/invalid verdict (and batch shape) equals serde_json's, at every
/// split, on arbitrary and JSON-like bytes.
#[test]
fn scanner_verdict_matches_serde_json() {
    big_stack(|| {
        proptest!(config(), |(bytes in json_ish(), cuts in cuts())| {
            check_scanner(&bytes.0, &scale(&cuts, bytes.0.len()))?;
        });
    });
}

/// Found by fuzzing (json_scanner): a complete document, then the first byte of a multi-byte
/// UTF-8 sequence, then the agent leaves. The bytes received are not a whole valid document,
/// so the call is cancelled before its answer is known (the oracle's rule), not malformed —
/// at any cut.
#[test]
fn agent_gone_after_a_document_and_a_held_utf8_lead() {
    let request =
        br#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"t","task":{}}}"#;
    let ct = Some(&b"application/json"[..]);
    for input in [
        &b"0\n\n\n\n\n\n\n\xea"[..],
        b"{}\xea",
        b"0\n\xea",
        b"{}\xe6\x97",
    ] {
        let want = oracle::classify(request, 200, ct, input, BodyEnd::AgentGone);
        for cut in 0..=input.len() {
            let got = oracle::streaming(request, &[], 200, ct, input, &[cut], BodyEnd::AgentGone);
            assert_eq!(got, want, "{input:?} cut at {cut}");
        }
    }
}

// =============================================================================================
// The oracle's own footing: the serde_json facts it relies on, and a few fixed cases, so a
// change in serde_json or in the oracle shows up here rather than as a puzzling property
// failure.

#[test]
fn oracle_footing() {
    // Depth: 127 open containers are fine, the 128th fails.
    let at = format!("{}{}", "[".repeat(127), "]".repeat(127));
    let past = format!("{}{}", "[".repeat(128), "]".repeat(128));
    assert!(oracle::valid(at.as_bytes()));
    assert!(!oracle::valid(past.as_bytes()));
    // Lone surrogates are invalid; a pair is fine.
    for bad in [r#""\ud800""#, r#""\udc00""#, r#""\ud800\u0041""#] {
        assert!(!oracle::valid(bad.as_bytes()), "{bad}");
    }
    assert!(oracle::valid(br#""\ud83d\ude00""#));
    // Out-of-range numbers are grammar-valid here (serde_json's Value alone rejects them),
    // but what follows them still counts.
    assert!(serde_json::from_slice::<serde_json::Value>(b"1e400").is_err());
    assert!(oracle::valid(b"1e400"));
    assert!(oracle::valid(b"[-1e400, {\"a\": 1e999}]"));
    assert!(!oracle::valid(b"[1e400, ]"));
    assert!(!oracle::valid(b"1e400.5"));
    // A BOM is not JSON.
    assert!(!oracle::valid(b"\xEF\xBB\xBF{}"));
    // Duplicate keys: last wins.
    let v = oracle::parse(br#"{"a":1,"a":2}"#).unwrap();
    assert_eq!(v["a"], 2);

    let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
    let one = |body: &str| {
        oracle::classify(
            call,
            200,
            Some(b"application/json"),
            body.as_bytes(),
            BodyEnd::Complete,
        )
    };
    let ok = Some(Outcome::ToolSuccess);
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":1.0,"result":{"content":[]}}"#)[0].outcome(),
        ok
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":10e-1,"result":{"content":[]}}"#)[0].outcome(),
        ok
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":"1","result":{"content":[]}}"#)[0].outcome(),
        Some(Outcome::InvalidEnvelope)
    );
    assert_eq!(
        one(r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{"content":[]}}"#)[0].outcome(),
        Some(Outcome::InvalidEnvelope)
    );
    let stream = oracle::parse_sse(b"\xEF\xBB\xBFid: a\r\ndata: 1\rdata:2\n\nid:\n\ndata: x\n");
    assert_eq!(stream.events.len(), 1);
    assert_eq!(stream.events[0].data, b"1\n2");
    assert_eq!(stream.last_event_id, b"");
}

// =============================================================================================
// The generators reach every row of the table (a fixed seed, so this cannot flake).

fn outcomes_of<S>(strategy: S, cases: usize, content_type: &'static str) -> Vec<(Res, usize)>
where
    S: Strategy<Value = (Bytes, Bytes)>,
{
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = Vec::new();
    for k in 0..cases {
        let (request, body) = strategy.new_tree(&mut runner).unwrap().current();
        let end = [
            BodyEnd::Complete,
            BodyEnd::Complete,
            BodyEnd::Complete,
            BodyEnd::AgentGone,
        ][k % 4];
        for r in oracle::classify(&request.0, 200, Some(content_type.as_bytes()), &body.0, end) {
            seen.push((r, body.0.len()));
        }
    }
    seen
}

#[test]
fn generators_reach_every_outcome() {
    big_stack(|| {
        let mut all = outcomes_of(json_case(), 600, "application/json");
        all.extend(outcomes_of(sse_case(), 600, "text/event-stream"));
        let mut missing = Vec::new();
        for want in Outcome::ALL {
            let n = all
                .iter()
                .filter(|(r, _)| r.outcome() == Some(want))
                .count();
            eprintln!("{want}: {n}");
            if want != Outcome::HttpError && n == 0 {
                missing.push(want);
            }
        }
        let pending = all
            .iter()
            .filter(|(r, _)| matches!(r, Res::Pending { .. }))
            .count();
        eprintln!("pending: {pending}");
        let small = all
            .iter()
            .filter(|(_, len)| *len < EVERY_SPLIT_BELOW)
            .count();
        eprintln!(
            "bodies under {EVERY_SPLIT_BELOW} bytes: {small} of {}",
            all.len()
        );
        assert!(missing.is_empty(), "never generated: {missing:?}");
        assert!(pending > 0, "never a pending call");
    });
}
