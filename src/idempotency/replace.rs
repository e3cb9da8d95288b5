//! Puts a repeat's own JSON-RPC id into a recorded answer.
//!
//! Only the id token's bytes change: the recorded body is scanned for the spans of response
//! ids and each matching token is spliced, so every other byte (whitespace, member order,
//! number formatting, SSE comments and event ids) goes out as the upstream wrote it. A
//! message is rewritten only when it is a *response* (`result` or `error`, no `method`) whose
//! id equals an original id: on an SSE stream a server→client request may carry the same
//! number in the server's own id space, and progress notifications carry no id at all.
//! Anything that is not valid JSON is left as it is.
//!
//! Left unchanged, knowingly: a replayed progress notification names the first call's
//! `progressToken` (it lives in `_meta`, which the fingerprint ignores), so an agent may see
//! progress for a token it does not know; SDKs log and drop such notifications.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use serde::de::IgnoredAny;

use super::jsonscan::{messages, same_id};

/// One id token to replace: its span in the body and the text that goes there.
type Splice<'a> = (Range<usize>, &'a str);

/// Replaces one id: [`replace_ids`] with a single pair.
pub fn replace_id(body: &Bytes, sse: bool, original_id_json: &str, new_id_json: &str) -> Bytes {
    replace_ids(body, sse, &[(original_id_json, new_id_json)])
}

/// Puts new ids into a recorded body. `pairs` maps each original id to the repeat's id (raw
/// JSON text). For `application/json` the body's top-level response (or each response in a
/// batch array) is rewritten; for `text/event-stream` each dispatched event whose data is
/// such a response. The unchanged body is returned without a copy when nothing matches.
pub fn replace_ids(body: &Bytes, sse: bool, pairs: &[(&str, &str)]) -> Bytes {
    let pairs: Vec<(&str, &str)> = pairs.iter().copied().filter(|(o, n)| o != n).collect();
    if pairs.is_empty() {
        return body.clone();
    }
    let splices = if sse {
        sse_splices(body, &pairs)
    } else {
        json_splices(body, 0, &pairs)
    };
    if splices.is_empty() {
        return body.clone();
    }
    let mut out = BytesMut::with_capacity(body.len() + 16 * splices.len());
    let mut at = 0;
    for (span, new) in splices {
        out.extend_from_slice(&body[at..span.start]);
        out.extend_from_slice(new.as_bytes());
        at = span.end;
    }
    out.extend_from_slice(&body[at..]);
    out.freeze()
}

/// The splices for one JSON text found at `offset` in the body.
fn json_splices<'p>(text: &[u8], offset: usize, pairs: &[(&str, &'p str)]) -> Vec<Splice<'p>> {
    // Checked first: the span scanner is exact only on valid JSON.
    if serde_json::from_slice::<IgnoredAny>(text).is_err() {
        return Vec::new();
    }
    let Some(found) = messages(text) else {
        return Vec::new();
    };
    found
        .into_iter()
        .filter(|m| m.is_response())
        .filter_map(|m| {
            let id = m.id?;
            let (_, new) = pairs
                .iter()
                .find(|(old, _)| same_id(old.as_bytes(), &text[id.clone()]))?;
            Some((id.start + offset..id.end + offset, *new))
        })
        .collect()
}

/// The splices for an SSE body (WHATWG HTML §9.2 "event stream interpretation": lines end in
/// CRLF, LF or CR; an event is dispatched at a blank line; its data is its `data` field
/// values joined by LF; one space after the colon is dropped). A final event without its
/// blank line is never dispatched by a client, so it is left alone.
fn sse_splices<'p>(body: &[u8], pairs: &[(&str, &'p str)]) -> Vec<Splice<'p>> {
    let mut out = Vec::new();
    let mut data: Vec<Range<usize>> = Vec::new();
    let mut i = 0;
    while let Some(len) = memchr::memchr2(b'\r', b'\n', &body[i..]) {
        let line = i..i + len;
        i = line.end + 1;
        if body[line.end] == b'\r' && body.get(i) == Some(&b'\n') {
            i += 1;
        }
        if line.is_empty() {
            out.extend(event_splices(body, &data, pairs));
            data.clear();
            continue;
        }
        let text = &body[line.clone()];
        let (name, value_at) = match memchr::memchr(b':', text) {
            Some(colon) => (&text[..colon], line.start + colon + 1),
            None => (text, line.end),
        };
        if name == b"data" {
            let skip = usize::from(body.get(value_at) == Some(&b' ') && value_at < line.end);
            data.push(value_at + skip..line.end);
        }
    }
    out
}

