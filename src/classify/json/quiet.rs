//! The scan loop inside an untracked container (`depth >= quiet`): grammar only.
//!
//! Most of a structure-heavy body is there (a tools/list's input schemas, a progress
//! notification's `params`), and nothing inside is captured, so no key is matched, no path is
//! kept and no message can end. The general loop in `json.rs` goes through `self.state` and a
//! handful of calls per token; this one keeps the grammar position, the depth and the
//! innermost container's kind in locals and takes each whole token in place.
//!
//! It hands back to the general loop, with `self.state` written as that loop would have left
//! it, wherever it would need more than grammar: a token cut by the chunk's end, a `\u`
//! escape (hex digits and surrogates), and the closing bracket of the untracked container
//! itself (its close resumes the path bookkeeping). Errors are the general loop's, byte for
//! byte, so the verdict never depends on where chunks were cut.

use super::{
    Dest, JsonScanner, MAX_DEPTH, Malformed, MessageSink, Num, SHORT_ESCAPES, State, Word,
    number_run, tail_matches, utf8,
};

/// Where the grammar stands between tokens (the boundary states of [`State`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// A value; `close`: or the `]` of an empty array.
    Value {
        close: bool,
    },
    /// A key; `close`: or the `}` of an empty object.
    Key {
        close: bool,
    },
    Colon,
    /// `,` or the closing bracket.
    After,
}

/// How a token ended.
enum Token {
    /// Whole: scanning goes on at this offset.
    Done(usize),
    /// Cut by the chunk's end, or a `\u` escape: `self.state` holds where it stands, and the
    /// general loop goes on at this offset.
    Handoff(usize),
}

