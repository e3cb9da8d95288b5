//! The canonical stream hashed straight from the body's text, for the body agents send: one
//! JSON-RPC object whose strings hold no escape and whose numbers are integers written as
//! `serde_json` prints them. No tree is built and the ids come from the same pass.
//!
//! Anything else — a batch, an escape, a fraction or an exponent, `-0`, an integer past 18
//! digits, a repeated key, nesting past [`MAX_DEPTH`], text that is not JSON — makes this path
//! give up, and the caller parses a tree ([`super::tree`]). On every body this path takes it
//! writes the same stream as the tree does, so the fingerprint is the same either way.
//!
//! One pass validates the body and lists every container's members (or elements) as spans,
//! each container's together; a second walks the list and hashes, each object's members
//! sorted by key in place. Neither reads a byte twice.

use std::ops::Range;

use smallvec::SmallVec;

use crate::classify::json::string_run;

use super::{DOMAIN, Fingerprint, Fingerprinted, Hash128, Hashing};

/// The deepest nesting this path reads; past it the tree takes the body.
const MAX_DEPTH: usize = 16;

/// The most digits of an integer hashed as written: every such integer is an `i64` or a `u64`,
/// which `serde_json` prints as they were written.
const MAX_DIGITS: usize = 18;

/// Fingerprints `body` from its text; `None` when it is not the kind of body this path reads
/// (which says nothing of whether it is JSON).
pub(super) fn fingerprint(target: &str, body: &[u8], hashing: Hashing) -> Option<Fingerprinted> {
    let start = ws(body, 0);
    if body.get(start) != Some(&b'{') {
        return None;
    }
    let mut text = Text {
        body,
        open: SmallVec::new(),
        read: SmallVec::new(),
        id: None,
        ascii: true,
    };
    let (end, top) = text.container(start, 1)?;
    if ws(body, end) != body.len() {
        return None;
    }
    // JSON text is UTF-8 (RFC 8259 §8.1). Outside strings only ASCII was taken, so a body
    // whose strings are ASCII is UTF-8; strings are hashed as their bytes.
    if !text.ascii {
        std::str::from_utf8(body).ok()?;
    }
    let mut h = Hash128::new(hashing);
    h.bytes(DOMAIN);
    h.string(target);
    text.object(top, Level::Message, &mut h)?;
    let ids = match text.id {
        Some(span) => vec![std::str::from_utf8(&body[span]).ok()?.to_owned()],
        None => Vec::new(),
    };
    Some(Fingerprinted {
        fingerprint: Fingerprint(h.finish()),
        ids,
    })
}

/// What an object is to the fingerprint: the message (its `id` hashed as a placeholder, its
/// `params` read as [`Level::Params`]), the message's `params` (`_meta` left out), or any
/// other object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Message,
    Params,
    Other,
}

/// One member of an object (or element of an array: `key` empty): the key's text without its
/// quotes, the value's span, and for a container value its own members' place in
/// [`Text::read`].
#[derive(Clone)]
struct Span {
    key: Range<usize>,
    value: Range<usize>,
    inner: Range<usize>,
}

/// The body; the members of the containers still open, innermost last; every container's
/// members once it has closed, each container's together; the span of the message's `id`;
/// whether every string read was ASCII.
struct Text<'a> {
    body: &'a [u8],
    open: SmallVec<[Span; 16]>,
    read: SmallVec<[Span; 16]>,
    id: Option<Range<usize>>,
    ascii: bool,
}