/// The splices for one event's data lines.
fn event_splices<'p>(
    body: &[u8],
    data: &[Range<usize>],
    pairs: &[(&str, &'p str)],
) -> Vec<Splice<'p>> {
    match data {
        [] => Vec::new(),
        [one] => json_splices(&body[one.clone()], one.start, pairs),
        lines => {
            // Joined as the client sees it; a token never spans lines (JSON strings cannot
            // hold a raw line break), so each span maps back into one raw line.
            let mut joined = Vec::new();
            let mut starts = Vec::with_capacity(lines.len());
            for (n, line) in lines.iter().enumerate() {
                if n > 0 {
                    joined.push(b'\n');
                }
                starts.push(joined.len());
                joined.extend_from_slice(&body[line.clone()]);
            }
            json_splices(&joined, 0, pairs)
                .into_iter()
                .filter_map(|(span, new)| {
                    let n = starts
                        .partition_point(|&s| s <= span.start)
                        .checked_sub(1)?;
                    let line = &lines[n];
                    let from = line.start + (span.start - starts[n]);
                    let to = from + span.len();
                    (to <= line.end).then_some((from..to, new))
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replaced(body: &str, sse: bool, pairs: &[(&str, &str)]) -> String {
        let out = replace_ids(&Bytes::copy_from_slice(body.as_bytes()), sse, pairs);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn json_response_keeps_every_other_byte() {
        let body =
            "{ \"jsonrpc\" : \"2.0\",\n  \"result\": {\"id\": 1, \"n\": 1.50},\n  \"id\" : 1 }";
        let want = "{ \"jsonrpc\" : \"2.0\",\n  \"result\": {\"id\": 1, \"n\": 1.50},\n  \"id\" : \"r-2\" }";
        assert_eq!(replaced(body, false, &[("1", "\"r-2\"")]), want);
        // Errors are answers too; ids compare as values.
        let body = r#"{"jsonrpc":"2.0","id":"\u0061","error":{"code":-1,"message":"m"}}"#;
        let want = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"m"}}"#;
        assert_eq!(replaced(body, false, &[("\"a\"", "7")]), want);
    }

    #[test]
    fn leaves_what_does_not_match() {
        let body = r#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
        assert_eq!(replaced(body, false, &[("1", "9")]), body);
        // Same id, new id: no copy needed.
        let b = Bytes::from_static(br#"{"id":1,"result":{}}"#);
        assert_eq!(replace_id(&b, false, "1", "1").as_ptr(), b.as_ptr());
        // Not JSON, or not a response.
        for body in [
            r#"{"id":1,"result":"#,
            r#"{"id":1,"method":"x","result":1}"#,
            "1",
        ] {
            assert_eq!(replaced(body, false, &[("1", "9")]), body);
        }
    }

    #[test]
    fn batch_elements_by_their_own_ids() {
        let body = r#"[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":""}}]"#;
        let want = r#"[{"jsonrpc":"2.0","id":20,"result":{}},{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":""}}]"#;
        assert_eq!(replaced(body, false, &[("1", "\"x\""), ("2", "20")]), want);
    }

    #[test]
    fn sse_rewrites_the_response_event_only() {
        let body = concat!(
            ": keep-alive\n\n",
            "id: ev-1\nevent: message\n",
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n",
            "id: ev-2\r\ndata:{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\r\n\r\n",
        );
        let want = body.replace("\"id\":1,\"result\"", "\"id\":42,\"result\"");
        assert_eq!(replaced(body, true, &[("1", "42")]), want);
    }

    #[test]
    fn sse_multiline_data_and_cr_endings() {
        let body = "data: {\"jsonrpc\":\"2.0\",\r\ndata:   \"id\" : 5,\r\ndata: \"result\":{}}\r\r";
        let want =
            "data: {\"jsonrpc\":\"2.0\",\r\ndata:   \"id\" : \"five\",\r\ndata: \"result\":{}}\r\r";
        assert_eq!(replaced(body, true, &[("5", "\"five\"")]), want);
    }

    #[test]
    fn sse_event_without_its_blank_line_is_not_dispatched() {
        let body = "data: {\"id\":1,\"result\":{}}\n";
        assert_eq!(replaced(body, true, &[("1", "2")]), body);
        let body = "data: {\"id\":1,\"result\":{}}";
        assert_eq!(replaced(body, true, &[("1", "2")]), body);
    }

    mod oracle {
        use proptest::prelude::*;
        use serde_json::{Value, json};

        use super::*;

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                "[a-z\"\\\\{}\\[\\],: \u{e9}\n]{0,8}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map("(id|result|[a-z\"{}]{0,4})", inner, 0..6)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn id() -> impl Strategy<Value = Value> {
            prop_oneof![
                any::<i64>().prop_map(Value::from),
                "[a-z0-9\"\\\\ ]{0,6}".prop_map(Value::String)
            ]
        }

        proptest! {
            // serde_json is the oracle: after the splice the document parses to the original
            // with only the top-level id changed, pretty-printed or not, JSON or SSE.
            #[test]
            fn only_the_response_id_changes(result in value(), id in id(), pretty: bool, sse: bool) {
                let message = json!({"jsonrpc": "2.0", "id": id, "result": result});
                let text = if pretty && !sse {
                    serde_json::to_string_pretty(&message).unwrap()
                } else {
                    message.to_string()
                };
                let body = if sse {
                    format!("data: {{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":{id}}}\n\ndata: {text}\n\n")
                } else {
                    text
                };
                let out = replace_id(&Bytes::from(body), sse, &id.to_string(), "\"new\"");
                let out = String::from_utf8(out.to_vec()).unwrap();
                let json_part = if sse {
                    let last = out.trim_end().rsplit("\n\n").next().unwrap();
                    // The server's request with the same id was left alone.
                    let first = out.split("\n\n").next().unwrap();
                    let untouched = format!("\"id\":{id}}}");
                    prop_assert!(first.ends_with(&untouched));
                    last.strip_prefix("data: ").unwrap().to_owned()
                } else {
                    out
                };
                let mut want = message.clone();
                want["id"] = json!("new");
                prop_assert_eq!(serde_json::from_str::<Value>(&json_part).unwrap(), want);
            }
        }
    }
}