impl JsonScanner {
    /// Scans from `i` while inside the untracked container. Returns where the general loop
    /// goes on, or `None` when the scanner is mid-token (the general loop's to finish).
    ///
    /// One turn of the loop takes a member (key, colon, value) or an element, and the comma
    /// or bracket that follows it when it follows at once (the usual case): one dispatch on
    /// the grammar position per value rather than per token.
    // Longer than the house's limit on purpose: the scanner's hot loop, whose state stays in
    // registers from one value to the next only while it is one function.
    #[inline(never)]
    pub(super) fn quiet_run<S: MessageSink + ?Sized>(
        &mut self,
        chunk: &[u8],
        mut i: usize,
        sink: &mut S,
    ) -> Result<Option<usize>, Malformed> {
        let mut at = match self.state {
            State::Value { close } => At::Value { close },
            State::Key { close } => At::Key { close },
            State::Colon => At::Colon,
            State::AfterValue => At::After,
            _ => return Ok(None),
        };
        // Nothing inside is captured (a value's begin would have cleared it).
        self.dest = Dest::None;
        let floor = self.quiet;
        let mut depth = self.depth;
        let mut object = self.in_object;
        // Ends with the offset to go on from and whether a token was handed off.
        let (next, handed_off) = 'scan: loop {
            // Up to the value: a key and its colon, or the punctuation after a value.
            let close = match at {
                At::Value { close } => close,
                At::Key { close } => {
                    let Some(b) = skip_ws(chunk, &mut i) else {
                        break (i, false);
                    };
                    match b {
                        b'"' => match self.quiet_key(chunk, i + 1)? {
                            Token::Done(next) => i = next,
                            Token::Handoff(next) => {
                                at = At::Colon;
                                break (next, true);
                            }
                        },
                        b'}' if close => {
                            if depth == floor {
                                break 'scan self.close_floor(depth, object, i, sink)?;
                            }
                            (depth, object) = self.pop(depth);
                            i += 1;
                            at = At::After;
                            continue;
                        }
                        _ => return Err(Malformed::Syntax),
                    }
                    at = At::Colon;
                    if chunk.get(i) != Some(&b':') {
                        continue;
                    }
                    i += 1;
                    at = At::Value { close: false };
                    false
                }
                At::Colon => {
                    let Some(b) = skip_ws(chunk, &mut i) else {
                        break (i, false);
                    };
                    if b != b':' {
                        return Err(Malformed::Syntax);
                    }
                    i += 1;
                    at = At::Value { close: false };
                    false
                }
                At::After => {
                    let Some(b) = skip_ws(chunk, &mut i) else {
                        break (i, false);
                    };
                    match b {
                        b',' => {
                            i += 1;
                            at = if object {
                                At::Key { close: false }
                            } else {
                                At::Value { close: false }
                            };
                        }
                        b'}' | b']' if (b == b'}') == object => {
                            if depth == floor {
                                break 'scan self.close_floor(depth, object, i, sink)?;
                            }
                            (depth, object) = self.pop(depth);
                            i += 1;
                        }
                        _ => return Err(Malformed::Syntax),
                    }
                    continue;
                }
            };
            // Values, and while a comma follows one at once, the next member or element: in
            // an object its key and colon taken here too. The usual run of a container goes
            // round this loop on plain branches, without a dispatch on `at` per value.
            let mut close = close;
            loop {
                // A value (`close`: or the `]` of an empty array).
                let Some(b) = skip_ws(chunk, &mut i) else {
                    at = At::Value { close };
                    break 'scan (i, false);
                };
                let token = match b {
                    b'"' => self.quiet_string(chunk, i + 1)?,
                    b'{' | b'[' => {
                        if depth == MAX_DEPTH {
                            return Err(Malformed::DepthLimit);
                        }
                        let open = b == b'{';
                        let (word, bit) = (depth / 64, depth % 64);
                        if open {
                            self.stack[word] |= 1 << bit;
                            at = At::Key { close: true };
                        } else {
                            self.stack[word] &= !(1 << bit);
                            at = At::Value { close: true };
                        }
                        depth += 1;
                        object = open;
                        i += 1;
                        continue 'scan;
                    }
                    b']' if close => {
                        if depth == floor {
                            break 'scan self.close_floor(depth, object, i, sink)?;
                        }
                        (depth, object) = self.pop(depth);
                        i += 1;
                        at = At::After;
                        continue 'scan;
                    }
                    b'-' | b'0'..=b'9' => self.quiet_number(chunk, i)?,
                    b't' | b'f' | b'n' => self.quiet_literal(chunk, i, b)?,
                    _ => return Err(Malformed::Syntax),
                };
                at = At::After;
                match token {
                    Token::Done(next) => i = next,
                    Token::Handoff(next) => break 'scan (next, true),
                }
                if chunk.get(i) != Some(&b',') {
                    continue 'scan;
                }
                i += 1;
                close = false;
                if !object {
                    continue;
                }
                // The next member: a whole key and its colon right after the comma go on
                // here; anything else goes round the grammar positions.
                if chunk.get(i) == Some(&b'"')
                    && let Some(next) = short_key(chunk, i + 1)
                    && chunk.get(next) == Some(&b':')
                {
                    i = next + 1;
                    continue;
                }
                at = At::Key { close: false };
                continue 'scan;
            }
        };
        if self.depth < floor {
            // Closed through `close`: the general loop's bookkeeping took over.
            return Ok(Some(next));
        }
        self.depth = depth;
        self.in_object = object;
        if !handed_off {
            self.state = match at {
                At::Value { close } => State::Value { close },
                At::Key { close } => State::Key { close },
                At::Colon => State::Colon,
                At::After => State::AfterValue,
            };
        }
        Ok(Some(next))
    }

    /// The container one level out becomes the innermost: the new depth and its kind.
    #[inline(always)]
    fn pop(&self, depth: usize) -> (usize, bool) {
        // `depth > quiet >= 1` before: a container is still open after.
        let d = depth - 2;
        (depth - 1, self.stack[d / 64] & (1 << (d % 64)) != 0)
    }

    /// The untracked container itself closes at `i`: [`Self::close`] resumes the path
    /// bookkeeping (and may end the message).
    #[cold]
    fn close_floor<S: MessageSink + ?Sized>(
        &mut self,
        depth: usize,
        object: bool,
        i: usize,
        sink: &mut S,
    ) -> Result<(usize, bool), Malformed> {
        self.depth = depth;
        self.in_object = object;
        self.close(sink)?;
        Ok((i + 1, true))
    }

    /// A key from `i` (after its opening quote).
    #[inline(always)]
    fn quiet_key(&mut self, chunk: &[u8], i: usize) -> Result<Token, Malformed> {
        match short_key(chunk, i) {
            Some(next) => Ok(Token::Done(next)),
            None => self.quiet_str(chunk, i, true),
        }
    }

    /// A string value from `i` (after its opening quote).
    #[inline(always)]
    fn quiet_string(&mut self, chunk: &[u8], i: usize) -> Result<Token, Malformed> {
        match short_string(chunk, i) {
            Some(next) => Ok(Token::Done(next)),
            None => self.quiet_str(chunk, i, false),
        }
    }

    /// A string from `i` (after its opening quote): as [`Self::string`] does with nothing to
    /// capture, but the end is [`Token::Done`] rather than a state change.
    #[inline(always)]
    fn quiet_str(&mut self, chunk: &[u8], mut i: usize, key: bool) -> Result<Token, Malformed> {
        loop {
            let rest = &chunk[i..];
            let p = self.wide.skip(rest)?;
            let Some(&stop) = rest.get(p) else {
                return Ok(self.string_handoff(State::Str, key, chunk.len()));
            };
            if stop == b'"' {
                return Ok(Token::Done(i + p + 1));
            }
            if stop < 0x20 {
                return Err(Malformed::ControlCharacter);
            }
            if stop >= 0x80 {
                i += p + utf8::run(&rest[p..])?;
                continue;
            }
            // A backslash: a short escape whose second byte is here is checked at once; `\u`
            // (and a chunk ending after the backslash) go through the escape states.
            match rest.get(p + 1) {
                Some(&e) if e != b'u' => {
                    if SHORT_ESCAPES[usize::from(e)] == 0 {
                        return Err(Malformed::Syntax);
                    }
                    i += p + 2;
                }
                _ => return Ok(self.string_handoff(State::Escape, key, i + p + 1)),
            }
        }
    }

    /// Leaves a string to the general loop in `state`, as `key_in_parts` or a string value
    /// would have begun it (nothing captured: `dest` stays `None`).
    #[cold]
    fn string_handoff(&mut self, state: State, key: bool, next: usize) -> Token {
        self.in_key = key;
        if key {
            self.key_len = 0;
            self.key_overflow = false;
        }
        self.state = state;
        Token::Handoff(next)
    }

    /// A number whose first byte is at `i`: as [`Self::number`] does, without a capture.
    #[inline(always)]
    fn quiet_number(&mut self, chunk: &[u8], i: usize) -> Result<Token, Malformed> {
        let len = chunk.len();
        // The usual number: digits (no sign, fraction or exponent) that a comma or bracket
        // ends inside the chunk. Anything else takes the general number states below.
        let first = chunk[i];
        if first != b'-' {
            let mut j = i + 1;
            if first != b'0' {
                while chunk.get(j).is_some_and(u8::is_ascii_digit) {
                    j += 1;
                }
            }
            if matches!(chunk.get(j), Some(b',' | b'}' | b']')) {
                return Ok(Token::Done(j));
            }
        }
        let start = match first {
            b'-' => Num::Minus,
            b'0' => Num::Zero,
            _ => Num::Int,
        };
        let (i, num) = number_run(chunk, i + 1, start);
        if i == len {
            self.state = State::Number(num);
            return Ok(Token::Handoff(len));
        }
        // The byte at `i` ends the number; it is scanned as the next token.
        if num.may_end() {
            Ok(Token::Done(i))
        } else {
            Err(Malformed::Syntax)
        }
    }

    /// A literal whose first byte `b` is at `i`, compared whole when the chunk holds it.
    #[inline(always)]
    fn quiet_literal(&mut self, chunk: &[u8], i: usize, b: u8) -> Result<Token, Malformed> {
        let (word, whole) = match b {
            b't' => (Word::True, tail_matches(chunk, i + 1, b"rue")),
            b'f' => (Word::False, tail_matches(chunk, i + 1, b"alse")),
            _ => (Word::Null, tail_matches(chunk, i + 1, b"ull")),
        };
        match whole {
            Some(true) => Ok(Token::Done(i + word.bytes().len())),
            Some(false) => Err(Malformed::Syntax),
            None => {
                self.state = State::Literal { word, pos: 1 };
                Ok(Token::Handoff(i + 1))
            }
        }
    }
}