impl Text<'_> {
    /// Validates the object or array at `at`, a container `depth` levels deep; its end, and
    /// where its members went in `read`.
    fn container(&mut self, at: usize, depth: usize) -> Option<(usize, Range<usize>)> {
        if depth > MAX_DEPTH {
            return None;
        }
        let body = self.body;
        let object = body.get(at) == Some(&b'{');
        let close = if object { b'}' } else { b']' };
        let mark = self.open.len();
        let mut i = ws(body, at + 1);
        if body.get(i) != Some(&close) {
            loop {
                let mut key = 0..0;
                if object {
                    key = self.string(i)?;
                    i = ws(body, key.end + 1);
                    if body.get(i) != Some(&b':') {
                        return None;
                    }
                    i = ws(body, i + 1);
                }
                let (end, inner) = self.value(i, depth)?;
                self.open.push(Span {
                    key,
                    value: i..end,
                    inner,
                });
                i = ws(body, end);
                match body.get(i)? {
                    b',' => i = ws(body, i + 1),
                    b if *b == close => break,
                    _ => return None,
                }
            }
        }
        let from = self.read.len();
        self.read.extend(self.open.drain(mark..));
        Some((i + 1, from..self.read.len()))
    }

    /// The text of the string at `at` (`"`), without its quotes; `None` for an escape (the
    /// tree unescapes) and for a control character (not JSON, RFC 8259 §7). The runs between
    /// stops are found as the classifier finds them ([`string_run`]); a byte above ASCII stops
    /// a run but not the string, and has the body's UTF-8 checked at the end.
    fn string(&mut self, at: usize) -> Option<Range<usize>> {
        let body = self.body;
        if body.get(at) != Some(&b'"') {
            return None;
        }
        let from = at + 1;
        let mut i = from;
        loop {
            i += string_run(body.get(i..)?);
            match body.get(i)? {
                b'"' => return Some(from..i),
                0x80.. => {
                    self.ascii = false;
                    i += 1;
                }
                _ => return None,
            }
        }
    }

    /// Validates the value at `at`, a member of a container `depth` levels deep; its end, and
    /// for a container where its members went.
    fn value(&mut self, at: usize, depth: usize) -> Option<(usize, Range<usize>)> {
        let body = self.body;
        let end = match body.get(at)? {
            b'"' => self.string(at)?.end + 1,
            b'{' | b'[' => return self.container(at, depth + 1),
            b't' => literal(body, at, b"true")?,
            b'f' => literal(body, at, b"false")?,
            b'n' => literal(body, at, b"null")?,
            _ => integer(body, at)?,
        };
        Some((end, 0..0))
    }

    /// Hashes the object whose members are `members` of `read` as the tree's canonical form
    /// does: sorted by key, each key once, stripped as its `level` asks.
    fn object(&mut self, members: Range<usize>, level: Level, h: &mut Hash128) -> Option<()> {
        let body = self.body;
        let list = self.read.get_mut(members.clone())?;
        list.sort_unstable_by(|a, b| body[a.key.clone()].cmp(&body[b.key.clone()]));
        if list
            .windows(2)
            .any(|w| body[w[0].key.clone()] == body[w[1].key.clone()])
        {
            // The tree keeps a repeated key's last value: the order in the body matters.
            return None;
        }
        let meta = level == Level::Params && list.iter().any(|s| &body[s.key.clone()] == b"_meta");
        h.bytes(b"{");
        h.len(list.len() - usize::from(meta));
        for n in members {
            let member = self.read.get(n)?.clone();
            let name = &body[member.key.clone()];
            if level == Level::Params && name == b"_meta" {
                continue;
            }
            h.len(name.len());
            h.bytes(name);
            match (level, name) {
                (Level::Message, b"id") => {
                    h.bytes(b"t");
                    self.id = Some(member.value);
                }
                (Level::Message, b"params") if body.get(member.value.start) == Some(&b'{') => {
                    self.object(member.inner, Level::Params, h)?;
                }
                _ => self.hash(&member, h)?,
            }
        }
        Some(())
    }

    /// Hashes a validated value.
    fn hash(&mut self, member: &Span, h: &mut Hash128) -> Option<()> {
        let body = self.body;
        let span = member.value.clone();
        match body.get(span.start)? {
            b'"' => {
                h.bytes(b"\"");
                let text = body.get(span.start + 1..span.end - 1)?;
                h.len(text.len());
                h.bytes(text);
            }
            b'{' => self.object(member.inner.clone(), Level::Other, h)?,
            b'[' => {
                h.bytes(b"[");
                h.len(member.inner.len());
                for n in member.inner.clone() {
                    let element = self.read.get(n)?.clone();
                    self.hash(&element, h)?;
                }
            }
            b't' => h.bytes(b"t"),
            b'f' => h.bytes(b"f"),
            b'n' => h.bytes(b"n"),
            _ => {
                let text = body.get(span)?;
                h.bytes(b"#");
                h.len(text.len());
                h.bytes(text);
            }
        }
        Some(())
    }
}

/// JSON's four whitespace bytes (RFC 8259 §2).
fn ws(body: &[u8], mut i: usize) -> usize {
    while matches!(body.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of `word` at `at`.
fn literal(body: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    let end = at + word.len();
    (body.get(at..end)? == word).then_some(end)
}

/// The end of the integer at `at`: `-?(0|[1-9][0-9]*)` (RFC 8259 §6), at most [`MAX_DIGITS`]
/// digits, not `-0` (which `serde_json` reads as the float `-0.0`), and not followed by a
/// fraction or an exponent.
fn integer(body: &[u8], at: usize) -> Option<usize> {
    let negative = body.get(at) == Some(&b'-');
    let from = at + usize::from(negative);
    let digits = body
        .get(from..)?
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = from + digits;
    let leading_zero = body.get(from) == Some(&b'0');
    let whole = digits > 0 && digits <= MAX_DIGITS && (!leading_zero || digits == 1);
    let fraction = matches!(body.get(end), Some(b'.' | b'e' | b'E'));
    (whole && !fraction && !(negative && leading_zero)).then_some(end)
}
