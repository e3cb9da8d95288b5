//! Finds the byte spans of JSON-RPC members (`id`, `method`, `result`, `error`) in a JSON text
//! without building a document, so a replayed body can have its id token spliced and every
//! other byte kept as the upstream wrote it.
//!
//! The scanner is lenient inside values (it skips strings and brackets, it does not check
//! them): callers check the text with `serde_json` first, and on valid JSON skipping is exact.
//! It walks containers with a depth counter, not recursion, so nesting cannot overflow a stack.

use std::ops::Range;

/// The top-level members of one JSON object: (key, value) spans, key spans include the quotes.
pub(super) type Members = Vec<(Range<usize>, Range<usize>)>;

/// A JSON-RPC message's interesting members, as spans into the scanned text.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Message {
    pub(super) id: Option<Range<usize>>,
    pub(super) has_method: bool,
    pub(super) has_result_or_error: bool,
}

impl Message {
    /// A response (result or error), as opposed to a request or notification: only a response
    /// carries the agent's id; a server→client request's id is in the server's own id space.
    pub(super) fn is_response(&self) -> bool {
        self.has_result_or_error && !self.has_method
    }
}

/// The messages in `text`: one for an object, one per object element for a batch array.
/// `None` when the top level is neither.
pub(super) fn messages(text: &[u8]) -> Option<Vec<Message>> {
    let start = skip_ws(text, 0);
    match text.get(start)? {
        b'{' => Some(vec![message(text, start)?]),
        b'[' => {
            let mut out = Vec::new();
            for element in elements(text, start)? {
                if text.get(element.start) == Some(&b'{') {
                    out.push(message(text, element.start)?);
                }
            }
            Some(out)
        }
        _ => None,
    }
}

fn message(text: &[u8], start: usize) -> Option<Message> {
    let mut m = Message::default();
    for (key, value) in members(text, start)? {
        match &text[key] {
            br#""id""# => m.id = Some(value),
            br#""method""# => m.has_method = true,
            br#""result""# | br#""error""# => m.has_result_or_error = true,
            _ => {}
        }
    }
    Some(m)
}

/// The members of the object starting at `start` (which must be `{`).
pub(super) fn members(text: &[u8], start: usize) -> Option<Members> {
    let mut out = Vec::new();
    let mut i = skip_ws(text, start + 1);
    if text.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        if text.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(text, i)?;
        let key = i..key_end;
        i = skip_ws(text, key_end);
        if text.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(text, i + 1);
        let value_end = skip_value(text, i)?;
        out.push((key, i..value_end));
        i = skip_ws(text, value_end);
        match text.get(i)? {
            b',' => i = skip_ws(text, i + 1),
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// The element spans of the array starting at `start` (which must be `[`).
fn elements(text: &[u8], start: usize) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::new();
    let mut i = skip_ws(text, start + 1);
    if text.get(i) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = skip_value(text, i)?;
        out.push(i..end);
        i = skip_ws(text, end);
        match text.get(i)? {
            b',' => i = skip_ws(text, i + 1),
            b']' => return Some(out),
            _ => return None,
        }
    }
}

/// JSON's four whitespace bytes (RFC 8259 §2).
fn skip_ws(text: &[u8], mut i: usize) -> usize {
    while matches!(text.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end (exclusive) of the string starting at `start` (which must be `"`).
fn skip_string(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        let at = i + memchr::memchr2(b'"', b'\\', text.get(i..)?)?;
        if text[at] == b'"' {
            return Some(at + 1);
        }
        // A backslash escapes the next byte (the rest of `\uXXXX` is plain hex).
        i = at + 2;
    }
}

/// The end (exclusive) of the value starting at `start`.
fn skip_value(text: &[u8], start: usize) -> Option<usize> {
    match text.get(start)? {
        b'"' => skip_string(text, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            loop {
                match text.get(i)? {
                    b'"' => {
                        i = skip_string(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        // A number or literal runs to the next delimiter.
        _ => {
            let len = text[start..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(text.len() - start);
            (len > 0).then_some(start + len)
        }
    }
}

/// Whether two id tokens name the same id: the same bytes, or the same JSON value (an upstream
/// may write `"\u0061"` for `"a"`).
pub(super) fn same_id(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match (
        serde_json::from_slice::<serde_json::Value>(a),
        serde_json::from_slice::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span<'a>(text: &'a str, r: &Option<Range<usize>>) -> &'a str {
        r.as_ref().map_or("", |r| &text[r.clone()])
    }

    #[test]
    fn finds_ids_of_objects_and_batches() {
        let text = r#" { "result" : {"id": 9, "s": "}\"{"}, "id" : "a\"b" , "jsonrpc":"2.0"} "#;
        let m = messages(text.as_bytes()).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(span(text, &m[0].id), r#""a\"b""#);
        assert!(m[0].is_response());

        let text = r#"[{"id":1,"result":[1,[2]]},{"jsonrpc":"2.0","method":"x","id":2},3]"#;
        let m = messages(text.as_bytes()).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(span(text, &m[0].id), "1");
        assert!(m[0].is_response());
        assert_eq!(span(text, &m[1].id), "2");
        assert!(!m[1].is_response());

        assert_eq!(messages(b"{}").unwrap(), vec![Message::default()]);
        assert_eq!(messages(b"[]").unwrap(), vec![]);
    }

    #[test]
    fn rejects_what_is_not_an_object_or_array() {
        for text in [
            "",
            "1",
            "\"x\"",
            "{\"id\" 1}",
            "{\"id\":1 \"x\":2}",
            "{\"id\":",
            "[1 2]",
        ] {
            assert_eq!(messages(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn ids_compare_as_values() {
        assert!(same_id(b"1", b"1"));
        assert!(same_id(br#""a""#, br#""\u0061""#));
        assert!(!same_id(b"1", br#""1""#));
        assert!(!same_id(b"1", b"2"));
    }
}