/// Skips whitespace from `*i`; the first other byte, or `None` at the chunk's end.
#[inline(always)]
fn skip_ws(chunk: &[u8], i: &mut usize) -> Option<u8> {
    loop {
        let b = *chunk.get(*i)?;
        // Every token starts above the space: one compare in the usual case.
        if b > b' ' || !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return Some(b);
        }
        *i += 1;
    }
}

/// Where a string from `i` (after its opening quote) ends, when its closing quote is in the
/// first 16 bytes with nothing to stop at before it: most keys and enum-like values. One
/// compare, no call.
#[inline(always)]
pub(super) fn short_string(chunk: &[u8], i: usize) -> Option<usize> {
    let head = chunk.get(i..)?.first_chunk::<16>()?;
    let p = super::head_run(head);
    (p < 16 && head[p] == b'"').then_some(i + p + 1)
}

/// [`short_string`] for a key, byte by byte. A vector compare puts its answer (where the key
/// ends) on the critical path: the colon's and the value's loads wait for compare, mask and
/// bit scan. The byte loop's exit is a branch, and keys repeat (a schema's `type`,
/// `properties`, `description`), so the CPU predicts it and runs ahead: tools/list went from
/// 0.89x to 1.04x of `IgnoredAny`'s throughput with this. (Values stay on the compare:
/// their lengths repeat less, and a mispredicted exit costs more than the compare.)
#[inline(always)]
fn short_key(chunk: &[u8], i: usize) -> Option<usize> {
    let head = chunk.get(i..)?.first_chunk::<16>()?;
    let p = head.iter().position(|&b| super::stops_string(b))?;
    (head[p] == b'"').then_some(i + p + 1)
}
